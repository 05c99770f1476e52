"""Scores and aggregate tables.

``score_answer`` is the single definition of "correct" used by evaluation and by the accuracy reward.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

# VSI-Bench's confidence thresholds C = {0.50, 0.55, ..., 0.95} (Yang et al., "Thinking in Space", Eq. 1),
# as the reference code builds them: np.linspace(.5, .95, int((.95 - .5) / .05 + 2)), i.e. 10 points
# start + i * step with the last set to .95. The same floating-point operations give the same values
# (0.8999999999999999, not 0.9), so scores match the reference at every boundary.
_MRA_STEP = (0.95 - 0.50) / 9
MRA_THRESHOLDS: tuple[float, ...] = (*(0.50 + i * _MRA_STEP for i in range(9)), 0.95)


def mean_relative_accuracy(prediction: float, target: float) -> float:
    """VSI-Bench mean relative accuracy: the share of thresholds θ with |ŷ−y|/y ≤ 1−θ, computed as the
    reference code computes it (``abs(pred - target) / target <= 1 - conf`` in float64; the paper
    writes ``<``). No tolerance is added at the boundaries: a prediction of 8 for 10 scores 0.6, since
    1 − 0.8 is 0.19999999999999996 < 0.2. The target must be positive, as in VSI-Bench.

    >>> mean_relative_accuracy(10.0, 10.0)
    1.0
    >>> mean_relative_accuracy(14.0, 10.0)  # 40% error passes thresholds 0.50, 0.55, 0.60
    0.3
    >>> mean_relative_accuracy(8.0, 10.0)
    0.6
    >>> mean_relative_accuracy(20.0, 10.0)
    0.0
    """
    if target is None or not math.isfinite(float(target)) or float(target) <= 0:
        raise ValueError(f"mean_relative_accuracy needs a positive target, got {target!r}")
    if prediction is None or not math.isfinite(float(prediction)):
        return 0.0
    relative_error = abs(float(prediction) - float(target)) / float(target)
    hits = sum(relative_error <= 1.0 - theta for theta in MRA_THRESHOLDS)
    return hits / len(MRA_THRESHOLDS)


def score_answer(parsed: str | float | None, answer: str | float, answer_type: str) -> float:
    """Score one parsed answer against the gold answer: 1/0 for choices and open text, MRA for numbers.

    >>> score_answer("B", "B", "choice"), score_answer(None, "B", "choice")
    (1.0, 0.0)
    >>> score_answer(9.6, 10, "number")
    1.0
    """
    if parsed is None:
        return 0.0
    if answer_type == "choice":
        return float(str(parsed).strip().upper() == str(answer).strip().upper())
    if answer_type == "number":
        return mean_relative_accuracy(float(parsed), float(answer))
    if answer_type == "open":
        return float(" ".join(str(parsed).lower().split()) == " ".join(str(answer).lower().split()))
    raise ValueError(f"unknown answer_type {answer_type!r}")


def task_table(predictions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-task and overall scores from prediction dicts (``task``, ``score``, ``parsed_answer``).

    ``micro`` is the sample-weighted mean over all predictions (the Embodied-R paper's "Avg");
    ``macro`` is the unweighted mean of the per-task means. ``ci95`` is the 95 % interval of a task's
    score and of ``micro`` (``intervals.score_interval``).
    """
    from embodied_r.evaluation.intervals import score_interval

    per_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in predictions:
        per_task[str(row["task"])].append(row)
    tasks: dict[str, dict[str, Any]] = {}
    for task in sorted(per_task):
        rows = per_task[task]
        scores = [float(r["score"]) for r in rows]
        tasks[task] = {
            "n": len(rows),
            "score": sum(scores) / len(scores),
            "ci95": score_interval(scores),
            "unparsed": sum(1 for r in rows if r.get("parsed_answer") is None),
        }
    n_total = sum(t["n"] for t in tasks.values())
    all_scores = [float(r["score"]) for rows in per_task.values() for r in rows]
    return {
        "tasks": tasks,
        "overall": {
            "n": n_total,
            "micro": (sum(all_scores) / n_total) if n_total else None,
            "ci95": score_interval(all_scores),
            "macro": (sum(t["score"] for t in tasks.values()) / len(tasks)) if tasks else None,
            "unparsed": sum(t["unparsed"] for t in tasks.values()),
            "unparsed_rate": (sum(t["unparsed"] for t in tasks.values()) / n_total) if n_total else None,
        },
    }
