"""Keypoint discovery on a demonstration, and the frames that get questions.

Robot-R1 (paper §3.2) takes keypoints with the heuristic of ARM (James & Davison 2022,
``keypoint_discovery``): step ``i > 0`` is a keypoint when

(a) the gripper opens or closes between ``i-1`` and ``i``;
(b) ``i`` is the last step; or
(c) the arm has stopped: every joint velocity is within ``velocity_atol`` of zero, the gripper state is
    the same over ``i-2 .. i+1`` (so ``i`` is before the second-to-last step), and at least ``stop_wait`` steps
    have passed since the previous stop (ARM's "stopped buffer" of 4).

If the last two keypoints are adjacent, the earlier one is dropped (ARM's merge rule).

Meta-World's scripted experts are proportional controllers that switch sub-goal as soon as they are
close enough, so the arm almost never comes to rest (measured on pick-place: the smallest joint speed of
a whole episode is ~0.4 rad/s against ARM's 0.1 threshold) and rule (c) rarely fires. The optional rule

(d) the expert's sub-goal jumps by more than ``phase_jump`` metres between ``i-1`` and ``i`` (the
    previous sub-goal was reached), subject to the same ``stop_wait`` spacing as (c),

recovers those waypoints (the Robot-R1 paper's keypoints follow policy phase changes). Questions are
asked at every ``interval``-th step (paper: t = 10, ARM's ``demo_augmentation_every_n``) that still has
a keypoint after it; the target is the first keypoint strictly after that step.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

VELOCITY_ATOL = 0.1   # rad/s, ARM's np.allclose(joint_velocities, 0, atol=0.1)
STOP_WAIT = 4         # steps, ARM's stopped buffer
QUESTION_INTERVAL = 10
PHASE_JUMP_M = 0.02


def discover_keypoints(gripper_closed: Sequence[bool] | np.ndarray, joint_velocities: np.ndarray,
                       velocity_atol: float = VELOCITY_ATOL, stop_wait: int = STOP_WAIT,
                       expert_targets: np.ndarray | None = None, phase_jump: float = PHASE_JUMP_M,
                       ) -> list[int]:
    """Keypoint step indices of one demonstration (sorted, each > 0). Rule (d) is used only when
    ``expert_targets`` (``(T, 3)``, NaN rows ignored) is given.

    >>> closed = [False] * 6 + [True] * 6
    >>> moving = np.ones((12, 7))
    >>> discover_keypoints(closed, moving)
    [6, 11]
    """
    closed = np.asarray(gripper_closed, dtype=bool)
    velocities = np.asarray(joint_velocities, dtype=float).reshape(len(closed), -1)
    n = len(closed)
    if n < 2:
        return []
    jumps = np.zeros(n, dtype=bool)
    if expert_targets is not None:
        targets = np.asarray(expert_targets, dtype=float).reshape(n, 3)
        step_sizes = np.linalg.norm(np.diff(targets, axis=0), axis=1)
        jumps[1:] = np.nan_to_num(step_sizes, nan=0.0) > phase_jump
    keypoints: list[int] = []
    buffer = 0
    for i in range(1, n):
        gripper_changed = bool(closed[i] != closed[i - 1])
        last = i == n - 1
        window = closed[max(0, i - 2): min(n, i + 2)]
        stopped = (
            buffer <= 0
            and i < n - 2
            and bool(np.all(np.abs(velocities[i]) <= velocity_atol))
            and bool(np.all(window == closed[i]))
        )
        phase = bool(jumps[i]) and buffer <= 0 and (not keypoints or i - keypoints[-1] > stop_wait)
        if stopped or phase:
            buffer = stop_wait
        else:
            buffer -= 1
        if gripper_changed or last or stopped or phase:
            keypoints.append(i)
    if len(keypoints) > 1 and keypoints[-1] - 1 == keypoints[-2]:
        keypoints.pop(-2)
    return keypoints


def next_keypoint(keypoints: Sequence[int], step: int) -> int | None:
    """The first keypoint strictly after ``step`` (the waypoint target), or None after the last.

    >>> next_keypoint([5, 9, 20], 9)
    20
    """
    position = bisect.bisect_right(list(keypoints), step)
    return keypoints[position] if position < len(keypoints) else None


def question_steps(keypoints: Sequence[int], n_frames: int, interval: int = QUESTION_INTERVAL) -> list[int]:
    """Steps that get questions: every ``interval``-th step that still has a keypoint after it.

    >>> question_steps([12, 25], 30, interval=10)
    [0, 10, 20]
    """
    if interval < 1:
        raise ValueError(f"question interval must be >= 1, got {interval}")
    return [s for s in range(0, n_frames, interval) if next_keypoint(keypoints, s) is not None]
