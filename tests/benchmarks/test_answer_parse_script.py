"""benchmarks/answer_parse.py runs end to end (the quadratic baseline left out of the big sizes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_answer_parse_benchmark_prints_every_case() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "answer_parse.py"), "--repeats", "1",
                           "--max-old-tags", "0"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert sum("100,000" in line for line in lines) == 3  # the new reader at 100,000 tags, each case
    assert sum(line.startswith("typical") and line.endswith("x") for line in lines) == 2  # old beside new
