"""Oracle perception at the detail levels that determine the answers: ``bearings``, ``map``, ``relations``
and ``facts``.

The ``words`` level (oracle.py) writes what a VLM writes, and its text does not determine most spatial
answers. These levels state enough that an exact solver over the prompt text alone
(``methods.embodied_r.solver``) answers every task type the generator makes:

- ``bearings``: each key frame opens with the camera motion since the previous one, with its amounts, in
  order ("Rotate right 31.4°, then Move forward 1.25 m"); then every object in view, by a stable instance
  name numbered in order of first sight ("chair 2" keeps its name in every frame), with the signed bearing
  of its centre (left positive) and the floor-plane distance to its closest point. The first time an
  object is named, its footprint (long x short side, and the long side's turn from the line of sight),
  its height above the floor and its longest side follow. Walls in view are given by their two ends.
- ``map``: a cognitive map in the first key frame's frame (x to the right, y ahead, metres; headings and
  angles in degrees, left positive): the camera's position and heading at each key frame, the objects in
  view, each object's centre and footprint when it first comes into view, and each wall's ends.
- ``relations``: the map, plus one sentence in the last frame stating the facts the question needs
  (distances, first frames, instances, angles), so one step is left: choose the least, order, count, bin.
- ``facts``: the bottom rung, short enough to train on a CPU: per key frame the motion and the names in
  view (no positions, sizes or walls), and the same facts sentence in the last frame. What the question
  needs is in that one sentence; the model's part is the last step alone.

Camera motion is stated as the sequence of single actions the walk is made of: between two video
frames that straddle the end of one primitive and the start of the next, rotation, tilt and translation
are split in the order they happened (a primitive rotates, tilts or moves, never two at once), so adding
the stated amounts up reproduces each key frame's pose to the rounding of the numbers.

Numbers are rounded to 0.1° and 0.01 m. ``detail_noise`` (σ) multiplies distances and sizes by
exp(N(0, σ)) and offsets angles by N(0, 30σ degrees), seeded per question and key frame.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_r.core.geometry import Box, box_distance, ccw_angle_deg, polygon_area
from embodied_r.core.records import QARecord

ANGLE_NOISE_DEG = 30.0  # degrees of angle noise per unit of detail_noise
_MIN_AMOUNT = {"deg": 0.05, "m": 0.005}  # pieces smaller than the rounding are not stated


# ---------------------------------------------------------------------------------------------------
# Number formatting (shared with the solver's reading by convention: see methods/embodied_r/solver)
# ---------------------------------------------------------------------------------------------------


def side_angle(signed_deg: float) -> str:
    """``35.2° left`` for +35.2, ``12.0° right`` for -12.0 (left positive).

    >>> side_angle(35.24), side_angle(-12.0), side_angle(0.0)
    ('35.2° left', '12.0° right', '0.0° left')
    """
    value = round(signed_deg, 1)
    return f"{abs(value):.1f}° {'left' if value >= 0 else 'right'}"


def wrap_deg(angle: float) -> float:
    """An angle in degrees wrapped to (-180, 180]."""
    wrapped = (angle + 180.0) % 360.0 - 180.0
    return 180.0 if wrapped == -180.0 else wrapped


def axis_deg(angle: float) -> float:
    """A line's direction (degrees) folded to (-90, 90]: a long side has no front or back."""
    folded = (angle + 90.0) % 180.0 - 90.0
    return 90.0 if folded == -90.0 else folded


def _xy(value: np.ndarray) -> str:
    """``(1.20, -0.35)``; a coordinate that rounds to zero is written 0.00, never -0.00."""
    x, y = (round(float(v), 2) + 0.0 for v in value[:2])
    return f"({x:.2f}, {y:.2f})"


