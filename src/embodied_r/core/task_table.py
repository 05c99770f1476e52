"""The per-task table of scored predictions: what evaluation reports (``metrics.json``, every baseline)
and the training run's held-out evaluation logs (``training.callbacks.EvalCallback``).

Each prediction is scored by :mod:`embodied_r.core.scoring`, the one definition of "correct" shared
by evaluation, the accuracy and ``open_l1`` rewards and the consistency gate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any


def task_table(predictions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-task and overall scores from prediction dicts (``task``, ``score``, ``parsed_answer``).

    ``micro`` is the sample-weighted mean over all predictions (the Embodied-R paper's "Avg");
    ``macro`` is the unweighted mean of the per-task means. ``ci95`` is the 95 % interval of a task's
    score and of ``micro`` (``intervals.score_interval``).
    """
    from embodied_r.core.intervals import score_interval

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
