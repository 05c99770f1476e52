"""benchmarks/gpu_check.py, the prepared GPU check, runs its whole path on a CPU with a 2-layer model, so
that the script a GPU session runs once has not rotted in between."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def vllm_runs_here() -> bool:
    """Whether the script also measures vLLM colocate rollouts here: it does where vLLM is installed and
    CUDA is up. Decided without importing vLLM, so a script that skips an installed vLLM fails the test."""
    import importlib.util

    import torch

    return importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


def test_gpu_check_runs_end_to_end_in_tiny_mode(tmp_path: Path) -> None:
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--tiny", "--steps", "1",
                           "--vl-steps", "1", "--completion-tokens", "8", "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(out.read_text())["runs"]
    with_vllm = vllm_runs_here()
    assert [(r["shared_prefix"], r["vllm"]) for r in runs] == [(False, False), (True, False)] + (
        [(True, True)] if with_vllm else [])
    for run in runs:   # every number the GPU run reports was measured
        assert run["steps"] == 1 and run["generation_tokens_per_s"] > 0 and run["update_s_per_step"] > 0
    assert "| transformers | shared-prefix |" in done.stdout and "| transformers | TRL per-row |" in done.stdout
    # Per-step times of both paths, the first GPU run's open question (issue 59): one value per step.
    assert "| rollouts | update | generation s per step | update s per step |" in done.stdout
    per_row = next(line for line in done.stdout.splitlines() if line.startswith("| transformers | TRL per-row |")
                   and line.count("|") == 5)
    assert per_row.split("|")[4].strip() == str(runs[0]["update_s_per_step_all"][0])
    # Exactly one of the two: the vLLM row of the table, or the line saying why it is missing.
    vllm_row, no_vllm_line = "| vLLM colocate | shared-prefix |" in done.stdout, "vLLM is not importable" in done.stdout
    assert (vllm_row, no_vllm_line) == ((True, False) if with_vllm else (False, True)), done.stdout[-3000:]
    # The VL arm: a Qwen2.5-VL on key-frame rows (4 frames at the tiny budget), through TRL's multi-image path.
    [vl] = json.loads(out.read_text())["vl_runs"]
    assert vl["arm"] == "vl" and vl["steps"] == 1 and (vl["frames"], vl["max_pixels"]) == (4, 112 * 112)
    assert vl["generation_tokens_per_s"] > 0 and vl["update_s_per_step"] > 0 and vl["prompt_tokens"] > 4 * 12
    assert all(loss == loss for loss in vl["losses"]) and vl["stock_path"]  # finite; the reason is reported
    assert "| VL arm | frames x pixels |" in done.stdout
