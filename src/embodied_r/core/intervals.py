"""95 % intervals for scores and for differences between two runs on the same questions.

A score over a dozen questions moves by several points per question, so every reported score carries
an interval (Wilson's for accuracy, a percentile bootstrap for MRA), and a before/after comparison is
a *paired* bootstrap over the questions both runs answered: a change counts only when its interval
excludes 0. Resampling uses a fixed seed, so a report is reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

RESAMPLES = 2000
SEED = 0


def bootstrap_ci(scores: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED) -> list[float] | None:
    """Percentile-bootstrap 95 % interval of the mean of ``scores`` (None when there are none).

    >>> bootstrap_ci([1.0] * 10)
    [1.0, 1.0]
    >>> low, high = bootstrap_ci([0.0, 1.0] * 20)
    >>> 0.3 < low < 0.5 < high < 0.7
    True
    """
    import numpy as np

    if not scores:
        return None
    values = np.asarray(scores, dtype=float)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def score_interval(scores: Sequence[float]) -> list[float] | None:
    """95 % interval of a mean score: Wilson's interval when every score is 0 or 1 (accuracy; honest at
    small n, where a bootstrap of one question would claim certainty), else the percentile bootstrap
    (MRA), which needs at least 3 questions to say anything (None below that).

    >>> score_interval([0.0])
    [0.0, 0.7935]
    >>> score_interval([0.3]) is None
    True
    """
    import math

    if not scores:
        return None
    if all(s in (0.0, 1.0) for s in scores):
        n, p, z = len(scores), sum(scores) / len(scores), 1.959964
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]
    return bootstrap_ci(scores) if len(scores) >= 3 else None


def paired_difference(before: Mapping[str, float], after: Mapping[str, float],
                      resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Any]:
    """``after - before`` on the question ids both hold: the mean difference, its paired-bootstrap 95 %
    interval, and a verdict that follows from the interval.

    >>> paired_difference({"a": 0.0, "b": 0.0}, {"a": 1.0, "b": 1.0})["verdict"]
    'better'
    >>> paired_difference({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 0.0})["verdict"]
    'no measurable change'
    """
    ids = sorted(set(before) & set(after))
    if not ids:
        return {"n": 0, "difference": None, "ci95": None, "verdict": "no shared questions"}
    differences = [float(after[i]) - float(before[i]) for i in ids]
    interval = bootstrap_ci(differences, resamples, seed)
    mean = sum(differences) / len(differences)
    assert interval is not None
    verdict = "better" if interval[0] > 0 else "worse" if interval[1] < 0 else "no measurable change"
    return {"n": len(ids), "difference": round(mean, 4), "ci95": interval, "verdict": verdict}


def format_interval(score: float | None, interval: Sequence[float] | None) -> str:
    """``"41.7 [16.7, 66.7]"`` in percent; ``"–"`` when there is no score.

    >>> format_interval(0.4167, [0.1667, 0.6667])
    '41.7 [16.7, 66.7]'
    """
    if score is None:
        return "–"
    text = f"{100 * score:.1f}"
    return f"{text} [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]" if interval else text


def prediction_difference(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``paired_difference`` of two runs' prediction dicts (``id``, ``score``), first prediction per id."""
    def scores(predictions: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in predictions:
            out.setdefault(str(p["id"]), float(p["score"]))
        return out

    return paired_difference(scores(before), scores(after))
