"""95 % intervals for scores and for differences between two runs on the same questions.

A score over a dozen questions moves by several points per question, so every reported score carries
an interval (Wilson's for accuracy, a percentile bootstrap for MRA). A before/after comparison pairs
the questions both runs answered and shows the paired-bootstrap interval of the difference beside an
exact test (``core.significance``: sign test for 0/1 scores, sign-flip test otherwise); the verdict comes
from the test, since a bootstrap of a few changed questions claims a certainty it does not have.
Resampling uses a fixed seed, so a report is reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embodied_r.core.significance import across_seeds, check_poolable, paired_test

__all__ = ["RESAMPLES", "SEED", "across_seeds", "bootstrap_ci", "check_poolable", "format_comparison",
           "format_interval", "format_p", "paired_difference", "prediction_difference", "score_interval"]

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
    interval, and the exact paired test whose p-value gives the verdict (5 % level).

    Keys: ``n``, ``difference``, ``ci95``, ``verdict`` ("better", "worse", "no measurable change", "too
    few differing answers" when no outcome of so few differing pairs could reach p < 0.05, or "no shared
    questions"), ``p_value``, ``test`` ("sign" or "sign-flip"), ``method``, ``improved``, ``worsened``.

    >>> paired_difference({"a": 0.0, "b": 0.0}, {"a": 1.0, "b": 1.0})["verdict"]
    'too few differing answers'
    >>> diff = paired_difference({str(i): 0.0 for i in range(9)}, {str(i): 1.0 for i in range(9)})
    >>> diff["verdict"], diff["p_value"], diff["test"], diff["improved"], diff["worsened"]
    ('better', 0.00390625, 'sign', 9, 0)
    >>> paired_difference({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 0.0})["p_value"]
    1.0
    """
    ids = sorted(set(before) & set(after))
    if not ids:
        return {"n": 0, "difference": None, "ci95": None, "verdict": "no shared questions", "p_value": None,
                "test": None, "method": None, "improved": 0, "worsened": 0}
    first = [float(before[i]) for i in ids]
    second = [float(after[i]) for i in ids]
    differences = [a - b for b, a in zip(first, second, strict=True)]
    interval = bootstrap_ci(differences, resamples, seed)
    mean = sum(differences) / len(differences)
    test = paired_test(first, second)
    return {"n": len(ids), "difference": round(mean, 4), "ci95": interval, "verdict": test["verdict"],
            "p_value": test["p_value"], "test": test["test"], "method": test["method"],
            "improved": test["improved"], "worsened": test["worsened"]}


def format_interval(score: float | None, interval: Sequence[float] | None) -> str:
    """``"41.7 [16.7, 66.7]"`` in percent; ``"–"`` when there is no score.

    >>> format_interval(0.4167, [0.1667, 0.6667])
    '41.7 [16.7, 66.7]'
    """
    if score is None:
        return "–"
    text = f"{100 * score:.1f}"
    return f"{text} [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]" if interval else text


def format_p(p_value: float | None) -> str:
    """A p-value as printed beside an interval: three decimals, ``"< 0.001"`` below that, ``"–"`` for none.

    >>> format_p(0.125), format_p(0.00012), format_p(None)
    ('0.125', '< 0.001', '–')
    """
    if p_value is None:
        return "–"
    return "< 0.001" if p_value < 0.001 else f"{p_value:.3f}"


def format_comparison(diff: Mapping[str, Any]) -> str:
    """A ``paired_difference`` in one line of score points: the difference, its interval, p and verdict.

    >>> before = {str(i): 0.0 for i in range(160)}
    >>> after = {**before, **{str(i): 1.0 for i in range(20)}, "158": 0.0, "159": 0.0}
    >>> before.update({"158": 1.0, "159": 1.0})
    >>> format_comparison(paired_difference(before, after))
    '+11.2 [+6.2, +16.9], p < 0.001, better (20 improved, 2 worse of 160)'
    """
    if diff.get("difference") is None:
        return str(diff.get("verdict", "–"))
    interval = diff.get("ci95")
    text = f"{100 * diff['difference']:+.1f}"
    if interval:
        text += f" [{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]"
    p_text = format_p(diff.get("p_value"))
    p_text = f"p {p_text}" if p_text.startswith("<") else f"p = {p_text}"
    return (f"{text}, {p_text}, {diff['verdict']} "
            f"({diff.get('improved', 0)} improved, {diff.get('worsened', 0)} worse of {diff['n']})")


def prediction_difference(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``paired_difference`` of two runs' prediction dicts (``id``, ``score``), first prediction per id."""
    def scores(predictions: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in predictions:
            out.setdefault(str(p["id"]), float(p["score"]))
        return out

    return paired_difference(scores(before), scores(after))
