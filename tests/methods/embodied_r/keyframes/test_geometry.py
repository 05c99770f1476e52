"""Polygon overlap (vs the official rasterised measure), degenerate homographies, the time-based
frame picker and the official resampling rule."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embodied_r.methods.embodied_r.keyframes.overlap import overlap_ratio
from embodied_r.methods.embodied_r.keyframes.sampling import (
    constrained_sampling,
    pick_nearest,
    select_indices,
    uniform_targets,
)


def rasterised(homography: np.ndarray, width: int, height: int) -> float:
    corners = np.float32([[0, 0], [width, 0], [width, height], [0, height]]).reshape(-1, 1, 2)
    quad = cv2.perspectiveTransform(corners, homography).reshape(-1, 2)
    canvas = np.zeros((height, width), np.uint8)
    cv2.fillPoly(canvas, [np.round(quad).astype(np.int32)], 1)
    return float(canvas.sum()) / (width * height)


def random_camera_motion(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A homography of a small rotation/zoom/shift/tilt about the image centre."""
    angle, zoom = rng.uniform(-0.3, 0.3), rng.uniform(0.7, 1.4)
    shift = rng.uniform(-0.8, 0.8, 2) * (width, height)
    centre = np.array([[1, 0, -width / 2], [0, 1, -height / 2], [0, 0, 1.0]])
    motion = np.array([[zoom * np.cos(angle), -zoom * np.sin(angle), shift[0]],
                       [zoom * np.sin(angle), zoom * np.cos(angle), shift[1]],
                       [rng.uniform(-3e-4, 3e-4), rng.uniform(-3e-4, 3e-4), 1.0]])
    return np.linalg.inv(centre) @ motion @ centre


def test_polygon_overlap_agrees_with_rasterising() -> None:
    rng = np.random.default_rng(0)
    width, height = 320, 240
    checked = 0
    for _ in range(200):
        homography = random_camera_motion(rng, width, height)
        exact = overlap_ratio(homography, width, height)
        if exact is None:
            continue
        checked += 1
        assert exact == pytest.approx(rasterised(homography, width, height), abs=0.02)
    assert checked > 150


def test_pure_translations_have_exact_overlaps() -> None:
    shift = np.eye(3)
    shift[0, 2], shift[1, 2] = 80.0, -60.0
    assert overlap_ratio(shift, 320, 240) == pytest.approx((240 / 320) * (180 / 240))
    shift[0, 2] = 400.0
    assert overlap_ratio(shift, 320, 240) == 0.0
    assert overlap_ratio(np.eye(3), 320, 240) == 1.0


@pytest.mark.parametrize("homography", [
    np.diag([-1.0, 1.0, 1.0]) @ np.array([[1, 0, -320], [0, 1, 0], [0, 0, 1.0]]),  # mirror flip
    np.array([[1, 0, 0], [0, 1, 0], [-0.01, 0, 1.0]]),  # a corner goes behind the camera
    np.diag([10.0, 10.0, 1.0]),  # exploding zoom
    np.diag([0.05, 0.05, 1.0]),  # collapsing zoom
    np.array([[1, 0, 0], [0, 1, 0], [np.nan, 0, 1.0]]),
])
def test_degenerate_homographies_are_rejected(homography: np.ndarray) -> None:
    assert overlap_ratio(homography, 320, 240) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 100_000).map(lambda ms: ms / 1000), min_size=1, max_size=40, unique=True),
       st.lists(st.integers(0, 100_000).map(lambda ms: ms / 1000), min_size=1, max_size=20))
def test_pick_nearest_matches_brute_force(times: list[float], targets: list[float]) -> None:
    times, targets = sorted(times), sorted(targets)
    picked = [t for t, _ in pick_nearest(((t, t) for t in times), targets)]
    expected: list[float] = []
    for target in targets:
        best = min(times, key=lambda t: (abs(t - target), t))
        if best not in expected:
            expected.append(best)
    assert picked == expected


def test_select_indices_handles_29_97_fps_without_drift() -> None:
    times = [i * 1001 / 30000 for i in range(30000 * 60 // 1001)]  # one minute at 29.97 fps
    chosen = select_indices(times, uniform_targets(1.0), include_last=True)
    assert len(chosen) == 61
    assert all(abs(times[i] - k) <= 0.5 * 1001 / 30000 for k, i in enumerate(chosen[:-1]))
    assert chosen[-1] == len(times) - 1


def test_constrained_sampling_keeps_ends_and_count() -> None:
    for n in range(1, 60):
        for count in range(1, 35):
            picked = constrained_sampling(list(range(n)), count)
            assert len(picked) == min(n, count)
            assert picked == sorted(set(picked))
            if n > count >= 2:
                assert picked[0] == 0 and picked[-1] == n - 1
