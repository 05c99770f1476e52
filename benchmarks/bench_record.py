"""The JSON record a benchmark writes with ``--record PATH``: the numbers it measured, for the docs.

docs/performance.md quotes benchmark numbers; each quoted number is read back by tests/test_docs_records.py
from the record named in its row, so a number that no longer matches its record fails a test. A record is
only ever written by the command that measured it:

    {"benchmark": "answer_parse", "date": "2026-12-08", "command": "python benchmarks/answer_parse.py",
     "machine": {"cpu": ..., "cores": 2, "avx512_bf16": false, "load_1min": 1.93},
     "settings": {...}, "results": {...}}

``results`` holds the numbers the script prints in its table (rounded to 4 significant digits, ratios
computed from the unrounded measurements); ``settings`` what it measured them at.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DIGITS = 4  # significant digits kept of a measured float: more than any doc quotes, less than timer noise


def add_record_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", type=Path, default=None, metavar="PATH",
                        help="write the measured numbers as a JSON record, e.g. docs/records/bench_NAME.json")


def significant(value: float, digits: int = DIGITS) -> float:
    """``value`` rounded to ``digits`` significant digits (0, inf and nan as they are)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def map_leaves(tree: Any, leaf: Callable[[Any], Any]) -> Any:
    """``tree`` (dicts, lists, tuples) with ``leaf`` applied to every other value; tuples become lists."""
    if isinstance(tree, dict):
        return {str(key): map_leaves(value, leaf) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return [map_leaves(value, leaf) for value in tree]
    return leaf(tree)


def rounded(tree: Any) -> Any:
    """``tree`` with every float rounded by :func:`significant` (ints, bools and strings as they are)."""
    return map_leaves(tree, lambda value: significant(value) if isinstance(value, float) else value)


def portable(text: str) -> str:
    """An argument or setting without this machine's absolute paths: a path in the repository relative to
    its root, any other absolute path as ``.../NAME`` (a record is checked in and read on other machines).
    ``--option=/a/path`` is rewritten in its value."""
    if text.startswith("-") and "=" in text:
        option, _, value = text.partition("=")
        return f"{option}={portable(value)}"
    if not os.path.isabs(text):
        return text
    path = Path(os.path.normpath(text))
    try:
        return path.relative_to(ROOT).as_posix() or "."
    except ValueError:
        return f".../{path.name}"


def command_line(benchmark: str, argv: list[str]) -> str:
    """The command that reproduces the record, as the docs give it: ``python benchmarks/NAME.py ARGS``."""
    return shlex.join(["python", f"benchmarks/{benchmark}.py", *(portable(arg) for arg in argv)])


def machine_now() -> dict[str, Any]:
    """The demo record's description of the CPU, plus the 1-minute load average at writing time: on a
    shared machine the load says how far the timings may be off."""
    from embodied_r.demo_record import machine

    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:  # no load average on this platform
        load = None
    return {**machine(), "load_1min": load}


def write_record(path: str | os.PathLike[str], benchmark: str, argv: list[str] | None, settings: dict[str, Any],
                 results: dict[str, Any]) -> dict[str, Any]:
    """Write the record of one run of ``benchmarks/{benchmark}.py`` to ``path``, atomically (a reader sees
    the old file or the whole new one), and return it. ``argv`` is the arguments as given (None: this
    process's); ``settings`` and ``results`` must be JSON-serialisable."""
    from embodied_r.core.io import atomic_write_json

    record = {
        "benchmark": benchmark,
        "date": _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
        "command": command_line(benchmark, list(sys.argv[1:] if argv is None else argv)),
        "machine": machine_now(),
        "settings": rounded(map_leaves(settings, lambda value: portable(value) if isinstance(value, str) else value)),
        "results": rounded(results),
    }
    atomic_write_json(path, record)  # temporary file in the same folder, then os.replace
    print(f"wrote {path}")
    return record


__all__ = ["add_record_argument", "command_line", "portable", "rounded", "significant", "write_record"]
