"""The context policy: over-long prompts are cut by a declared rule or skipped, and say so."""

from __future__ import annotations

import pytest

from embodied_r.core.chat import render_chat
from embodied_r.inference.context_policy import (
    ContextError,
    ContextPolicy,
    fit_chat,
    frame_line_numbers,
    model_context_length,
    token_budget_batches,
)
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages


class CharTokenizer:
    """One token per character, so the expected lengths are plain string lengths."""

    chat_template = None

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


TOKENIZER = CharTokenizer()
OPTIONS = ["A. left", "B. right", "C. behind"]


def _messages(frame_texts: list[str]) -> list[dict[str, str]]:
    frames = [{"action": "move forward" if i else None, "delta": text} for i, text in enumerate(frame_texts)]
    return build_reasoner_messages(frames, "Where is the door?", OPTIONS)


def _length(messages: list[dict[str, str]]) -> int:
    return len(render_chat(TOKENIZER, messages))


def test_a_prompt_that_fits_is_untouched() -> None:
    messages = _messages(["a sofa", "a door"])
    fit = fit_chat(TOKENIZER, messages, limit=_length(messages))
    assert fit.action == "fits" and fit.messages == messages and fit.record() is None
    assert len(fit.token_ids) == fit.prompt_tokens == fit.kept_tokens == _length(messages)


def test_drop_frames_removes_the_oldest_frames_and_keeps_the_question() -> None:
    repeated = "the same wall again " * 500  # a VLM that repeated itself in frame 1
    messages = _messages(["a sofa", repeated, "a door on the right", "the door is close"])
    short = _messages(["the door is close"])
    limit = _length(short) + 120  # room for the last two frames, not for the repeated one
    fit = fit_chat(TOKENIZER, messages, limit)
    assert fit.action == "dropped-frames" and fit.frames_dropped == 2
    user = fit.messages[1]["content"]
    assert "the same wall" not in user and "a sofa" not in user
    assert "Frame 2: After move forward, Observe: a door on the right" in user  # numbering kept: nothing invented
    assert user.endswith("Question: Where is the door?\nChoices:\nA. left\nB. right\nC. behind")
    assert fit.messages[0] == messages[0]  # the system prompt is kept
    assert fit.kept_tokens == _length(fit.messages) <= limit and fit.prompt_tokens == _length(messages)
    assert fit.record() == {"action": "dropped-frames", "prompt_tokens": fit.prompt_tokens,
                            "kept_tokens": fit.kept_tokens, "limit": limit, "frames_dropped": 2}


def test_drop_frames_skips_when_the_question_alone_is_too_long() -> None:
    messages = _messages(["a sofa", "a door"])
    fit = fit_chat(TOKENIZER, messages, limit=50)
    assert fit.skipped and fit.action == "skipped" and fit.kept_tokens == 0
    assert "even without its 2 frame descriptions" in fit.reason
    plain = [{"role": "user", "content": "x" * 500}]
    assert "no frame descriptions" in fit_chat(TOKENIZER, plain, limit=100).reason


def test_truncate_left_keeps_the_end_of_the_user_text() -> None:
    messages = _messages(["a sofa " * 100, "a door"])
    limit = _length(messages) - 300
    fit = fit_chat(TOKENIZER, messages, limit, rule="truncate-left")
    assert fit.action == "truncated-left" and fit.kept_tokens == limit  # one token per char: exact
    assert fit.messages[0] == messages[0]
    assert messages[1]["content"].endswith(fit.messages[1]["content"])
    assert fit.messages[1]["content"].endswith("C. behind")


def test_truncate_left_with_a_real_tokenizer_stays_within_the_limit() -> None:
    from tests.tiny_models import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    messages = _messages(["a red sofa ahead " * 40, "a door"])
    whole = len(tokenizer(render_chat(tokenizer, messages), add_special_tokens=False)["input_ids"])
    fit = fit_chat(tokenizer, messages, whole - 100, rule="truncate-left")
    assert fit.action == "truncated-left" and whole - 110 <= fit.kept_tokens <= whole - 100
    assert fit.kept_tokens == len(
        tokenizer(render_chat(tokenizer, fit.messages), add_special_tokens=False)["input_ids"])


def test_token_rule_keeps_the_last_tokens_of_the_whole_rendered_prompt() -> None:
    # The official trainer's left truncation: the system prompt goes first; the messages stay as given.
    from embodied_r.core.chat import render_chat as render

    messages = _messages(["a sofa " * 100, "a door"])
    ids = TOKENIZER(render(TOKENIZER, messages), add_special_tokens=False)["input_ids"]
    fit = fit_chat(TOKENIZER, messages, len(ids) - 300, rule="truncate-left-tokens")
    assert fit.action == "truncated-left-tokens" and fit.messages == messages
    assert fit.token_ids == ids[300:] and fit.kept_tokens == len(ids) - 300
    assert fit.record()["kept_tokens"] == len(ids) - 300


def test_skip_rule_and_policy_errors() -> None:
    messages = _messages(["a sofa", "a door"])
    fit = fit_chat(TOKENIZER, messages, limit=10, rule="skip")
    assert fit.skipped and fit.record()["action"] == "skipped" and fit.record()["prompt_tokens"] == _length(messages)
    with pytest.raises(ContextError, match="unknown context rule"):
        ContextPolicy(rule="cut-middle")
    with pytest.raises(ContextError, match="positive"):
        ContextPolicy(max_prompt_tokens=0)
    with pytest.raises(ContextError, match="leaves no room"):
        ContextPolicy().limit(512, 512)


def test_completion_prefix_is_measured() -> None:
    messages = [{"role": "user", "content": "x" * 10}]
    assert fit_chat(TOKENIZER, messages, _length(messages), completion_prefix="").action == "fits"
    assert fit_chat(TOKENIZER, messages, _length(messages), completion_prefix="<think>").action == "skipped"


def test_model_context_and_frame_lines() -> None:
    class Config:
        max_position_embeddings = 8192

    class Model:
        config = Config()

    assert model_context_length(Model()) == 8192 and model_context_length(None) == 2048
    assert frame_line_numbers("Frame 0: a\nnot a frame\n Frame 12: b") == [0, 2]


def test_token_budget_keeps_long_rows_alone() -> None:
    lengths = [9000, 100, 100, 100, 8000]
    batches = token_budget_batches(lengths, max_tokens=16384, max_rows=2)
    assert batches == [[0], [4, 1], [2, 3]]  # the 9,000-token row alone; nothing exceeds the budget
    assert all(len(b) * max(lengths[i] for i in b) <= 16384 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(5))
