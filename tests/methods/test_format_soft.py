"""The shaped format reward ``format_soft`` and the completion-prefix helper the trainer uses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodied_r.core.chat import completion_text
from embodied_r.core.columns import with_completion_prefix
from embodied_r.methods.format import format_reward, format_steps, soft_format_reward
from embodied_r.methods.rewards import get_reward


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is A.", 0.0),
        ("<answer>A</answer>", 0.0),  # no think block at the start: nothing else counts
        (" <think>x</think><answer>A</answer>", 0.0),  # leading space: the official rule fails too
        ("<think>the sofa is left of", 0.25),  # opened only (what a truncated completion looks like)
        ("<think>x <answer>A</answer>", 0.25),  # an answer block without closing the think block
        ("<think>x</think>", 0.5),
        ("<think>x</think> so <answer>A</answer>", 0.5),  # text between the blocks breaks step 3
        ("<think>x</think><answer>A", 0.5),  # answer never closed
        ("<think>x</think><answer>A</answer> because", 0.75),  # trailing text
        ("<think>x</think>\n<answer>B</answer>\n", 0.75),  # official rule: nothing at all after </answer>
        ("<think>x</think>\n\n<answer>A</answer>", 1.0),
        ("<think></think><answer>A</answer>", 1.0),  # as lenient as the official rule
        ("<think>a</think>b</think><answer>C</answer>", 1.0),  # the official regex accepts this too
    ],
)
def test_soft_format_steps(text: str, expected: float) -> None:
    assert soft_format_reward([text]) == [expected]
    assert soft_format_reward([[{"role": "assistant", "content": text}]]) == [expected]


TAGGY = st.lists(
    st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", " ", "\n", "A", "so"]), max_size=8
).map("".join)


@settings(max_examples=300, deadline=None)
@given(TAGGY)
def test_full_credit_exactly_when_the_official_rule_holds(text: str) -> None:
    soft = soft_format_reward([text])[0]
    assert (soft == 1.0) == (format_reward([text])[0] == 1.0)
    assert soft in (0.0, 0.25, 0.5, 0.75, 1.0)


@settings(max_examples=200, deadline=None)
@given(TAGGY, TAGGY)
def test_a_longer_completion_never_loses_the_first_three_steps(head: str, tail: str) -> None:
    # Steps 1-3 are about a prefix of the text, so appending can only keep or add them (step 4, "nothing
    # after </answer>", is the one that appending can take away).
    assert min(format_steps(head + tail), 3) >= min(format_steps(head), 3)


def test_recipe_name_and_metric_name() -> None:
    reward = get_reward("format_soft")
    assert reward.__name__ == "format_soft"  # TRL logs rewards/format_soft/mean
    assert reward(["<think>x</think>"]) == [0.5]


def test_with_completion_prefix_keeps_the_form() -> None:
    plain = with_completion_prefix(["x</think><answer>A</answer>"], "<think>")
    chats = with_completion_prefix([[{"role": "assistant", "content": "x</think><answer>A</answer>"}]], "<think>")
    assert plain == ["<think>x</think><answer>A</answer>"]
    assert completion_text(chats[0]) == plain[0]
    assert soft_format_reward(plain) == soft_format_reward(chats) == [1.0]
    original = [[{"role": "assistant", "content": "x"}]]
    with_completion_prefix(original, "<think>")
    assert original[0][0]["content"] == "x"  # the trainer's own completions are not modified
    assert with_completion_prefix(["x"], "") == ["x"]
    with pytest.raises(TypeError, match="completion_prefix"):
        with_completion_prefix([[{"role": "assistant", "content": [{"type": "text", "text": "x"}]}]], "<think>")
