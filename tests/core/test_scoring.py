"""One scorer: training's rewards and evaluation give a completion the same score, for every answer type."""

from __future__ import annotations

import pytest

from embodied_r.core.records import ANSWER_TYPES, PromptRow
from embodied_r.core.scoring import score_answer, score_completion
from embodied_r.evaluation.predict import score_completion as evaluation_score
from embodied_r.methods.accuracy import accuracy_reward
from embodied_r.methods.robot_r1.rewards import open_l1

OPTIONS = ["A. left", "B. right", "C. ahead", "D. behind"]
# (answer type, gold, options, completions): right, partly right, wrong, unreadable
CASES = [
    ("choice", "B", OPTIONS, ["<think>t</think><answer>B</answer>", "<answer>[[B]]</answer>",
                              "<answer>C</answer>", "<answer>E</answer>", "B"]),
    ("number", 10.0, None, ["<answer>10</answer>", "<answer>8 m</answer>", "<answer>14</answer>",
                            "<answer>twenty</answer>", "<answer>many</answer>"]),
    ("position", "[0.1, 0.6, 0.2]", None, ["<answer>[0.1, 0.6, 0.2]</answer>", "<answer>0.3, 0.6, 0.2</answer>",
                                           "<answer>[5, 5, 5]</answer>", "<answer>up</answer>", "no tags"]),
    ("open", "Move down", None, ["<answer>move  DOWN</answer>", "<answer>Move down and left</answer>",
                                 "<answer></answer>", "Move down"]),
]


def test_every_answer_type_is_covered() -> None:
    assert {case[0] for case in CASES} == set(ANSWER_TYPES)


@pytest.mark.parametrize("answer_type, gold, options, completions", CASES, ids=[c[0] for c in CASES])
def test_training_and_evaluation_give_the_same_score(answer_type, gold, options, completions) -> None:
    n = len(completions)
    rewards = accuracy_reward(completions, answer=[gold] * n, answer_type=[answer_type] * n, options=[options] * n)
    row = PromptRow(id="q", task="t", prompt=[{"role": "user", "content": "?"}], answer=gold,
                    answer_type=answer_type, options=options)
    evaluated = [evaluation_score(row, c) for c in completions]
    assert rewards == [p.score for p in evaluated]
    assert [p.parsed_answer for p in evaluated] == [score_completion(c, gold, answer_type, options).parsed
                                                   for c in completions]
    if answer_type == "position":       # Robot-R1's open-ended reward is the same score again
        assert open_l1(completions, answer=[gold] * n, answer_type=[answer_type] * n) == \
            [round(r, 6) for r in rewards]
    # the cases are not all 0 or all 1: right and wrong answers are told apart
    assert max(rewards) == 1.0 and min(rewards) == 0.0


def test_partial_scores() -> None:
    assert score_completion("<answer>8 m</answer>", 10.0, "number", None).score == pytest.approx(0.6)
    assert score_completion("<answer>0.3, 0.6, 0.2</answer>", "[0.1, 0.6, 0.2]", "position", None).score \
        == pytest.approx(0.8)


def test_bad_gold_answers_raise_instead_of_scoring_zero() -> None:
    with pytest.raises(ValueError, match=r"\[x, y, z\]"):
        score_answer([0.1, 0.2, 0.3], "B", "position")
    with pytest.raises(ValueError, match="positive target"):
        score_answer(3.0, 0.0, "number")
    with pytest.raises(ValueError, match="unknown answer_type"):
        score_answer("x", "x", "essay")
