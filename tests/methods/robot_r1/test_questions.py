"""Question building blocks: movement labels, distractors, option shuffling."""

from __future__ import annotations

import numpy as np
import pytest

from embodied_r.methods.robot_r1.questions import (
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
    Move,
    format_xyz,
    movement_distractors,
    movement_parts,
    movement_phrase,
    position_distractors,
    shuffle_options,
)

WORDS = {0: ("right", "left"), 1: ("back", "front"), 2: ("down", "up")}


def test_slightly_rule_is_half_of_largest_move() -> None:
    parts = movement_parts([0.10, -0.05, 0.051])
    assert parts == [Move(0, 1, False), Move(1, -1, True), Move(2, 1, False)]
    assert movement_phrase(parts, WORDS) == "slightly move back, move left, and move up"
    assert movement_parts([0.005, 0.0, -0.004]) == []          # inside the dead zone


def test_position_distractors_are_distinct_and_in_bounds() -> None:
    rng = np.random.default_rng(0)
    truth = np.array([0.0, 0.6, 0.2])
    for _ in range(50):
        wrong = position_distractors(truth, rng, n_random=2, n_near=1)
        near, randoms = wrong[0], wrong[1:]
        offset = np.abs(near - truth)
        assert 0.02 <= offset.max() <= 0.06 + 1e-9
        for point in randoms:
            assert np.all(point >= WORKSPACE_LOW) and np.all(point <= WORKSPACE_HIGH)
        texts = {format_xyz(p) for p in [truth, *wrong]}
        assert len(texts) == 4


def test_movement_distractors_differ_from_truth() -> None:
    rng = np.random.default_rng(1)
    parts = movement_parts([0.0, 0.0, -0.2])
    truth = movement_phrase(parts, WORDS)
    for _ in range(20):
        phrases = [movement_phrase(p, WORDS) for p in movement_distractors(parts, rng)]
        assert truth not in phrases and len(set(phrases)) == 3


def test_shuffle_options_letter_points_at_correct() -> None:
    rng = np.random.default_rng(2)
    seen = set()
    for _ in range(40):
        options, letter = shuffle_options("right one", ["w1", "w2", "w3"], rng)
        assert [o[:3] for o in options] == ["A. ", "B. ", "C. ", "D. "]
        assert options["ABCD".index(letter)] == f"{letter}. right one"
        seen.add(letter)
    assert seen == set("ABCD")                       # the answer position really is shuffled
    with pytest.raises(ValueError):
        shuffle_options("x", ["x", "y", "z"], rng)
