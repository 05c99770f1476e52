"""Accuracy reward: the evaluation's own scorer, applied to each completion.

Training and evaluation must agree on what "correct" means, so this reward does no parsing of its
own: it scores each completion with its row's method's scorer (``Method.score_answer``, the one
``embodied-r eval`` uses; the row's method comes from its ``prompt_version`` column, and rows without one
follow the default method). Both shipped methods score with :func:`embodied_r.core.scoring.score_completion`
(text inside the last ``<answer>`` only, unlike the official reward that read letters out of the
reasoning; letter match for choices, including Robot-R1's ``[[X]]``, VSI-Bench mean relative accuracy for
numbers, L1 closeness for positions).

``accuracy_rule: official`` (``make_accuracy_reward("official")``) reads choices the way Embodied-R's
released reward did instead, from the whole completion (``core.official_choice``), for users who
reproduce the paper's training exactly; docs/training.md lists where the two rules disagree.

>>> accuracy_reward(["<think>.</think><answer>B</answer>", "<think>.</think><answer>A</answer>"],
...                 answer=["B", "B"], answer_type=["choice", "choice"], options=[["A. l", "B. r"]] * 2)
[1.0, 0.0]
>>> accuracy_reward(["<answer>9.6</answer>"], answer=["10"], answer_type=["number"])
[1.0]
>>> make_accuracy_reward("official")(["<think>C. is far</think><answer>B</answer>"], answer=["B"])
[0.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from embodied_r.core.chat import completion_text
from embodied_r.core.columns import column
from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE, check_accuracy_rule
from embodied_r.methods import method_for_version


def accuracy_reward(completions: Sequence[Any], **columns: Any) -> list[float]:
    """Per-completion score in [0, 1]; needs the ``answer`` column (``answer_type`` defaults to choice).

    A missing ``answer`` column is a configuration error, raised at the first step rather than
    returning zeros that would look like a model that never learns.
    """
    return scored_with_rule(completions, columns, DEFAULT_ACCURACY_RULE)


def scored_with_rule(completions: Sequence[Any], columns: dict[str, Any], rule: str) -> list[float]:
    """``accuracy_reward`` with the choice answers read by ``rule`` (``core.scoring.ACCURACY_RULES``)."""
    n = len(completions)
    answers = column(columns, "answer", n, required=True)
    answer_types = [t or "choice" for t in column(columns, "answer_type", n)]
    options = column(columns, "options", n)
    versions = column(columns, "prompt_version", n)  # which method's scorer reads the row
    return [
        method_for_version(versions[i]).score_answer(completion_text(c), answers[i], answer_types[i], options[i],
                                                     rule=rule).score
        for i, c in enumerate(completions)
    ]


def make_accuracy_reward(rule: str = DEFAULT_ACCURACY_RULE) -> Callable[..., list[float]]:
    """The ``accuracy`` reward under ``rule`` (the recipe key ``accuracy_rule``); an unknown rule is a
    ValueError here, before any model loads.

    Each call returns a new function named ``accuracy`` (TRL names the reward's metrics after it), so
    renaming it never touches :func:`accuracy_reward`.
    """
    check_accuracy_rule(rule, "accuracy reward")

    def accuracy(completions: Sequence[Any], **columns: Any) -> list[float]:
        return scored_with_rule(completions, columns, rule)

    accuracy.__doc__ = f"{accuracy_reward.__doc__}\n    Choices are read with accuracy_rule {rule!r}.\n"
    accuracy.rule = rule  # type: ignore[attr-defined]  # which rule a built reward uses, for logs and tests
    return accuracy


__all__ = ["accuracy_reward", "make_accuracy_reward", "scored_with_rule"]
