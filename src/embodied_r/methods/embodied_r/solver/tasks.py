"""One exact answer per task type, from a plan read off the prompt text (``reading.py``) and the question.

Each function returns ``Solved``: the answer the text determines, or why it determines none. The rules are
the benchmark's (VSI-Bench's bins, distances between closest points, route turns; ``core.spatial_rules``),
applied to the positions the text states, so where the text holds what the question needs the answer is
exact up to the rounding of the stated numbers.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable

import numpy as np

from embodied_r.core.geometry import Box, box_distance, ccw_angle_deg, polygon_area
from embodied_r.core.parsing import option_texts
from embodied_r.core.records import PromptRow
from embodied_r.core.solving import Solved
from embodied_r.core.spatial_rules import HARD_BINS, MEDIUM_BINS, angle_bin, classify_turn
from embodied_r.methods.embodied_r.frame_text import counted_category, direction_object, question_text
from embodied_r.methods.embodied_r.solver.reading import Plan, PlanObject, Point, room_outline, unit
from embodied_r.methods.embodied_r.text_rules import option_letter

_ABS_DISTANCE_RE = re.compile(r"between the (.+?) and the (.+?) \(in meters\)")
_SIZE_RE = re.compile(r"dimension \(length, width, or height\) of the (.+?), measured")
_REL_DISTANCE_RE = re.compile(r"which of these objects \((.+?)\) is the closest to the (.+?)\?")
_REL_DIRECTION_RE = re.compile(r"standing by the (.+?) and facing the (.+?), is the (.+?) to ")
_ROUTE_START_RE = re.compile(r"beginning at the (.+?) facing the ")
_ROUTE_STOP_RE = re.compile(r"Go forward until the (.+?)(?= \d+\. |\. You have)")


def choose(row: PromptRow, wanted: str) -> Solved:
    """The letter of the option whose text is ``wanted`` (the text rule's matching); not applicable when no
    option, or several, reads so."""
    letter = option_letter(row, wanted)
    return Solved(letter) if letter else Solved(reason=f"no single option reads {wanted!r}")


def _instances(plan: Plan, category: str) -> list[PlanObject] | str:
    found = plan.instances(category)
    return found if found else f"the {category} is in no frame's text"


def _box(obj: PlanObject) -> Box:
    # The plan's angles run from +y; Box.upright's yaw runs from +x.
    return Box.upright(obj.centre, obj.bottom, obj.long_side, obj.short_side, obj.top - obj.bottom,
                       math.radians(obj.axis + 90.0))


def _gap(a: list[PlanObject], b: list[PlanObject]) -> float:
    """The least closest-point distance between any instance of ``a`` and any of ``b`` (VSI-Bench's)."""
    return min(box_distance(_box(x), _box(y)) for x in a for y in b)


def _minus(a: Point, b: Point) -> Point:
    return a[0] - b[0], a[1] - b[1]


# ---------------------------------------------------------------------------------------------------
# The task types
# ---------------------------------------------------------------------------------------------------


def counting(row: PromptRow, plan: Plan) -> Solved:
    category = counted_category(row)
    if category is None:
        return Solved(reason="the question names no category to count")
    names = {o.name for o in plan.instances(category)} | {n for n in plan.unplaced if n.rsplit(" ", 1)[0] == category}
    return Solved(len(names)) if names else Solved(reason=f"no {category} is in any frame's text")


def abs_distance(row: PromptRow, plan: Plan) -> Solved:
    match = _ABS_DISTANCE_RE.search(question_text(row))
    if not match:
        return Solved(reason="cannot read the two objects of the question")
    a, b = _instances(plan, match.group(1)), _instances(plan, match.group(2))
    for found in (a, b):
        if isinstance(found, str):
            return Solved(reason=found)
    return Solved(round(_gap(a, b), 1), copy=plan.level == "relations")  # type: ignore[arg-type]


def object_size(row: PromptRow, plan: Plan) -> Solved:
    match = _SIZE_RE.search(question_text(row))
    if not match:
        return Solved(reason="cannot read the object of the question")
    found = _instances(plan, match.group(1))
    if isinstance(found, str):
        return Solved(reason=found)
    return Solved(int(round(100 * max(o.longest for o in found))), copy=True)


def room_size(row: PromptRow, plan: Plan) -> Solved:
    outline = room_outline(plan.walls)
    if outline is None:
        return Solved(reason="the walls stated do not close the room (a wall is in no frame)")
    return Solved(round(polygon_area(outline), 1), copy=plan.level == "relations")


def rel_distance(row: PromptRow, plan: Plan) -> Solved:
    match = _REL_DISTANCE_RE.search(question_text(row))
    if not match:
        return Solved(reason="cannot read the objects of the question")
    primary = _instances(plan, match.group(2))
    if isinstance(primary, str):
        return Solved(reason=primary)
    gaps = {}
    for choice in (c.strip() for c in match.group(1).split(",")):
        found = _instances(plan, choice)
        if isinstance(found, str):
            return Solved(reason=found)
        gaps[choice] = _gap(primary, found)
    return choose(row, min(gaps, key=gaps.__getitem__))


def rel_direction(row: PromptRow, plan: Plan) -> Solved:
    match = _REL_DIRECTION_RE.search(question_text(row))
    if not match:
        return Solved(reason="cannot read the three objects of the question")
    centres = []
    for category in match.groups():
        found = _instances(plan, category)
        if isinstance(found, str):
            return Solved(reason=found)
        centres.append(found[0].centre)
    stand, face, target = centres
    return choose(row, rel_direction_label(row.task, ccw_angle_deg(_minus(face, stand), _minus(target, stand))))


def rel_direction_label(task: str, theta: float) -> str:
    """The option text for a counter-clockwise angle ``theta`` in [0, 360) at a relative-direction level:
    hard's quadrants, medium's left / back / right, easy's left / right.

    >>> rel_direction_label("object_rel_direction_easy", 170.0), rel_direction_label("object_rel_direction_hard", 300.0)
    ('left', 'front-right')
    """
    if task.endswith("_hard"):
        return angle_bin(theta, HARD_BINS)
    label = angle_bin(theta, MEDIUM_BINS)
    if task.endswith("_easy") and label == "back":  # easy asks left or right only
        label = "left" if theta < 180 else "right"
    return label


def route_plan(row: PromptRow, plan: Plan) -> Solved:
    text = question_text(row)
    start = _ROUTE_START_RE.search(text)
    stops = _ROUTE_STOP_RE.findall(text)
    if not start or len(stops) < 2:
        return Solved(reason="cannot read the route's stops")
    points = []
    for category in [start.group(1), *stops]:
        found = _instances(plan, category)
        if isinstance(found, str):
            return Solved(reason=found)
        points.append(found[0].centre)
    legs = [np.array(_minus(b, a)) for a, b in zip(points, points[1:])]
    # No margin: the generator kept only turns at least 15° from a bin's edge, so the exact angle bins them.
    turns = [classify_turn(heading, leg, margin=0.0) for heading, leg in zip(legs, legs[1:])]
    if None in turns:
        return Solved(reason="a leg goes straight on, which no turn names")
    return choose(row, ", ".join(turns))


def appearance_order(row: PromptRow, plan: Plan) -> Solved:
    texts = list(option_texts(row.options).values())
    if not texts:
        return Solved(reason="no options")
    first: dict[str, int] = {}
    for category in (c.strip() for c in texts[0].split(",")):
        frames = [k for o in plan.instances(category) for k in o.frames]
        if not frames:
            return Solved(reason=f"the {category} is in no frame's text")
        first[category] = min(frames)
    for a, b in itertools.combinations(first, 2):
        if first[a] == first[b]:
            return Solved(reason=f"the {a} and the {b} are first shown in the same key frame")
    return choose(row, ", ".join(sorted(first, key=first.__getitem__)))


def egocentric_direction(row: PromptRow, plan: Plan) -> Solved:
    category = direction_object(row)
    if category is None:
        return Solved(reason="cannot read the object of the question")
    found = _instances(plan, category)
    if isinstance(found, str):
        return Solved(reason=found)
    last = plan.poses[-1]
    theta = ccw_angle_deg(unit(last.heading), _minus(found[0].centre, (last.x, last.y)))
    return choose(row, angle_bin(theta, HARD_BINS))


def last_action(row: PromptRow, plan: Plan) -> Solved:
    if plan.last_action is None:
        return Solved(reason="the last frame states no motion")
    solved = choose(row, plan.last_action)
    return Solved(solved.answer, solved.reason, copy=True)


SOLVERS: dict[str, Callable[[PromptRow, Plan], Solved]] = {
    "object_counting": counting,
    "object_abs_distance": abs_distance,
    "object_size_estimation": object_size,
    "room_size_estimation": room_size,
    "object_rel_distance": rel_distance,
    "object_rel_direction_easy": rel_direction,
    "object_rel_direction_medium": rel_direction,
    "object_rel_direction_hard": rel_direction,
    "route_planning": route_plan,
    "obj_appearance_order": appearance_order,
    "egocentric_direction": egocentric_direction,
    "last_action": last_action,
}
