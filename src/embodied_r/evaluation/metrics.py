"""Scores and aggregate tables.

``score_answer`` is the single definition of "correct" used by evaluation and by the accuracy reward.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

# VSI-Bench's confidence thresholds C = {0.50, 0.55, ..., 0.95} (Yang et al., "Thinking in Space", Eq. 1).
MRA_THRESHOLDS: tuple[float, ...] = tuple(round(0.50 + 0.05 * i, 2) for i in range(10))


def mean_relative_accuracy(prediction: float, target: float) -> float:
    """VSI-Bench mean relative accuracy: the share of thresholds θ with |ŷ−y|/y ≤ 1−θ.

    Uses ``<=`` as the reference implementation does (the paper writes ``<``; they differ only at
    exact boundaries). The target must be positive, as in VSI-Bench.

    >>> mean_relative_accuracy(10.0, 10.0)
    1.0
    >>> mean_relative_accuracy(14.0, 10.0)  # 40% error passes thresholds 0.50, 0.55, 0.60
    0.3
    >>> mean_relative_accuracy(20.0, 10.0)
    0.0
    """
    if target is None or not math.isfinite(float(target)) or float(target) <= 0:
        raise ValueError(f"mean_relative_accuracy needs a positive target, got {target!r}")
    if prediction is None or not math.isfinite(float(prediction)):
        return 0.0
    relative_error = abs(float(prediction) - float(target)) / float(target)
    # Small epsilon: 1 - 0.95 is 0.05000000000000004 in floating point; keep exact boundaries inclusive.
    hits = sum(relative_error <= (1.0 - theta) + 1e-9 for theta in MRA_THRESHOLDS)
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
