"""The solver at the ``facts`` level: no map, one ``Facts: ...`` sentence in the last frame.

The oracle's ``facts`` level states, per key frame, the motion and the names in view, and in the last frame
one sentence with what the question needs (distances, instances, first frames, angles, turns). The answer
follows from that sentence by the benchmark's last step: the least distance, the count, the order, the
bin of an angle, the turn of each route leg. The same sentence ends the ``relations`` level, whose map the
plan reader (``reading.py``) reads instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from embodied_r.core.records import PromptRow
from embodied_r.core.solving import Solved
from embodied_r.core.spatial_rules import HARD_BINS, angle_bin, classify_turn
from embodied_r.methods.embodied_r.evidence import facts_quote
from embodied_r.methods.embodied_r.frame_text import Frame
from embodied_r.methods.embodied_r.solver.reading import Pose, apply_motion
from embodied_r.methods.embodied_r.solver.tasks import choose, rel_direction_label

_NUMBER = r"(\d+(?:\.\d+)?)"
_DISTANCES_RE = re.compile(r"distances from the .+?: (.*)\.$")
_DISTANCE_RE = re.compile(rf"(.+) {_NUMBER} m")
_APART_RE = re.compile(rf"are {_NUMBER} m apart")
_INSTANCES_RE = re.compile(r"instances seen: (.*)\.$")
_LONGEST_RE = re.compile(rf"longest side is {_NUMBER} m")
_AREA_RE = re.compile(rf"floor area is {_NUMBER} square metres")
_FIRST_SHOWN_RE = re.compile(r"first shown: (.*)\.$")
_SHOWN_RE = re.compile(r"(.+) in (?:frame (\d+)|no frame)")
_SIDE_RE = re.compile(rf"is {_NUMBER}° (left|right) of straight ahead")
_TURN_RE = re.compile(rf"at the (.+?) {_NUMBER}° (left|right)")


def signed_angle(amount: str, side: str) -> float:
    """Degrees, left positive, as the oracle writes them ("35.2° left")."""
    return float(amount) if side == "left" else -float(amount)


def _listed(pattern: re.Pattern[str], item: re.Pattern[str], facts: str) -> list[tuple[str, ...]] | None:
    """The items of a "...: a 1.20 m, b 0.75 m." list, each matched whole by ``item``; None if any is not."""
    match = pattern.search(facts)
    if not match:
        return None
    items = [item.fullmatch(part.strip()) for part in match.group(1).split(", ")]
    return None if None in items else [m.groups() for m in items]  # type: ignore[union-attr]


def _number(pattern: re.Pattern[str], facts: str) -> float | None:
    match = pattern.search(facts)
    return float(match.group(1)) if match else None


def _unreadable(task: str) -> Solved:
    return Solved(reason=f"the facts sentence does not read as a {task} fact")


def rel_distance(row: PromptRow, facts: str) -> Solved:
    listed = _listed(_DISTANCES_RE, _DISTANCE_RE, facts)
    if not listed:
        return _unreadable(row.task)
    gaps = {name: float(value) for name, value in listed}
    return choose(row, min(gaps, key=gaps.__getitem__))


def abs_distance(row: PromptRow, facts: str) -> Solved:
    value = _number(_APART_RE, facts)
    return _unreadable(row.task) if value is None else Solved(round(value, 1), copy=True)


def counting(row: PromptRow, facts: str) -> Solved:
    match = _INSTANCES_RE.search(facts)
    if not match or match.group(1) == "none":
        return Solved(reason="the facts name no instance to count") if match else _unreadable(row.task)
    return Solved(len({name.strip() for name in match.group(1).split(",")}))


def object_size(row: PromptRow, facts: str) -> Solved:
    value = _number(_LONGEST_RE, facts)
    return _unreadable(row.task) if value is None else Solved(int(round(100 * value)), copy=True)


def room_size(row: PromptRow, facts: str) -> Solved:
    value = _number(_AREA_RE, facts)
    return _unreadable(row.task) if value is None else Solved(round(value, 1), copy=True)


def appearance_order(row: PromptRow, facts: str) -> Solved:
    listed = _listed(_FIRST_SHOWN_RE, _SHOWN_RE, facts)
    if not listed:
        return _unreadable(row.task)
    first = dict(listed)
    missing = [name for name, frame in first.items() if frame is None]
    if missing:
        return Solved(reason=f"the {missing[0]} is in no frame")
    if len(set(first.values())) < len(first):
        return Solved(reason="two of the objects are first shown in the same key frame")
    return choose(row, ", ".join(sorted(first, key=lambda name: int(first[name]))))


def rel_direction(row: PromptRow, facts: str) -> Solved:
    match = _SIDE_RE.search(facts)
    if not match:
        return _unreadable(row.task)
    return choose(row, rel_direction_label(row.task, signed_angle(*match.groups()) % 360.0))


def egocentric_direction(row: PromptRow, facts: str) -> Solved:
    match = _SIDE_RE.search(facts)
    if not match:
        return _unreadable(row.task)
    return choose(row, angle_bin(signed_angle(*match.groups()) % 360.0, HARD_BINS))


def route_plan(row: PromptRow, facts: str) -> Solved:
    angles = [signed_angle(amount, side) for _, amount, side in _TURN_RE.findall(facts)]
    if not angles:
        return _unreadable(row.task)
    ahead = np.array([1.0, 0.0])
    legs = [np.array([math.cos(math.radians(a)), math.sin(math.radians(a))]) for a in angles]
    turns = [classify_turn(ahead, leg, margin=0.0) for leg in legs]
    if None in turns:
        return Solved(reason="a leg goes straight on, which no turn names")
    return choose(row, ", ".join(turns))  # type: ignore[arg-type]


def last_action(row: PromptRow, frames: Sequence[Frame]) -> Solved:
    _, last = apply_motion(Pose(), frames[-1].action) if len(frames) > 1 else (None, None)
    if last is None:
        return Solved(reason="the last frame states no motion")
    solved = choose(row, last)
    return Solved(solved.answer, solved.reason, copy=True)


FACT_SOLVERS: dict[str, Callable[[PromptRow, str], Solved]] = {
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
}


def solve_facts(row: PromptRow, frames: Sequence[Frame]) -> Solved:
    """The answer the last frame's facts sentence determines for ``row`` (``last_action`` from the motion)."""
    if row.task == "last_action":
        return last_action(row, frames)
    solver = FACT_SOLVERS.get(row.task)
    if solver is None:
        return Solved(reason=f"no solver for task type {row.task!r}")
    facts = facts_quote(frames)
    if not facts:
        return Solved(reason="the last frame states no facts sentence")
    return solver(row, facts)


__all__ = ["FACT_SOLVERS", "solve_facts"]
