from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.core.records import PromptRow
from embodied_r.evaluation.baselines import direct_answer_rows, position_bias, prior_baseline, random_baseline
from embodied_r.judge.rate import consistency_summary, judge_predictions


def _row(i: int, answer: str = "A", task: str = "t", options: list[str] | None = None) -> PromptRow:
    return PromptRow(id=f"q{i}", task=task, answer=answer, answer_type="choice",
                     options=options or ["A. left", "B. right", "C. back", "D. front"],
                     prompt=[{"role": "system", "content": "sys"},
                             {"role": "user", "content": f"Frame 0: a sofa\nQuestion: where {i}?\nChoices:\nA. left\n"
                                                         "B. right\nC. back\nD. front"}])


def test_random_is_the_expected_accuracy() -> None:
    rows = [_row(0), _row(1, options=["A. x", "B. y"]),
            PromptRow(id="n", task="count", prompt=[], answer=3.0, answer_type="number")]
    table = random_baseline(rows)
    assert table["overall"]["micro"] == pytest.approx((0.25 + 0.5) / 2)
    assert table["excluded_non_choice"] == 1 and "count" not in table["tasks"]


def test_prior_uses_the_most_frequent_letter_per_task_and_median_numbers() -> None:
    rows = [_row(0, "B"), _row(1, "B"), _row(2, "C"), _row(3, "A", task="u"),
            PromptRow(id="n1", task="count", prompt=[], answer=2.0, answer_type="number"),
            PromptRow(id="n2", task="count", prompt=[], answer=4.0, answer_type="number"),
            PromptRow(id="n3", task="count", prompt=[], answer=3.0, answer_type="number")]
    table = prior_baseline(rows)  # leave-one-out: a question's own answer never informs its guess
    assert table["fit_on"] == "evaluated questions, leave-one-out"
    # t: B and B are each guessed from {B, C} (tie -> B, right); C is guessed from {B, B} (B, wrong).
    assert table["tasks"]["t"]["score"] == pytest.approx(2 / 3)
    # u: nothing else to learn from, so the first letter is guessed (A, right here by chance).
    assert table["tasks"]["u"]["score"] == 1.0
    # count: 2 is guessed as median(4, 3) = 3.5 (75% error: 0), 4 as median(2, 3) = 2.5 (37.5% error
    # passes θ = 0.50, 0.55, 0.60: 0.3), 3 as median(2, 4) = 3 (1.0).
    assert table["tasks"]["count"]["score"] == pytest.approx((0.0 + 0.3 + 1.0) / 3)
    fitted_elsewhere = prior_baseline(rows[:3], fit_rows=[_row(9, "C")])
    assert fitted_elsewhere["tasks"]["t"]["score"] == pytest.approx(1 / 3)


def test_answer_prior_follows_the_answer_text_where_the_letter_prior_cannot() -> None:
    # The generator balances letters: "front" is the answer behind a different letter each time.
    orders = [["A. front", "B. back"], ["A. back", "B. front"], ["A. left", "B. front"], ["A. front", "B. left"]]
    rows = [_row(i, "AB"[o.index(next(x for x in o if x.endswith("front")))], options=o) for i, o in enumerate(orders)]
    letter, text = prior_baseline(rows), prior_baseline(rows, name="answer-prior")
    assert text["name"] == "answer-prior" and text["fit_on"] == "evaluated questions, leave-one-out"
    assert text["tasks"]["t"]["score"] == 1.0  # each guess comes from the three other questions' "front"
    assert letter["tasks"]["t"]["score"] == 0.0  # leave-one-out, the other letters are 2:1 against this one
    assert text["prior"]["answer_texts"] == {"t": {"front": 4}}
    # Fit elsewhere: "back" is the answer there, so "back" is guessed where it is an option (wrong twice);
    # where no option text was ever an answer, the letter prior's order decides: B, the fit set's only
    # letter (right for "left / front", wrong for "front / left").
    elsewhere = prior_baseline(rows, fit_rows=[_row(9, "B", options=["A. front", "B. back"])], name="answer-prior")
    assert elsewhere["tasks"]["t"]["score"] == pytest.approx(1 / 4)
    assert elsewhere["fit_on"] == "separate prior set"
    with pytest.raises(ValueError, match="unknown prior"):
        prior_baseline(rows, name="median")


def test_position_bias_counts_letters() -> None:
    predictions = [{"task": "t", "answer_type": "choice", "answer": a, "parsed_answer": p}
                   for a, p in [("A", "A"), ("B", "A"), ("C", "A"), ("D", None)]]
    bias = position_bias(predictions)["overall"]
    assert bias["true"] == {"A": 1, "B": 1, "C": 1, "D": 1} and bias["predicted"] == {"A": 3}
    assert bias["max_excess"] == pytest.approx(0.75) and bias["most_predicted"] == "A"


