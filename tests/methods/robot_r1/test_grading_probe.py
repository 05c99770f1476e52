"""The 0-3 grading judge's probe: known-equivalent, partly right and wrong answers, graded as expected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from embodied_r.core.io import read_jsonl
from embodied_r.core.records import QARecord
from embodied_r.methods.robot_r1.grading_probe import (
    EXPECTED,
    GradingProbeError,
    build_grading_cases,
    cases_for,
    run_grading_probe,
)

MEANING = {"shift": "move", "a little": "slightly", "backward": "back", "grab": "grasp", "raise": "lift",
           "let go of": "release", "over": "above", "under": "below"}


def _words(text: str) -> set[str]:
    text = text.lower()
    for phrase, canonical in MEANING.items():
        text = re.sub(rf"\b{phrase}\b", canonical, text)
    return set(re.findall(r"[a-z]+", text)) - {"the", "and", "then", "first", "is", "of", "to", "answer"}


def careful_judge(batch):
    """Grades by meaning words: same words 3, a strict subset 1, otherwise 0 (cm read as metres)."""
    replies = []
    for messages in batch:
        user = messages[1]["content"]
        reference = user.split("Reference answer: ", 1)[1].split("\nModel answer: ")[0]
        answer = user.split("\nModel answer: ", 1)[1]
        ref_m, ans_m = re.search(r"([\d.]+) m\b", reference), re.search(r"([\d.]+) (c?m)\b", answer)
        if ref_m and ans_m:
            value = float(ans_m.group(1)) / (100 if ans_m.group(2) == "cm" else 1)
            replies.append(f"Score: {3 if abs(value - float(ref_m.group(1))) < 0.02 else 0}")
            continue
        ref, ans = _words(reference), _words(answer)
        replies.append("Score: 3" if ans == ref else "Score: 1" if ans < ref else "Score: 0")
    return replies


@pytest.fixture(scope="module")
def bench_records(robot_dataset: Path) -> list[QARecord]:
    return [QARecord.from_dict(r) for r in read_jsonl(robot_dataset / "bench_test_in.jsonl")]


def test_cases_cover_every_kind_and_category(bench_records) -> None:
    cases = build_grading_cases(bench_records, n_items=16)
    assert {c.kind for c in cases} == set(EXPECTED)
    assert {c.category for c in cases} == {r.task for r in bench_records}
    for case in cases:                     # a probe answer is never the reference itself
        reference = next(r.answer for r in bench_records if r.id == case.item_id)
        assert case.answer.strip() != str(reference).strip()


def test_a_careful_judge_passes(bench_records) -> None:
    result = run_grading_probe(bench_records, careful_judge, n_items=16)
    assert result.passed, result.failures
    assert set(result.agreement) == set(EXPECTED) and min(result.agreement.values()) >= 0.75


@pytest.mark.parametrize("reply, failing", [
    ("Score: 3", {"partial", "wrong"}),      # a judge that likes everything
    ("Score: 0", {"equivalent", "partial"}),  # a judge that likes nothing
    ("I cannot grade this", set(EXPECTED)),   # no score: counted against the judge
])
def test_constant_judges_fail(bench_records, reply: str, failing: set[str]) -> None:
    result = run_grading_probe(bench_records, lambda batch: [reply] * len(batch), n_items=16)
    assert not result.passed
    assert {kind for kind, value in result.agreement.items() if value < 0.75} == failing
    assert all(any(kind in f for f in result.failures) for kind in failing)


def test_reversed_meaning_is_the_wrong_case() -> None:
    record = QARecord(id="x", source="s", task="movement", video="v.png", question="?", options=None,
                      answer="Move left and slightly move down", answer_type="open")
    by_kind = {c.kind: c.answer for c in cases_for(record)}
    assert by_kind["wrong"] == "Move right and slightly move up"
    assert by_kind["partial"] == "Move left."
    assert by_kind["equivalent"] == "Shift left and a little shift down"


def test_no_reference_is_a_clear_error() -> None:
    empty = QARecord(id="x", source="s", task="movement", video="v.png", question="?", options=None,
                     answer=" ", answer_type="open")
    with pytest.raises(GradingProbeError, match="no bench item"):
        build_grading_cases([empty])


class _Echo:
    """An answering engine that writes each bench question's reference (the judge sees right answers)."""

    def __init__(self, records: list[QARecord]) -> None:
        self.records = records

    def generate_chats(self, conversations, max_new_tokens, batch_size, on_batch=None, **_):
        texts = [f"<think>t</think><answer>{r.answer}</answer>" for r in self.records[:len(conversations)]]
        if on_batch is not None:
            on_batch(list(range(len(texts))), texts)
        return texts


def test_run_bench_with_a_judge_that_passes(bench_records, robot_dataset: Path, tmp_path: Path) -> None:
    import json

    from embodied_r.methods.robot_r1.bench import run_bench

    metrics = run_bench(robot_dataset / "bench_test_in.jsonl", lambda: _Echo(bench_records), careful_judge,
                        tmp_path, "echo", probe_items=16)
    assert metrics["scores_trusted"] is True and metrics["judge_probe"]["passed"] is True
    assert json.loads((tmp_path / "judge_probe.json").read_text())["passed"] is True
    for category in metrics["categories"].values():   # right answers, a judge that can grade: all 3
        assert category["mean"] == 3.0 and category["ci95"] == [3.0, 3.0]
