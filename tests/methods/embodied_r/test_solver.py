"""The exact solver on hand-built prompts: one small room written at the ``bearings`` and ``map`` levels, every
task type asked about it, each answer worked out by hand below.

The room, in the first key frame's frame (x to the right, y ahead, metres):

- walls: the rectangle (-4, -4), (4, -4), (4, 5), (-4, 5): 8 x 9 = 72 m²;
- sofa 1: centre (0, 3), 2 x 1 m with its long side along x, 0.8 m tall (spans x -1..1, y 2.5..3.5);
- table 1: centre (3, 3), 1 x 1 m, 0.75 m tall (spans 2.5..3.5 on both axes);
- door 1: centre (-3, 0), 1 x 0.1 m along x, 2 m tall;
- chair 1: centre (0, -2) and chair 2: centre (-3, 1), 0.5 x 0.5 m, 0.9 m tall.

The camera: frame 0 at (0, 0) facing +y; frame 1 after turning 45° right; frame 2 after turning 135° left
(facing -x); frame 3 after walking 2 m to (-2, 0) and turning 90° left (facing -y).
"""

from __future__ import annotations

from typing import Any

import pytest

from embodied_r.core.records import PromptRow
from embodied_r.methods import method_for_row
from embodied_r.methods.embodied_r.frame_text import user_text, video_frames
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages
from embodied_r.methods.embodied_r.solver import solve_row
from embodied_r.methods.embodied_r.solver.reading import Pose, centre_on_ray, read_plan

WALLS_AT_ORIGIN = ("Walls in view: wall 1 from 135.0° left, 5.66 m to 135.0° right, 5.66 m; wall 2 from 135.0° right, "
                   "5.66 m to 38.7° right, 6.40 m; wall 3 from 38.7° right, 6.40 m to 38.7° left, 6.40 m; wall 4 from "
                   "38.7° left, 6.40 m to 135.0° left, 5.66 m.")
# Bearings: the sofa's nearest point is 2.5 m straight ahead; the table's (2.5, 2.5) is 3.54 m off, its centre
# on the 45° line the camera faces; the door's nearest point (-2.5, 0) is 2.5 m ahead once facing -x; chair 2's
# centre (-3, 1) is 18.4° right of -x and its nearest corner (-2.75, 0.75) 2.85 m off; from (-2, 0) facing -y
# chair 1's centre is 45° left and its nearest corner (-0.25, -1.75) 2.47 m off.
BEARINGS = [
    (None, "In view: sofa 1 at 0.0° left, 2.50 m away, long side turned 90.0° left, footprint 2.00 × 1.00 m, 0.00 "
           "to 0.80 m above the floor, longest side 2.00 m. " + WALLS_AT_ORIGIN),
    ("Rotate right 45.0°", "In view: table 1 at 0.0° left, 3.54 m away, long side turned 45.0° left, footprint "
                           "1.00 × 1.00 m, 0.00 to 0.75 m above the floor, longest side 1.00 m; sofa 1 at 45.0° left, "
                           "2.60 m away."),
    ("Rotate left 135.0°", "In view: door 1 at 0.0° left, 2.50 m away, long side turned 0.0° left, footprint 1.00 × "
                           "0.10 m, 0.00 to 2.00 m above the floor, longest side 2.00 m; chair 2 at 18.4° right, "
                           "2.85 m away, long side turned 90.0° left, footprint 0.50 × 0.50 m, 0.00 to 0.90 m above "
                           "the floor, longest side 0.90 m."),
    ("Move forward 2.00 m, then Rotate left 90.0°",
     "In view: chair 1 at 45.0° left, 2.47 m away, long side turned 0.0° left, footprint 0.50 × 0.50 m, 0.00 to "
     "0.90 m above the floor, longest side 0.90 m."),
]
MAP = [
    (None, "Camera at (0.00, 0.00), heading 0.0° left. In view: sofa 1. New on the map: sofa 1 centre (0.00, 3.00), "
           "long side at 90.0° left, footprint 2.00 × 1.00 m, 0.00 to 0.80 m above the floor, longest side 2.00 m. "
           "New walls: wall 1 from (-4.00, -4.00) to (4.00, -4.00); wall 2 from (4.00, -4.00) to (4.00, 5.00); "
           "wall 3 from (4.00, 5.00) to (-4.00, 5.00); wall 4 from (-4.00, 5.00) to (-4.00, -4.00)."),
    ("Rotate right 45.0°", "Camera at (0.00, 0.00), heading 45.0° right. In view: table 1, sofa 1. New on the map: "
                           "table 1 centre (3.00, 3.00), long side at 0.0° left, footprint 1.00 × 1.00 m, 0.00 to "
                           "0.75 m above the floor, longest side 1.00 m."),
    ("Rotate left 135.0°", "Camera at (0.00, 0.00), heading 90.0° left. In view: door 1, chair 2. New on the map: "
                           "door 1 centre (-3.00, 0.00), long side at 90.0° left, footprint 1.00 × 0.10 m, 0.00 to "
                           "2.00 m above the floor, longest side 2.00 m; chair 2 centre (-3.00, 1.00), long side at "
                           "0.0° left, footprint 0.50 × 0.50 m, 0.00 to 0.90 m above the floor, longest side 0.90 m."),
    ("Move forward 2.00 m, then Rotate left 90.0°",
     "Camera at (-2.00, 0.00), heading 180.0° left. In view: chair 1. New on the map: chair 1 centre (0.00, -2.00), "
     "long side at 0.0° left, footprint 0.50 × 0.50 m, 0.00 to 0.90 m above the floor, longest side 0.90 m."),
]

