"""Reward functions for GRPO, by name (TRL contract: ``fn(completions, **columns) -> list[float | None]``).

``REWARDS`` maps a recipe name to a plain reward function or to a factory (a class or function marked
with ``needs_options``) that builds a stateful reward, e.g. the consistency reward's reference judge.
Other recipes add their own rewards with ``register_reward``::

    from embodied_r.methods.rewards import register_reward
    register_reward("keypoint_distance", my_reward)            # a plain function
    register_reward("my_judge", MyJudgeReward, factory=True)   # built with the recipe's options

>>> sorted(REWARDS)
['accuracy', 'consistency', 'format', 'format_soft', 'format_strict', 'open_l1']
>>> get_reward("format")(["<think>x</think><answer>A</answer>"])
[1.0]
>>> get_reward("accuracy", rule="official")(["<think>x</think><answer>a. bed</answer>"], answer=["A"])
[1.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from embodied_r.methods.accuracy import make_accuracy_reward
from embodied_r.methods.embodied_r.rewards import format_reward, soft_format_reward, strict_format_reward
from embodied_r.methods.robot_r1.rewards import open_l1

RewardFunc = Callable[..., list]


class RewardSpecError(ValueError):
    """A ``rewards:`` entry that is neither a name nor ``{name: {options}}``."""


def reward_spec(entry: Any) -> tuple[str, dict[str, Any]]:
    """``"format"`` or ``{"consistency": {options}}`` or ``{"name": "consistency", ...options}``.

    >>> reward_spec({"consistency": {"gate": False}})
    ('consistency', {'gate': False})
    """
    if isinstance(entry, str):
        return entry, {}
    if isinstance(entry, dict) and "name" in entry:
        options = {k: v for k, v in entry.items() if k != "name"}
        return str(entry["name"]), options
    if isinstance(entry, dict) and len(entry) == 1:
        name, options = next(iter(entry.items()))
        return str(name), dict(options or {})
    raise RewardSpecError(f"rewards: entry {entry!r} must be a name or {{name: {{options}}}}")


def _consistency_factory(judge: Any = None, reference_model: Any = "policy", policy_model: str | None = None,
                         dtype: str = "auto", sees_letters: bool = False, scoring: str | None = None,
                         attn_implementation: str | None = None, consistency_rule: str = "judge",
                         **options: Any) -> Any:
    """Build the consistency reward; ``judge`` (any object with ``.judge(...)``) wins over a model spec.
    ``consistency_rule: shuffled-options`` has that judge (the reader) re-read each think with the options
    shuffled and relabelled (``inference.shuffled_options``)."""
    from embodied_r.inference.judges import build_judge
    from embodied_r.methods.embodied_r.consistency import ConsistencyReward, check_consistency_rule

    check_consistency_rule(consistency_rule, "consistency reward")  # before any model loads
    if judge is None:
        if policy_model is None and reference_model in (None, "policy"):
            raise ValueError(
                "the consistency reward needs policy_model (the starting policy) or a reference_model"
            )
        judge = build_judge(
            reference_model, policy_model or "", dtype=dtype, sees_letters=sees_letters, scoring=scoring,
            attn_implementation=attn_implementation,
        )
    if consistency_rule == "shuffled-options":
        from embodied_r.inference.shuffled_options import ShuffledOptionsJudge

        judge = ShuffledOptionsJudge(judge)
    return ConsistencyReward(judge, **options)


REWARDS: dict[str, Callable[..., Any]] = {
    "format": format_reward,
    "format_strict": strict_format_reward,
    "format_soft": soft_format_reward,  # shaped partial credit (ours, opt-in; not the paper's reward)
    "accuracy": make_accuracy_reward,  # option rule: last-answer (default) | official (recipe accuracy_rule)
    "consistency": _consistency_factory,
    "open_l1": open_l1,  # Robot-R1 open-ended waypoints (methods/robot_r1/rewards.py)
}
_FACTORIES: set[str] = {"accuracy", "consistency"}


def register_reward(
    name: str, func: Callable[..., Any], factory: bool = False, replace: bool = False
) -> None:
    """Add a reward to the table. ``factory=True``: ``func(**options)`` returns the reward callable."""
    if name in REWARDS and not replace:
        raise ValueError(f"reward {name!r} is already registered; pass replace=True to override it")
    REWARDS[name] = func
    if factory:
        _FACTORIES.add(name)
    else:
        _FACTORIES.discard(name)


def is_factory(name: str) -> bool:
    return name in _FACTORIES


def get_reward(name: str, **options: Any) -> RewardFunc:
    """The reward callable for ``name``. Options go to a factory; a plain function takes none."""
    if name not in REWARDS:
        raise KeyError(f"unknown reward {name!r}; known rewards: {sorted(REWARDS)}")
    func = REWARDS[name]
    if name in _FACTORIES:
        reward = func(**options)
        if getattr(reward, "__name__", None) != name:
            reward.__name__ = name  # TRL names metrics rewards/<__name__>/mean
        return reward
    if options:
        raise TypeError(f"reward {name!r} takes no options (got {sorted(options)})")
    if func.__name__ == name:
        return func
    return _renamed(func, name)


def _renamed(func: Callable[..., Any], name: str) -> RewardFunc:
    # TRL reads __name__ for metric names; give recipe names ("format") rather than function names.
    def reward(*args: Any, **kwargs: Any) -> list:
        return func(*args, **kwargs)

    reward.__name__ = name
    reward.__qualname__ = name
    reward.__doc__ = func.__doc__
    return reward


__all__ = ["REWARDS", "RewardFunc", "get_reward", "is_factory", "register_reward"]
