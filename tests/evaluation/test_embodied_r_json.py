from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_paths import shared_data

from embodied_r.evaluation.benchmarks.embodied_r_json import load_embodied_r_json, parse_options_from_text
from embodied_r.io import DataFileError
from embodied_r.reasoning.prompts import OFFICIAL_SYSTEM_PROMPT


def test_real_urbanvideo_prompts_load_with_options() -> None:
    rows, report = load_embodied_r_json(shared_data("embodied_r_processed/urban_original_test.json"))
    assert len(rows) + len(report.skipped) == 14
    assert len(rows) == 14  # includes "Choice:" headers with the first option on the same line
    for row in rows:
        assert row.prompt[0]["content"] == OFFICIAL_SYSTEM_PROMPT
        assert row.prompt[1]["content"].startswith("Please assume the role of an agent")
        assert 2 <= len(row.options) <= 8
        assert row.answer in {o[0] for o in row.options}
    tasks = {r.task for r in rows}
    assert {"Progress Evaluation", "Landmark Position", "Action Generation"} <= tasks


def test_real_demo_file_strips_video_tag() -> None:
    rows, report = load_embodied_r_json(shared_data("embodied_r_processed/data_demo.json"))
    assert [r.answer for r in rows] == ["C", "C"] and not report.skipped
    assert all("<video>" not in r.prompt[1]["content"] for r in rows)
    assert rows[0].options == ["A. left", "B. right", "C. back"]


def test_options_parsing_handles_artefacts() -> None:
    text = "Question: where?  \nchoose:  \nA. I go up  \nand then right.\nB. I descend  \n"
    assert parse_options_from_text(text) == ["A. I go up and then right.", "B. I descend"]
    assert parse_options_from_text("no choices here") == []
    assert parse_options_from_text("Choices:\nA. x\nC. y") == []  # gap in letters: not trusted


def test_bad_items_are_reported_not_scored(tmp_path: Path) -> None:
    items = [
        {"Question_id": 1, "question_category": "t", "question": "Question: q\nChoices:\nA. x\nB. y", "answer": "B"},
        {"Question_id": 1, "question_category": "t", "question": "Question: q\nChoices:\nA. x\nB. y", "answer": "A"},
        {"Question_id": 2, "question_category": "t", "question": "Question: q without options", "answer": "A"},
        {"Question_id": 3, "question_category": "t", "question": "Question: q\nChoices:\nA. x\nB. y", "answer": "F"},
        {"Question_id": 4, "question_category": "t", "question": "", "answer": "A"},
        "not an object",
    ]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(items))
    rows, report = load_embodied_r_json(path)
    assert [r.id for r in rows] == ["1"]
    reasons = {s["id"]: s["reason"] for s in report.skipped}
    assert "duplicated" in reasons["1"]
    assert "no options" in reasons["2"]
    assert "not one of the option letters" in reasons["3"]
    assert "empty" in reasons["4"]
    assert reasons["#5"] == "not a JSON object"


def test_malformed_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(DataFileError, match="broken.json: not valid JSON"):
        load_embodied_r_json(path)
    with pytest.raises(DataFileError, match="file not found"):
        load_embodied_r_json(tmp_path / "missing.json")
    (tmp_path / "obj.json").write_text('{"a": 1}')
    with pytest.raises(DataFileError, match="expected a JSON list"):
        load_embodied_r_json(tmp_path / "obj.json")
