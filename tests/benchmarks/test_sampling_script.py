"""benchmarks/sampling.py runs end to end on a tiny model: both paths write the same tokens, and a path that
did not would be reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sampling_benchmark_compares_equal_tokens(tiny_lm_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sampling.py"), "--data", "toy:4",
                           "--model", str(tiny_lm_dir), "--dtype", "float32", "--shapes", "2x3,1x2",
                           "--tokens", "6", "--repeats", "1"], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    table = [line.split() for line in done.stdout.splitlines() if line.lstrip().startswith(("2x3", "1x2"))]
    assert [(row[0], row[1], row[-1]) for row in table] == [("2x3", "6", "0"), ("1x2", "2", "0")]
    assert all(float(row[3]) > 0 and float(row[4]) > 0 for row in table)
