"""benchmarks/lmms_eval_reference.py, the check of ``reference.vsibench`` / ``reference.mvbench`` against
lmms-eval: its check set goes through ``embodied-r score`` here; lmms-eval's own functions join in where
lmms-eval is installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lmms_eval_task_files() -> list[str]:
    """``--vsibench-utils`` and ``--mvbench-utils`` from an installed lmms-eval, or nothing."""
    spec = importlib.util.find_spec("lmms_eval")
    if spec is None or not spec.submodule_search_locations:
        return []
    tasks = Path(next(iter(spec.submodule_search_locations))) / "tasks"
    return ["--vsibench-utils", str(tasks / "vsibench" / "utils.py"),
            "--mvbench-utils", str(tasks / "mvbench" / "utils.py")]


def test_check_set_scores_through_score_with_complete_reference_tables() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    script = ROOT / "benchmarks" / "lmms_eval_reference.py"
    done = subprocess.run([sys.executable, str(script), *lmms_eval_task_files()], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    # All ten question types, by level and merged, give the same complete table; the two rules disagree on
    # some answers (the check set holds "(B)", "**B**", ".62", "1,234" ...).
    per_level = next(line for line in lines if line.startswith("vsibench: 432 questions, 10 tasks"))
    merged = next(line for line in lines if line.startswith("vsibench-merged: 432 questions, 8 tasks"))
    assert per_level.endswith("complete True") and merged.split(";")[1:] == per_level.split(";")[1:]
    assert int(per_level.split("score ")[1].split(" of")[0]) > 0
    assert lines[-1].startswith("0 difference(s)")
