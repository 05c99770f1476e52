"""Reading a prompt's frame text back into a floor plan: camera poses, objects and walls in one frame.

The plan's frame is the first key frame's (x to the right, y ahead, metres; angles in degrees counter-clockwise,
i.e. left positive, from +y). Two written forms are read, the oracle's ``bearings`` and ``map`` levels
(``relations`` is ``map`` plus a facts sentence):

- ``bearings``: the camera's pose is dead-reckoned by adding up each frame's stated motions ("Rotate right
  31.4°, then Move forward 1.25 m"). An object's first sighting gives the bearing of its centre, the
  floor distance to its closest point and its footprint; the centre is the one point on that bearing whose
  footprint lies at that distance (found by bisection: the distance grows with the range along the ray).
  A wall's ends are given by bearing and distance.
- ``map``: the camera's pose, each object's centre and footprint, and each wall's ends, are stated.

Text at the ``words`` level (direction words, rounded distances) reads as no plan: its answers are not
determined. Everything here is plain Python arithmetic, linear in the text's length.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from embodied_r.methods.embodied_r.frame_text import Frame

_NUMBER = r"(\d+(?:\.\d+)?)"
_SIGNED = r"(-?\d+(?:\.\d+)?)"
_ANGLE = rf"{_NUMBER}° (left|right)"
_FOOTPRINT = (rf"long side (?:turned|at) {_ANGLE}, footprint {_NUMBER} × {_NUMBER} m, {_NUMBER} to {_NUMBER} m above "
              rf"the floor, longest side {_NUMBER} m")
# An object's name is its category and a number; it follows the list's opening or a "; ".
_NAME = r"(?:In view: |New on the map: |; )(?P<name>[a-z][a-z -]*? \d+)"
_BEARING_RE = re.compile(rf"{_NAME} at {_ANGLE}, {_NUMBER} m away(?:, {_FOOTPRINT})?")
_MAP_OBJECT_RE = re.compile(rf"{_NAME} centre \({_SIGNED}, {_SIGNED}\), {_FOOTPRINT}")
_CAMERA_RE = re.compile(rf"Camera at \({_SIGNED}, {_SIGNED}\), heading {_ANGLE}\.")
_BEARING_WALL_RE = re.compile(rf"(wall \d+) from {_ANGLE}, {_NUMBER} m to {_ANGLE}, {_NUMBER} m")
_MAP_WALL_RE = re.compile(rf"(wall \d+) from \({_SIGNED}, {_SIGNED}\) to \({_SIGNED}, {_SIGNED}\)")
_IN_VIEW_NAMES_RE = re.compile(r"In view: ([^.]*)\.")
_MOTION_RE = re.compile(r"(Rotate left|Rotate right|Tilt upward|Tilt downward|Move forward|Move backward|Move left|"
                        rf"Move right) {_NUMBER}(°| m)")

Point = tuple[float, float]


def signed(value: str, side: str) -> float:
    """``("35.2", "left")`` -> 35.2; ``right`` is negative."""
    return float(value) if side == "left" else -float(value)


def unit(angle_deg: float) -> Point:
    """The plan's direction ``angle_deg`` counter-clockwise from +y."""
    angle = math.radians(angle_deg)
    return -math.sin(angle), math.cos(angle)


@dataclass
class Pose:
    x: float = 0.0
    y: float = 0.0
    heading: float = 0.0  # degrees counter-clockwise from +y

    def ahead(self, bearing: float, distance: float) -> Point:
        dx, dy = unit(self.heading + bearing)
        return self.x + distance * dx, self.y + distance * dy

    def bearing_to(self, point: Point) -> float:
        """Signed degrees from this pose's straight ahead to ``point``; left positive, in (-180, 180]."""
        fx, fy = unit(self.heading)
        tx, ty = point[0] - self.x, point[1] - self.y
        return math.degrees(math.atan2(fx * ty - fy * tx, fx * tx + fy * ty))


@dataclass
class PlanObject:
    """An object on the plan: its name ("chair 2"), centre, footprint (long and short side, the long side's
    direction), height range and longest side, and the key frames that show it."""

    name: str
    centre: Point
    long_side: float
    short_side: float
    axis: float  # the long side's direction, degrees counter-clockwise from +y
    bottom: float
    top: float
    longest: float
    frames: list[int] = field(default_factory=list)

    @property
    def category(self) -> str:
        return self.name.rsplit(" ", 1)[0]