ROUTE = ("You are a robot beginning at the sofa facing the table. You want to navigate to the door. You will perform "
         "the following actions (Note: for each [please fill in], choose either 'turn back,' 'turn left,' or 'turn "
         "right.'): 1. Go forward until the table 2. [please fill in] 3. Go forward until the door. You have reached "
         "the final destination.")
# Each question, its options and the answer worked out by hand (the letter's option, or the number).
CASES: list[tuple[str, str, list[str] | None, Any]] = [
    ("object_counting", "How many chair(s) are in this room?", None, 2),
    # sofa x -1..1 and table x 2.5..3.5 share y 2.5..3.5 and the floor: 1.5 m apart.
    ("object_abs_distance", "Measuring from the closest point of each object, what is the direct distance between "
                            "the sofa and the table (in meters)?", None, 1.5),
    ("object_size_estimation", "What is the length of the longest dimension (length, width, or height) of the sofa, "
                               "measured in centimeters?", None, 200),
    ("room_size_estimation", "What is the size of this room (in square meters)? If multiple rooms are shown, "
                             "estimate the size of the combined space.", None, 72.0),
    # From the sofa: table 1.5 m, the nearer chair (chair 2: dx 1.75, dy 1.25) 2.15 m, the door farther still.
    ("object_rel_distance", "Measuring from the closest point of each object, which of these objects (chair, "
                            "table, door) is the closest to the sofa?", ["A. chair", "B. table", "C. door"], "B"),
    # Standing by the door (-3, 0) facing the sofa (3, 3 away), the table (6, 3 away) is 18.4° to the right.
    ("object_rel_direction_easy", "If I am standing by the door and facing the sofa, is the table to the left or the "
                                  "right of the sofa?", ["A. left", "B. right"], "B"),
    ("object_rel_direction_medium", "If I am standing by the door and facing the sofa, is the table to my left, "
                                    "right, or back?", ["A. back", "B. left", "C. right"], "C"),
    ("object_rel_direction_hard", "If I am standing by the door and facing the sofa, is the table to my front-left, "
                                  "front-right, back-left, or back-right?",
     ["A. front-left", "B. back-right", "C. front-right", "D. back-left"], "C"),
    # Sofa -> table heads +x; table -> door (-6, -3) turns 153° right of it: back.
    ("route_planning", ROUTE, ["A. Turn Left", "B. Turn Back", "C. Turn Right"], "B"),
    # First shown: sofa (frame 0), table (1), door (2), chair (2 for chair 2).  Door and chair tie: ask without chair.
    ("obj_appearance_order", "What will be the first-time appearance order of the following categories in the video: "
                             "door, table, sofa?", ["A. table, sofa, door", "B. sofa, door, table",
                                                    "C. sofa, table, door", "D. door, sofa, table"], "C"),
    # At the end: at (-2, 0) facing -y; the sofa (0, 3) is behind, on the left (146° counter-clockwise).
    ("egocentric_direction", "At the end of the video, where is the sofa relative to me: front-left, front-right, "
                             "back-left, or back-right?", ["A. front-left", "B. back-left", "C. back-right",
                                                          "D. front-right"], "B"),
    ("last_action", "Which action did I take just before reaching my current position at the end of the video?",
     ["A. Move forward", "B. Rotate right", "C. Rotate left", "D. Move backward"], "C"),
]


