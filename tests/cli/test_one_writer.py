"""One writer per output: a second process is refused at once, a dead holder's lock is taken over, and
metrics count each question once even when a file already holds duplicates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from probe_rows import probe_rows, quick_eval_argv

from embodied_r.cli.main import main
from embodied_r.core.io import OutputLockedError, exclusive_output, write_jsonl

HOLD = (
    "import sys, time\nfrom embodied_r.core.io import exclusive_output\nwith exclusive_output(sys.argv[1]):\n"
    "    print('held', flush=True)\n    time.sleep(60)\n"
)


def _holder(output: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(output)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_writer_is_refused_and_a_dead_holders_lock_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    out.mkdir()
    holder = _holder(out)
    try:
        with pytest.raises(OutputLockedError, match=f"pid {holder.pid}"), exclusive_output(out):
            pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # kill -9: no cleanup runs in the holder
        holder.wait()
    with exclusive_output(out):  # the kernel released the dead holder's lock
        pass
    with exclusive_output(tmp_path / "perception.jsonl") as lock:
        assert lock.name == "perception.jsonl.lock"


def test_eval_and_perceive_refuse_a_second_writer(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(2))
    out = tmp_path / "eval"
    out.mkdir()
    holder = _holder(out)
    try:
        started = time.perf_counter()
        assert main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(out)]) == 2
        assert time.perf_counter() - started < 10  # at once, before any model is loaded
        assert f"pid {holder.pid}" in capsys.readouterr().err
        assert not (out / "predictions.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    perception = tmp_path / "perception.jsonl"
    holder = _holder(perception)
    try:
        qa = tmp_path / "qa.jsonl"
        qa.write_text(
            json.dumps(
                {
                    "id": "q",
                    "source": "t",
                    "task": "t",
                    "video": "v.mp4",
                    "question": "?",
                    "options": None,
                    "answer": 1.0,
                    "answer_type": "number",
                }
            )
            + "\n"
        )
        assert (
            main(
                [
                    "perceive",
                    "--qa",
                    str(qa),
                    "--keyframes",
                    str(tmp_path),
                    "--backend",
                    "oracle",
                    "--out",
                    str(perception),
                ]
            )
            == 2
        )
        assert "being written by another embodied-r process" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()


def test_metrics_count_each_question_once(tmp_path: Path, tiny_lm_dir: Path, capsys) -> None:
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, probe_rows(3))
    out = tmp_path / "eval"
    args = quick_eval_argv(data, tiny_lm_dir, out)
    assert main(args) == 0
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines + lines) + "\n")  # what two racing writers left
    capsys.readouterr()
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"]["n"] == 3 and metrics["duplicate_predictions_ignored"] == 3
    assert "3 duplicate prediction(s)" in capsys.readouterr().out
