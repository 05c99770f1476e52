"""VSI-Bench questions from a scene's meta_info entry alone (no video needed).

Mirrors VSI-Bench's generation rules (Yang et al., "Thinking in Space", 2024): which categories may be
asked (unique ones for direction/distance/size, count >= 2 for counting), its thresholds and angle bins,
and its rejection of ambiguous cases, so every answer here is unambiguous by construction. Two deliberate
differences, both more exact: distances are exact box-to-box distances (VSI samples 5 cm grids), and
the angle-bin margin is symmetric (VLM-3R's generator applies it on one side only). Route plans are
made programmatically (VSI's were human-written) with the turn thresholds of ``routes.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_r.core.geometry import Box, box_distance, ccw_angle_deg
from embodied_r.core.records import QARecord
from embodied_r.core.spatial_rules import HARD_BINS, MEDIUM_BINS, angle_bin
from embodied_r.sim.world.options import LetterBalancer, letter_options
from embodied_r.sim.world.scenes import inconsistent_categories, meta_boxes, validate_meta_entry

DIRECTION_MARGIN_DEG = 10.0

TEMPLATES = {
    "object_counting": "How many {category}(s) are in this room?",
    "object_abs_distance": "Measuring from the closest point of each object, what is the direct distance between "
                           "the {a} and the {b} (in meters)?",
    "object_size_estimation": "What is the length of the longest dimension (length, width, or height) of the "
                              "{category}, measured in centimeters?",
    "room_size_estimation": "What is the size of this room (in square meters)? If multiple rooms are shown, "
                            "estimate the size of the combined space.",
    "object_rel_distance": "Measuring from the closest point of each object, which of these objects ({choices}) is "
                           "the closest to the {category}?",
    "object_rel_direction_easy": "If I am standing by the {p} and facing the {o}, is the {q} to the left or the right "
                                 "of the {o}?",
    "object_rel_direction_medium": "If I am standing by the {p} and facing the {o}, is the {q} to my left, right, or "
                                   "back? An object is to my back if I would have to turn at least 135 degrees in "
                                   "order to face it.",
    "object_rel_direction_hard": "If I am standing by the {p} and facing the {o}, is the {q} to my front-left, "
                                 "front-right, back-left, or back-right? The directions refer to the quadrants of a "
                                 "Cartesian plane (if I am standing at the origin and facing along the positive "
                                 "y-axis).",
}


@dataclass
class SceneFacts:
    """A validated meta_info entry with the category sets that questions may use."""

    name: str
    entry: dict[str, Any]
    boxes: dict[str, list[Box]]
    usable: set[str]  # consistent annotation (and, with a video, seen in it)
    fully_seen: set[str] = field(default_factory=set)  # every instance seen (counting needs it)

    @property
    def area(self) -> float:
        return float(self.entry["room_size"])

    def unique(self) -> list[str]:
        return sorted(c for c in self.usable if len(self.boxes[c]) == 1)


def scene_facts(name: str, entry: dict[str, Any], seen: dict[str, int] | None = None) -> SceneFacts:
    """``seen`` maps category -> number of instances visible in the video (None: no video, all usable)."""
    validate_meta_entry(name, entry)
    boxes = meta_boxes(entry)
    usable = set(boxes) - set(inconsistent_categories(entry))
    if seen is None:
        return SceneFacts(name, entry, boxes, usable, set(usable))
    fully = {c for c in usable if seen.get(c, 0) >= len(boxes[c])}
    return SceneFacts(name, entry, boxes, {c for c in usable if seen.get(c, 0) > 0}, fully)


def category_distance(facts: SceneFacts, a: str, b: str) -> float:
    """Minimum over instance pairs (VSI-Bench's category-to-category distance)."""
    return min(box_distance(x, y) for x in facts.boxes[a] for y in facts.boxes[b])


def direction_label(forward_xy: np.ndarray, origin_xy: np.ndarray, target: Box,
                    bins: tuple[tuple[float, float, str], ...]) -> str | None:
    """The bin of ``target`` seen from ``origin`` facing ``forward``; None when ambiguous (centroid
    within the margin of a bin edge, or more than 2 of its 8 corners in another bin)."""
    theta = ccw_angle_deg(forward_xy, target.centroid[:2] - origin_xy)
    edges = sorted({lo for lo, _, _ in bins} | {hi for _, hi, _ in bins})
    if min(abs(theta - e) for e in edges) < DIRECTION_MARGIN_DEG:
        return None
    label = angle_bin(theta, bins)
    corner_labels = [angle_bin(ccw_angle_deg(forward_xy, c[:2] - origin_xy), bins) for c in target.corners()]
    if sum(1 for c in corner_labels if c != label) > 2:
        return None
    return label


# ---------------------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------------------


class StaticQuestionMaker:
    """Makes the seven VSI-Bench tasks that need only the scene annotation."""

    def __init__(self, facts: SceneFacts, rng: np.random.Generator, balancer: LetterBalancer, video: str,
                 source: str, per_task: int = 3) -> None:
        self.f, self.rng, self.balancer = facts, rng, balancer
        self.video, self.source, self.per_task = video, source, per_task

    def record(self, task: str, index: int, question: str, answer: str | float, options: list[str] | None,
               categories: list[str], **detail: Any) -> QARecord:
        return QARecord(
            id=f"{self.f.name}-{task}-{index}", source=self.source, task=task, video=self.video,
            question=question, options=options, answer=answer,
            answer_type="choice" if options else "number",
            meta={"scene": self.f.name, "categories": categories, **detail},
        )

    def shuffled(self, items: list[Any]) -> list[Any]:
        return [items[i] for i in self.rng.permutation(len(items))]

    def all(self) -> list[QARecord]:
        out: list[QARecord] = []
        for make in (self.counting, self.abs_distance, self.size, self.room_size, self.rel_distance,
                     self.rel_direction, self.route_plan):
            out.extend(make())
        return out

    def counting(self) -> list[QARecord]:
        cats = self.shuffled(sorted(c for c in self.f.fully_seen if len(self.f.boxes[c]) >= 2))
        return [self.record("object_counting", i, TEMPLATES["object_counting"].format(category=c),
                            len(self.f.boxes[c]), None, [c]) for i, c in enumerate(cats[: self.per_task])]

    def abs_distance(self) -> list[QARecord]:
        out = []
        for a, b in self.shuffled(list(itertools.combinations(self.f.unique(), 2))):
            gt = round(category_distance(self.f, a, b), 1)
            if gt < 0.2:  # too close to measure meaningfully (VSI rule)
                continue
            a, b = self.shuffled([a, b])
            out.append(self.record("object_abs_distance", len(out), TEMPLATES["object_abs_distance"].format(a=a, b=b),
                                   gt, None, [a, b]))
            if len(out) >= self.per_task:
                break
        return out

    def size(self) -> list[QARecord]:
        cats = self.shuffled(self.f.unique())[: self.per_task]
        return [self.record("object_size_estimation", i, TEMPLATES["object_size_estimation"].format(category=c),
                            int(round(100 * float(self.f.boxes[c][0].lengths.max()))), None, [c])
                for i, c in enumerate(cats)]

    def room_size(self) -> list[QARecord]:
        return [self.record("room_size_estimation", 0, TEMPLATES["room_size_estimation"], round(self.f.area, 1),
                            None, [])]

    def rel_distance(self) -> list[QARecord]:
        out = []
        threshold = 0.30 if self.f.area > 40 else 0.15  # VSI-Bench: 0.30 m gap in rooms over 40 m^2, else 0.15 m
        others_all = sorted(self.f.usable)
        for primary in self.shuffled(self.f.unique()):
            others = [c for c in others_all if c != primary]
            if len(others) < 4:
                continue
            choices = [others[i] for i in self.rng.choice(len(others), size=4, replace=False)]
            dists = {c: category_distance(self.f, primary, c) for c in choices}
            values = sorted(dists.values())
            if values[0] < 0.15 or any(b - a <= threshold for a, b in zip(values, values[1:])):
                continue
            nearest = min(dists, key=dists.__getitem__)
            options, answer = letter_options("object_rel_distance", nearest, [c for c in choices if c != nearest],
                                             self.balancer)
            question = TEMPLATES["object_rel_distance"].format(choices=", ".join(choices), category=primary)
            out.append(self.record("object_rel_distance", len(out), question, answer, options, [primary, *choices],
                                   distances={c: round(d, 3) for c, d in dists.items()}))
            if len(out) >= self.per_task:
                break
        return out

    def rel_direction(self) -> list[QARecord]:
        out: dict[str, list[QARecord]] = {"easy": [], "medium": [], "hard": []}
        triples = self.shuffled(list(itertools.combinations(self.f.unique(), 3)))
        for a, b, c in triples:
            boxes = {k: self.f.boxes[k][0] for k in (a, b, c)}
            pair = [box_distance(boxes[x], boxes[y]) for x, y in ((a, b), (a, c), (b, c))]
            if min(pair) < 0.3 or max(pair) > 5.0:
                continue
            for p, o, q in self.shuffled([(a, b, c), (a, c, b), (b, a, c)]):
                origin = boxes[p].centroid[:2]
                forward = boxes[o].centroid[:2] - origin
                level = ("easy", "medium", "hard")[int(self.rng.integers(3))]
                if len(out[level]) >= self.per_task:
                    continue
                bins = HARD_BINS if level == "hard" else MEDIUM_BINS
                label = direction_label(forward, origin, boxes[q], bins)
                if label is None or (level == "easy" and label == "back"):
                    continue
                names = {"easy": ["left", "right"], "medium": ["left", "right", "back"],
                         "hard": [n for _, _, n in HARD_BINS]}[level]
                task = f"object_rel_direction_{level}"
                options, answer = letter_options(task, label, [n for n in names if n != label], self.balancer)
                question = TEMPLATES[task].format(p=p, o=o, q=q)
                out[level].append(self.record(task, len(out[level]), question, answer, options, [p, o, q],
                                              direction=label))
        return out["easy"] + out["medium"] + out["hard"]

    def route_plan(self) -> list[QARecord]:
        from embodied_r.sim.world.routes import make_route_questions

        return make_route_questions(self)