# ---------------------------------------------------------------------------------------------------
# Frames of reference
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pose:
    """A camera on the floor plane: position (world metres) and yaw (degrees counter-clockwise from +x)."""

    xy: np.ndarray
    yaw: float

    @staticmethod
    def of(frame: dict[str, Any]) -> Pose:
        return Pose(np.asarray(frame["position"][:2], float), float(frame["yaw"]))

    def bearing(self, point: np.ndarray) -> float:
        """Signed degrees from straight ahead to ``point``; left positive."""
        heading = math.radians(self.yaw)
        theta = ccw_angle_deg(np.array([math.cos(heading), math.sin(heading)]), point[:2] - self.xy)
        return wrap_deg(theta)

    def to_map(self, point: np.ndarray) -> np.ndarray:
        """World xy -> this pose's map frame: x to the right, y ahead."""
        heading = math.radians(self.yaw)
        d = point[:2] - self.xy
        return np.array([d[0] * math.sin(heading) - d[1] * math.cos(heading),
                         d[0] * math.cos(heading) + d[1] * math.sin(heading)])


def footprint_axis_yaw(box: Box) -> tuple[float, float, float]:
    """(long side, short side, yaw of the long side in degrees from +x) of an upright box's footprint."""
    if box.lengths[0] >= box.lengths[1]:
        axis, long_side, short_side = box.axes[0], box.lengths[0], box.lengths[1]
    else:
        axis, long_side, short_side = box.axes[1], box.lengths[1], box.lengths[0]
    return float(long_side), float(short_side), math.degrees(math.atan2(axis[1], axis[0]))


def floor_distance(pose: Pose, box: Box) -> float:
    """Floor-plane distance from the camera to the box's footprint (its closest point)."""
    return float(box.point_distance(np.array([[pose.xy[0], pose.xy[1], box.centroid[2]]]))[0])


def walls_in_view(pose: Pose, polygon: list[tuple[float, float]], half_fov_deg: float,
                  samples: int = 24) -> list[int]:
    """Indices of the polygon's edges (walls) with some point within the horizontal field of view."""
    points = np.asarray(polygon, float)
    seen = []
    for i in range(len(points)):
        a, b = points[i], points[(i + 1) % len(points)]
        for u in np.linspace(0.0, 1.0, samples):
            if abs(pose.bearing(a + (b - a) * u)) <= half_fov_deg:
                seen.append(i)
                break
    return seen


def half_horizontal_fov(poses: dict[str, Any]) -> float:
    vertical = math.radians(float(poses.get("fovy", 60.0)))
    return math.degrees(math.atan(math.tan(vertical / 2) * poses["width"] / poses["height"]))


# ---------------------------------------------------------------------------------------------------
# Camera motion between key frames, with amounts
# ---------------------------------------------------------------------------------------------------

_MOVE_KINDS = ("Move forward", "Move backward", "Move left", "Move right")


def _pieces(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, float]]:
    """The single actions from video frame ``a`` to the next one ``b``, in order, with amounts (degrees or
    metres, positive). A move translates at the heading it starts with."""
    dyaw = wrap_deg(float(b["yaw"]) - float(a["yaw"]))
    dpitch = float(b["pitch"]) - float(a["pitch"])
    step = np.asarray(b["position"][:2], float) - np.asarray(a["position"][:2], float)
    moves_first = a["motion"] in _MOVE_KINDS and b["motion"] not in _MOVE_KINDS
    heading = math.radians(float(a["yaw"]) if moves_first else float(b["yaw"]))
    forward = step[0] * math.cos(heading) + step[1] * math.sin(heading)
    left = -step[0] * math.sin(heading) + step[1] * math.cos(heading)
    turn = [("Rotate left" if dyaw > 0 else "Rotate right", abs(dyaw)),
            ("Tilt upward" if dpitch > 0 else "Tilt downward", abs(dpitch))]
    move = [("Move forward" if forward > 0 else "Move backward", abs(forward)),
            ("Move left" if left > 0 else "Move right", abs(left))]
    return move + turn if moves_first else turn + move


def motion_between(frames: list[dict[str, Any]], start: int, stop: int) -> list[tuple[str, float]]:
    """The camera's single actions from video frame ``start`` to ``stop``, same-kind neighbours merged."""
    merged: list[list[Any]] = []
    for j in range(start + 1, stop + 1):
        for kind, amount in _pieces(frames[j - 1], frames[j]):
            if amount < 1e-9:
                continue
            if merged and merged[-1][0] == kind:
                merged[-1][1] += amount
            else:
                merged.append([kind, amount])
    # A piece under the rounding (a rounding-size wobble of the path) is dropped only when that does not
    # split a run: its neighbours of one kind are then merged.
    out: list[tuple[str, float]] = []
    for kind, amount in merged:
        unit = "m" if kind.startswith("Move") else "deg"
        if amount < _MIN_AMOUNT[unit]:
            continue
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + amount)
        else:
            out.append((kind, amount))
    return out


