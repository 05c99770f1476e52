"""Doctest collection for the package (pytest ``--doctest-modules`` over ``src/embodied_r``, pyproject.toml).

Collecting a module for its doctests imports it, so in the package only modules with a ``>>>`` example
are collected: the others have nothing to run and would only cost imports. A module whose example needs an
optional dependency that is not installed (a ``pip install embodied-r`` without its extras) is left out
and named in the summary; any other import error fails the collection, as it should.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent / "src" / "embodied_r"
os.environ.setdefault("MUJOCO_GL", "egl")  # before a sim module's example imports MuJoCo

_missing_dependency: dict[str, str] = {}  # module -> the optional package its import needs


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.suffix != ".py" or PACKAGE not in collection_path.parents:
        return None
    if ">>>" not in collection_path.read_text(encoding="utf-8"):
        return True
    name = _module_name(collection_path)
    try:
        importlib.import_module(name)  # what the doctest collector does next; cached for it
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "embodied_r":
            raise
        _missing_dependency[name] = exc.name
        return True
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _missing_dependency:
        terminalreporter.write_line("doctests not collected (optional dependency not installed): " + ", ".join(
            f"{module} ({package})" for module, package in sorted(_missing_dependency.items())))
