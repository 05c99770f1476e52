"""VSI-Bench's direction and turn rules, shared by the question generator (which labels answers with them)
and the exact solver (which reads positions back from prompt text and applies the same rules).

Angles follow ``core.geometry.ccw_angle_deg``: degrees in [0, 360) counter-clockwise from the facing
direction, so (0, 180) is the left half.
"""

from __future__ import annotations

import math

import numpy as np

# Quadrants (relative direction hard, egocentric direction) and the three sectors of relative direction
# medium; easy asks left or right with the medium sectors' bounds (its questions are never "back").
HARD_BINS = ((0, 90, "front-left"), (90, 180, "back-left"), (180, 270, "back-right"), (270, 360, "front-right"))
MEDIUM_BINS = ((0, 135, "left"), (135, 225, "back"), (225, 360, "right"))
TURNS = ("Turn Left", "Turn Right", "Turn Back")


def angle_bin(theta: float, bins: tuple[tuple[float, float, str], ...]) -> str:
    """The name of the bin holding ``theta`` (degrees in [0, 360)).

    >>> angle_bin(100.0, HARD_BINS), angle_bin(300.0, MEDIUM_BINS)
    ('back-left', 'right')
    """
    for lo, hi, name in bins:
        if lo <= theta < hi:
            return name
    raise ValueError(f"angle {theta} outside [0, 360)")


def signed_turn_deg(heading: np.ndarray, leg: np.ndarray) -> float:
    """Signed angle in (-180, 180] from ``heading`` to ``leg`` (xy vectors); positive turns left."""
    return math.degrees(math.atan2(heading[0] * leg[1] - heading[1] * leg[0], heading @ leg))


def classify_turn(heading: np.ndarray, leg: np.ndarray, margin: float = 15.0) -> str | None:
    """The turn from ``heading`` onto ``leg`` (xy vectors): left in (45°, 135°), right in (-135°, -45°),
    back beyond ±135°; None if straight on (under 45°) or within ``margin`` of a boundary.

    >>> classify_turn(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    'Turn Left'
    >>> classify_turn(np.array([1.0, 0.0]), np.array([1.0, 0.1])) is None
    True
    """
    angle = signed_turn_deg(heading, leg)
    magnitude = abs(angle)
    if min(abs(magnitude - 45.0), abs(magnitude - 135.0)) < margin or magnitude < 45.0:
        return None
    if magnitude > 135.0:
        return "Turn Back"
    return "Turn Left" if angle > 0 else "Turn Right"
