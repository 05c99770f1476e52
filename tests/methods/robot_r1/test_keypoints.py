"""Keypoint rule (ARM heuristic as used by Robot-R1) on hand-made trajectories."""

from __future__ import annotations

import numpy as np

from embodied_r.methods.robot_r1.keypoints import discover_keypoints, next_keypoint, question_steps


def test_gripper_change_and_last_step() -> None:
    closed = [False] * 5 + [True] * 5 + [False] * 5
    assert discover_keypoints(closed, np.ones((15, 7))) == [5, 10, 14]


def test_stop_detected_once_per_wait_window() -> None:
    velocities = np.ones((20, 7))
    velocities[6:9] = 0.0            # arm at rest for three steps
    velocities[15] = 0.05            # a second, separate stop
    kps = discover_keypoints([False] * 20, velocities, stop_wait=4)
    assert kps == [6, 15, 19]        # 7 and 8 fall inside the wait after the stop at 6


def test_stop_needs_gripper_steady_and_not_second_to_last() -> None:
    velocities = np.zeros((10, 7))
    closed = [False] * 4 + [True] * 6
    kps = discover_keypoints(closed, velocities, stop_wait=100)
    assert 4 in kps                          # gripper change
    assert 3 not in kps and 5 not in kps     # gripper not steady over i-2..i+1 around the change
    assert 8 not in kps                      # second-to-last step never counts as a stop


def test_adjacent_last_keypoints_merge() -> None:
    closed = [False] * 8 + [True] * 2        # gripper change at 8, last step 9: ARM keeps only 9
    assert discover_keypoints(closed, np.ones((10, 7))) == [9]
    closed = [False] * 7 + [True] * 3        # change at 7 is not adjacent to 9: both stay
    assert discover_keypoints(closed, np.ones((10, 7))) == [7, 9]


def test_phase_rule_adds_subgoal_switches() -> None:
    targets = np.zeros((30, 3))
    targets[12:] = [0.0, 0.0, 0.1]           # sub-goal jumps 10 cm at step 12
    targets[14:] = [0.0, 0.0, 0.2]           # a second jump inside the wait window is ignored
    moving = np.ones((30, 7))
    assert discover_keypoints([False] * 30, moving) == [29]
    assert discover_keypoints([False] * 30, moving, expert_targets=targets) == [12, 29]
    nan_targets = np.full((30, 3), np.nan)
    assert discover_keypoints([False] * 30, moving, expert_targets=nan_targets) == [29]


def test_next_keypoint_and_question_steps() -> None:
    kps = [7, 19, 33]
    assert next_keypoint(kps, 0) == 7
    assert next_keypoint(kps, 7) == 19       # strictly after
    assert next_keypoint(kps, 33) is None
    assert question_steps(kps, 34, interval=10) == [0, 10, 20, 30]
    assert question_steps([5], 20, interval=10) == [0]