def motion_text(motion: list[tuple[str, float]]) -> str:
    """``Rotate right 31.4°, then Move forward 1.25 m``; ``No movement`` when the camera stood still."""
    if not motion:
        return "No movement"
    return ", then ".join(f"{kind} {amount:.1f}°" if not kind.startswith("Move") else f"{kind} {amount:.2f} m"
                          for kind, amount in motion)


# ---------------------------------------------------------------------------------------------------
# Naming: stable instance names in order of first sight
# ---------------------------------------------------------------------------------------------------


@dataclass
class Names:
    """``chair 2`` for the second chair first seen; a sighting misnamed under noise gets a name of its own."""

    given: dict[tuple[str, str], str] = field(default_factory=dict)
    per_category: dict[str, int] = field(default_factory=dict)

    def name(self, label: str, category: str) -> tuple[str, bool]:
        key = (label, category)
        if key in self.given:
            return self.given[key], False
        self.per_category[category] = self.per_category.get(category, 0) + 1
        self.given[key] = f"{category} {self.per_category[category]}"
        return self.given[key], True


# ---------------------------------------------------------------------------------------------------
# Noise on stated numbers
# ---------------------------------------------------------------------------------------------------


class NumberNoise:
    """Distances and sizes times exp(N(0, σ)); angles plus N(0, 30σ) degrees. σ = 0 states the truth."""

    def __init__(self, sigma: float, rng: np.random.Generator) -> None:
        self.sigma, self.rng = sigma, rng

    def length(self, value: float) -> float:
        return value * math.exp(self.rng.normal(0.0, self.sigma)) if self.sigma else value

    def angle(self, value: float) -> float:
        return value + self.rng.normal(0.0, ANGLE_NOISE_DEG * self.sigma) if self.sigma else value

    def point(self, pose: Pose, world_xy: np.ndarray) -> np.ndarray:
        """A world point as seen from ``pose`` with its bearing and range perturbed, back in world xy."""
        if not self.sigma:
            return np.asarray(world_xy[:2], float)
        bearing = self.angle(pose.bearing(world_xy))
        distance = self.length(float(np.linalg.norm(world_xy[:2] - pose.xy)))
        direction = math.radians(pose.yaw + bearing)
        return pose.xy + distance * np.array([math.cos(direction), math.sin(direction)])


# ---------------------------------------------------------------------------------------------------
# One question's frames at a detail level
# ---------------------------------------------------------------------------------------------------


@dataclass
class Sight:
    label: str  # ground-truth instance label, "chair_1"
    category: str  # as perceived (another one under wrong-label noise)


def _object_facts(box: Box) -> str:
    long_side, short_side, _ = footprint_axis_yaw(box)
    bottom = float(box.centroid[2] - box.lengths[2] / 2)
    top = float(box.centroid[2] + box.lengths[2] / 2)
    return (f"footprint {long_side:.2f} × {short_side:.2f} m, {max(bottom, 0.0):.2f} to {top:.2f} m above the "
            f"floor, longest side {float(box.lengths.max()):.2f} m")


def _noisy_box(box: Box, noise: NumberNoise) -> Box:
    """The box with its sizes and height perturbed (a VLM misjudging an object's size)."""
    if not noise.sigma:
        return box
    lengths = np.array([noise.length(float(v)) for v in box.lengths])
    bottom = float(box.centroid[2] - box.lengths[2] / 2)
    centroid = np.array([box.centroid[0], box.centroid[1], max(0.0, noise.length(bottom)) + lengths[2] / 2])
    return Box(centroid, lengths, box.axes)


