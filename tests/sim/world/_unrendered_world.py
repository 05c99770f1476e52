"""A synthetic-world dataset built without rendering: procedural rooms, planned camera walks and questions,
with each frame's visible objects decided by geometry instead of MuJoCo's pixel counts.

Rendering's pixel counts depend on the GL driver, so tests that pin exact text, or that need many scenes
quickly (the solver against ground truth on hundreds of questions), use this world: the oracle and the
question generator read only the poses file, which has the same layout as `embodied-r synth world`'s.
An object is in view when its centre lies within the horizontal field of view and within 8 m, with a
pixel count that falls with distance (so the listing order, largest first, is by distance).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.core.io import atomic_write_json, write_jsonl
from embodied_r.core.records import QARecord
from embodied_r.sim.world.camera_path import plan_camera_path
from embodied_r.sim.world.dataset import questions_for_scene
from embodied_r.sim.world.layout import LayoutConfig, sample_scene
from embodied_r.sim.world.options import LetterBalancer
from embodied_r.sim.world.scenes import SceneError

WIDTH, HEIGHT, FPS, FOVY = 320, 240, 5.0, 60.0
HALF_FOV = math.degrees(math.atan(math.tan(math.radians(FOVY / 2)) * WIDTH / HEIGHT))


def _visible(pose: dict[str, Any], scene: Any) -> dict[str, int]:
    x, y = pose["position"][:2]
    yaw = math.radians(pose["yaw"])
    out = {}
    for obj in scene.objects:
        dx, dy = obj.box.centroid[0] - x, obj.box.centroid[1] - y
        distance = math.hypot(dx, dy)
        bearing = math.degrees(math.atan2(math.cos(yaw) * dy - math.sin(yaw) * dx,
                                          math.cos(yaw) * dx + math.sin(yaw) * dy))
        if abs(bearing) <= HALF_FOV and distance <= 8.0:
            out[obj.label] = int(20000 / (1.0 + distance) ** 2)
    return out


def build_unrendered_world(out: Path, scenes: int, seed: int = 0, seconds: float = 12.0,
                           per_task: int = 3) -> list[QARecord]:
    """Write ``poses/`` and ``questions.jsonl`` for ``scenes`` rooms under ``out``; return the questions."""
    balancer = LetterBalancer(np.random.default_rng([seed, 2]))
    questions: list[QARecord] = []
    for index in range(scenes):
        name = f"scene_{seed}_{index:04d}"
        for attempt in range(5):
            try:
                scene = sample_scene(name, np.random.default_rng([seed, index, 0, attempt]), LayoutConfig())
                path = plan_camera_path(scene, np.random.default_rng([seed, index, 1, attempt]), seconds)
                break
            except SceneError:
                continue
        else:
            continue
        frames = path.poses(FPS)
        for pose in frames:
            pose["visible"] = _visible(pose, scene)
        poses = {"scene": name, "fps": FPS, "width": WIDTH, "height": HEIGHT, "fovy": FOVY,
                 "final_action": path.final_action, "meta": scene.to_meta_info(), "frames": frames}
        atomic_write_json(out / "poses" / f"{name}.json", poses, indent=None)
        questions += questions_for_scene(name, poses, np.random.default_rng([seed, index, 3]), balancer, per_task)
    write_jsonl(out / "questions.jsonl", [q.to_dict() for q in questions])
    return questions


def key_times(out: Path, qa: QARecord, count: int = 6) -> list[float]:
    """``count`` evenly spaced key-frame times from the first video frame to the last."""
    import json

    frames = json.loads((out / "poses" / f"{qa.meta['scene']}.json").read_text())["frames"]
    end = float(frames[-1]["t"])
    return [round(end * k / (count - 1), 4) for k in range(count)]