@dataclass
class Plan:
    level: str  # "bearings" | "map" | "relations" (``facts`` has no plan: solver/facts.py)
    poses: list[Pose]
    objects: dict[str, PlanObject]
    walls: dict[str, tuple[Point, Point]]  # name -> (start, end), as first stated
    last_action: str | None  # the last single action of the last frame's motion
    unplaced: list[str] = field(default_factory=list)  # objects seen without a readable first sighting

    def instances(self, category: str) -> list[PlanObject]:
        return [o for o in self.objects.values() if o.category == category]


class NotReadable(ValueError):
    """The frame text is not at a level that determines positions (``words``), or is malformed."""


# ---------------------------------------------------------------------------------------------------
# Footprint geometry in plain Python (a numpy call costs more than the arithmetic here)
# ---------------------------------------------------------------------------------------------------


def footprint_distance(point: Point, centre: Point, axis: float, long_side: float, short_side: float) -> float:
    """Floor distance from ``point`` to a rectangle (0 inside)."""
    ux, uy = unit(axis)  # along the long side
    dx, dy = point[0] - centre[0], point[1] - centre[1]
    along, across = dx * ux + dy * uy, -dx * uy + dy * ux
    out_along = max(0.0, abs(along) - long_side / 2)
    out_across = max(0.0, abs(across) - short_side / 2)
    return math.hypot(out_along, out_across)


def centre_on_ray(pose: Pose, bearing: float, distance: float, axis: float, long_side: float,
                  short_side: float) -> Point:
    """The centre on the ray at ``bearing`` whose footprint's closest point is ``distance`` away.

    Along the ray the footprint's distance from the camera grows (it is a convex function of the range,
    zero while the camera is inside): bisection between the closest point's range and that plus the
    half-diagonal, which bracket it.

    >>> x, y = centre_on_ray(Pose(), 0.0, 1.0, 90.0, 2.0, 1.0)  # a 2 x 1 m footprint across the view
    >>> round(x, 6), round(y, 6)
    (0.0, 1.5)
    """
    low, high = distance, distance + math.hypot(long_side, short_side) / 2 + 1e-6
    for _ in range(48):
        middle = (low + high) / 2
        centre = pose.ahead(bearing, middle)
        if footprint_distance((pose.x, pose.y), centre, axis, long_side, short_side) < distance:
            low = middle
        else:
            high = middle
    return pose.ahead(bearing, (low + high) / 2)


# ---------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------


def detail_level(frames: Sequence[Frame]) -> str:
    """``relations``, ``map``, ``facts``, ``bearings`` or ``words``, from how the frames are written
    (``relations`` is the map with a facts sentence in the last frame; ``facts`` the names in view with one)."""
    facts = bool(frames) and "Facts:" in frames[-1].view
    if any(f.view.startswith("Camera at (") for f in frames):
        return "relations" if facts else "map"
    if facts:
        return "facts"
    if any(f.view.startswith("In view:") for f in frames):
        return "bearings"
    return "words"


def apply_motion(pose: Pose, action: str | None) -> tuple[Pose, str | None]:
    """The pose after a frame's stated motions, and the last single action among them."""
    x, y, heading, last = pose.x, pose.y, pose.heading, None
    for kind, amount, _ in _MOTION_RE.findall(action or ""):
        value = float(amount)
        if kind == "Rotate left":
            heading += value
        elif kind == "Rotate right":
            heading -= value
        elif kind.startswith("Move"):
            direction = {"Move forward": 0.0, "Move left": 90.0, "Move backward": 180.0, "Move right": -90.0}[kind]
            dx, dy = unit(heading + direction)
            x, y = x + value * dx, y + value * dy
        last = kind
    return Pose(x, y, heading), last