def detailed_frames(detail: str, poses: dict[str, Any], boxes: dict[str, Box], qa: QARecord,
                    indices: list[int], sights: list[list[Sight]], seed: int,
                    detail_noise: float) -> list[dict[str, Any]]:
    """Per key frame ``{action, delta, q_related, raw}`` at ``detail`` (bearings, map, relations or facts).

    ``indices`` are the key frames' video frame indices and ``sights`` the objects each one shows (after
    the miss and wrong-label noise, in the order they are listed)."""
    frames = poses["frames"]
    polygon = [tuple(p) for p in poses["meta"]["room_polygon"]]
    half_fov = half_horizontal_fov(poses)
    names, wall_names = Names(), Names()
    origin = Pose.of(frames[indices[0]])
    out: list[dict[str, Any]] = []
    for k, index in enumerate(indices):
        pose = Pose.of(frames[index])
        noise = NumberNoise(detail_noise, np.random.default_rng([seed, zlib.crc32(qa.id.encode("utf-8")), k, 7]))
        action = None if k == 0 else _noisy_motion_text(motion_between(frames, indices[k - 1], index), noise)
        listed, new = [], []
        for sight in sights[k]:
            name, first = names.name(sight.label, sight.category)
            listed.append((name, sight.label))
            if first:
                new.append((name, sight.label))
        walls = [(*wall_names.name(f"wall_{i}", "wall"), i) for i in walls_in_view(pose, polygon, half_fov)]
        if detail == "bearings":
            delta = _bearings_view(pose, boxes, listed, {n for n, _ in new}, walls, polygon, noise)
        elif detail == "facts":
            delta = f"In view: {', '.join(n for n, _ in listed)}." if listed else "In view: no objects."
        else:
            delta = _map_view(pose, origin, boxes, listed, new, walls, polygon, noise)
        related = ""
        if detail in ("relations", "facts") and k == len(indices) - 1:
            related = relation_facts(qa, boxes, poses, pose, names, sights)
        raw = f"{delta} {related}".strip() if k == 0 else f"1. {action}\n2. {delta}\n3. {related}".rstrip()
        out.append({"action": action, "delta": delta, "q_related": related, "raw": raw})
    return out


def _noisy_motion_text(motion: list[tuple[str, float]], noise: NumberNoise) -> str:
    if noise.sigma:
        motion = [(kind, noise.length(amount) if kind.startswith("Move") else abs(noise.angle(amount)))
                  for kind, amount in motion]
    return motion_text(motion)


def _bearings_view(pose: Pose, boxes: dict[str, Box], listed: list[tuple[str, str]], new: set[str],
                   walls: list[tuple[str, bool, int]], polygon: list[tuple[float, float]], noise: NumberNoise) -> str:
    parts = []
    for name, label in listed:
        box = boxes[label]
        text = (f"{name} at {side_angle(noise.angle(pose.bearing(box.centroid)))}, "
                f"{noise.length(floor_distance(pose, box)):.2f} m away")
        if name in new:
            _, _, yaw = footprint_axis_yaw(box)
            turn = axis_deg(noise.angle(yaw - pose.yaw))
            text += f", long side turned {side_angle(turn)}, {_object_facts(_noisy_box(box, noise))}"
        parts.append(text)
    view = f"In view: {'; '.join(parts)}." if parts else "In view: no objects."
    if walls:
        ends = []
        for name, _, i in walls:
            a, b = np.asarray(polygon[i], float), np.asarray(polygon[(i + 1) % len(polygon)], float)
            pa, pb = noise.point(pose, a), noise.point(pose, b)
            ends.append(f"{name} from {side_angle(pose.bearing(pa))}, {np.linalg.norm(pa - pose.xy):.2f} m to "
                        f"{side_angle(pose.bearing(pb))}, {np.linalg.norm(pb - pose.xy):.2f} m")
        view += f" Walls in view: {'; '.join(ends)}."
    return view


