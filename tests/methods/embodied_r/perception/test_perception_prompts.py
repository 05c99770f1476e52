"""Perception prompts: snapshots of both versions, and the json-v1 promise never to show the choices."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodied_r.methods.embodied_r.perception.entities import extract_entities
from embodied_r.methods.embodied_r.perception.prompts import ACTIONS, build_frame_prompts, official_question_text

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
QUESTION = "If I am standing by the refrigerator and facing the washer, is the stool to my left, right, or back?"
OPTIONS = ["A. left", "B. right", "C. back"]


def check_snapshot(name: str, text: str) -> None:
    """Compare with snapshots/<name>.txt; set UPDATE_SNAPSHOTS=1 to rewrite after a deliberate change
    (a prompt change must also bump its version: cached answers and trained models depend on it)."""
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing snapshot {path}; run with UPDATE_SNAPSHOTS=1 once"
    assert text == path.read_text(encoding="utf-8"), f"prompt text changed; see {path}"


@pytest.mark.parametrize("version", ["official-v1", "json-v1"])
def test_prompt_snapshots(version):
    entities = extract_entities(QUESTION)
    prompts = build_frame_prompts(QUESTION, OPTIONS, [0.0, 1.5, 4.0], version=version, entities=entities)
    assert [p.frame_index for p in prompts] == [0, 1, 2]
    assert [p.image_timestamps for p in prompts] == [(0.0,), (0.0, 1.5), (1.5, 4.0)]
    assert prompts[1].text == prompts[2].text  # later frames share one prompt; the images differ
    check_snapshot(f"{version}_first", prompts[0].text)
    check_snapshot(f"{version}_later", prompts[1].text)


def test_official_prompt_carries_question_choices_and_action_list():
    first, later = build_frame_prompts(QUESTION, OPTIONS, [0.0, 1.0])
    inserted = official_question_text(QUESTION, OPTIONS)
    assert inserted in first.text and inserted in later.text and "C. back" in inserted
    assert all(action.lower() in later.text.lower() for action in ACTIONS)
    assert first.output == later.output == "numbered"


def test_json_prompt_shows_entities_not_choices():
    entities = extract_entities(QUESTION)
    assert entities == ["refrigerator", "washer", "stool"]
    for prompt in build_frame_prompts(QUESTION, OPTIONS, [0.0, 1.0], version="json-v1", entities=entities):
        assert "refrigerator, washer, stool" in prompt.text and prompt.output == "json"
        assert QUESTION not in prompt.text and not any(o in prompt.text for o in OPTIONS)


# A marker prefix keeps a random option from coinciding with ordinary prompt words ("object").
option_text = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd")), min_size=1,
                      max_size=20).map(lambda text: f"qz{text}")


@settings(max_examples=40, deadline=None)
@given(options=st.lists(option_text, min_size=2, max_size=6, unique=True))
def test_json_prompt_never_contains_option_text(options):
    labelled = [f"{chr(65 + i)}. {o}" for i, o in enumerate(options)]
    question = "Which object is closest to the bed?"
    prompts = build_frame_prompts(question, labelled, [0.0, 1.0, 2.0], version="json-v1",
                                  entities=extract_entities(question))
    assert not any(o in p.text for p in prompts for o in options)


def test_entities_from_real_urbanvideo_question(urban_processed):
    stem = urban_processed[0]["question"].split("Question:", 1)[1].split("choose:", 1)[0]
    entities = extract_entities(stem)
    assert "buildings" in entities and "street" in entities
    assert all(len(e.split()) <= 5 for e in entities) and len(entities) <= 8


def test_entities_prefer_meta_and_handle_lists():
    assert extract_entities("Where is it?", {"objects": ["lamp", "bed"]}) == ["lamp", "bed"]
    assert extract_entities("What will be the first-time appearance order of the following categories in the "
                            "video: heater, door, bed?") == ["heater", "door", "bed"]
    assert extract_entities("What is the size of this room (in square meters)?") == []


def test_bad_version_and_no_frames_are_rejected():
    with pytest.raises(ValueError, match="unknown perception prompt version"):
        build_frame_prompts(QUESTION, OPTIONS, [0.0], version="v9")
    with pytest.raises(ValueError, match="at least one key frame"):
        build_frame_prompts(QUESTION, OPTIONS, [])
