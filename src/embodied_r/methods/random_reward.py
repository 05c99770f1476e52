"""The random-reward control: the accuracy reward's values, shuffled within each group of completions.

A model can gain from GRPO under almost any reward (the update alone moves it; a spurious reward can
still sharpen what the model already prefers), so a gain of GRPO means something only above a control
that trains the same way with a reward that knows nothing. ``accuracy_shuffled`` is that control: it
scores the completions with the true accuracy reward (the same factory and rule as ``accuracy``), then
permutes the values within each group of ``num_generations`` completions of one prompt (TRL orders a
batch as such groups). Each group keeps exactly the values the true reward gave it, hence the same rate
of right answers, the same group variance and the same advantage magnitudes; only *which* completion
receives them is random, so the reward carries no information about which completion was right.

The permutation comes from a numpy Generator seeded with the run's ``seed`` and a call counter: steps
differ from each other, and a run is reproducible. ``None`` values (TRL's "not applicable") keep their
positions; the others are permuted among themselves.

>>> import numpy as np
>>> shuffle_within_groups([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], 3, np.random.default_rng(0))
[0.0, 1.0, 0.0, 1.0, 1.0, 0.0]
>>> reward = make_shuffled_accuracy_reward(num_generations=2, seed=0)
>>> sorted(reward(["<answer>A</answer>", "<answer>B</answer>"], answer=["A", "A"]))
[0.0, 1.0]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from embodied_r.core.scoring import DEFAULT_ACCURACY_RULE, check_accuracy_rule
from embodied_r.methods.accuracy import make_accuracy_reward

if TYPE_CHECKING:
    import numpy as np

# TRL's GRPOConfig defaults, for a recipe that leaves num_generations or seed unset.
TRL_NUM_GENERATIONS = 8
TRL_SEED = 42
# The options the reward is built with; the recipe keys accuracy_rule, num_generations and seed give them.
SHUFFLED_OPTIONS = ("rule", "num_generations", "seed")


def shuffle_within_groups(values: Sequence[float | None], group_size: int,
                          rng: np.random.Generator) -> list[float | None]:
    """``values`` permuted within each consecutive group of ``group_size``; ``None`` stays where it is.

    A batch that is not whole groups would mix prompts in one group (the control would then move reward
    between prompts and change their rates), so it is a ValueError rather than a silent misalignment.
    """
    if group_size < 1 or len(values) % group_size:
        raise ValueError(f"accuracy_shuffled: a batch of {len(values)} completions is not whole groups of "
                         f"num_generations {group_size} (the shuffle keeps each prompt's rewards within its group)")
    shuffled = list(values)
    for start in range(0, len(values), group_size):
        shuffled[start:start + group_size] = _shuffle_group(values[start:start + group_size], rng)
    return shuffled


def _shuffle_group(group: Sequence[float | None], rng: np.random.Generator) -> list[float | None]:
    """One group's values permuted among the positions that hold a value (not ``None``)."""
    positions = [i for i, v in enumerate(group) if v is not None]
    out = list(group)
    for position, taken in zip(positions, rng.permutation(len(positions))):
        out[position] = group[positions[int(taken)]]
    return out


def make_shuffled_accuracy_reward(rule: str = DEFAULT_ACCURACY_RULE, num_generations: int = TRL_NUM_GENERATIONS,
                                  seed: int = TRL_SEED) -> Callable[..., list[float | None]]:
    """The ``accuracy_shuffled`` reward: ``accuracy`` under ``rule`` (the recipe key ``accuracy_rule``),
    shuffled within groups of ``num_generations`` with a Generator seeded by ``(seed, call number)``.

    Each built reward counts its own calls, so two runs with one seed see the same permutations in the
    same steps, and successive steps of one run see different ones.
    """
    check_shuffled_options({"rule": rule, "num_generations": num_generations, "seed": seed}, "accuracy_shuffled")
    true_reward = make_accuracy_reward(rule)
    calls = itertools.count()

    def accuracy_shuffled(completions: Sequence[Any], **columns: Any) -> list[float | None]:
        import numpy as np

        rng = np.random.default_rng([int(seed), next(calls)])
        return shuffle_within_groups(true_reward(completions, **columns), int(num_generations), rng)

    accuracy_shuffled.__doc__ = (f"The accuracy reward (accuracy_rule {rule!r}) shuffled within groups of "
                                 f"{num_generations} completions, seed {seed}: a control that knows nothing.")
    accuracy_shuffled.rule = rule  # type: ignore[attr-defined]  # as the accuracy reward, for logs and tests
    return accuracy_shuffled


def check_shuffled_options(options: Mapping[str, Any], source: str) -> None:
    """Refuse, before any model loads, an option the reward does not take, a rule that does not exist, a
    group size under 1 or a seed that is not a non-negative integer (numpy's seeds are)."""
    unknown = sorted(set(options) - set(SHUFFLED_OPTIONS))
    if unknown:
        raise ValueError(f"{source}: accuracy_shuffled takes no option {unknown} (only {', '.join(SHUFFLED_OPTIONS)})")
    check_accuracy_rule(options.get("rule", DEFAULT_ACCURACY_RULE), source)
    generations = options.get("num_generations", TRL_NUM_GENERATIONS)
    if isinstance(generations, bool) or not isinstance(generations, int) or generations < 1:
        raise ValueError(f"{source}: accuracy_shuffled needs num_generations a positive integer, not {generations!r}")
    seed = options.get("seed", TRL_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{source}: accuracy_shuffled needs seed a non-negative integer, not {seed!r}")


__all__ = ["check_shuffled_options", "make_shuffled_accuracy_reward", "shuffle_within_groups"]