def test_direct_rows_keep_the_user_text() -> None:
    direct = direct_answer_rows([_row(0)])[0]
    assert "Question: where 0?" in direct.prompt[-1]["content"]
    assert "<answer>" in direct.prompt[-1]["content"] and direct.meta["baseline"] == "direct"


def test_the_prompt_baselines_are_the_rows_methods_and_say_so_where_it_has_none(tmp_path: Path) -> None:
    """Robot-R1 names no text rules and no blind or direct prompt: its questions are not applicable to the
    text rule, and the blind and direct baselines are not run on them (no Embodied-R prompt is put to them)."""
    from embodied_r.evaluation.analysis import run_baselines

    robot = [PromptRow(id=f"r{i}", task="waypoint", prompt=[{"role": "user", "content": "Where next?"}], answer="B",
                       answer_type="choice", options=["A. x", "B. y"], meta={"prompt_version": "robot_r1_mw_v1"})
             for i in range(2)]

    def no_engine() -> None:
        raise AssertionError("nothing is generated for rows whose method has no prompt for the baseline")

    tables = run_baselines(["direct", "blind", "text-rule"], [*robot, _row(0)], tmp_path, no_engine, batch_size=2,
                           direct_max_new_tokens=4, max_new_tokens=8)
    for name, what in (("direct", "a direct-answer prompt"), ("blind", "a blind prompt")):
        assert tables[name]["status"] == "not run"
        assert tables[name]["reason"] == f"2 of 3 question(s) belong to a method without {what} (robot_r1); not run"
    rule = tables["text-rule"]
    assert rule["tasks"]["waypoint"]["not_applied"] == {"method robot_r1 has no text rule": 2}
    assert rule["tasks"]["waypoint"]["rule"] == "none" and rule["tasks"]["waypoint"]["score"] == 0.5
    assert rule["rules"]["last_action"] == "last frame's action"  # the Embodied-R row's method's rules
    with pytest.raises(ValueError, match="method robot_r1 has no direct-answer prompt"):
        direct_answer_rows(robot)


class FakeJudge:
    """Answers with the last option letter the reasoning mentions (or None); records what it saw."""

    sees_letters = True  # the official rule: this stub reads letters, so they must reach it

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []

    def judge(self, questions, thinks, options):
        self.calls.append((list(questions), list(thinks)))
        return [next((c for c in reversed(t) if c in "ABCD"), None) for t in thinks]


def test_judge_uses_question_and_reasoning_only_and_resumes(tmp_path: Path) -> None:
    rows = {f"q{i}": _row(i) for i in range(4)}
    predictions = [
        {"id": "q0", "task": "t", "answer_type": "choice", "parsed_answer": "A", "correct": True,
         "completion": "<think>so A</think><answer>A</answer>"},
        {"id": "q1", "task": "t", "answer_type": "choice", "parsed_answer": "B", "correct": False,
         "completion": "<think>it must be C</think><answer>B</answer>"},
        {"id": "q2", "task": "t", "answer_type": "choice", "parsed_answer": "A", "correct": True,
         "completion": "<answer>A</answer>"},
        {"id": "q3", "task": "t", "answer_type": "choice", "parsed_answer": None, "correct": False, "completion": ""},
    ]
    judge = FakeJudge()
    judgements = judge_predictions(judge, rows, predictions, tmp_path / "j.jsonl")
    questions, thinks = judge.calls[0]
    assert thinks == ["so A", "it must be C"]
    assert questions[0].startswith("Question: where 0?") and "Frame 0" not in questions[0]  # no video text
    summary = consistency_summary(judgements)["overall"]
    assert (summary["judged"], summary["consistent"], summary["rate"]) == (2, 1, 0.5)
    assert summary["not_judged"] == {"no <think> block": 1, "unparsed answer": 1}
    assert summary["rate_when_correct"] == 1.0
    again = FakeJudge()
    assert len(judge_predictions(again, rows, predictions, tmp_path / "j.jsonl")) == 4
    assert again.calls == []  # everything was already judged


def test_the_reward_judge_runs_on_a_tiny_model(tmp_path: Path, tiny_lm_dir: Path) -> None:
    from embodied_r.judge.rate import make_judge

    judge = make_judge(str(tiny_lm_dir), policy_model="unused", dtype="float32")
    predictions = [{"id": "q0", "task": "t", "answer_type": "choice", "parsed_answer": "A", "correct": True,
                    "completion": "<think>the sofa is on the left, so A</think><answer>A</answer>"}]
    judgements = judge_predictions(judge, {"q0": _row(0)}, predictions, tmp_path / "j.jsonl")
    assert judgements[0]["judged"] and judgements[0]["judge_answer"] in {"A", "B", "C", "D"}
