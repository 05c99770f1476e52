"""Overlap of two views from a homography, computed exactly on polygons.

Embodied-R (arXiv 2504.12680, §3.1) keeps a frame when c = Area(L_t ∩ L'_{t+1}) / Area_total falls
below a threshold, where L' is the current frame's outline warped into the last key frame. The
official code rasterises both outlines on an image-sized canvas; here the warped quadrilateral is
clipped against the frame rectangle (Sutherland–Hodgman) and measured with the shoelace formula, which
is exact, resolution-free and ~100x cheaper. Homographies that cannot describe a real camera motion
(a corner behind the camera, a flipped or non-convex outline, an exploding or vanishing area) are
rejected, and the caller treats the frame as a new view.
"""

from __future__ import annotations

import numpy as np

Polygon = list[tuple[float, float]]


def polygon_area(points: Polygon) -> float:
    """Signed shoelace area; positive for corners listed (0,0), (w,0), (w,h), (0,h) in image axes.

    >>> polygon_area([(0, 0), (4, 0), (4, 2), (0, 2)])
    8.0
    """
    total = 0.0
    for (x1, y1), (x2, y2) in zip(points, points[1:] + points[:1]):
        total += x1 * y2 - x2 * y1
    return total / 2.0


def clip_to_rectangle(points: Polygon, width: float, height: float) -> Polygon:
    """The part of a convex polygon inside ``[0, width] x [0, height]`` (Sutherland–Hodgman).

    >>> polygon_area(clip_to_rectangle([(2, 0), (6, 0), (6, 2), (2, 2)], 4, 2))
    4.0
    """
    # Each edge of the rectangle as (is-inside test, intersection with the boundary line).
    edges = [
        (lambda p: p[0] >= 0.0, lambda p, q: _cross_x(p, q, 0.0)),
        (lambda p: p[0] <= width, lambda p, q: _cross_x(p, q, width)),
        (lambda p: p[1] >= 0.0, lambda p, q: _cross_y(p, q, 0.0)),
        (lambda p: p[1] <= height, lambda p, q: _cross_y(p, q, height)),
    ]
    output = list(points)
    for inside, intersect in edges:
        if not output:
            break
        source, output = output, []
        for index, current in enumerate(source):
            previous = source[index - 1]
            if inside(current):
                if not inside(previous):
                    output.append(intersect(previous, current))
                output.append(current)
            elif inside(previous):
                output.append(intersect(previous, current))
    return output


def _cross_x(p: tuple[float, float], q: tuple[float, float], x: float) -> tuple[float, float]:
    t = (x - p[0]) / (q[0] - p[0])
    return x, p[1] + t * (q[1] - p[1])


def _cross_y(p: tuple[float, float], q: tuple[float, float], y: float) -> tuple[float, float]:
    t = (y - p[1]) / (q[1] - p[1])
    return p[0] + t * (q[0] - p[0]), y


def warp_corners(homography: np.ndarray, width: float, height: float) -> Polygon | None:
    """The frame's corners mapped through ``homography``; None when a corner maps to or behind the
    line at infinity (its projective weight changes sign), i.e. the outline is not a real view."""
    corners = np.array([[0.0, 0.0, 1.0], [width, 0.0, 1.0], [width, height, 1.0], [0.0, height, 1.0]])
    mapped = corners @ np.asarray(homography, dtype=np.float64).T
    weights = mapped[:, 2]
    if not np.all(np.isfinite(mapped)) or np.any(np.abs(weights) < 1e-12):
        return None
    if not (np.all(weights > 0) or np.all(weights < 0)):
        return None
    xy = mapped[:, :2] / weights[:, None]
    return [(float(x), float(y)) for x, y in xy]


def is_plausible_outline(quad: Polygon, frame_area: float, max_area_ratio: float) -> bool:
    """A warped frame outline must stay convex, keep its orientation (no mirror flip) and keep its
    area within ``[frame_area / max_area_ratio, frame_area * max_area_ratio]``.

    >>> is_plausible_outline([(0, 0), (4, 0), (4, 2), (0, 2)], 8.0, 4.0)
    True
    >>> is_plausible_outline([(0, 0), (0, 2), (4, 2), (4, 0)], 8.0, 4.0)  # mirrored
    False
    """
    for index in range(len(quad)):
        (ax, ay), (bx, by), (cx, cy) = quad[index - 2], quad[index - 1], quad[index]
        if (bx - ax) * (cy - by) - (by - ay) * (cx - bx) <= 0.0:
            return False  # a right turn or a straight corner: flipped, twisted or collapsed
    area = polygon_area(quad)
    return frame_area / max_area_ratio <= area <= frame_area * max_area_ratio


def overlap_ratio(
    homography: np.ndarray, width: float, height: float, max_area_ratio: float = 16.0
) -> float | None:
    """Area of the current frame warped by ``homography`` (current -> reference) that falls inside the
    reference frame, over the frame area; None for an implausible homography.

    >>> shift = np.array([[1.0, 0.0, 160.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    >>> overlap_ratio(shift, 640, 360)
    0.75
    """
    quad = warp_corners(homography, width, height)
    frame_area = float(width) * float(height)
    if quad is None or not is_plausible_outline(quad, frame_area, max_area_ratio):
        return None
    inside = clip_to_rectangle(quad, width, height)
    return max(0.0, polygon_area(inside)) / frame_area if len(inside) >= 3 else 0.0
