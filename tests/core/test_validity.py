"""Training and evaluation refuse the same prompt rows, for the same reasons."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from embodied_r.core.io import DataFileError, write_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.core.validity import row_problem
from embodied_r.evaluation.inputs import load_prompt_rows_jsonl
from embodied_r.training.data import load_prompt_rows

USER = [{"role": "user", "content": "Which way?\nA. left\nB. right"}]

GOOD = [
    PromptRow(id="choice", task="t", prompt=USER, answer="B", options=["A. left", "B. right"]),
    PromptRow(id="number", task="t", prompt=USER, answer="2.5", answer_type="number"),
    PromptRow(id="position", task="t", prompt=USER, answer="[0.1, 0.2, 0.3]", answer_type="position"),
    # Options without "A. " prefixes are lettered by position, as the scorer letters them.
    PromptRow(id="bare", task="t", prompt=USER, answer="B", options=["left", "right"]),
]
BAD = {
    "empty prompt": PromptRow(id="empty", task="t", prompt=[{"role": "user", "content": "  "}], answer="A",
                              options=["A. x", "B. y"]),
    "no answer": PromptRow(id="none", task="t", prompt=USER, answer="", options=["A. x", "B. y"]),
    "answer outside the options": PromptRow(id="outside", task="t", prompt=USER, answer="C",
                                            options=["A. x", "B. y"]),
    "repeated option letters": PromptRow(id="repeat", task="t", prompt=USER, answer="A", options=["A. x", "A. y"]),
    "no options": PromptRow(id="noopts", task="t", prompt=USER, answer="A"),
    "must be a positive number": PromptRow(id="zero", task="t", prompt=USER, answer="0", answer_type="number"),
    "is not a number": PromptRow(id="nan", task="t", prompt=USER, answer="two", answer_type="number"),
}


def test_good_rows_pass_both_loaders(tmp_path: Path) -> None:
    path = tmp_path / "good.jsonl"
    write_jsonl(path, [r.to_dict() for r in GOOD])
    assert [r.id for r in load_prompt_rows(path)] == ["choice", "number", "position", "bare"]
    rows, report = load_prompt_rows_jsonl(path)
    assert [r.id for r in rows] == ["choice", "number", "position", "bare"] and report.skipped == []


@pytest.mark.parametrize("reason", sorted(BAD))
def test_a_row_training_refuses_is_one_evaluation_skips_with_the_same_reason(tmp_path: Path, reason: str) -> None:
    bad = BAD[reason]
    problem = row_problem(bad)
    assert problem is not None and reason in problem
    path = tmp_path / "rows.jsonl"
    write_jsonl(path, [r.to_dict() for r in [*GOOD, bad]])
    with pytest.raises(DataFileError, match=re.escape(f"(id {bad.id}): {problem}")):
        load_prompt_rows(path)
    rows, report = load_prompt_rows_jsonl(path)
    assert [r.id for r in rows] == [r.id for r in GOOD]
    assert report.skipped == [{"id": bad.id, "reason": problem}]
