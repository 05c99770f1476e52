"""The text-rule baseline: each rule on hand-written perception texts, and on rows of a synthetic world."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.core.records import PromptRow
from embodied_r.evaluation.text_rules import text_rule_predictions, text_rule_table
from embodied_r.methods.embodied_r.frame_text import video_frames
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages


def _row(task: str, views: list[tuple[str | None, str]], question: str, answer: object,
         options: list[str] | None = None, version: str = "official-v1") -> PromptRow:
    frames = [{"action": action, "delta": view} for action, view in views]
    return PromptRow(id=f"{task}-q", task=task, prompt=build_reasoner_messages(frames, question, options, version),
                     answer=answer, answer_type="choice" if options else "number", options=options)


def _one(row: PromptRow) -> dict:
    return text_rule_predictions([row])[0]


ACTIONS = ["A. Move forward", "B. Rotate left", "C. Rotate right", "D. Move backward"]


# ---------------------------------------------------------------------------------------------------
# last_action
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["official-v1", "official", "structured-v1", "compact-v1"])
def test_last_action_is_the_last_frames_action(version: str) -> None:
    row = _row("last_action", [(None, "A sofa."), ("Rotate left", "A door."), ("Rotate right", "A bed.")],
               "Which action did I take last?", "C", ACTIONS, version)
    p = _one(row)
    assert (p["parsed_answer"], p["applies"], p["reason"], p["score"], p["exact"]) == ("C", True, None, 1.0, True)


def test_last_action_does_not_apply_without_an_action_or_an_option() -> None:
    only_first = _one(_row("last_action", [(None, "A sofa.")], "Which action?", "A", ACTIONS))
    assert not only_first["applies"] and only_first["reason"] == "the last frame names no action"
    assert only_first["score"] == 0.25 and only_first["parsed_answer"] is None  # the uniform guess's expectation
    sideways = _one(_row("last_action", [(None, "A sofa."), ("Move left", "A door.")], "Which action?", "A", ACTIONS))
    assert not sideways["applies"] and sideways["reason"] == "the last action is not one of the options: Move left"


# ---------------------------------------------------------------------------------------------------
# obj_appearance_order
# ---------------------------------------------------------------------------------------------------

ORDER_OPTIONS = ["A. chair, sofa, tv", "B. sofa, chair, tv", "C. tv, sofa, chair", "D. sofa, tv, chair"]


def test_appearance_order_follows_first_mentions_not_negations() -> None:
    views = [(None, "I see a blue sofa ahead-left, about 2.0 m away. The chair is not visible. The tv is not visible."),
             ("Rotate left", "Newly visible: a black tv straight ahead, about 3.1 m away. The chair is not visible."),
             ("Rotate left", "Newly visible: a red chair to the left, about 1.0 m away; an old blue sofa.")]
    p = _one(_row("obj_appearance_order", views, "Order of sofa, chair, tv?", "D", ORDER_OPTIONS))
    assert (p["parsed_answer"], p["applies"], p["score"]) == ("D", True, 1.0)


def test_appearance_order_does_not_apply_on_a_tie_or_a_missing_category() -> None:
    tie = [(None, "I see a blue sofa and a red chair."), ("Rotate left", "Newly visible: a black tv.")]
    p = _one(_row("obj_appearance_order", tie, "Order?", "A", ORDER_OPTIONS))
    assert not p["applies"] and p["reason"] == "categories first mentioned in the same frame: chair, sofa"
    missing = [(None, "I see a blue sofa."), ("Rotate left", "Newly visible: a black tv. The chair is not visible.")]
    p = _one(_row("obj_appearance_order", missing, "Order?", "A", ORDER_OPTIONS))
    assert not p["applies"] and p["reason"] == "category never mentioned: chair" and p["score"] == 0.25


# ---------------------------------------------------------------------------------------------------
# object_counting
# ---------------------------------------------------------------------------------------------------


def test_counting_adds_new_object_sentences_and_ignores_repeated_mentions() -> None:
    views = [(None, "I am standing in a room. I see a red chair ahead-left, about 1.1 m away. "
                    "The chair is visible: a red chair ahead-left, about 1.1 m away."),
             ("Rotate right", "No new objects came into view. The chair is visible: a red chair straight ahead, "
                              "about 1.0 m away."),
             ("Rotate right", "Newly visible: a red chair ahead-right, about 2.2 m away; a brown table to the right, "
                              "about 0.5 m away; a red chair ahead-right, about 2.2 m away. The chair is visible: a "
                              "red chair to the left, about 0.9 m away; a red chair ahead-right, about 2.2 m away; a "
                              "red chair ahead-right, about 2.2 m away.")]
    p = _one(_row("object_counting", views, "How many chair(s) are in this room?", 3))
    assert (p["parsed_answer"], p["applies"], p["score"]) == (3, True, 1.0)


def test_counting_without_new_object_sentences_adds_rises_in_view() -> None:
    # VLM-style text: 1 chair in view, then 2 (one more came in), then 1, then 2 again (counted as new).
    views = [(None, "There is a red chair by the wall."), ("Move forward", "Two seats: a red chair and a red chair."),
             ("Rotate left", "A red chair remains."), ("Rotate left", "Again a red chair and a wooden chair.")]
    p = _one(_row("object_counting", views, "How many chairs are in this room?", 3))
    assert (p["parsed_answer"], p["applies"], p["exact"]) == (3, True, True)


def test_counting_does_not_apply_when_the_category_is_never_seen() -> None:
    views = [(None, "I see a blue sofa. The chair is not visible."), ("Move forward", "Newly visible: a black tv.")]
    p = _one(_row("object_counting", views, "How many chair(s) are in this room?", 2))
    assert not p["applies"] and p["reason"] == "category never mentioned" and p["score"] == 0.0  # numeric: 0


# ---------------------------------------------------------------------------------------------------
# egocentric_direction
# ---------------------------------------------------------------------------------------------------

QUADRANTS = ["A. front-right", "B. front-left", "C. back-left", "D. back-right"]
EGO_QUESTION = "At the end of the video, where is the table relative to me: front-left, front-right, back-left, or " \
               "back-right?"


@pytest.mark.parametrize(("words", "letter"), [("ahead-left", "B"), ("ahead-right", "A"), ("behind-right", "D")])
def test_egocentric_direction_maps_the_last_frames_words(words: str, letter: str) -> None:
    views = [(None, "I see a brown table to the right, about 2.0 m away."),
             ("Rotate right", f"No new objects came into view. The table is visible: a brown table {words}, about "
                              "0.4 m away.")]
    p = _one(_row("egocentric_direction", views, EGO_QUESTION, letter, QUADRANTS))
    assert (p["parsed_answer"], p["applies"], p["score"]) == (letter, True, 1.0)


def test_egocentric_direction_does_not_apply_when_the_words_or_the_object_are_missing() -> None:
    vague = [(None, "I see a brown table ahead-left, about 2.0 m away."),
             ("Rotate right", "The table is visible: a brown table to the left, about 0.4 m away.")]
    p = _one(_row("egocentric_direction", vague, EGO_QUESTION, "B", QUADRANTS))
    assert not p["applies"] and "do not determine a quadrant" in p["reason"] and p["score"] == 0.25
    gone = [(None, "I see a brown table ahead-left, about 2.0 m away."),
            ("Rotate right", "Newly visible: a blue sofa ahead-left. The table is not visible.")]
    p = _one(_row("egocentric_direction", gone, EGO_QUESTION, "B", QUADRANTS))
    assert not p["applies"] and p["reason"] == "object not in the last frame"


# ---------------------------------------------------------------------------------------------------
# Tasks without a rule, rows without frames, the table
# ---------------------------------------------------------------------------------------------------


def test_other_tasks_and_rows_without_frames_guess() -> None:
    views = [(None, "I see a blue sofa.")]
    easy = _one(_row("object_rel_direction_easy", views, "Left or right?", "A", ["A. left", "B. right"]))
    assert not easy["applies"] and easy["rule"] == "none" and easy["score"] == 0.5
    assert easy["reason"] == "no rule for task object_rel_direction_easy"
    bare = PromptRow("b", "last_action", [{"role": "user", "content": "Question: Which?"}], "A", "choice", ACTIONS)
    assert _one(bare)["reason"] == "no frame lines in the prompt"


def test_table_reports_applies_score_and_ceiling_per_task() -> None:
    right = _row("last_action", [(None, "A sofa."), ("Rotate left", "A door.")], "Which?", "B", ACTIONS)
    wrong = _row("last_action", [(None, "A sofa."), ("Rotate right", "A door.")], "Which?", "B", ACTIONS)
    vague = _row("last_action", [(None, "A sofa.")], "Which?", "B", ACTIONS)
    size = _row("object_size_estimation", [(None, "A sofa.")], "How long is the sofa?", 180.0)
    for i, row in enumerate((right, wrong, vague, size)):
        row.id = f"r{i}"
    table = text_rule_table([right, wrong, vague, size])
    last = table["tasks"]["last_action"]
    assert (last["n"], last["n_applies"], last["rule"]) == (3, 2, "last frame's action")
    assert last["score"] == pytest.approx((1.0 + 0.0 + 0.25) / 3)
    assert last["ceiling"] == pytest.approx(1 / 3)
    assert last["not_applied"] == {"the last frame names no action": 1}
    assert table["tasks"]["object_size_estimation"]["rule"] == "none"
    assert table["tasks"]["object_size_estimation"]["ceiling"] is None
    assert table["overall"]["n_applies"] == 2 and table["overall"]["n_with_rule"] == 3
    assert table["overall"]["ceiling"] == pytest.approx(1 / 3)
    assert (table["name"], table["status"]) == ("text-rule", "ok")


def test_multi_line_frames_end_at_the_video_block() -> None:
    text = ("Video content: \n<\nHeader.\nFrame 0: Observe: 1. a sofa\n2. a lamp\nFrame 1: After Move forward, "
            "Observe: a door\nthen a wall\n>\n            Question: Which?\nchoose:\nA. x")
    frames = video_frames(text)
    assert [(f.action, f.view) for f in frames] == [(None, "1. a sofa\n2. a lamp"),
                                                    ("Move forward", "a door\nthen a wall")]


# ---------------------------------------------------------------------------------------------------
# Rows of a synthetic world (oracle perception)
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world_rows(tmp_path_factory: pytest.TempPathFactory) -> list[PromptRow]:
    import numpy as np

    from embodied_r.cli.main import main
    from embodied_r.core.io import read_json, read_jsonl
    from embodied_r.core.records import QARecord
    from embodied_r.sim.world.oracle import oracle_frames

    out: Path = tmp_path_factory.mktemp("world")
    assert main(["synth", "world", "--out", str(out), "--scenes", "4", "--seed", "5", "--resolution", "160x120",
                 "--fps", "8", "--seconds", "12", "--per-task", "3", "--workers", "1"]) == 0
    rows = []
    for record in read_jsonl(out / "questions.jsonl"):
        qa = QARecord.from_dict(record)
        end = read_json(out / "poses" / f"{qa.meta['scene']}.json")["frames"][-1]["t"]
        # Eight evenly spaced key frames, the last at the video's end (where the direction questions are asked).
        frames = oracle_frames(out, qa, [round(float(t), 3) for t in np.linspace(0.0, end, 8)])
        rows.append(PromptRow(qa.id, qa.task, build_reasoner_messages(frames, qa.question, qa.options), qa.answer,
                              qa.answer_type, qa.options))
    return rows


def test_rules_on_a_synthetic_world(world_rows: list[PromptRow]) -> None:
    predictions = text_rule_predictions(world_rows)
    table = text_rule_table(world_rows, predictions)
    ruled = {"last_action", "egocentric_direction", "object_counting", "obj_appearance_order"}
    assert ruled <= set(table["tasks"])
    for task in ruled:
        assert table["tasks"][task]["n_applies"] >= 1, task
    # The oracle's text and these questions share the last frame: where these rules apply, they are right.
    for p in predictions:
        if p["applies"] and p["task"] in {"last_action", "egocentric_direction"}:
            assert p["exact"] and p["score"] == 1.0, p["id"]
    assert table["tasks"]["last_action"]["ceiling"] >= 0.5
    assert table["tasks"]["object_counting"]["ceiling"] > 0
    # Every score is the one scorer's on applying rows and the guess's elsewhere.
    for row, p in zip(world_rows, predictions):
        if not p["applies"]:
            assert p["score"] == (1 / len(row.options) if row.options else 0.0)
    assert all(t["ceiling"] is None for t in table["tasks"].values() if t["rule"] == "none")
