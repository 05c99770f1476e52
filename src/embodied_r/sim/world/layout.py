"""Procedural rooms: a rectangle or L-shaped floor and non-overlapping furniture.

Room areas follow the VSI-Bench annotations (median 17.5 m^2, 5th-95th percentile 5.6-45.7 m^2),
clipped to what an egocentric walk can cover. Furniture is drawn from the
category vocabulary weighted by how many VSI-Bench scenes contain it; a few categories get several
instances (counting questions need count >= 2) and most stay unique (direction and distance questions
use unique categories only). Every object is placed by rejection sampling with a 3D separating-axis
test, so nothing interpenetrates; a door keeps the floor in front of it clear.

``OOD_LAYOUT`` is the out-of-distribution preset (``synth world --ood``): larger rooms, more categories
per room, and most of the category draw's mass on ``OOD_CATEGORIES``, which the default config never
draws. The default config's random draws are exactly those made before the preset existed, so ID
worlds do not change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from embodied_r.core.geometry import Box, boxes_overlap, points_in_polygon, polygon_area
from embodied_r.sim.world.categories import (
    ALL_CATEGORIES,
    CATEGORIES,
    OOD_CATEGORIES,
    SIZE_JITTER,
    Category,
    get_category,
)
from embodied_r.sim.world.scenes import Scene, SceneError, SceneObject

CLEARANCE = 0.08  # minimum gap between furniture (m)


@dataclass(frozen=True)
class LayoutConfig:
    min_area: float = 9.0
    max_area: float = 40.0
    min_categories: int = 5
    max_categories: int = 9
    l_shape_prob: float = 0.3
    multi_instance_prob: float = 0.35
    categories: tuple[str, ...] | None = None  # restrict the vocabulary (validated)
    # Room area: log-normal around area_median (m^2) with this log-sigma, clipped to [min_area, max_area].
    # The defaults are the VSI-Bench fit; they must stay as they are for ID worlds to stay the same.
    area_median: float = 17.5
    area_sigma: float = 0.58
    # Probability mass of OOD categories in the category draw. 0 (default): the ID vocabulary only, drawn
    # exactly as before OOD categories existed. 0 < s < 1: ID and OOD names together, the OOD ones
    # sharing mass s (each table by its own weights). 1: OOD categories only.
    ood_share: float = 0.0

    def validate(self) -> None:
        if not (0 < self.min_area <= self.max_area):
            raise SceneError(f"room area range must satisfy 0 < min_area <= max_area, got "
                             f"{self.min_area}..{self.max_area}")
        if self.min_area < 6.0:
            raise SceneError(f"min_area {self.min_area} m^2 is too small to walk a camera through; use >= 6")
        if not (1 <= self.min_categories <= self.max_categories):
            raise SceneError(f"need 1 <= min_categories <= max_categories, got "
                             f"{self.min_categories}..{self.max_categories}")
        for name in self.categories or ():
            get_category(name)
        if not (self.area_median > 0 and self.area_sigma >= 0):
            raise SceneError(f"need area_median > 0 and area_sigma >= 0, got {self.area_median} and "
                             f"{self.area_sigma}")
        if not (0.0 <= self.ood_share <= 1.0):
            raise SceneError(f"ood_share is a probability mass in [0, 1], got {self.ood_share}")
        id_names, ood_names = _pools(self)
        named_ood = [n for n in self.categories or () if n in OOD_CATEGORIES]
        if self.ood_share == 0 and named_ood:
            raise SceneError(f"categories {', '.join(named_ood)} are out-of-distribution ones; set ood_share > 0 "
                             f"to draw them")
        if self.ood_share > 0 and not ood_names:
            raise SceneError(f"ood_share {self.ood_share} needs OOD categories in the vocabulary; known OOD "
                             f"categories: {', '.join(sorted(OOD_CATEGORIES))}")
        if self.ood_share < 1 and not id_names:
            raise SceneError(f"ood_share {self.ood_share} < 1 needs some ID categories in the vocabulary "
                             f"(or use ood_share 1 for OOD categories only)")
        available = len(id_names) * (self.ood_share < 1) + len(ood_names) * (self.ood_share > 0)
        if available < self.min_categories:
            raise SceneError(f"{available} categories available (categories, ood_share) but min_categories is "
                             f"{self.min_categories}; allow more categories or lower min_categories")


def _pools(config: LayoutConfig) -> tuple[list[str], list[str]]:
    """(ID names, OOD names) of the vocabulary, in table order. Without ``categories`` and with
    ood_share 0 the ID pool is the whole ID table, in the order the default draw has always used."""
    if config.categories:
        names = list(config.categories)
    elif config.ood_share > 0:
        names = list(ALL_CATEGORIES)
    else:
        names = list(CATEGORIES)
    return [n for n in names if n in CATEGORIES], [n for n in names if n in OOD_CATEGORIES]


# The out-of-distribution preset: rooms of 30-70 m^2 (ID: mostly 9-40), 7-11 categories (ID: 5-9) with
# about two thirds of the draw's mass on OOD categories, so a typical room holds several of them.
OOD_LAYOUT = LayoutConfig(min_area=30.0, max_area=70.0, area_median=45.0, area_sigma=0.3,
                          min_categories=7, max_categories=11, ood_share=0.65)


def sample_room(rng: np.random.Generator, config: LayoutConfig) -> tuple[list[tuple[float, float]], float]:
    """Floor polygon (counter-clockwise, origin at a corner) and ceiling height."""
    # default: log-normal fitted to the VSI-Bench median (17.5) and 95th percentile (45.7)
    area = float(np.clip(rng.lognormal(math.log(config.area_median), config.area_sigma), config.min_area,
                         config.max_area))
    aspect = float(rng.uniform(1.0, 1.7))
    width, depth = math.sqrt(area * aspect), math.sqrt(area / aspect)
    height = float(rng.uniform(2.5, 3.0))
    if rng.random() < config.l_shape_prob:
        # Cut a corner; grow the outer rectangle so the floor keeps roughly the drawn area.
        cut_w, cut_d = float(rng.uniform(0.3, 0.45)), float(rng.uniform(0.3, 0.45))
        scale = 1.0 / math.sqrt(1.0 - cut_w * cut_d)
        width, depth = width * scale, depth * scale
        cx, cy = width * (1 - cut_w), depth * (1 - cut_d)
        polygon = [(0.0, 0.0), (width, 0.0), (width, cy), (cx, cy), (cx, depth), (0.0, depth)]
    else:
        polygon = [(0.0, 0.0), (width, 0.0), (width, depth), (0.0, depth)]
    return [(round(x, 3), round(y, 3)) for x, y in polygon], height


def _draw_weights(config: LayoutConfig) -> tuple[list[str], np.ndarray]:
    """Names and their draw probabilities. With ood_share 0 this is the ID pool by its weights, computed
    exactly as before the OOD table existed (ID worlds depend on these draws bit for bit)."""
    id_names, ood_names = _pools(config)
    if config.ood_share == 0.0:
        weights = np.array([CATEGORIES[n].weight for n in id_names], dtype=float)
        return id_names, weights / weights.sum()
    parts: list[tuple[list[str], float]] = [(ood_names, config.ood_share)]
    if config.ood_share < 1.0:
        parts.insert(0, (id_names, 1.0 - config.ood_share))
    names, probs = [], []
    for pool, mass in parts:
        weights = np.array([ALL_CATEGORIES[n].weight for n in pool], dtype=float)
        names.extend(pool)
        probs.extend(mass * weights / weights.sum())
    p = np.array(probs)
    return names, p / p.sum()


def _sample_counts(rng: np.random.Generator, config: LayoutConfig) -> dict[str, int]:
    names, p = _draw_weights(config)
    k = int(rng.integers(config.min_categories, min(config.max_categories, len(names)) + 1))
    chosen = rng.choice(len(names), size=k, replace=False, p=p)
    counts = {}
    for idx in chosen:
        cat = ALL_CATEGORIES[names[idx]]
        multi = cat.max_count >= 2 and rng.random() < config.multi_instance_prob
        counts[cat.name] = int(rng.integers(2, cat.max_count + 1)) if multi else 1
    return counts


def _jittered(rng: np.random.Generator, cat: Category) -> tuple[float, float, float]:
    j = lambda v: float(v * rng.uniform(1 - SIZE_JITTER, 1 + SIZE_JITTER))  # noqa: E731
    return j(cat.length), j(cat.width), j(cat.height)


def _walls(polygon: list[tuple[float, float]]) -> list[tuple[np.ndarray, np.ndarray]]:
    pts = [np.asarray(p, float) for p in polygon]
    return [(pts[i], pts[(i + 1) % len(pts)]) for i in range(len(pts))]


def _candidate(rng: np.random.Generator, cat: Category, polygon: list[tuple[float, float]],
               height: float) -> Box | None:
    """A random pose for one object of ``cat``, or None when the drawn wall is too short to hold it."""
    length, width, obj_h = _jittered(rng, cat)
    if cat.placement == "floor":
        xs, ys = [p[0] for p in polygon], [p[1] for p in polygon]
        center = (float(rng.uniform(min(xs), max(xs))), float(rng.uniform(min(ys), max(ys))))
        if cat.shape == "table":  # tables mostly square to the room, chairs anywhere
            yaw = float(rng.integers(0, 4)) * math.pi / 2 + float(rng.uniform(-0.15, 0.15))
        else:
            yaw = float(rng.uniform(0, 2 * math.pi))
        return Box.upright(center, 0.0, length, width, obj_h, yaw)
    walls = _walls(polygon)
    lengths = np.array([np.linalg.norm(b - a) for a, b in walls])
    a, b = walls[int(rng.choice(len(walls), p=lengths / lengths.sum()))]
    along = (b - a) / np.linalg.norm(b - a)
    inward = np.array([-along[1], along[0]])  # polygon is counter-clockwise: left of each edge is inside
    wall_len = float(np.linalg.norm(b - a))
    if wall_len < length + 0.2:
        length = wall_len - 0.2
        if length < 0.3:  # a wall stub (the short side of an L-room's notch): nothing fits, draw again
            return None
    # Written as start + uniform(0, slack): when the object fills the wall the slack is 0, and the bounds
    # written the other way round can differ by rounding with high < low, which numpy rejects.
    slack = max(0.0, wall_len - length - 0.2)
    offset = length / 2 + 0.1 + float(rng.uniform(0.0, slack))
    gap = 0.01 if cat.placement == "mounted" else 0.03
    center = a + along * offset + inward * (width / 2 + gap)
    elevation = min(cat.elevation, max(0.0, height - obj_h - 0.05))
    yaw = math.atan2(along[1], along[0])
    return Box.upright((float(center[0]), float(center[1])), elevation, length, width, obj_h, yaw)


def _inside(box: Box, polygon: list[tuple[float, float]]) -> bool:
    corners = box.corners()[:, :2]
    return bool(points_in_polygon(corners, polygon).all())


def _door_keepout(box: Box) -> Box:
    # The floor in front of a door stays clear (0.8 m deep), so rooms look plausible and walkable.
    inward = box.axes[1]
    center = box.centroid[:2] + inward[:2] * (box.lengths[1] / 2 + 0.4)
    return Box.upright((float(center[0]), float(center[1])), 0.0, float(box.lengths[0]), 0.8, 2.0,
                       math.atan2(box.axes[0][1], box.axes[0][0]))


def sample_scene(name: str, rng: np.random.Generator, config: LayoutConfig | None = None,
                 max_attempts: int = 20, tries_per_object: int = 60) -> Scene:
    """Sample a room with furniture. Objects that cannot be placed are dropped (the counts in the
    scene are what was placed); a room left with fewer than 3 unique categories is re-drawn, and after
    ``max_attempts`` draws a SceneError says the configuration is impossible."""
    config = config or LayoutConfig()
    config.validate()
    for _ in range(max_attempts):
        polygon, height = sample_room(rng, config)
        wanted = _sample_counts(rng, config)
        placed: list[SceneObject] = []
        keepouts: list[Box] = []
        # Big wall objects first: they are the hardest to fit.
        order = sorted(wanted, key=lambda c: (ALL_CATEGORIES[c].placement == "floor", -ALL_CATEGORIES[c].length))
        for category in order:
            cat = ALL_CATEGORIES[category]
            for _instance in range(wanted[category]):
                for _try in range(tries_per_object):
                    box = _candidate(rng, cat, polygon, height)
                    if box is None or not _inside(box, polygon):
                        continue
                    if any(boxes_overlap(box, o.box, CLEARANCE / 2) for o in placed):
                        continue
                    if cat.placement != "mounted" and any(boxes_overlap(box, k) for k in keepouts):
                        continue
                    if category == "door" and any(
                        boxes_overlap(_door_keepout(box), o.box) for o in placed
                        if ALL_CATEGORIES[o.category].placement != "mounted"
                    ):
                        continue
                    instance = sum(1 for o in placed if o.category == category)
                    placed.append(SceneObject(category, instance, box, cat.color_name, cat.rgba, cat.shape))
                    if category == "door":
                        keepouts.append(_door_keepout(box))
                    break
        counts: dict[str, int] = {}
        for obj in placed:
            counts[obj.category] = counts.get(obj.category, 0) + 1
        if sum(1 for n in counts.values() if n == 1) >= 3 and len(counts) >= min(4, config.min_categories):
            return Scene(name, polygon, height, placed, 0.0, room_size=polygon_area(polygon),
                         style=int(rng.integers(0, 4)))
    raise SceneError(f"scene {name!r}: could not place at least 3 unique categories in {max_attempts} "
                     f"rooms; allow larger rooms (max_area) or fewer/smaller categories")
