"""Read back from a GRPO run's ``metrics.jsonl`` how often its groups carried a learning signal.

GRPO's advantages are relative within a group of completions of one prompt: a group whose completions all
earn one reward teaches nothing. The trainer logs, per reward function, the share of groups whose rewards
did not vary (``zero_variance_groups/NAME``, training/callbacks.py); a step with every share at 1 had no
signal at all.
"""

from __future__ import annotations

from pathlib import Path

from embodied_r.core.io import read_jsonl


def steps_with_signal(metrics_file: Path, steps: int | None) -> int | None:
    """How many of a GRPO run's ``steps`` logged steps had a group whose completions earned different rewards
    from some reward function (the trainer's exact per-function ``zero_variance_groups/NAME`` share below 1;
    TRL's ``frac_reward_zero_std`` can count a uniform group as varying by float rounding): in the other steps
    every advantage was zero and the step taught nothing. None without the run's metrics or step count.

    ``metrics.jsonl`` is only ever appended to, so a run started again over an earlier one logs its steps
    after the earlier run's: the last row of a step counts, and steps past the run's own ``steps`` are the
    earlier run's and are left out."""
    if not metrics_file.is_file() or steps is None:
        return None
    varied: dict[int, bool] = {}
    for row in read_jsonl(metrics_file):
        shares = [value for key, value in row.items() if key.startswith("zero_variance_groups/") and value is not None]
        step = row.get("step")
        if shares and isinstance(step, int) and step <= steps:
            varied[step] = min(shares) < 1.0
    return sum(varied.values())
