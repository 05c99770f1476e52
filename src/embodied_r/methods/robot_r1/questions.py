"""Robot-R1's three multiple-choice question types, built from a recorded demonstration.

Paper §3.2: at a frame ``t`` with end-effector position ``s_t`` and next keypoint ``s_k*``,

- **waypoint** (main task): which option is ``s_k*``, given the image and ``s_t``;
- **current_state**: which option is ``s_t``, given the image;
- **movement**: which rule-based phrase describes ``s_k* - s_t`` ("slightly" when an axis moves at
  most half of the largest axis move).

Four options, shuffled. Position distractors are uniform random points of the workspace (the paper's
"random states from the valid state space") plus, by default, one harder point a few centimetres from the
truth (research note §8: uniform distractors make the task easy). Movement distractors are "adjacent"
phrases: one axis flipped, one "slightly" toggled, one axis dropped or added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from embodied_r.core.records import QARecord
from embodied_r.methods.robot_r1.demos import Episode
from embodied_r.methods.robot_r1.keypoints import next_keypoint
from embodied_r.sim.robot.tasks import TaskSpec

LETTERS = "ABCD"
# Reachable box above Meta-World's table (hand limits in SawyerXYZEnv subclasses, trimmed to the table).
WORKSPACE_LOW = np.array([-0.35, 0.40, 0.05])
WORKSPACE_HIGH = np.array([0.35, 0.90, 0.35])
MIN_OPTION_SEPARATION_M = 0.05   # random distractors are at least this far (L2) from every other option
NEAR_OFFSET_RANGE_M = (0.02, 0.06)
MOVE_DEAD_ZONE_M = 0.01          # smaller axis changes are not mentioned (the paper gives no value)
SLIGHT_RATIO = 0.5               # paper: "slightly" when |delta_axis| <= 0.5 * max |delta|


@dataclass(frozen=True)
class Move:
    """One axis command: ``sign`` +1/-1 along world ``axis``; ``slight`` marks a small move."""

    axis: int
    sign: int
    slight: bool


# ---------------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------------


def format_xyz(point: Sequence[float]) -> str:
    """Coordinates rounded to 3 decimals, as the paper prints them.

    >>> format_xyz([0.2541, -0.07, -0.0001])
    '[0.254, -0.07, 0.0]'
    """
    return "[" + ", ".join(str(round(float(v), 3) + 0.0) for v in point) + "]"


def movement_parts(delta: Sequence[float], dead_zone: float = MOVE_DEAD_ZONE_M,
                   slight_ratio: float = SLIGHT_RATIO) -> list[Move]:
    """The axis commands for a displacement (paper's rule-based movement label).

    >>> movement_parts([0.0, -0.02, -0.2])
    [Move(axis=1, sign=-1, slight=True), Move(axis=2, sign=-1, slight=False)]
    """
    delta = np.asarray(delta, dtype=float)
    largest = float(np.max(np.abs(delta)))
    parts = []
    for axis in range(3):
        size = abs(float(delta[axis]))
        if size < dead_zone:
            continue
        parts.append(Move(axis, 1 if delta[axis] > 0 else -1, size <= slight_ratio * largest))
    return parts


def movement_phrase(parts: Sequence[Move], axis_words: dict[int, tuple[str, str]]) -> str:
    """Words for axis commands, ordered front/back, left/right, up/down like the paper's example.

    >>> words = {0: ("right", "left"), 1: ("back", "front"), 2: ("down", "up")}
    >>> movement_phrase([Move(0, 1, True), Move(2, -1, False)], words)
    'slightly move left and move down'
    """
    if not parts:
        return "stay in place"
    order = {"back": 0, "front": 0, "left": 1, "right": 1, "down": 2, "up": 2}

    def word(move: Move) -> str:
        return axis_words[move.axis][1 if move.sign > 0 else 0]

    pieces = [("slightly move " if m.slight else "move ") + word(m)
              for m in sorted(parts, key=lambda m: order.get(word(m), 3))]
    if len(pieces) == 1:
        return pieces[0]
    return ", ".join(pieces[:-1]) + (", and " if len(pieces) > 2 else " and ") + pieces[-1]


# ---------------------------------------------------------------------------------------------------
# Distractors
# ---------------------------------------------------------------------------------------------------


def _distinct(candidate: np.ndarray, chosen: Sequence[np.ndarray], min_sep: float) -> bool:
    rounded = format_xyz(candidate)
    return all(np.linalg.norm(candidate - c) >= min_sep and format_xyz(c) != rounded for c in chosen)


def position_distractors(truth: Sequence[float], rng: np.random.Generator, n_random: int = 2,
                         n_near: int = 1, low: np.ndarray = WORKSPACE_LOW, high: np.ndarray = WORKSPACE_HIGH,
                         ) -> list[np.ndarray]:
    """``n_random`` uniform workspace points and ``n_near`` points 2-6 cm per axis from ``truth``."""
    truth = np.asarray(truth, dtype=float)
    chosen: list[np.ndarray] = [truth]
    for _ in range(n_near):
        for _attempt in range(1000):
            axes = rng.choice(3, size=int(rng.integers(1, 3)), replace=False)
            offset = np.zeros(3)
            offset[axes] = rng.uniform(*NEAR_OFFSET_RANGE_M, size=len(axes)) * rng.choice([-1, 1], len(axes))
            candidate = truth + offset
            if _distinct(candidate, chosen, NEAR_OFFSET_RANGE_M[0]):
                chosen.append(candidate)
                break
        else:
            raise RuntimeError(f"could not place a near distractor around {format_xyz(truth)}")
    for _ in range(n_random):
        for _attempt in range(1000):
            candidate = rng.uniform(low, high)
            if _distinct(candidate, chosen, MIN_OPTION_SEPARATION_M):
                chosen.append(candidate)
                break
        else:
            raise RuntimeError(f"could not place a random distractor away from {format_xyz(truth)}")
    return chosen[1:]


def movement_distractors(parts: Sequence[Move], rng: np.random.Generator, n: int = 3) -> list[list[Move]]:
    """``n`` different "adjacent" commands: one axis flipped, "slightly" toggled, an axis dropped/added."""
    parts = list(parts)
    candidates: list[list[Move]] = []
    for i, move in enumerate(parts):
        candidates.append(parts[:i] + [Move(move.axis, -move.sign, move.slight)] + parts[i + 1:])
        candidates.append(parts[:i] + [Move(move.axis, move.sign, not move.slight)] + parts[i + 1:])
        if len(parts) > 1:
            candidates.append(parts[:i] + parts[i + 1:])
    used = {m.axis for m in parts}
    for axis in range(3):
        if axis not in used:
            for sign in (1, -1):
                candidates.append(sorted(parts + [Move(axis, sign, True)], key=lambda m: m.axis))
    truth_key = frozenset(parts)
    unique: dict[frozenset[Move], list[Move]] = {}
    for cand in candidates:
        key = frozenset(cand)
        if key != truth_key and cand and key not in unique:
            unique[key] = cand
    pool = list(unique.values())
    if len(pool) < n:
        raise RuntimeError(f"only {len(pool)} movement distractors for {parts}")
    picks = rng.choice(len(pool), size=n, replace=False)
    return [pool[i] for i in picks]


def shuffle_options(correct: str, distractors: Sequence[str], rng: np.random.Generator,
                    ) -> tuple[list[str], str]:
    """Options ``["A. ...", ...]`` in random order and the letter of ``correct``."""
    texts = [correct, *distractors]
    if len(set(texts)) != len(texts):
        raise ValueError(f"duplicate option texts: {texts}")
    order = rng.permutation(len(texts))
    options = [f"{LETTERS[i]}. {texts[j]}" for i, j in enumerate(order)]
    return options, LETTERS[int(np.flatnonzero(order == 0)[0])]


# ---------------------------------------------------------------------------------------------------
# Questions of one episode
# ---------------------------------------------------------------------------------------------------

SOURCE = "robot_r1_metaworld"
STEMS = {
    "waypoint": "Based on the image and the current robot state, which position [x, y, z] is the next "
                "waypoint of the gripper? Choose the most accurate option.",
    "current_state": "Based on the image, which position [x, y, z] is the gripper at right now? "
                     "Choose the most accurate option.",
    "movement": "Which movement takes the gripper to its next keypoint for this task? "
                "Choose the most accurate option.",
}


def object_positions(episode: Episode, step: int, names: Sequence[str]) -> dict[str, list[float]]:
    """Named object positions at ``step`` (extra unnamed objects get numbered names)."""
    positions = episode.object_pos[step]
    out = {}
    for i, pos in enumerate(positions):
        name = names[i] if i < len(names) else f"object {i + 1}"
        out[name] = [round(float(v), 3) for v in pos]
    return out


def frame_meta(episode: Episode, step: int, target_step: int, spec: TaskSpec, scene: dict[str, Any],
               image: str) -> dict[str, Any]:
    """What a question about frame ``step`` keeps in ``meta``: enough to rebuild its prompt (scene,
    objects, gripper) and to recheck its answer against the episode file."""
    return {
        "image": image, "mw_task": episode.task, "task_description": spec.description,
        "episode": episode.index, "step": int(step), "target_step": int(target_step),
        "current_xyz": [round(float(v), 3) for v in episode.ee_pos[step]],
        "gripper_closed": bool(episode.gripper_closed[step]),
        "objects": object_positions(episode, step, spec.object_names),
        "goal": {spec.goal_name: [round(float(v), 3) for v in episode.goal_pos]},
        "scene": scene,
    }


def episode_questions(episode: Episode, keypoints: Sequence[int], steps: Sequence[int],
                      images: dict[int, str], scene: dict[str, Any], spec: TaskSpec, episode_file: str,
                      rng: np.random.Generator, n_near: int = 1) -> list[QARecord]:
    """All QARecords of one episode: per question step, one of each type (movement is skipped when the
    gripper is already within the dead zone of its next keypoint on every axis)."""
    axis_words = {int(k): tuple(v) for k, v in scene["axis_words"].items()}
    records = []
    for step in steps:
        target_step = next_keypoint(keypoints, step)
        if target_step is None:
            continue
        current = episode.ee_pos[step]
        target = episode.ee_pos[target_step]
        base_meta = dict(frame_meta(episode, step, target_step, spec, scene, images[step]),
                         episode_file=episode_file, keypoints=[int(k) for k in keypoints],
                         target_xyz=[round(float(v), 3) for v in target])
        uid = f"{episode.task}/ep{episode.index:03d}/s{step:04d}"
        for qtype, truth in (("waypoint", target), ("current_state", current)):
            distractors = position_distractors(truth, rng, n_random=3 - n_near, n_near=n_near)
            options, letter = shuffle_options(format_xyz(truth), [format_xyz(d) for d in distractors], rng)
            records.append(QARecord(id=f"{uid}/{qtype}", source=SOURCE, task=qtype, video=images[step],
                                    question=STEMS[qtype], options=options, answer=letter,
                                    answer_type="choice", meta=dict(base_meta)))
        parts = movement_parts(target - current)
        if not parts:
            continue
        wrong = movement_distractors(parts, rng)
        options, letter = shuffle_options(movement_phrase(parts, axis_words),
                                          [movement_phrase(w, axis_words) for w in wrong], rng)
        meta = dict(base_meta, moves=[[m.axis, m.sign, m.slight] for m in parts])
        records.append(QARecord(id=f"{uid}/movement", source=SOURCE, task="movement", video=images[step],
                                question=STEMS["movement"], options=options, answer=letter,
                                answer_type="choice", meta=meta))
    return records
