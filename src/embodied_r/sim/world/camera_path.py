"""Egocentric camera paths: a person-height camera walking through free floor, with look-arounds.

The walk imitates VSI-Bench's scan videos (Yang et al., "Thinking in Space", 2024): eye height 1.45-1.6 m,
pitched 12-20° down, 0.5 m/s walking and ~50°/s turning, with eased starts and stops so motion is smooth.
A path is a list of *primitives* (rotate, move, tilt), each a single action from the Embodied-R action
vocabulary, so the ground-truth action of any stretch of video is known exactly. The last primitive
is a clear, isolated action (rotate left/right, move forward/backward) that "what did I just do"
questions ask about.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from embodied_r.core.geometry import points_in_polygon
from embodied_r.sim.world.scenes import Scene, SceneError

GRID = 0.1  # occupancy grid cell (m)
WALL_CLEARANCE = 0.45
OBJECT_CLEARANCE = 0.4
WALK_SPEED = 0.5  # m/s
TURN_SPEED = 50.0  # deg/s
TILT_SPEED = 25.0  # deg/s


@dataclass
class Primitive:
    action: str  # "Move forward", "Rotate left", ... (perception action vocabulary, sentence case)
    duration: float
    start_xy: np.ndarray
    end_xy: np.ndarray
    start_yaw: float  # degrees, counter-clockwise from +x
    end_yaw: float
    start_pitch: float
    end_pitch: float


@dataclass
class CameraPath:
    primitives: list[Primitive]
    eye_z: float
    final_action: str
    notes: dict[str, float] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return sum(p.duration for p in self.primitives)

    def poses(self, fps: float) -> list[dict]:
        """One pose per video frame: ``{t, position, yaw, pitch, motion}`` (angles in degrees)."""
        n = int(math.floor(self.duration * fps + 1e-9)) + 1
        out, index, start = [], 0, 0.0
        for k in range(n):
            t = k / fps
            while index < len(self.primitives) - 1 and t > start + self.primitives[index].duration:
                start += self.primitives[index].duration
                index += 1
            prim = self.primitives[index]
            u = min(1.0, max(0.0, (t - start) / prim.duration))
            s = (1 - math.cos(math.pi * u)) / 2  # ease in/out
            xy = prim.start_xy + (prim.end_xy - prim.start_xy) * s
            out.append({
                "t": round(t, 4),
                "position": [round(float(xy[0]), 4), round(float(xy[1]), 4), round(self.eye_z, 4)],
                "yaw": round(prim.start_yaw + (prim.end_yaw - prim.start_yaw) * s, 3),
                "pitch": round(prim.start_pitch + (prim.end_pitch - prim.start_pitch) * s, 3),
                "motion": prim.action,
            })
        return out


# ---------------------------------------------------------------------------------------------------
# Free space
# ---------------------------------------------------------------------------------------------------


def free_space(scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """Boolean grid of cells the camera may stand in, and the (H, W, 2) cell-centre coordinates."""
    xs = [p[0] for p in scene.polygon]
    ys = [p[1] for p in scene.polygon]
    gx = np.arange(min(xs) + GRID / 2, max(xs), GRID)
    gy = np.arange(min(ys) + GRID / 2, max(ys), GRID)
    centers = np.stack(np.meshgrid(gx, gy, indexing="xy"), axis=-1)  # (H, W, 2)
    flat = centers.reshape(-1, 2)
    free = points_in_polygon(flat, scene.polygon)
    poly = np.asarray(scene.polygon, float)
    for a, b in zip(poly, np.roll(poly, -1, axis=0)):
        ab = b - a
        u = np.clip(((flat - a) @ ab) / (ab @ ab), 0, 1)
        free &= np.linalg.norm(flat - (a + u[:, None] * ab), axis=1) >= WALL_CLEARANCE
    for obj in scene.objects:
        pts = np.column_stack([flat, np.full(len(flat), obj.box.centroid[2])])
        free &= obj.box.point_distance(pts) >= OBJECT_CLEARANCE
    return free.reshape(centers.shape[:2]), centers


def _largest_component(free: np.ndarray) -> np.ndarray:
    labels = np.full(free.shape, -1, dtype=int)
    best, best_size, label = None, 0, 0
    for start in zip(*np.nonzero(free)):
        if labels[start] >= 0:
            continue
        queue, size = deque([start]), 0
        labels[start] = label
        while queue:
            i, j = queue.popleft()
            size += 1
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                ni, nj = i + di, j + dj
                if 0 <= ni < free.shape[0] and 0 <= nj < free.shape[1] and free[ni, nj] and labels[ni, nj] < 0:
                    labels[ni, nj] = label
                    queue.append((ni, nj))
        if size > best_size:
            best, best_size = label, size
        label += 1
    return labels == best if best is not None else np.zeros_like(free)


def _bfs_path(mask: np.ndarray, start: tuple[int, int], goal: tuple[int, int]) -> list[tuple[int, int]]:
    prev = {start: start}
    queue = deque([start])
    steps = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)]
    while queue:
        cell = queue.popleft()
        if cell == goal:
            break
        for di, dj in steps:
            nxt = (cell[0] + di, cell[1] + dj)
            if 0 <= nxt[0] < mask.shape[0] and 0 <= nxt[1] < mask.shape[1] and mask[nxt] and nxt not in prev:
                prev[nxt] = cell
                queue.append(nxt)
    path = [goal]
    while path[-1] != start:
        path.append(prev[path[-1]])
    return path[::-1]


def _line_free(mask: np.ndarray, centers: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    origin = centers[0, 0]
    n = max(2, int(np.linalg.norm(b - a) / (GRID / 2)) + 1)
    for p in np.linspace(a, b, n):
        j, i = np.round((p - origin) / GRID).astype(int)
        if not (0 <= i < mask.shape[0] and 0 <= j < mask.shape[1]) or not mask[i, j]:
            return False
    return True


def _shortcut(mask: np.ndarray, centers: np.ndarray, cells: list[tuple[int, int]]) -> list[np.ndarray]:
    # String pulling: keep only the turns needed to stay in free space.
    pts = [centers[c] for c in cells]
    out, i = [pts[0]], 0
    while i < len(pts) - 1:
        j = len(pts) - 1
        while j > i + 1 and not _line_free(mask, centers, pts[i], pts[j]):
            j -= 1
        out.append(pts[j])
        i = j
    return out


# ---------------------------------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------------------------------


def _turn(action_xy: np.ndarray, yaw: float, delta: float, pitch: float) -> Primitive:
    action = "Rotate left" if delta > 0 else "Rotate right"  # yaw is counter-clockwise: + is a left turn
    return Primitive(action, max(0.6, abs(delta) / TURN_SPEED), action_xy, action_xy, yaw, yaw + delta, pitch, pitch)


def _wrap(angle: float) -> float:
    return (angle + 180.0) % 360.0 - 180.0


def plan_camera_path(scene: Scene, rng: np.random.Generator, max_seconds: float = 20.0,
                     waypoints: int = 4) -> CameraPath:
    """Plan a walk through the scene's free floor lasting at most ``max_seconds``."""
    free, centers = free_space(scene)
    mask = _largest_component(free)
    cells = list(zip(*np.nonzero(mask)))
    if len(cells) < 30:
        raise SceneError(f"scene {scene.name!r}: only {len(cells)} free floor cells for the camera; the room is "
                         f"too cluttered to walk through")
    # Waypoints spread over the floor: each next one is far from those already chosen.
    chosen = [cells[int(rng.integers(len(cells)))]]
    coords = np.array([centers[c] for c in cells])
    for _ in range(waypoints - 1):
        dist = np.min([np.linalg.norm(coords - centers[c], axis=1) for c in chosen], axis=0)
        candidates = np.nonzero(dist >= np.quantile(dist, 0.7))[0]
        chosen.append(cells[int(rng.choice(candidates))])
    route = [centers[chosen[0]]]
    for a, b in zip(chosen, chosen[1:]):
        route.extend(_shortcut(mask, centers, _bfs_path(mask, a, b))[1:])

    pitch = float(rng.uniform(-20.0, -12.0))
    eye_z = scene.floor_z + float(rng.uniform(1.45, 1.6))
    pos = route[0]
    yaw = _quiet_heading(scene, pos, rng)
    prims: list[Primitive] = []
    # Opening look-around, as a person scanning a room does: left first, then sweep right.
    for delta in (float(rng.uniform(60, 100)), -float(rng.uniform(120, 200))):
        prims.append(_turn(pos, yaw, delta, pitch))
        yaw += delta
    budget = max_seconds - 3.0  # room for the final action
    for target in route[1:]:
        step = target - pos
        dist = float(np.linalg.norm(step))
        if dist < 0.2:
            continue
        heading = math.degrees(math.atan2(step[1], step[0]))
        delta = _wrap(heading - yaw)
        segment = [_turn(pos, yaw, delta, pitch)] if abs(delta) > 5 else []
        segment.append(Primitive("Move forward", dist / WALK_SPEED, pos, target, yaw + delta, yaw + delta,
                                 pitch, pitch))
        if sum(p.duration for p in prims + segment) > budget and len(prims) > 2:
            break
        prims.extend(segment)
        yaw, pos = yaw + delta, target
        if rng.random() < 0.3 and sum(p.duration for p in prims) < budget - 2.0:
            tilt = float(rng.uniform(12, 20))
            prims.append(Primitive("Tilt downward", tilt / TILT_SPEED, pos, pos, yaw, yaw, pitch, pitch - tilt))
            prims.append(Primitive("Tilt upward", tilt / TILT_SPEED, pos, pos, yaw, yaw, pitch - tilt, pitch))

    final = _final_primitive(mask, centers, rng, pos, yaw, pitch)
    prims.append(final)
    return CameraPath(prims, eye_z, final.action)


