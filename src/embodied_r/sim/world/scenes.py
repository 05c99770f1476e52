"""Scenes: a floor polygon, walls and furniture boxes, in VSI-Bench's ``meta_info`` schema.

A ``Scene`` is what the renderer draws and what the question generator reasons about. It converts to
and from one entry of a VSI-Bench meta_info file (``room_size``, ``room_center``, ``object_counts``,
``object_bbox{centroid, axesLengths, normalizedAxes, min, max}``), so real annotations and procedural
rooms go through the same code. Procedural sampling lives in ``layout.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embodied_r.core.geometry import Box, polygon_area
from embodied_r.sim.world.categories import color_for, find_category

REQUIRED_META_FIELDS = ("room_size", "object_counts", "object_bbox")
REQUIRED_BOX_FIELDS = {"centroid": 3, "axesLengths": 3, "normalizedAxes": 9}


class SceneError(ValueError):
    """A scene that cannot be built or used (bad meta_info entry, impossible layout); the message says
    which scene and field, and what to do."""


@dataclass
class SceneObject:
    category: str
    instance: int  # 0-based index within its category
    box: Box
    color_name: str
    rgba: tuple[float, float, float, float]
    shape: str = "box"

    @property
    def label(self) -> str:
        return f"{self.category}_{self.instance}"


@dataclass
class Scene:
    name: str
    polygon: list[tuple[float, float]]  # floor outline, counter-clockwise, at z = floor_z
    height: float
    objects: list[SceneObject]
    floor_z: float = 0.0
    room_size: float | None = None  # area in m^2; None -> polygon area
    style: int = 0  # picks floor/wall textures, so rooms look different
    dataset: str = "synthetic"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def area(self) -> float:
        return float(self.room_size) if self.room_size is not None else polygon_area(self.polygon)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for obj in self.objects:
            out[obj.category] = out.get(obj.category, 0) + 1
        return out

    def to_meta_info(self) -> dict[str, Any]:
        """This scene as one VSI-Bench meta_info entry (plus ``room_polygon``/``room_height``/``floor_z``
        so that a scenes.json can be rendered again)."""
        xs = [p[0] for p in self.polygon]
        ys = [p[1] for p in self.polygon]
        bbox: dict[str, list[dict[str, Any]]] = {}
        for obj in sorted(self.objects, key=lambda o: (o.category, o.instance)):
            lo, hi = obj.box.bounds()
            bbox.setdefault(obj.category, []).append({
                "centroid": [round(float(v), 4) for v in obj.box.centroid],
                "axesLengths": [round(float(v), 4) for v in obj.box.lengths],
                "normalizedAxes": [round(float(v), 6) for v in obj.box.axes.reshape(-1)],
                "min": [round(float(v), 4) for v in lo],
                "max": [round(float(v), 4) for v in hi],
            })
        return {
            "dataset": self.dataset,
            "video_path": f"videos/{self.name}.mp4",
            "room_size": round(self.area, 4),
            "room_center": [round((min(xs) + max(xs)) / 2, 4), round((min(ys) + max(ys)) / 2, 4),
                            round(self.floor_z + self.height / 2, 4)],
            "object_counts": dict(sorted(self.counts().items())),
            "object_bbox": bbox,
            "room_polygon": [[round(x, 4), round(y, 4)] for x, y in self.polygon],
            "room_height": round(self.height, 4),
            "floor_z": round(self.floor_z, 4),
            "style": self.style,
        }


# ---------------------------------------------------------------------------------------------------
# Reading meta_info entries (real VSI-Bench files or our own scenes.json)
# ---------------------------------------------------------------------------------------------------


def validate_meta_entry(name: str, entry: Any) -> None:
    """Raise SceneError naming the scene and field when a meta_info entry is malformed."""
    if not isinstance(entry, dict):
        raise SceneError(f"scene {name!r}: expected an object, got {type(entry).__name__}")
    missing = [f for f in REQUIRED_META_FIELDS if f not in entry]
    if missing:
        raise SceneError(f"scene {name!r}: missing field(s) {missing}; a VSI-Bench meta_info entry needs "
                         f"{list(REQUIRED_META_FIELDS)}")
    size = entry["room_size"]
    if not isinstance(size, (int, float)) or not math.isfinite(size) or size <= 0:
        raise SceneError(f"scene {name!r}: room_size must be a positive number, got {size!r}")
    bbox = entry["object_bbox"]
    if not isinstance(bbox, dict):
        raise SceneError(f"scene {name!r}: object_bbox must map category -> list of boxes")
    for category, boxes in bbox.items():
        if not isinstance(boxes, list) or not boxes:
            raise SceneError(f"scene {name!r}: object_bbox[{category!r}] must be a non-empty list")
        for i, box in enumerate(boxes):
            for key, size_needed in REQUIRED_BOX_FIELDS.items():
                value = box.get(key) if isinstance(box, dict) else None
                if not isinstance(value, list) or len(value) != size_needed:
                    raise SceneError(f"scene {name!r}: object_bbox[{category!r}][{i}].{key} must be a list "
                                     f"of {size_needed} numbers, got {value!r}")
            if any(v <= 0 for v in box["axesLengths"]):
                raise SceneError(f"scene {name!r}: object_bbox[{category!r}][{i}].axesLengths must be positive")
    if not isinstance(entry["object_counts"], dict):
        raise SceneError(f"scene {name!r}: object_counts must map category -> count")


def inconsistent_categories(entry: dict[str, Any]) -> list[str]:
    """Categories whose ``object_counts`` disagrees with the number of boxes. Real VSI-Bench files have
    a few (e.g. ScanNet printers annotated twice); questions must not use them, since either number
    could be the truth."""
    counts = entry["object_counts"]
    return sorted(c for c, boxes in entry["object_bbox"].items() if counts.get(c) != len(boxes))


def meta_boxes(entry: dict[str, Any]) -> dict[str, list[Box]]:
    """Boxes per category of a (validated) meta_info entry."""
    out: dict[str, list[Box]] = {}
    for category, boxes in entry["object_bbox"].items():
        out[category] = [
            Box(np.asarray(b["centroid"], float), np.asarray(b["axesLengths"], float),
                _orthonormal_rows(np.asarray(b["normalizedAxes"], float).reshape(3, 3)))
            for b in boxes
        ]
    return out


def _orthonormal_rows(axes: np.ndarray) -> np.ndarray:
    # Annotations are rounded; re-orthonormalise so corners and distances stay consistent.
    u, _, vt = np.linalg.svd(axes)
    return u @ vt


def scene_from_meta(name: str, entry: dict[str, Any], margin: float = 0.4) -> Scene:
    """Rebuild a renderable scene from a meta_info entry.

    Our own scenes.json entries carry ``room_polygon``; real VSI-Bench entries do not, so their room is
    a rectangle around all objects (``margin`` metres of clearance), grown about its centre to the
    annotated ``room_size`` when that is larger. The floor is the lowest box bottom.
    """
    validate_meta_entry(name, entry)
    boxes = meta_boxes(entry)
    objects = []
    for category, cat_boxes in sorted(boxes.items()):
        color_name, rgba = color_for(category)
        known = find_category(category)
        shape = known.shape if known is not None else "box"
        for i, box in enumerate(cat_boxes):
            objects.append(SceneObject(category, i, box, color_name, rgba, shape))
    if "room_polygon" in entry:
        polygon = [(float(x), float(y)) for x, y in entry["room_polygon"]]
        return Scene(name, polygon, float(entry["room_height"]), objects, float(entry.get("floor_z", 0.0)),
                     room_size=float(entry["room_size"]), style=int(entry.get("style", 0)),
                     dataset=str(entry.get("dataset", "synthetic")))
    corners = np.concatenate([o.box.corners() for o in objects])
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    floor_z = float(lo[2])
    cx, cy = (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2
    half_w, half_d = (hi[0] - lo[0]) / 2 + margin, (hi[1] - lo[1]) / 2 + margin
    grow = math.sqrt(max(1.0, float(entry["room_size"]) / (4 * half_w * half_d)))
    half_w, half_d = half_w * grow, half_d * grow
    polygon = [(cx - half_w, cy - half_d), (cx + half_w, cy - half_d), (cx + half_w, cy + half_d),
               (cx - half_w, cy + half_d)]
    height = max(2.5, float(hi[2] - floor_z) + 0.2)
    style = sum(name.encode("utf-8")) % 4
    return Scene(name, polygon, height, objects, floor_z, room_size=float(entry["room_size"]), style=style,
                 dataset=str(entry.get("dataset", "vsibench")))
