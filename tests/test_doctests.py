"""The runnable examples in the package's docstrings run as pytest items: ``--doctest-modules`` over
``src/embodied_r`` (pyproject.toml), with the root conftest.py collecting the modules that have examples.
This checks that every such module is collected, so no example silently stops running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import embodied_r

PACKAGE = Path(embodied_r.__file__).parent
ROOT = PACKAGE.parents[1]


def modules_with_examples() -> set[str]:
    return {str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py") if ">>>" in path.read_text(encoding="utf-8")}


def test_every_module_with_examples_is_collected_for_its_doctests() -> None:
    # A fresh interpreter collects from the repository root as `make test` does (no test runs here).
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "src/embodied_r"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    expected = modules_with_examples()
    assert len(expected) > 50  # the package was read
    assert sorted(expected - collected) == [] and sorted(collected - expected) == []


# The extras' packages (pyproject.toml [project.optional-dependencies]), blocked to stand for an install without them.
EXTRAS = ("torch", "transformers", "trl", "accelerate", "peft", "datasets", "safetensors", "gguf", "mujoco",
          "metaworld", "gymnasium", "imageio", "cv2", "av", "httpx", "PIL", "deepspeed", "vllm")
BLOCKED_RUN = ("import sys\n"
               "for name in {names!r}:\n"
               "    sys.modules[name] = None  # `import name` now raises ModuleNotFoundError\n"
               "import pytest\n"
               "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'src/embodied_r']))\n")


def test_without_the_extras_the_examples_that_need_them_are_left_out_by_name() -> None:
    done = subprocess.run([sys.executable, "-c", BLOCKED_RUN.format(names=EXTRAS)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = next(line for line in done.stdout.splitlines() if line.startswith("doctests not collected"))
    assert "embodied_r.training.zero_advantage (torch)" in summary
