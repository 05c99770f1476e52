"""Oriented boxes: corners, overlap, exact box-to-box distance and planar angles.

Everything works in VSI-Bench's world frame (z up, right-handed). A box's ``axes`` rows are its unit
axes (the ``normalizedAxes`` layout of VSI-Bench meta_info, row-major) and ``lengths`` the full side
lengths along them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
# Corner index pairs joined by an edge: corners differing in exactly one sign.
_EDGES = np.array(
    [(i, j) for i in range(8) for j in range(i + 1, 8) if int(np.sum(_SIGNS[i] != _SIGNS[j])) == 1]
)


@dataclass(frozen=True)
class Box:
    centroid: np.ndarray  # (3,)
    lengths: np.ndarray  # (3,) full side lengths
    axes: np.ndarray  # (3, 3) rows are unit axes

    @staticmethod
    def upright(center_xy: tuple[float, float], bottom_z: float, length: float, width: float,
                height: float, yaw: float) -> Box:
        """A box standing on ``bottom_z`` whose long side points along ``yaw`` (radians from +x)."""
        c, s = math.cos(yaw), math.sin(yaw)
        axes = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
        centroid = np.array([center_xy[0], center_xy[1], bottom_z + height / 2.0])
        return Box(centroid, np.array([length, width, height], dtype=float), axes)

    def corners(self) -> np.ndarray:
        """The 8 corners, shape (8, 3)."""
        half = (_SIGNS * (self.lengths / 2.0)) @ self.axes
        return self.centroid + half

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        pts = self.corners()
        return pts.min(axis=0), pts.max(axis=0)

    def point_distance(self, points: np.ndarray) -> np.ndarray:
        """Euclidean distance from each point (N, 3) to the solid box (0 inside)."""
        local = (np.atleast_2d(points) - self.centroid) @ self.axes.T
        half = self.lengths / 2.0
        outside = np.abs(local) - half
        return np.linalg.norm(np.clip(outside, 0.0, None), axis=1)


def boxes_overlap(a: Box, b: Box, margin: float = 0.0) -> bool:
    """Separating-axis test for two oriented boxes; ``margin`` grows both boxes (clearance)."""
    axes = [a.axes[i] for i in range(3)] + [b.axes[i] for i in range(3)]
    for i in range(3):
        for j in range(3):
            cross = np.cross(a.axes[i], b.axes[j])
            norm = np.linalg.norm(cross)
            if norm > 1e-9:
                axes.append(cross / norm)
    delta = b.centroid - a.centroid
    for axis in axes:
        ra = np.sum(np.abs(a.axes @ axis) * (a.lengths / 2.0 + margin))
        rb = np.sum(np.abs(b.axes @ axis) * (b.lengths / 2.0 + margin))
        if abs(float(delta @ axis)) > ra + rb:
            return False
    return True


def _segment_distances(p1: np.ndarray, q1: np.ndarray, p2: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Closest distance between segments [p1,q1] and [p2,q2], vectorised over rows (clamped
    closest-point parameters; Ericson, Real-Time Collision Detection, §5.1.9)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a = np.sum(d1 * d1, axis=1)
    e = np.sum(d2 * d2, axis=1)
    f = np.sum(d2 * r, axis=1)
    c = np.sum(d1 * r, axis=1)
    b = np.sum(d1 * d2, axis=1)
    denom = a * e - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(denom > 1e-12, np.clip((b * f - c * e) / denom, 0.0, 1.0), 0.0)
        t = (b * s + f) / e
        t_clamped = np.clip(t, 0.0, 1.0)
        s = np.where(t != t_clamped, np.clip((b * t_clamped - c) / a, 0.0, 1.0), s)
    closest1 = p1 + d1 * s[:, None]
    closest2 = p2 + d2 * t_clamped[:, None]
    return np.linalg.norm(closest1 - closest2, axis=1)


def box_distance(a: Box, b: Box) -> float:
    """Exact minimum Euclidean distance between two solid oriented boxes (0 when they touch).

    For disjoint convex polyhedra the closest pair is vertex-to-solid or edge-to-edge, so checking
    those is exact. VSI-Bench approximates the same quantity with 5 cm point grids.
    """
    if boxes_overlap(a, b):
        return 0.0
    ca, cb = a.corners(), b.corners()
    best = min(float(b.point_distance(ca).min()), float(a.point_distance(cb).min()))
    ia = np.repeat(np.arange(len(_EDGES)), len(_EDGES))  # all 12 x 12 edge pairs
    ib = np.tile(np.arange(len(_EDGES)), len(_EDGES))
    seg = _segment_distances(ca[_EDGES[ia, 0]], ca[_EDGES[ia, 1]], cb[_EDGES[ib, 0]], cb[_EDGES[ib, 1]])
    return min(best, float(seg.min()))


def ccw_angle_deg(forward_xy: np.ndarray, target_xy: np.ndarray) -> float:
    """Angle in [0, 360) from ``forward`` to ``target`` measured counter-clockwise in the xy-plane, so
    (0, 180) is the left half (VSI-Bench's relative-direction convention)."""
    fx, fy = float(forward_xy[0]), float(forward_xy[1])
    tx, ty = float(target_xy[0]), float(target_xy[1])
    angle = math.degrees(math.atan2(fx * ty - fy * tx, fx * tx + fy * ty))
    return angle % 360.0


def polygon_area(vertices: list[tuple[float, float]]) -> float:
    """Shoelace area of a simple polygon."""
    pts = np.asarray(vertices, dtype=float)
    x, y = pts[:, 0], pts[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


def points_in_polygon(points: np.ndarray, vertices: list[tuple[float, float]]) -> np.ndarray:
    """Even-odd rule containment for (N, 2) points; boundary points count as either."""
    pts = np.atleast_2d(points)
    poly = np.asarray(vertices, dtype=float)
    inside = np.zeros(len(pts), dtype=bool)
    x, y = pts[:, 0], pts[:, 1]
    for (x1, y1), (x2, y2) in zip(poly, np.roll(poly, -1, axis=0)):
        crosses = (y1 > y) != (y2 > y)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_at = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
        inside ^= crosses & (x < x_at)
    return inside