def make_row(frames: list[tuple[str | None, str]], task: str, question: str, options: list[str] | None,
             answer: Any = None, facts: str = "") -> PromptRow:
    perception = [{"action": action, "delta": view, "q_related": facts if k == len(frames) - 1 else "", "raw": ""}
                  for k, (action, view) in enumerate(frames)]
    messages = build_reasoner_messages(perception, question, options, version="official-v1")
    return PromptRow(id=f"hand-{task}", task=task, prompt=messages, answer=answer,
                     answer_type="choice" if options else "number", options=options,
                     meta={"prompt_version": "official-v1"})


@pytest.mark.parametrize("level", ["bearings", "map"])
@pytest.mark.parametrize(("task", "question", "options", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_task_type_is_answered_exactly_from_the_text(level: str, task: str, question: str,
                                                         options: list[str] | None, expected: Any) -> None:
    row = make_row(BEARINGS if level == "bearings" else MAP, task, question, options, expected)
    solved = solve_row(row)
    assert solved.reason is None
    if isinstance(expected, str):
        assert solved.answer == expected
    else:
        assert solved.answer == pytest.approx(expected, rel=0.01)
    assert solved.copy == (task in ("object_size_estimation", "last_action"))
    # The method seam reaches the same solver.
    assert method_for_row(row.meta).solve(row) == solved


def test_dead_reckoning_places_every_object_where_the_map_states_it() -> None:
    bearings = read_plan(video_frames(user_text(make_row(BEARINGS, "last_action", "q", ["A. x"]))))
    stated = read_plan(video_frames(user_text(make_row(MAP, "last_action", "q", ["A. x"]))))
    assert bearings.level == "bearings" and stated.level == "map"
    assert sorted(bearings.objects) == sorted(stated.objects) == ["chair 1", "chair 2", "door 1", "sofa 1", "table 1"]
    for name, obj in stated.objects.items():
        assert bearings.objects[name].centre == pytest.approx(obj.centre, abs=0.02), name
    assert (bearings.poses[-1].x, bearings.poses[-1].y, bearings.poses[-1].heading) == pytest.approx((-2.0, 0.0, 180.0))
    assert bearings.objects["sofa 1"].frames == [0, 1]
    assert bearings.last_action == "Rotate left"


def test_centre_on_ray_inverts_the_nearest_point_distance() -> None:
    # A 1 x 1 m footprint whose nearest corner is 3.54 m away on the 45° line: its centre is at (3, 3).
    x, y = centre_on_ray(Pose(0.0, 0.0, -45.0), 0.0, 3.54, 0.0, 1.0, 1.0)
    assert (x, y) == pytest.approx((3.0, 3.0), abs=0.01)


def test_words_level_text_determines_nothing() -> None:
    words = [(None, "I am standing in a room with a textured floor. I see a blue sofa straight ahead, about 2.5 m "
                    "away."), ("Rotate left", "Newly visible: a red chair ahead-left, about 2.0 m away.")]
    solved = solve_row(make_row(words, "object_counting", "How many chair(s) are in this room?", None, 2))
    assert solved.answer is None and "words" in solved.reason


def test_an_object_in_no_frame_is_not_applicable_never_guessed() -> None:
    question = ("Measuring from the closest point of each object, what is the direct distance between the sofa and "
                "the bed (in meters)?")
    solved = solve_row(make_row(MAP, "object_abs_distance", question, None, 2.0))
    assert solved.answer is None and solved.reason == "the bed is in no frame's text"
    # A room whose walls do not close (one wall never stated) has no area.
    open_room = [(None, MAP[0][1].replace("; wall 4 from (-4.00, 5.00) to (-4.00, -4.00)", "")), *MAP[1:]]
    solved = solve_row(make_row(open_room, "room_size_estimation", CASES[3][1], None, 72.0))
    assert solved.answer is None and "wall" in solved.reason
    # Two categories first shown in one key frame cannot be ordered.
    solved = solve_row(make_row(MAP, "obj_appearance_order", "order: door, chair, sofa?",
                                ["A. sofa, door, chair", "B. sofa, chair, door"], "A"))
    assert solved.answer is None and "same key frame" in solved.reason


def test_relations_marks_stated_distances_as_copies() -> None:
    facts = "Facts: the sofa and the table are 1.50 m apart at their closest points."
    solved = solve_row(make_row(MAP, "object_abs_distance", CASES[1][1], None, 1.5, facts=facts))
    assert solved.answer == pytest.approx(1.5) and solved.copy
    assert not solve_row(make_row(MAP, "object_abs_distance", CASES[1][1], None, 1.5)).copy


def test_a_prompt_without_frames_or_an_unknown_task_is_not_applicable() -> None:
    row = PromptRow(id="x", task="object_counting", prompt=[{"role": "user", "content": "Question: How many?"}],
                    answer=2, answer_type="number", options=None, meta={})
    assert solve_row(row).reason == "the prompt has no 'Frame k:' lines"
    row = make_row(MAP, "scene_caption", "Describe the room.", None, 0)
    assert solve_row(row).reason == "no solver for task type 'scene_caption'"


# The same room at the ``facts`` level: motions and names in view, and the oracle's facts sentence per type.
FACTS_FRAMES = [(None, "In view: sofa 1."), ("Rotate right 45.0°", "In view: table 1, sofa 1."),
                ("Rotate left 135.0°", "In view: door 1, chair 2."),
                ("Move forward 2.00 m, then Rotate left 90.0°", "In view: chair 1.")]
FACTS = {
    "object_counting": "Facts: the chair instances seen: chair 1, chair 2.",
    "object_abs_distance": "Facts: the sofa and the table are 1.50 m apart at their closest points.",
    "object_size_estimation": "Facts: the sofa's longest side is 2.00 m.",
    "room_size_estimation": "Facts: the floor area is 72.00 square metres.",
    "object_rel_distance": "Facts: closest-point distances from the sofa: chair 2.15 m, table 1.50 m, door 2.50 m.",
    "object_rel_direction_easy": "Facts: standing by the door facing the sofa, the table is 18.4° right of straight "
                                 "ahead.",
    "route_planning": "Facts: the route turns at the table 153.4° right.",
    "obj_appearance_order": "Facts: first shown: door in frame 2, table in frame 1, sofa in frame 0.",
    "egocentric_direction": "Facts: at the last frame the sofa is 146.3° left of straight ahead.",
    "last_action": "",
}
FACTS["object_rel_direction_medium"] = FACTS["object_rel_direction_hard"] = FACTS["object_rel_direction_easy"]


@pytest.mark.parametrize(("task", "question", "options", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_facts_level_is_answered_from_its_facts_sentence(task: str, question: str, options: list[str] | None,
                                                             expected: Any) -> None:
    row = make_row(FACTS_FRAMES, task, question, options, expected, facts=FACTS[task])
    solved = solve_row(row)
    assert solved.reason is None
    assert solved.answer == (expected if isinstance(expected, str) else pytest.approx(expected, rel=0.01))
    assert solved.copy == (task in ("object_abs_distance", "object_size_estimation", "room_size_estimation",
                                    "last_action"))


def test_the_facts_level_never_guesses() -> None:
    case = CASES[4]  # relative distance
    unreadable = solve_row(make_row(FACTS_FRAMES, *case[:3], case[3], facts="Facts: the sofa is somewhere."))
    assert unreadable.answer is None and "does not read" in unreadable.reason
    tied = solve_row(make_row(FACTS_FRAMES, *CASES[9][:3], CASES[9][3],
                              facts="Facts: first shown: door in frame 2, table in frame 2, sofa in frame 0."))
    assert tied.answer is None and "same key frame" in tied.reason
    missing = solve_row(make_row(FACTS_FRAMES, *CASES[9][:3], CASES[9][3],
                                 facts="Facts: first shown: door in no frame, table in frame 1, sofa in frame 0."))
    assert missing.answer is None and "door is in no frame" in missing.reason
    none_seen = solve_row(make_row(FACTS_FRAMES, *CASES[0][:3], CASES[0][3],
                                   facts="Facts: the chair instances seen: none."))
    assert none_seen.answer is None
