"""Questions that need the rendered video's ground truth (camera poses and per-frame visibility).

- ``obj_appearance_order`` (VSI-Bench): first appearance of a category is the first frame where one
  of its instances covers at least ``APPEAR_FRACTION`` of the image (the paper's pixel-threshold rule;
  the value is our choice); four categories whose first appearances are
  more than 1 s apart.
- ``egocentric_direction`` (UrbanVideo-Bench "Landmark Position" spirit): the quadrant of a seen
  object relative to the camera at the last frame, with VSI-Bench's ambiguity margins.
- ``last_action`` (UrbanVideo-Bench "Action Generation" spirit): the isolated motion that ends the
  video, from the action vocabulary the perception stage uses.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from embodied_r.core.records import QARecord
from embodied_r.sim.world.options import letter_options
from embodied_r.sim.world.questions import HARD_BINS, StaticQuestionMaker, direction_label

APPEAR_FRACTION = 0.005  # 0.5 % of the frame
VISIBLE_FRACTION = 0.002  # an object counts as seen (and the oracle mentions it) from 0.2 % of the image
APPEARANCE_GAP_S = 1.0
LAST_ACTIONS = ("Move forward", "Move backward", "Rotate left", "Rotate right")


def first_appearances(poses: dict[str, Any], fraction: float = APPEAR_FRACTION) -> dict[str, float]:
    """Category -> first timestamp at which any of its instances covers ``fraction`` of the frame."""
    threshold = fraction * poses["width"] * poses["height"]
    first: dict[str, float] = {}
    for frame in poses["frames"]:
        for label, pixels in frame["visible"].items():
            category = label.rsplit("_", 1)[0]
            if pixels >= threshold and category not in first:
                first[category] = float(frame["t"])
    return first


def seen_instances(poses: dict[str, Any], fraction: float = VISIBLE_FRACTION) -> dict[str, int]:
    """Category -> number of its instances visible (>= ``fraction`` of the frame) in some frame."""
    threshold = fraction * poses["width"] * poses["height"]
    labels = {label for f in poses["frames"] for label, px in f["visible"].items() if px >= threshold}
    out: dict[str, int] = {}
    for label in labels:
        category = label.rsplit("_", 1)[0]
        out[category] = out.get(category, 0) + 1
    return out


def appearance_order(maker: StaticQuestionMaker, poses: dict[str, Any]) -> list[QARecord]:
    first = {c: t for c, t in first_appearances(poses).items() if c in maker.f.usable}
    out: list[QARecord] = []
    cats = sorted(first)
    combos = [combo for combo in itertools.combinations(cats, 4)
              if all(abs(first[a] - first[b]) > APPEARANCE_GAP_S for a, b in itertools.combinations(combo, 2))]
    for combo in maker.shuffled(combos)[: maker.per_task]:
        order = sorted(combo, key=first.__getitem__)
        correct = ", ".join(order)
        perms = [", ".join(p) for p in itertools.permutations(order) if ", ".join(p) != correct]
        distractors = [perms[i] for i in maker.rng.choice(len(perms), size=3, replace=False)]
        options, answer = letter_options("obj_appearance_order", correct, distractors, maker.balancer)
        listed = maker.shuffled(list(combo))
        question = (f"What will be the first-time appearance order of the following categories in the video: "
                    f"{', '.join(listed)}?")
        out.append(maker.record("obj_appearance_order", len(out), question, answer, options, listed,
                                first_seen={c: first[c] for c in order}))
    return out


def egocentric_direction(maker: StaticQuestionMaker, poses: dict[str, Any]) -> list[QARecord]:
    last = poses["frames"][-1]
    origin = np.asarray(last["position"][:2], float)
    yaw = math.radians(float(last["yaw"]))
    forward = np.array([math.cos(yaw), math.sin(yaw)])
    names = [n for _, _, n in HARD_BINS]
    out: list[QARecord] = []
    for category in maker.shuffled(maker.f.unique()):
        box = maker.f.boxes[category][0]
        if np.linalg.norm(box.centroid[:2] - origin) < 0.5:
            continue
        label = direction_label(forward, origin, box, HARD_BINS)
        if label is None:
            continue
        options, answer = letter_options("egocentric_direction", label, [n for n in names if n != label],
                                         maker.balancer)
        question = (f"At the end of the video, where is the {category} relative to me: front-left, front-right, "
                    f"back-left, or back-right?")
        out.append(maker.record("egocentric_direction", len(out), question, answer, options, [category],
                                direction=label))
        if len(out) >= maker.per_task:
            break
    return out


def last_action(maker: StaticQuestionMaker, poses: dict[str, Any]) -> list[QARecord]:
    action = poses["frames"][-1]["motion"]
    if action not in LAST_ACTIONS:
        return []
    options, answer = letter_options("last_action", action, [a for a in LAST_ACTIONS if a != action], maker.balancer)
    question = "Which action did I take just before reaching my current position at the end of the video?"
    return [maker.record("last_action", 0, question, answer, options, [], action=action)]


def video_questions(maker: StaticQuestionMaker, poses: dict[str, Any]) -> list[QARecord]:
    return appearance_order(maker, poses) + egocentric_direction(maker, poses) + last_action(maker, poses)
