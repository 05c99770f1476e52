"""``reward_signal.steps_with_signal``: the GRPO steps whose groups varied in reward, read from metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

from embodied_r.training.reward_signal import steps_with_signal


def write_metrics(path: Path, rows: list[tuple[int, float, float]]) -> None:
    path.write_text("".join(json.dumps({"step": step, "zero_variance_groups/format": fmt,
                                        "zero_variance_groups/accuracy": acc}) + "\n" for step, fmt, acc in rows))


def test_a_step_has_signal_when_any_reward_function_varied_in_some_group(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    write_metrics(metrics, [(1, 1.0, 1.0), (2, 0.5, 1.0), (3, 1.0, 0.75), (4, 1.0, 1.0)])
    assert steps_with_signal(metrics, 4) == 2
    assert steps_with_signal(tmp_path / "none.jsonl", 4) is None and steps_with_signal(metrics, None) is None


def test_a_shorter_run_started_over_an_earlier_one_counts_only_its_own_steps(tmp_path: Path) -> None:
    # The file is appended to: an earlier 5-step run whose every step had signal, then a 2-step run without.
    metrics = tmp_path / "metrics.jsonl"
    write_metrics(metrics, [*((step, 0.5, 0.5) for step in range(1, 6)), (1, 1.0, 1.0), (2, 1.0, 1.0)])
    assert steps_with_signal(metrics, 2) == 0
    with metrics.open("a") as handle:  # the trainer's closing row carries no shares
        handle.write(json.dumps({"step": 2, "train_loss": 0.0}) + "\n")
    assert steps_with_signal(metrics, 2) == 0