def _quiet_heading(scene: Scene, pos: np.ndarray, rng: np.random.Generator) -> float:
    """A starting yaw that sees few objects, so the look-around reveals them one after another (this
    spreads first appearances in time, which appearance-order questions need)."""
    headings = np.arange(0.0, 360.0, 30.0) + float(rng.uniform(0, 30))
    centers = np.array([o.box.centroid[:2] for o in scene.objects]) - pos
    bearings = np.degrees(np.arctan2(centers[:, 1], centers[:, 0]))
    in_view = [int(np.sum(np.abs((bearings - h + 180) % 360 - 180) < 45)) for h in headings]
    quiet = [h for h, n in zip(headings, in_view) if n == min(in_view)]
    return float(quiet[int(rng.integers(len(quiet)))])


def _final_primitive(mask: np.ndarray, centers: np.ndarray, rng: np.random.Generator, pos: np.ndarray,
                     yaw: float, pitch: float) -> Primitive:
    forward = np.array([math.cos(math.radians(yaw)), math.sin(math.radians(yaw))])
    options = ["Rotate left", "Rotate right"]
    if _line_free(mask, centers, pos, pos + forward * 1.0):
        options.append("Move forward")
    if _line_free(mask, centers, pos, pos - forward * 0.8):
        options.append("Move backward")
    action = options[int(rng.integers(len(options)))]
    if action.startswith("Rotate"):
        delta = float(rng.uniform(70, 110)) * (1 if action == "Rotate left" else -1)
        return _turn(pos, yaw, delta, pitch)
    step = forward * (1.0 if action == "Move forward" else -0.8)
    return Primitive(action, float(np.linalg.norm(step)) / WALK_SPEED * 1.2, pos, pos + step, yaw, yaw, pitch, pitch)
