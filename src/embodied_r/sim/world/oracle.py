"""Oracle perception: the per-key-frame text a VLM would write, derived only from ground truth.

Embodied-R's VLM writes, for each key frame after the first, (1) the action taken since the previous
key frame, (2) newly visible spatial information and (3) question-related content, in egocentric terms
("ahead-left", "to the right") rather than image positions (as the official perception prompts ask). The oracle
writes the same three parts from the camera poses and per-object visible pixels of a synthetic
dataset, so the reasoner can be trained and tested with perfect (or deliberately noisy) perception.

``OracleNoise`` degrades it the way a VLM errs: objects missed, labels swapped, distances misjudged.
"""

from __future__ import annotations

import functools
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.core.geometry import Box, ccw_angle_deg
from embodied_r.core.io import DataFileError, read_json
from embodied_r.core.records import QARecord
from embodied_r.sim.world.categories import CATEGORIES, color_for
from embodied_r.sim.world.detail_levels import DETAIL_LEVELS
from embodied_r.sim.world.oracle_detail import Pose, Sight, detailed_frames, half_horizontal_fov, walls_in_view
from embodied_r.sim.world.scenes import meta_boxes
from embodied_r.sim.world.video_questions import VISIBLE_FRACTION

DESCRIBE_FRACTION = VISIBLE_FRACTION  # the oracle mentions exactly what questions count as seen
ACTION_SCALES = {"rotate": 15.0, "tilt": 8.0, "move": 0.25}  # degrees, degrees, metres that count as "one step"


