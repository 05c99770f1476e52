"""The text-rule baseline: each rule on hand-written perception texts, and on rows of a synthetic world."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.core.records import PromptRow
from embodied_r.evaluation.text_rule_baseline import text_rule_predictions, text_rule_table
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
# Floor-plan rules: relative distance and direction, routes, absolute distance
# ---------------------------------------------------------------------------------------------------

# One frame's plan (x ahead, y left, metres): sofa (2, 0), lamp (0.35, 1.97), chair (0.17, -0.98), door (4, 0).
PLAN = ("a blue sofa straight ahead, about 2.0 m away; a white lamp to the left, about 2.0 m away; "
        "a red chair to the right, about 1.0 m away; a brown door straight ahead, about 4.0 m away.")
SIDES = ["A. left", "B. right"]
CORNERS = ["A. front-left", "B. front-right", "C. back-left", "D. back-right"]


def test_relative_distance_picks_the_nearest_on_one_frames_plan() -> None:
    question = ("Measuring from the closest point of each object, which of these objects (lamp, door) is the closest "
                "to the sofa?")
    near = _one(_row("object_rel_distance", [(None, "I see nothing."), ("Rotate left", PLAN)], question, "B",
                     ["A. lamp", "B. door"]))
    assert near["applies"] and near["parsed_answer"] == "B" and near["exact"]  # door 2.0 m, lamp 2.6 m
    # A choice never seen in the same frame as the object: no plan holds both.
    apart = _one(_row("object_rel_distance", [(None, "I see a brown door ahead-left, about 3.0 m away."),
                                              ("Rotate left", "I see a blue sofa straight ahead, about 2.0 m away; "
                                                              "a white lamp to the left, about 2.0 m away.")],
                      question, "B", ["A. lamp", "B. door"]))
    assert not apart["applies"] and apart["reason"] == "no frame places all of: sofa, door"


# Standing by the sofa facing the door, the lamp is 130 degrees counter-clockwise (left, back-left) and the
# chair 208 (back, back-right); standing by the lamp facing the door, the sofa is at 338 (front-right).
@pytest.mark.parametrize(("task", "standing", "asked", "options", "letter"), [
    ("object_rel_direction_easy", "sofa", "lamp", SIDES, "A"),
    ("object_rel_direction_easy", "sofa", "chair", SIDES, "B"),
    ("object_rel_direction_medium", "sofa", "lamp", ["A. left", "B. right", "C. back"], "A"),
    ("object_rel_direction_medium", "sofa", "chair", ["A. left", "B. right", "C. back"], "C"),
    ("object_rel_direction_hard", "sofa", "lamp", CORNERS, "C"),
    ("object_rel_direction_hard", "sofa", "chair", CORNERS, "D"),
    ("object_rel_direction_hard", "lamp", "sofa", CORNERS, "B"),
])
def test_relative_direction_bins_the_angle_seen_from_the_standing_object(task: str, standing: str, asked: str,
                                                                         options: list[str], letter: str) -> None:
    question = f"If I am standing by the {standing} and facing the door, is the {asked} to my left or right?"
    p = _one(_row(task, [(None, PLAN)], question, letter, options))
    assert p["applies"], p["reason"]
    assert p["parsed_answer"] == letter


def test_relative_direction_needs_all_three_in_one_frame_and_a_majority() -> None:
    question = "If I am standing by the sofa and facing the door, is the lamp to the left or the right of the door?"
    missing = _one(_row("object_rel_direction_easy", [(None, "I see a blue sofa straight ahead, about 2.0 m away.")],
                        question, "B", SIDES))
    assert not missing["applies"] and missing["reason"].startswith("no frame places all of")
    mirrored = PLAN.replace("lamp to the left", "lamp to the right")
    split = _one(_row("object_rel_direction_easy", [(None, PLAN), ("Rotate left", mirrored)], question, "B", SIDES))
    assert not split["applies"] and split["reason"] == "the frames disagree: left, right"
    views = [(None, PLAN), ("Rotate left", mirrored), ("Rotate left", PLAN)]
    two_to_one = _one(_row("object_rel_direction_easy", views, question, "A", SIDES))
    assert two_to_one["applies"] and two_to_one["parsed_answer"] == "A"


def test_route_turns_follow_the_plan() -> None:
    # Lamp -> sofa heads (1.65, -1.97), sofa -> door (2, 0): 50 degrees to the left; door -> lamp turns 152 (back).
    question = ("You are a robot beginning at the lamp facing the sofa. You want to navigate to the lamp. You will "
                "perform the following actions (Note: for each [please fill in], choose either 'turn back,' 'turn "
                "left,' or 'turn right.'): 1. Go forward until the sofa 2. [please fill in] 3. Go forward until the "
                "door 4. [please fill in] 5. Go forward until the lamp. You have reached the final destination.")
    options = ["A. Turn Right, Turn Back", "B. Turn Left, Turn Back", "C. Turn Left, Turn Left",
               "D. Turn Back, Turn Back"]
    p = _one(_row("route_planning", [(None, PLAN)], question, "B", options))
    assert p["applies"] and p["parsed_answer"] == "B" and p["exact"]


def test_absolute_distance_takes_off_the_objects_depth() -> None:
    from embodied_r.methods.embodied_r.position_rules import DEPTH_ALLOWANCE

    question = ("Measuring from the closest point of each object, what is the direct distance between the sofa and "
                "the door (in meters)?")
    p = _one(_row("object_abs_distance", [(None, PLAN), ("Rotate left", PLAN)], question, 1.3))
    assert p["applies"] and p["parsed_answer"] == pytest.approx(round(2.0 - DEPTH_ALLOWANCE, 1))
    # Two sightings of a category: the nearer pair counts; a pair closer than the allowance is floored.
    door = "a brown door straight ahead, about 4.0 m away"
    twin = PLAN.replace(door, f"{door}; a brown door straight ahead, about 2.5 m away")
    assert _one(_row("object_abs_distance", [(None, twin)], question, 0.2))["parsed_answer"] == pytest.approx(0.2)
    vague = _one(_row("object_abs_distance", [(None, "I see a blue sofa and a brown door.")], question, 1.3))
    assert not vague["applies"]


# ---------------------------------------------------------------------------------------------------
# Tasks without a rule, rows without frames, the table
# ---------------------------------------------------------------------------------------------------


def test_other_tasks_and_rows_without_frames_guess() -> None:
    views = [(None, "I see a blue sofa.")]
    size = _one(_row("object_size_estimation", views, "How long is the sofa?", 180.0))
    assert not size["applies"] and size["rule"] == "none" and size["score"] == 0.0
    assert size["reason"] == "no rule for task object_size_estimation"
    guess = _one(_row("route_planning", views, "Which turns?", "A", ["A. Turn Left, Turn Left", "B. x"]))
    assert not guess["applies"] and guess["score"] == 0.5
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


def test_floor_plan_rules_on_a_synthetic_world(world_rows: list[PromptRow]) -> None:
    from embodied_r.methods.embodied_r.position_rules import POSITION_RULES

    predictions = [p for p in text_rule_predictions(world_rows) if p["task"] in POSITION_RULES]
    applied = [p for p in predictions if p["applies"]]
    # Every such task of this world has a question whose objects one key frame shows together ...
    assert {p["task"] for p in applied} == set(POSITION_RULES)
    # ... and the oracle's words place them well enough that the choice answers are mostly exactly right
    # (a bearing word spans 40-60 degrees, so not always).
    choices = [p for p in applied if p["answer_type"] == "choice"]
    assert sum(p["exact"] for p in choices) > len(choices) / 2
    assert all(isinstance(p["parsed_answer"], float) and p["parsed_answer"] >= 0.2
               for p in applied if p["answer_type"] == "number")
    assert all(p["reason"] for p in predictions if not p["applies"])