def read_plan(frames: Sequence[Frame]) -> Plan:
    """The plan the frames' text states; ``NotReadable`` at the words level."""
    level = detail_level(frames)
    if level == "facts":
        raise NotReadable("the facts level states no positions, only the question's facts (solver/facts.py)")
    if level == "words":
        raise NotReadable("the frames are described in words (direction words, rounded distances): positions "
                          "are not determined")
    if not frames:
        raise NotReadable("no frames")
    pose, last_action = Pose(), None
    poses: list[Pose] = []
    objects: dict[str, PlanObject] = {}
    walls: dict[str, tuple[Point, Point]] = {}
    seen_names: set[str] = set()
    for k, frame in enumerate(frames):
        if k > 0:
            pose, last_action = apply_motion(pose, frame.action)
        if level != "bearings":  # map and relations state the camera and the map
            camera = _CAMERA_RE.search(frame.view)
            if camera is None:
                raise NotReadable(f"frame {frame.index} states no camera pose")
            pose = Pose(float(camera.group(1)), float(camera.group(2)), signed(camera.group(3), camera.group(4)))
            _read_map_frame(frame.view, k, objects, walls, seen_names)
        else:
            _read_bearings_frame(frame.view, k, pose, objects, walls, seen_names)
        poses.append(pose)
    unplaced = sorted(seen_names - set(objects))
    return Plan(level, poses, objects, walls, last_action, unplaced)


def _read_bearings_frame(view: str, k: int, pose: Pose, objects: dict[str, PlanObject],
                         walls: dict[str, tuple[Point, Point]], seen_names: set[str]) -> None:
    for match in _BEARING_RE.finditer(view):
        name = match.group("name")
        seen_names.add(name)
        bearing, distance = signed(match.group(2), match.group(3)), float(match.group(4))
        if name not in objects and match.group(5) is not None:
            axis = pose.heading + signed(match.group(5), match.group(6))
            long_side, short_side = float(match.group(7)), float(match.group(8))
            centre = centre_on_ray(pose, bearing, distance, axis, long_side, short_side)
            objects[name] = PlanObject(name, centre, long_side, short_side, axis, float(match.group(9)),
                                       float(match.group(10)), float(match.group(11)))
        if name in objects:
            objects[name].frames.append(k)
    for match in _BEARING_WALL_RE.finditer(view):
        if match.group(1) not in walls:
            start = pose.ahead(signed(match.group(2), match.group(3)), float(match.group(4)))
            end = pose.ahead(signed(match.group(5), match.group(6)), float(match.group(7)))
            walls[match.group(1)] = (start, end)


def _read_map_frame(view: str, k: int, objects: dict[str, PlanObject], walls: dict[str, tuple[Point, Point]],
                    seen_names: set[str]) -> None:
    for match in _MAP_OBJECT_RE.finditer(view):
        name = match.group("name")
        if name not in objects:
            objects[name] = PlanObject(name, (float(match.group(2)), float(match.group(3))),
                                       float(match.group(6)), float(match.group(7)),
                                       signed(match.group(4), match.group(5)), float(match.group(8)),
                                       float(match.group(9)), float(match.group(10)))
    in_view = _IN_VIEW_NAMES_RE.search(view)
    if in_view and in_view.group(1) != "no objects":
        for name in (n.strip() for n in in_view.group(1).split(",")):
            seen_names.add(name)
            if name in objects:
                objects[name].frames.append(k)
    for match in _MAP_WALL_RE.finditer(view):
        if match.group(1) not in walls:
            walls[match.group(1)] = ((float(match.group(2)), float(match.group(3))),
                                     (float(match.group(4)), float(match.group(5))))


def room_outline(walls: dict[str, tuple[Point, Point]], tolerance: float = 0.15) -> list[Point] | None:
    """The floor outline the walls close, or None when they do not close one loop (a wall never seen).

    Walls are written in the outline's order of travel (each one's end is the next one's start).

    >>> room_outline({"wall 1": ((0, 0), (2, 0)), "wall 3": ((2, 1), (0, 1)), "wall 2": ((2, 0), (2, 1)),
    ...               "wall 4": ((0, 1), (0, 0))})
    [(0, 0), (2, 0), (2, 1), (0, 1)]
    >>> room_outline({"wall 1": ((0, 0), (2, 0)), "wall 2": ((2, 0), (2, 1))}) is None
    True
    """
    if len(walls) < 3:
        return None
    segments = list(walls.values())
    outline = [segments[0][0]]
    current = segments[0]
    used = {0}
    while True:
        end = current[1]
        following = [i for i, (start, _) in enumerate(segments)
                     if math.dist(start, end) <= tolerance and (i not in used or i == 0)]
        if not following:
            return None
        if following[0] == 0:
            return outline if len(used) == len(segments) else None
        used.add(following[0])
        current = segments[following[0]]
        outline.append(current[0])
