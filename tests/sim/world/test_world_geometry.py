from __future__ import annotations

import math

import numpy as np
import pytest
from _world_reference import sampled_distance, vsi_angle

from embodied_r.core.geometry import Box, box_distance, boxes_overlap, ccw_angle_deg, polygon_area


def _meta_box(box: Box) -> dict:
    return {"centroid": box.centroid.tolist(), "axesLengths": box.lengths.tolist(),
            "normalizedAxes": box.axes.reshape(-1).tolist()}


def _random_box(rng: np.random.Generator) -> Box:
    # arbitrary 3D orientation, like real annotations
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Box(rng.uniform(-1.5, 1.5, 3), rng.uniform(0.2, 1.2, 3), q.T)


def test_exact_box_distance_matches_point_sampling() -> None:
    rng = np.random.default_rng(0)
    for _ in range(8):
        a, b = _random_box(rng), _random_box(rng)
        exact = box_distance(a, b)
        sampled = sampled_distance([_meta_box(a)], [_meta_box(b)])
        # a 5 cm grid over-estimates by at most half a cell diagonal in each box
        assert exact <= sampled + 1e-9
        assert sampled - exact < 0.06, (exact, sampled)


def test_overlap_and_touching_boxes() -> None:
    a = Box.upright((0, 0), 0, 1, 1, 1, 0)
    assert boxes_overlap(a, Box.upright((0.9, 0), 0, 1, 1, 1, 0.3))
    far = Box.upright((3, 0), 0, 1, 1, 1, 0)
    assert not boxes_overlap(a, far)
    assert box_distance(a, far) == pytest.approx(2.0)


def test_angle_convention_counter_clockwise_is_left() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        f, t = rng.normal(size=2), rng.normal(size=2)
        assert ccw_angle_deg(f, t) == pytest.approx(vsi_angle(f, t), abs=1e-6)
    assert 0 < ccw_angle_deg(np.array([1.0, 0]), np.array([0, 1.0])) < 180  # +y is left when facing +x


def test_polygon_area_l_shape() -> None:
    assert polygon_area([(0, 0), (4, 0), (4, 2), (2, 2), (2, 3), (0, 3)]) == pytest.approx(10.0)
    assert math.isclose(polygon_area([(0, 0), (2, 0), (2, 2), (0, 2)]), 4.0)