def _map_view(pose: Pose, origin: Pose, boxes: dict[str, Box], listed: list[tuple[str, str]],
              new: list[tuple[str, str]], walls: list[tuple[str, bool, int]], polygon: list[tuple[float, float]],
              noise: NumberNoise) -> str:
    """The map-frame view: camera, objects in view, and the objects and walls seen for the first time."""
    camera = origin.to_map(pose.xy)
    heading = wrap_deg(pose.yaw - origin.yaw)
    view = f"Camera at {_xy(camera)}, heading {side_angle(heading)}."
    view += f" In view: {', '.join(n for n, _ in listed)}." if listed else " In view: no objects."
    added = []
    for name, label in new:
        box = boxes[label]
        centre = origin.to_map(noise.point(pose, box.centroid))
        _, _, yaw = footprint_axis_yaw(box)
        turn = axis_deg(noise.angle(yaw - origin.yaw))  # from the map's +y axis (the first view), left positive
        added.append(f"{name} centre {_xy(centre)}, long side at {side_angle(turn)}, "
                     f"{_object_facts(_noisy_box(box, noise))}")
    if added:
        view += f" New on the map: {'; '.join(added)}."
    fresh = [(name, i) for name, first, i in walls if first]
    if fresh:
        ends = []
        for name, i in fresh:
            a, b = np.asarray(polygon[i], float), np.asarray(polygon[(i + 1) % len(polygon)], float)
            ends.append(f"{name} from {_xy(origin.to_map(noise.point(pose, a)))} to "
                        f"{_xy(origin.to_map(noise.point(pose, b)))}")
        view += f" New walls: {'; '.join(ends)}."
    return view


# ---------------------------------------------------------------------------------------------------
# relations: the facts the question needs, stated in the last frame
# ---------------------------------------------------------------------------------------------------


def relation_facts(qa: QARecord, boxes: dict[str, Box], poses: dict[str, Any], last: Pose, names: Names,
                   sights: list[list[Sight]]) -> str:
    """One ``Facts: ...`` sentence with what ``qa`` needs, from ground truth (exact numbers)."""
    categories = list(qa.meta.get("categories") or [])
    instances = {c: [b for label, b in boxes.items() if label.rsplit("_", 1)[0] == c] for c in categories}

    def gap(a: str, b: str) -> float:
        return min(box_distance(x, y) for x in instances[a] for y in instances[b])

    def centre(c: str) -> np.ndarray:
        return instances[c][0].centroid[:2]

    task = qa.task
    if task == "object_rel_distance":
        primary, *choices = categories
        listed = ", ".join(f"{c} {gap(primary, c):.2f} m" for c in choices)
        return f"Facts: closest-point distances from the {primary}: {listed}."
    if task == "object_abs_distance":
        a, b = categories
        return f"Facts: the {a} and the {b} are {gap(a, b):.2f} m apart at their closest points."
    if task == "object_counting":
        category = categories[0]
        seen = sorted({n for (label, cat), n in names.given.items() if cat == category},
                      key=lambda n: int(n.rsplit(" ", 1)[1]))
        return f"Facts: the {category} instances seen: {', '.join(seen) if seen else 'none'}."
    if task == "object_size_estimation":
        box = instances[categories[0]][0]
        return f"Facts: the {categories[0]}'s longest side is {float(box.lengths.max()):.2f} m."
    if task == "room_size_estimation":
        area = polygon_area([tuple(p) for p in poses["meta"]["room_polygon"]])
        return f"Facts: the floor area is {area:.2f} square metres."
    if task == "obj_appearance_order":
        first = {}
        for k, frame_sights in enumerate(sights):
            for sight in frame_sights:
                first.setdefault(sight.category, k)
        listed = ", ".join(f"{c} in frame {first[c]}" if c in first else f"{c} in no frame" for c in categories)
        return f"Facts: first shown: {listed}."
    if task.startswith("object_rel_direction"):
        p, o, q = categories
        angle = wrap_deg(ccw_angle_deg(centre(o) - centre(p), centre(q) - centre(p)))
        return f"Facts: standing by the {p} facing the {o}, the {q} is {side_angle(angle)} of straight ahead."
    if task == "route_planning":
        points = [centre(c) for c in categories]
        legs = [b - a for a, b in zip(points, points[1:])]
        turns = [wrap_deg(ccw_angle_deg(h, leg)) for h, leg in zip(legs, legs[1:])]
        listed = ", ".join(f"at the {c} {side_angle(t)}" for c, t in zip(categories[1:], turns))
        return f"Facts: the route turns {listed}."
    if task == "egocentric_direction":
        category = categories[0]
        angle = side_angle(last.bearing(instances[category][0].centroid))
        return f"Facts: at the last frame the {category} is {angle} of straight ahead."
    return ""