@dataclass(frozen=True)
class OracleNoise:
    """Perception errors: each visible object is missed with ``miss_prob``, named as another category
    with ``wrong_label_prob``, and its distance multiplied by exp(N(0, ``distance_sigma``))."""

    miss_prob: float = 0.0
    wrong_label_prob: float = 0.0
    distance_sigma: float = 0.0

    def __post_init__(self) -> None:
        for name in ("miss_prob", "wrong_label_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"OracleNoise.{name} must be in [0, 1], got {value}")
        if self.distance_sigma < 0:
            raise ValueError(f"OracleNoise.distance_sigma must be >= 0, got {self.distance_sigma}")


@functools.lru_cache(maxsize=64)
def _load_scene(poses_path: str) -> tuple[dict[str, Any], dict[str, Box]]:
    poses = read_json(poses_path)
    if "frames" not in poses or "meta" not in poses:
        raise DataFileError(f"{poses_path}: not a synthetic-world poses file (needs 'frames' and 'meta')")
    boxes = {f"{cat}_{i}": box for cat, items in meta_boxes(poses["meta"]).items() for i, box in enumerate(items)}
    return poses, boxes


def _scene_name(qa: QARecord) -> str:
    return str(qa.meta.get("scene") or Path(qa.video).stem)


# ---------------------------------------------------------------------------------------------------
# Ground truth -> words
# ---------------------------------------------------------------------------------------------------


def egocentric_phrase(signed_deg: float) -> str:
    """Direction words for a bearing (degrees, positive = to the left of straight ahead).

    >>> egocentric_phrase(5.0), egocentric_phrase(-30.0), egocentric_phrase(80.0)
    ('straight ahead', 'ahead-right', 'to the left')
    """
    side = "left" if signed_deg > 0 else "right"
    magnitude = abs(signed_deg)
    if magnitude <= 12:
        return "straight ahead"
    if magnitude <= 50:
        return f"ahead-{side}"
    if magnitude <= 110:
        return f"to the {side}"
    return f"behind-{side}"


def action_between(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The single vocabulary action that best explains the camera change from pose ``a`` to ``b``:
    the largest of rotation, tilt and translation, each in units of
    ``ACTION_SCALES``."""
    dyaw = (float(b["yaw"]) - float(a["yaw"]) + 180.0) % 360.0 - 180.0
    dpitch = float(b["pitch"]) - float(a["pitch"])
    step = np.asarray(b["position"], float) - np.asarray(a["position"], float)
    # Walking after a turn is "move forward", not a side step: measure the translation against whichever
    # of the two headings it is best aligned with.
    forward, left = 0.0, 0.0
    for heading in (math.radians(float(a["yaw"])), math.radians(float(b["yaw"]))):
        f = step[0] * math.cos(heading) + step[1] * math.sin(heading)
        if abs(f) >= abs(forward):
            forward, left = f, -step[0] * math.sin(heading) + step[1] * math.cos(heading)
    candidates = {
        ("Rotate left" if dyaw > 0 else "Rotate right"): abs(dyaw) / ACTION_SCALES["rotate"],
        ("Tilt upward" if dpitch > 0 else "Tilt downward"): abs(dpitch) / ACTION_SCALES["tilt"],
        ("Move forward" if forward > 0 else "Move backward"): abs(forward) / ACTION_SCALES["move"],
        ("Move left" if left > 0 else "Move right"): abs(left) / ACTION_SCALES["move"],
        ("Move upward" if step[2] > 0 else "Move downward"): abs(step[2]) / ACTION_SCALES["move"],
    }
    return max(candidates, key=candidates.__getitem__)


@dataclass
class Sighting:
    label: str  # instance label, e.g. "chair_1"
    name: str  # category as perceived (may be wrong under noise)
    phrase: str  # "a red chair ahead-left, about 2.1 m away"


def _sightings(frame: dict[str, Any], boxes: dict[str, Box], min_pixels: float, noise: OracleNoise,
               rng: np.random.Generator, vocabulary: list[str]) -> list[Sighting]:
    pos = np.asarray(frame["position"], float)
    yaw = math.radians(float(frame["yaw"]))
    forward = np.array([math.cos(yaw), math.sin(yaw)])
    out = []
    for label, pixels in sorted(frame["visible"].items(), key=lambda kv: -kv[1]):
        if pixels < min_pixels or label not in boxes:
            continue
        if rng.random() < noise.miss_prob:
            continue
        category = label.rsplit("_", 1)[0]
        name = category
        if rng.random() < noise.wrong_label_prob:
            others = [c for c in vocabulary if c != category]
            name = others[int(rng.integers(len(others)))]
        box = boxes[label]
        theta = ccw_angle_deg(forward, box.centroid[:2] - pos[:2])
        signed = theta if theta <= 180 else theta - 360
        flat = np.array([pos[0], pos[1], box.centroid[2]])
        distance = float(box.point_distance(flat[None])[0]) * math.exp(rng.normal(0, noise.distance_sigma))
        color = color_for(name)[0]
        article = "an" if color[:1].lower() in "aeiou" else "a"
        out.append(Sighting(label, name,
                            f"{article} {color} {name} {egocentric_phrase(signed)}, about {distance:.1f} m away"))
    return out


def _question_categories(qa: QARecord, boxes: dict[str, Box]) -> list[str]:
    cats = qa.meta.get("categories")
    if cats:
        return list(dict.fromkeys(cats))
    scene_cats = sorted({label.rsplit("_", 1)[0] for label in boxes})
    text = (qa.question + " " + " ".join(qa.options or [])).lower()
    return [c for c in scene_cats if c in text]


def _q_related(sightings: list[Sighting], categories: list[str]) -> str:
    if not categories:
        return "The question names no specific object."
    parts = []
    for category in categories:
        seen = [s.phrase for s in sightings if s.name == category]
        parts.append(f"The {category} is visible: {'; '.join(seen)}." if seen else f"The {category} is not visible.")
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------------


def _detail_sights(frame: dict[str, Any], boxes: dict[str, Box], min_pixels: float, noise: OracleNoise,
                   rng: np.random.Generator, vocabulary: list[str]) -> list[Sight]:
    """The objects a key frame shows at the detail levels, after the miss and wrong-label noise, largest first."""
    out = []
    for label, pixels in sorted(frame["visible"].items(), key=lambda kv: -kv[1]):
        if pixels < min_pixels or label not in boxes or rng.random() < noise.miss_prob:
            continue
        category = label.rsplit("_", 1)[0]
        if rng.random() < noise.wrong_label_prob:
            others = [c for c in vocabulary if c != category]
            category = others[int(rng.integers(len(others)))]
        out.append(Sight(label, category))
    return out


def question_needs(qa: QARecord, boxes: dict[str, Box], walls: int) -> list[str]:
    """The ground-truth labels a question's answer depends on: every instance of each category it names
    (counting needs them all; a distance is the least over instances), every wall for the room's size."""
    if qa.task == "room_size_estimation":
        return [f"wall_{i}" for i in range(walls)]
    categories = set(_question_categories(qa, boxes)) if qa.task != "last_action" else set()
    return sorted(label for label in boxes if label.rsplit("_", 1)[0] in categories)


def oracle_frames(dataset_dir: str | Path, qa: QARecord, timestamps: list[float], noise: OracleNoise | None = None,
                  seed: int = 0, detail: str = "words", detail_noise: float = 0.0) -> list[dict[str, Any]]:
    """Per key frame ``{timestamp, action, delta, q_related, raw, seen, needs}`` for ``qa``'s video.

    ``action`` is None for the first key frame; ``raw`` is what a VLM's whole reply would look like
    (numbered "1./2./3." parts for later frames, as Embodied-R's parser expects). ``detail`` is one of
    ``DETAIL_LEVELS`` (``words``: as a VLM writes; the others: oracle_detail.py), ``detail_noise`` the σ
    of the noise on their stated numbers. ``seen`` lists the ground-truth labels the key frame shows
    (objects ``chair_0``, walls ``wall_2``) and ``needs`` those the question needs, so a later stage can
    tell over how many key frames a question's objects spread. Deterministic for (seed, qa.id, timestamps).
    """
    if detail not in DETAIL_LEVELS:
        raise ValueError(f"unknown detail level {detail!r}; choose one of {', '.join(DETAIL_LEVELS)}")
    if not (detail_noise >= 0 and math.isfinite(detail_noise)):
        raise ValueError(f"detail_noise must be a finite number >= 0, got {detail_noise}")
    if not timestamps:
        raise ValueError(f"question {qa.id}: no key-frame timestamps given")
    noise = noise or OracleNoise()
    poses_path = Path(dataset_dir) / "poses" / f"{_scene_name(qa)}.json"
    if not poses_path.is_file():
        raise DataFileError(f"{poses_path}: no poses for question {qa.id}; oracle perception works only on "
                            f"datasets made by `embodied-r synth world`")
    poses, boxes = _load_scene(str(poses_path))
    frames, fps = poses["frames"], float(poses["fps"])
    min_pixels = DESCRIBE_FRACTION * poses["width"] * poses["height"]
    vocabulary = sorted(set(CATEGORIES) | {label.rsplit("_", 1)[0] for label in boxes})
    indices = [min(len(frames) - 1, max(0, int(round(float(t) * fps)))) for t in timestamps]
    polygon = [tuple(p) for p in poses["meta"].get("room_polygon") or []]
    half_fov = half_horizontal_fov(poses)
    seen = [sorted([label for label, px in frames[i]["visible"].items() if px >= min_pixels and label in boxes]
                   + [f"wall_{w}" for w in walls_in_view(Pose.of(frames[i]), polygon, half_fov)]) for i in indices]
    needs = question_needs(qa, boxes, len(polygon))
    if detail == "words":
        described = _words_frames(qa, timestamps, indices, frames, boxes, min_pixels, noise, seed, vocabulary)
    else:
        if not polygon:
            raise DataFileError(f"{poses_path}: the scene has no room_polygon; detail level {detail!r} states walls "
                                f"and needs it (render the world again with this version)")
        sights = [_detail_sights(frames[i], boxes, min_pixels, noise,
                                 np.random.default_rng([seed, zlib.crc32(qa.id.encode("utf-8")), k]), vocabulary)
                  for k, i in enumerate(indices)]
        described = detailed_frames(detail, poses, boxes, qa, indices, sights, seed, detail_noise)
    return [{"timestamp": float(t), **frame, "seen": seen[k], "needs": needs}
            for k, (t, frame) in enumerate(zip(timestamps, described))]


def _words_frames(qa: QARecord, timestamps: list[float], indices: list[int], frames: list[dict[str, Any]],
                  boxes: dict[str, Box], min_pixels: float, noise: OracleNoise, seed: int,
                  vocabulary: list[str]) -> list[dict[str, Any]]:
    categories = _question_categories(qa, boxes)
    out: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    previous_labels: set[str] = set()
    for k, index in enumerate(indices):
        frame = frames[index]
        rng = np.random.default_rng([seed, zlib.crc32(qa.id.encode("utf-8")), k])
        sightings = _sightings(frame, boxes, min_pixels, noise, rng, vocabulary)
        q_related = _q_related(sightings, categories)
        if previous is None:
            seen = "; ".join(s.phrase for s in sightings)
            delta = (f"I am standing in a room with a textured floor. I see {seen}." if seen
                     else "I am standing in a room facing a wall; no furniture is in view.")
            out.append({"action": None, "delta": delta, "q_related": q_related, "raw": f"{delta} {q_related}"})
        else:
            action = action_between(previous, frame)
            new = [s.phrase for s in sightings if s.label not in previous_labels]
            delta = (f"Newly visible: {'; '.join(new)}." if new else "No new objects came into view.")
            out.append({"action": action, "delta": delta, "q_related": q_related,
                        "raw": f"1. {action}\n2. {delta}\n3. {q_related}"})
        previous, previous_labels = frame, {s.label for s in sightings}
    return out
