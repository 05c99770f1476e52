"""Logical-consistency reward: gate, batching, failures, and the real logits judge on a tiny model."""

from __future__ import annotations

import re
import socket

import pytest

from embodied_r.judge.judges import (
    JudgeError,
    OpenAIJudge,
    ReferenceJudge,
    build_judge,
    question_for_judge,
)
from embodied_r.methods.embodied_r.consistency import ConsistencyReward
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages
from embodied_r.methods.rewards import get_reward

OPTIONS = ["A. left", "B. right", "C. behind"]
PROMPT = build_reasoner_messages([{"delta": "A chair is on the right."}], "Where is the chair?", OPTIONS)


class ReadingJudge:
    """A stand-in for a reference model that reads content: it answers the option whose text the
    reasoning mentions last, else the letter the reasoning names, else A (a judge always answers)."""

    def __init__(self, sees_letters: bool = False) -> None:
        self.sees_letters = sees_letters
        self.calls: list[tuple[list[str], list[str]]] = []

    def judge(self, questions, thinks, options):
        self.calls.append((list(questions), list(thinks)))
        out = []
        for think, opts in zip(thinks, options):
            texts = {o.split(". ", 1)[1]: o[0] for o in opts}
            found = [(think.rfind(text), letter) for text, letter in texts.items() if text in think]
            named = re.search(r"option ([A-H])\b", think)
            out.append(max(found)[1] if found else named.group(1) if named else "A")
        return out


class BrokenJudge:
    def judge(self, questions, thinks, options):
        raise JudgeError("connection refused")


def run(reward, completions, answers, answer_types=None, metrics=None):
    n = len(completions)
    log = (lambda name, value: metrics.setdefault(name, []).append(value)) if metrics is not None else None
    return reward(
        prompts=[PROMPT] * n,
        completions=completions,
        answer=answers,
        answer_type=answer_types or ["choice"] * n,
        options=[OPTIONS] * n,
        log_metric=log,
    )


def test_rewards_reasoning_that_leads_to_the_answer_not_one_that_contradicts_it() -> None:
    judge = ReadingJudge()
    reward = ConsistencyReward(judge)
    completions = [
        "<think>The chair is on the right, so it is B</think><answer>B</answer>",  # consistent, correct
        "<think>The chair is on the left, so it is A</think><answer>B</answer>",  # contradicts its answer
        "<think>it is left</think><answer>A</answer>",  # consistent but wrong
        "<answer>B</answer>",  # no reasoning
    ]
    assert run(reward, completions, ["B"] * 4) == [1.0, 0.0, 0.0, 0.0]
    # One batched call, only for the rows that pass the gate (correct answer with a think block).
    assert len(judge.calls) == 1 and len(judge.calls[0][0]) == 2


def test_judge_sees_the_question_and_choices_but_not_the_scene() -> None:
    judge = ReadingJudge()
    run(ConsistencyReward(judge), ["<think>it is right</think><answer>B</answer>"], ["B"])
    question = judge.calls[0][0][0]
    assert question.startswith("Question: Where is the chair?") and "B. right" in question
    assert "Frame 0" not in question and "chair is on the right" not in question
    assert question_for_judge([{"role": "user", "content": "no marker here"}], None) == "no marker here"


def test_not_applicable_rows_and_unweighted_stage_return_none() -> None:
    reward = ConsistencyReward(ReadingJudge())
    assert run(reward, ["<think>x</think><answer>3</answer>"], ["3"], ["number"]) == [None]
    reward.set_weight(0.0)  # stages 1-2 of the paper: no reference compute at all
    judge = reward.judge
    assert run(reward, ["<think>it is right</think><answer>B</answer>"], ["B"]) == [None]
    assert judge.calls == []


def test_judge_failure_is_counted_and_not_a_zero() -> None:
    reward = ConsistencyReward(BrokenJudge(), max_consecutive_failures=2)
    metrics: dict = {}
    completions = [
        "<think>so it is B</think><answer>B</answer>",
        "<think>so it is A</think><answer>A</answer>",
    ]
    assert run(reward, completions, ["B", "B"], metrics=metrics) == [None, None]
    assert reward.failures == 1 and metrics["consistency/judge_failures"] == [1.0]
    with pytest.raises(JudgeError, match="2 steps in a row"):
        run(reward, completions, ["B", "B"])


