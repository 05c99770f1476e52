"""Two real processes (accelerate launch, gloo on CPU): a judge failure or an unreadable row drops the
consistency term for whole groups on every rank, and a judge error is raised on all ranks together."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("two_process_consistency.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_groups_stay_whole_and_errors_are_raised_together(tmp_path: Path, tiny_lm_dir: Path) -> None:
    launcher = Path(sys.executable).with_name("accelerate")
    command = [
        str(launcher),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(_free_port()),
        str(SCRIPT),
        str(tmp_path),
        str(tiny_lm_dir),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    # The judge failed on rank 1 only: both ranks drop the term for the whole step...
    assert [r["first"] for r in ranks] == [[None] * 6, [None] * 6]
    # ...and the second failure in a row is raised on both ranks (no rank left waiting in a collective).
    assert all(r["second"].startswith("JudgeError") and "2 steps in a row" in r["second"] for r in ranks)
    # Global rows 4-7 form group 1; rank 1's first row could not be judged, so all four are dropped.
    rank0, rank1 = ranks[0]["groups"], ranks[1]["groups"]
    assert rank0[4:] == [None, None] and rank1[:2] == [None, None]
    assert all(v in (0.0, 1.0) for v in rank0[:4] + rank1[2:])
