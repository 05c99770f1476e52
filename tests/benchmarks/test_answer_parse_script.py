"""benchmarks/answer_parse.py runs end to end (the quadratic baseline left out of the big sizes), and its
``--record`` holds the printed table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_answer_parse_benchmark_prints_every_case(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    record = tmp_path / "bench_answer_parse.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "answer_parse.py"), "--repeats", "1",
                           "--max-old-tags", "0", "--record", str(record)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert sum("100,000" in line for line in lines) == 3  # the new reader at 100,000 tags, each case
    assert sum(line.startswith("typical") and line.endswith("x") for line in lines) == 2  # old beside new
    rows = json.loads(record.read_text(encoding="utf-8"))["results"]["rows"]
    assert len(rows) == 11 and [r["tags"] for r in rows[:3]] == [2_000, 8_000, 100_000]
    assert all(r["new_ms"] > 0 for r in rows) and [r["old_over_new"] is None for r in rows[:9]] == [True] * 9
