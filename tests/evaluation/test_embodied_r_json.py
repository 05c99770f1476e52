from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_paths import shared_data

from embodied_r.core.io import DataFileError
from embodied_r.evaluation.benchmarks.embodied_r_json import load_embodied_r_json, parse_options_from_text
from embodied_r.methods.embodied_r.prompts import (
    OFFICIAL_EXACT_SYSTEM_PROMPT,
    OFFICIAL_SYSTEM_PROMPT,
    build_user_text,
    parse_official_prompt,
)


def test_real_urbanvideo_prompts_load_with_options() -> None:
    rows, report = load_embodied_r_json(shared_data("embodied_r_processed/urban_original_test.json"))
    assert len(rows) + len(report.skipped) == 14
    assert len(rows) == 14  # includes "Choice:" headers with the first option on the same line
    items = {str(x["Question_id"]): x
             for x in json.loads(Path(shared_data("embodied_r_processed/urban_original_test.json")).read_text())}
    for row in rows:
        # Sent as the official batch inference sends it: its system prompt and the file's text, byte for byte.
        assert row.prompt[0]["content"] == OFFICIAL_EXACT_SYSTEM_PROMPT
        assert row.prompt[1]["content"] == items[row.id]["question"]
        assert 2 <= len(row.options) <= 8
        assert row.answer in {o[0] for o in row.options}
    tasks = {r.task for r in rows}
    assert {"Progress Evaluation", "Landmark Position", "Action Generation"} <= tasks


def test_the_cleaned_variant_keeps_its_system_prompt() -> None:
    rows, _ = load_embodied_r_json(shared_data("embodied_r_processed/urban_original_test.json"),
                                   prompt_version="official-v1")
    assert rows[0].prompt[0]["content"] == OFFICIAL_SYSTEM_PROMPT != OFFICIAL_EXACT_SYSTEM_PROMPT
    assert OFFICIAL_EXACT_SYSTEM_PROMPT == OFFICIAL_SYSTEM_PROMPT.replace("</think>\n", "</think> \n")


def test_every_official_prompt_is_rendered_back_byte_for_byte() -> None:
    # Each processed prompt read into frames and question text, then rendered by the official variant.
    items = json.loads(Path(shared_data("embodied_r_processed/urban_original_test.json")).read_text())
    for item in items:
        parsed = parse_official_prompt(item["question"])
        assert len(parsed.frames) == item["question"].count("\nFrame ") and parsed.frames[0]["action"] is None
        assert all(f["action"] for f in parsed.frames[1:])
        assert parse_options_from_text(parsed.question_text)  # the choices are in the question text
        text = build_user_text(parsed.frames, "", None, "official", "Question: " + parsed.question_text)
        assert text == item["question"], item["Question_id"]


def test_official_variant_from_a_question_record_matches_the_processed_prompt() -> None:
    # UrbanVideo-Bench's questions through its loader and build-prompts' own function, with the frames the
    # official pipeline wrote: the official bytes, system prompt included.
    pytest.importorskip("pandas")
    from embodied_r.core.records import Perception
    from embodied_r.evaluation.benchmarks.urbanvideo import load_urbanvideo
    from embodied_r.methods.embodied_r.perception.prompt_rows import build_rows

    items = {str(x["Question_id"]): x for x in
             json.loads(Path(shared_data("embodied_r_processed/urban_original_test.json")).read_text())}
    records, _ = load_urbanvideo(shared_data("urbanvideo_bench/MCQ.parquet"))
    questions = [r for r in records if r.id in items]
    perceptions = {qid: Perception(qa_id=qid, video="v", backend="official", model="official", prompt_version="x",
                                   frames=parse_official_prompt(item["question"]).frames)
                   for qid, item in items.items()}
    rows, missing = build_rows(questions, perceptions, "official")
    assert len(rows) == len(items) and not missing
    for row in rows:
        assert row.prompt == [{"role": "system", "content": OFFICIAL_EXACT_SYSTEM_PROMPT},
                              {"role": "user", "content": items[row.id]["question"]}], row.id


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
