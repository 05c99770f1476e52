"""Format and accuracy rewards, and the name -> function table."""

from __future__ import annotations

import pytest

from embodied_r.methods.accuracy import accuracy_reward
from embodied_r.methods.format import format_reward, strict_format_reward
from embodied_r.methods.rewards import REWARDS, RewardSpecError, get_reward, register_reward

OPTIONS = ["A. left", "B. right", "C. behind", "D. front"]


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>the sofa was left</think><answer>A</answer>", 1.0),
        ("<think>x</think>\n\n<answer>A</answer>", 1.0),
        ("<think>a\nb</think>\n<answer>B</answer>\n", 0.0),  # official rule: nothing after </answer>
        (" <think>x</think><answer>A</answer>", 0.0),  # must start with <think>
        ("<answer>A</answer>", 0.0),
        ("<think>x</think> so <answer>A</answer>", 0.0),  # text between the blocks
        ("<think></think><answer>A</answer>", 1.0),  # the official rule allows an empty think
    ],
)
def test_official_format_rule(text: str, expected: float) -> None:
    assert format_reward([text]) == [expected]
    assert format_reward([chat(text)]) == [expected]  # conversational completions


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>the sofa was left</think><answer>A</answer>", 1.0),
        ("  <think>x</think>\n<answer>B</answer>\n", 1.0),  # surrounding whitespace is fine
        ("<think></think><answer>A</answer>", 0.0),  # empty reasoning
        ("<think>x <answer>C</answer></think><answer>A</answer>", 0.0),  # answer hidden in the think block
        ("<think>x</think><answer>Z</answer>", 0.0),  # not one of the options
        ("<think>x</think><answer>A</answer><answer>B</answer>", 0.0),
    ],
)
def test_strict_format(text: str, expected: float) -> None:
    assert strict_format_reward([text], options=[OPTIONS], answer_type=["choice"]) == [expected]


def test_accuracy_uses_the_answer_block_only() -> None:
    completions = [
        "<think>Option C. is wrong, so not C</think><answer>B</answer>",  # the official parser said C here
        "<think>.</think><answer>[[B]]</answer>",  # Robot-R1 convention
        "<think>.</think><answer>right</answer>",  # the option text
        "<think>the answer is B</think>",  # no answer block
    ]
    rewards = accuracy_reward(
        completions, answer=["B"] * 4, answer_type=["choice"] * 4, options=[OPTIONS] * 4
    )
    assert rewards == [1.0, 1.0, 1.0, 0.0]


def test_accuracy_numbers_use_mean_relative_accuracy() -> None:
    rewards = accuracy_reward(
        ["<answer>10</answer>", "<answer>12.6</answer>", "<answer>3 m</answer>"],
        answer=["10", "10", "10"],
        answer_type=["number"] * 3,
        options=[None] * 3,
    )
    assert rewards == pytest.approx([1.0, 0.5, 0.0])  # 26% error passes thresholds 0.50-0.70


def test_accuracy_without_answer_column_is_an_error_not_zero() -> None:
    with pytest.raises(KeyError, match="answer"):
        accuracy_reward(["<answer>A</answer>"])


def test_table_names_match_metric_names() -> None:
    for name in ("format", "format_strict", "accuracy"):
        assert get_reward(name).__name__ == name  # TRL logs rewards/<__name__>/mean
    with pytest.raises(RewardSpecError, match="known rewards"):
        get_reward("nope")
    with pytest.raises(TypeError, match="no options"):
        get_reward("format", strict=True)


def test_register_an_extra_reward() -> None:
    def keypoint(completions, **_):
        return [0.5] * len(completions)

    register_reward("test_keypoint", keypoint)
    try:
        assert get_reward("test_keypoint")(["x", "y"]) == [0.5, 0.5]
        with pytest.raises(ValueError, match="already registered"):
            register_reward("test_keypoint", keypoint)
    finally:
        REWARDS.pop("test_keypoint")
