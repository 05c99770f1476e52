"""The one scorer: what "correct" means for every answer type, in training and in evaluation.

The accuracy reward, the ``open_l1`` reward, the consistency gate and ``embodied-r eval`` all call
:func:`score_completion` (parse the last ``<answer>``, then :func:`score_answer`), so a completion
earns in training exactly the score it gets when evaluated.

Answer types (``records.ANSWER_TYPES``):

- ``choice``: the option letter (also Robot-R1's ``[[X]]``), 1 or 0;
- ``number``: VSI-Bench mean relative accuracy (Yang et al., "Thinking in Space", Eq. 1);
- ``position``: Robot-R1's open-ended waypoint, ``clip(1 - L1, 0, 1)`` with L1 the sum of absolute
  differences in metres between the written and the true ``[x, y, z]`` (Robot-R1 §4.4);
- ``open``: free text, 1 only for the same words ignoring case and spacing; graded answers (0-3) need
  a judge, see ``embodied-r robot-bench``.

How a ``choice`` answer is read is the accuracy rule (``ACCURACY_RULES``): ``last-answer``, the default,
reads only the last ``<answer>`` (``core.parsing``); ``official`` reads the letter the way Embodied-R's
released reward did, from the whole completion (``core.official_choice``), for users who reproduce the
paper's training exactly. Other answer types have one rule (the official code had only letters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from embodied_r.core.official_choice import official_choice_letter, official_choice_score
from embodied_r.core.parsing import parse_answer, parse_xyz

# last-answer: ours, the text inside the last <answer> only; official: Embodied-R's released letter rule.
ACCURACY_RULES: tuple[str, ...] = ("last-answer", "official")
DEFAULT_ACCURACY_RULE = "last-answer"

# VSI-Bench's confidence thresholds C = {0.50, 0.55, ..., 0.95}, as the reference code builds them:
# np.linspace(.5, .95, int((.95 - .5) / .05 + 2)), i.e. 10 points start + i * step with the last set
# to .95. The same floating-point operations give the same values (0.8999999999999999, not 0.9), so
# scores match the reference at every boundary.
_MRA_STEP = (0.95 - 0.50) / 9
MRA_THRESHOLDS: tuple[float, ...] = (*(0.50 + i * _MRA_STEP for i in range(9)), 0.95)


class Scored(NamedTuple):
    """A completion's parsed answer (None when unreadable) and its score in [0, 1]."""

    parsed: Any
    score: float


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


def l1_score(predicted: Sequence[float] | None, target: Sequence[float]) -> float:
    """``clip(1 - sum|pred - gt|, 0, 1)``; 0 for a missing prediction.

    >>> l1_score([0.1, 0.6, 0.2], [0.1, 0.6, 0.2])
    1.0
    >>> round(l1_score([0.2, 0.6, 0.3], [0.1, 0.6, 0.2]), 3)
    0.8
    """
    if predicted is None:
        return 0.0
    distance = sum(abs(float(p) - float(t)) for p, t in zip(predicted, target, strict=True))
    return min(1.0, max(0.0, 1.0 - distance))


def score_answer(parsed: Any, answer: Any, answer_type: str) -> float:
    """Score one parsed answer against the gold answer (0 for an unreadable one).

    >>> score_answer("B", "B", "choice"), score_answer(None, "B", "choice")
    (1.0, 0.0)
    >>> score_answer(9.6, 10, "number")
    1.0
    >>> round(score_answer([0.1, 0.6, 0.25], "[0.1, 0.6, 0.2]", "position"), 6)
    0.95
    """
    if answer_type == "position":
        gold = parse_xyz(answer)
        if gold is None:  # a data error, not a wrong answer: it must not look like a score of 0
            raise ValueError(f"a position answer must be [x, y, z], got {answer!r}")
        return l1_score(parse_xyz(parsed) if parsed is not None else None, gold)
    if parsed is None:
        return 0.0
    if answer_type == "choice":
        return float(str(parsed).strip().upper() == str(answer).strip().upper())
    if answer_type == "number":
        return mean_relative_accuracy(float(parsed), float(answer))
    if answer_type == "open":
        return float(" ".join(str(parsed).lower().split()) == " ".join(str(answer).lower().split()))
    raise ValueError(f"unknown answer_type {answer_type!r}")


def check_accuracy_rule(rule: Any, source: str = "recipe") -> None:
    """A clear error for an accuracy rule that does not exist (checked before any model loads).

    >>> check_accuracy_rule("official")
    >>> check_accuracy_rule("paper")
    Traceback (most recent call last):
    ...
    ValueError: recipe: accuracy_rule 'paper' does not exist; use one of last-answer, official
    """
    if rule not in ACCURACY_RULES:
        raise ValueError(f"{source}: accuracy_rule {rule!r} does not exist; use one of {', '.join(ACCURACY_RULES)}")


def score_completion(completion: str, answer: Any, answer_type: str, options: list[str] | None,
                     rule: str = DEFAULT_ACCURACY_RULE) -> Scored:
    """Parse the last ``<answer>`` of a completion as ``answer_type`` and score it; with
    ``rule="official"`` a choice is read from the whole completion as the official reward read it.

    >>> score_completion("<think>.</think><answer>B</answer>", "B", "choice", ["A. l", "B. r"])
    Scored(parsed='B', score=1.0)
    >>> score_completion("<think>A. is far</think><answer>B</answer>", "B", "choice", None, rule="official")
    Scored(parsed='A', score=0.0)
    """
    check_accuracy_rule(rule, "score_completion")
    if rule == "official" and answer_type == "choice":
        return Scored(official_choice_letter(completion), official_choice_score(completion, answer))
    parsed = parse_answer(completion, options, answer_type)
    return Scored(parsed, score_answer(parsed, answer, answer_type))


__all__ = ["ACCURACY_RULES", "DEFAULT_ACCURACY_RULE", "MRA_THRESHOLDS", "Scored", "check_accuracy_rule", "l1_score",
           "mean_relative_accuracy", "parse_xyz", "score_answer", "score_completion"]
