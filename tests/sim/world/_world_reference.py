"""Independent ground-truth recomputation for the synthetic-world tests.

Written separately from ``embodied_r.sim.world`` on purpose: distances come from 5 cm point grids (as
VSI-Bench computes them) instead of exact box geometry, and angles from arccos plus a cross-product
sign (VSI-Bench's formula) instead of atan2, so a bug in the library cannot be mirrored here.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def box_points(entry_box: dict, step: float = 0.05) -> np.ndarray:
    """Points on a grid over the whole solid box (surface included) from a meta_info box dict."""
    axes = np.asarray(entry_box["normalizedAxes"], float).reshape(3, 3)
    lengths = np.asarray(entry_box["axesLengths"], float)
    grids = [np.linspace(-length / 2, length / 2, max(2, int(math.ceil(length / step)) + 1)) for length in lengths]
    local = np.stack(np.meshgrid(*grids, indexing="ij"), axis=-1).reshape(-1, 3)
    shell = np.any(np.isclose(np.abs(local), lengths / 2), axis=1)  # outer surface is enough for distances
    return np.asarray(entry_box["centroid"], float) + local[shell] @ axes


def sampled_distance(boxes_a: list[dict], boxes_b: list[dict]) -> float:
    best = math.inf
    for a in boxes_a:
        pa = box_points(a)
        for b in boxes_b:
            pb = box_points(b)
            d = np.sqrt(((pa[:, None, :] - pb[None, :, :]) ** 2).sum(-1)).min()
            best = min(best, float(d))
    return best


def vsi_angle(forward: np.ndarray, target: np.ndarray) -> float:
    """VSI-Bench: theta = arccos(f.q / |f||q|), replaced by 360 - theta when cross_z(f, q) < 0."""
    cos = float(np.dot(forward, target) / (np.linalg.norm(forward) * np.linalg.norm(target)))
    theta = math.degrees(math.acos(max(-1.0, min(1.0, cos))))
    if forward[0] * target[1] - forward[1] * target[0] < 0:
        theta = 360.0 - theta
    return theta % 360.0


def quadrant(theta: float) -> str:
    return ["front-left", "back-left", "back-right", "front-right"][int(theta // 90) % 4]


def lr_back(theta: float) -> str:
    if theta < 135:
        return "left"
    if theta < 225:
        return "back"
    return "right"


def option_text(qa: dict) -> str:
    letter = qa["answer"]
    for option in qa["options"]:
        if option.startswith(f"{letter}. "):
            return option[3:]
    raise AssertionError(f"{qa['id']}: answer {letter} not among options {qa['options']}")


def check_static_question(qa: dict, entry: dict) -> None:
    """Assert ``qa``'s answer from the scene's meta_info entry alone (raises AssertionError)."""
    bbox = entry["object_bbox"]
    cats = qa["meta"]["categories"]
    task = qa["task"]
    if task == "object_counting":
        assert qa["answer"] == len(bbox[cats[0]]) >= 2
    elif task == "object_size_estimation":
        assert qa["answer"] == round(100 * max(bbox[cats[0]][0]["axesLengths"]))
    elif task == "room_size_estimation":
        assert qa["answer"] == round(entry["room_size"], 1)
    elif task == "object_abs_distance":
        d = sampled_distance(bbox[cats[0]], bbox[cats[1]])
        assert abs(d - qa["answer"]) <= 0.05 + 0.03, (qa["id"], d, qa["answer"])  # rounding + 5 cm grid
    elif task == "object_rel_distance":
        primary, choices = cats[0], cats[1:]
        dists = {c: sampled_distance(bbox[primary], bbox[c]) for c in choices}
        assert option_text(qa) == min(dists, key=dists.get), (qa["id"], dists)
    elif task.startswith("object_rel_direction"):
        p, o, q = (np.asarray(bbox[c][0]["centroid"], float)[:2] for c in cats)
        theta = vsi_angle(o - p, q - p)
        expected = quadrant(theta) if task.endswith("hard") else lr_back(theta)
        assert option_text(qa) == expected, (qa["id"], theta)
    elif task == "route_planning":
        pts = [np.asarray(bbox[c][0]["centroid"], float)[:2] for c in cats]
        turns = []
        for a, b, c in zip(pts, pts[1:], pts[2:]):
            theta = vsi_angle(b - a, c - b)
            signed = theta if theta <= 180 else theta - 360
            turns.append("Turn Back" if abs(signed) > 135 else ("Turn Left" if signed > 0 else "Turn Right"))
            assert abs(signed) > 45
        assert option_text(qa) == ", ".join(turns)
    else:
        raise AssertionError(f"no reference check for task {task}")


META_DIR = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "vsibench" / "meta_info"


def real_meta_dir() -> Path:
    import pytest

    if not META_DIR.is_dir():
        pytest.skip(f"real VSI-Bench meta_info not found at {META_DIR}")
    return META_DIR
