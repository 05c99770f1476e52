"""kill -9 of ``train`` while it saves a checkpoint, then ``--resume``: the run continues from the last
complete checkpoint and finishes, whatever the kill left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from embodied_r.training.checkpoints import is_complete_checkpoint
from embodied_r.training.recipe import load_recipe


def _train(recipe: Path, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "embodied_r.cli.main", "train", "--recipe", str(recipe), *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_when_saving(process: subprocess.Popen, run: Path, checkpoint: str, timeout: float = 240) -> bool:
    """SIGKILL ``process`` the moment ``run/checkpoint`` appears (its save has just begun); False when the
    process ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run / checkpoint).exists():
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.002)
    process.kill()
    raise AssertionError(f"{checkpoint} did not appear within {timeout} s")


def test_kill_9_during_checkpoint_saves_then_resume_finishes(tiny_recipe) -> None:
    path = tiny_recipe(max_steps=4, save_steps=1)
    run = load_recipe(path).output_dir
    assert _kill_when_saving(_train(path), run, "checkpoint-2")
    left = sorted(p.name for p in run.glob("checkpoint-*"))
    assert "checkpoint-2" in left  # the kill landed during (or right after) that save
    torn = not is_complete_checkpoint(run / "checkpoint-2")  # usually: the save had just begun
    first = _train(path, "--resume")
    assert _kill_when_saving(first, run, "checkpoint-3")
    if torn:
        assert "removed incomplete checkpoint(s) checkpoint-2" in first.stderr.read()
    final = _train(path, "--resume")
    _, err = final.communicate(timeout=600)
    assert final.returncode == 0, err[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["global_step"] == 4
    assert all(is_complete_checkpoint(p) for p in run.glob("checkpoint-*"))
    assert (run / "final" / "model.safetensors").is_file()
