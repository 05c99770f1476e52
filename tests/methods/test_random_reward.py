"""The random-reward control ``accuracy_shuffled``: each group keeps the true reward's values (its rate), the
values land on completions at random (no information about which one was right), runs are reproducible by
seed, and a batch that is not whole groups is refused."""

from __future__ import annotations

import numpy as np
import pytest

from embodied_r.methods.random_reward import shuffle_within_groups
from embodied_r.methods.rewards import check_reward, get_reward

RIGHT, WRONG = "<think>.</think><answer>A</answer>", "<think>.</think><answer>B</answer>"


def batch(groups: list[list[bool]]) -> tuple[list[str], list[str]]:
    """Completions of ``len(groups)`` prompts whose answer is A: True marks a right completion."""
    completions = [RIGHT if right else WRONG for group in groups for right in group]
    return completions, ["A"] * len(completions)


def shuffled(seed: int = 0, generations: int = 4, **settings: object):
    return get_reward("accuracy_shuffled", settings={"seed": seed, "num_generations": generations, **settings})


def test_each_group_keeps_the_true_reward_s_values() -> None:
    groups = [[True, False, False, False], [True, True, False, True], [False] * 4, [True] * 4]
    completions, answers = batch(groups)
    reward = shuffled()
    for _ in range(5):
        values = reward(completions, answer=answers)
        for g, group in enumerate(groups):
            assert sorted(values[4 * g:4 * g + 4]) == sorted(1.0 if right else 0.0 for right in group)


def test_the_values_move_between_completions_and_successive_steps_differ() -> None:
    completions, answers = batch([[True, False, False, False]] * 8)
    reward = shuffled()
    steps = [reward(completions, answer=answers) for _ in range(4)]
    true = get_reward("accuracy")(completions, answer=answers)
    assert any(step != true for step in steps)  # not the identity
    assert len({tuple(step) for step in steps}) > 1  # the call counter: steps differ


def test_a_seed_reproduces_its_run_and_another_seed_does_not() -> None:
    completions, answers = batch([[True, False, False, False]] * 16)

    def run(seed: int) -> list[list[float]]:
        reward = shuffled(seed)
        return [reward(completions, answer=answers) for _ in range(3)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_the_reward_knows_nothing_about_which_completion_was_right() -> None:
    # Completion 0 of each group is the only right one: the shuffled 1 lands on it about 1/G of the time.
    generations, groups = 4, 2000
    completions, answers = batch([[True, False, False, False]] * groups)
    values = shuffled(3, generations)(completions, answer=answers)
    on_right = sum(values[g * generations] for g in range(groups)) / groups
    assert sum(values) == groups  # one 1 per group, as the true reward gave
    assert abs(on_right - 1 / generations) < 0.05  # sd about 0.01 at 2000 groups


def test_none_stays_in_place_and_the_rule_is_the_accuracy_reward_s() -> None:
    values = [None, 1.0, 0.0, None, 0.0, 1.0]
    for seed in range(10):
        out = shuffle_within_groups(values, 3, np.random.default_rng(seed))
        assert out[0] is None and out[3] is None
        assert sorted(out[1:3]) == [0.0, 1.0] and sorted([out[4], out[5]]) == [0.0, 1.0]
    assert get_reward("accuracy_shuffled", settings={"accuracy_rule": "official"}).rule == "official"
    assert get_reward("accuracy_shuffled").__name__ == "accuracy_shuffled"  # TRL's metric name


def test_a_batch_that_is_not_whole_groups_is_refused() -> None:
    completions, answers = batch([[True, False, False]])
    with pytest.raises(ValueError, match="not whole groups of num_generations 4"):
        shuffled()(completions, answer=answers)


def test_bad_options_are_refused_before_any_model_loads() -> None:
    with pytest.raises(ValueError, match="accuracy_rule 'paper'"):
        check_reward("accuracy_shuffled", {"rule": "paper"})
    with pytest.raises(ValueError, match="num_generations"):
        check_reward("accuracy_shuffled", {}, settings={"num_generations": 0})
    with pytest.raises(ValueError, match="takes no option"):
        check_reward("accuracy_shuffled", {"gate": False})
    check_reward("accuracy_shuffled", {}, settings={"num_generations": 8, "seed": 1, "accuracy_rule": "official"})