def test_unreachable_endpoint_fails_before_training() -> None:
    with socket.socket() as sock:  # a local port with nothing listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(JudgeError, match="not reachable"):
        build_judge({"base_url": f"http://127.0.0.1:{port}/v1", "model": "ref"}, "policy-model")
    with pytest.raises(JudgeError, match="failed"):
        OpenAIJudge(f"http://127.0.0.1:{port}/v1", "ref", max_retries=0, timeout=2).judge(
            ["q"], ["t"], [OPTIONS]
        )


def test_factory_in_the_table_takes_a_judge() -> None:
    reward = get_reward("consistency", judge=ReadingJudge(), gate=False)
    assert reward.__name__ == "consistency"
    assert run(reward, ["<think>on the left</think><answer>A</answer>"], ["B"]) == [1.0]  # ungated


def test_reference_judge_answers_with_option_letters(tiny_lm_dir) -> None:
    judge = ReferenceJudge.from_pretrained(
        str(tiny_lm_dir), dtype="float32", device="cpu", max_batch_size=8, scoring="letter"
    )
    questions = [question_for_judge(PROMPT, OPTIONS)] * 3 + ["Question: which?\nChoices:\nA. x\nB. y"]
    thinks = ["short", "a much longer thinking process about the chair on the right " * 5, "left", "y"]
    options = [OPTIONS] * 3 + [["A. x", "B. y"]]
    scores = judge.letter_scores(questions, thinks, options)
    assert [sorted(s) for s in scores] == [["A", "B", "C"]] * 3 + [["A", "B"]]
    letters = judge.judge(questions, thinks, options)
    assert letters[:3] == [max(s, key=s.get) for s in scores[:3]] and letters[3] in ("A", "B")
    # Batched (left-padded) and one-by-one scoring agree: padding does not leak into the answer.
    single = ReferenceJudge(judge.model, judge.tokenizer, max_batch_size=1, scoring="letter").letter_scores(
        questions, thinks, options
    )
    for batched, alone in zip(scores, single):
        assert batched == pytest.approx(alone, abs=1e-3)
    assert all(not p.requires_grad for p in judge.model.parameters())


def test_naming_the_letter_is_not_paid_by_default_but_content_is() -> None:
    letter_only = "<think>I choose option B.</think><answer>B</answer>"
    by_content = "<think>The chair was seen on the right side.</think><answer>B</answer>"
    blind, official = ReadingJudge(), ReadingJudge(sees_letters=True)
    assert run(ConsistencyReward(blind), [letter_only, by_content], ["B", "B"]) == [0.0, 1.0]
    assert "option [masked]" in blind.calls[0][1][0]  # the judge never saw the letter
    assert run(ConsistencyReward(official), [letter_only, by_content], ["B", "B"]) == [1.0, 1.0]


def test_an_unreadable_completion_drops_its_whole_group() -> None:
    class PartlyBlind(ReadingJudge):
        def judge(self, questions, thinks, options):
            letters = super().judge(questions, thinks, options)
            return [None if "too long" in t else letter for t, letter in zip(thinks, letters)]

    reward = ConsistencyReward(PartlyBlind(), num_generations=2)
    metrics: dict = {}
    completions = [
        "<think>right</think><answer>B</answer>",
        "<think>too long right</think><answer>B</answer>",  # the judge cannot read it
        "<think>right</think><answer>B</answer>",
        "<think>left</think><answer>B</answer>",
    ]
    # Group 0 (rows 0-1) is dropped whole; group 1 is measured; never a 0 for the unread row.
    assert run(reward, completions, ["B"] * 4, metrics=metrics) == [None, None, 1.0, 0.0]
    assert metrics["consistency/not_judged_rows"] == [2.0] and reward.rows_not_judged == 2


def test_a_judgement_of_none_earns_nothing_and_is_counted() -> None:
    from embodied_r.judge.judges import NO_OPTION

    class Undecided(ReadingJudge):
        """Answers none for a reasoning that names no option's text (it supports no option)."""

        def judge(self, questions, thinks, options):
            letters = super().judge(questions, thinks, options)
            return [NO_OPTION if not any(o.split(". ", 1)[1] in t for o in opts) else letter
                    for t, opts, letter in zip(thinks, options, letters)]

    completions = [
        "<think>The chair is on the right.</think><answer>B</answer>",
        "<think>I could not see the chair in any frame.</think><answer>B</answer>",  # supports no option
    ]
    for gate in (True, False):
        metrics: dict = {}
        assert run(ConsistencyReward(Undecided(), gate=gate), completions, ["B", "B"], metrics=metrics) == [1.0, 0.0]
        assert metrics["consistency/no_option"] == [1.0] and metrics["consistency/judged"] == [2.0]
