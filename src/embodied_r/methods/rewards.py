"""Reward functions for GRPO, by name (TRL contract: ``fn(completions, **columns) -> list[float | None]``).

A recipe's ``rewards:`` entry names a reward in one of two ways:

- a name of the reward table (:func:`reward_table`): the generic rewards in ``REWARDS`` (format,
  accuracy, the random-reward control ``accuracy_shuffled``, and any added with :func:`register_reward`)
  and every method's own rewards (``Method.own_rewards``, e.g. Embodied-R's ``consistency``, Robot-R1's ``open_l1``);
- a ``"module:attr"`` path to any importable reward (``my_pkg.rewards:my_reward``), TRL's contract, with
  no registration. Its metrics are named after the path as written.

An entry is either a reward function or a :class:`RewardFactory` that builds a stateful reward when the run
starts (the consistency reward's reference judge), from the run's settings and the entry's options::

    from embodied_r.methods.rewards import register_reward
    register_reward("keypoint_distance", my_reward)            # a plain function
    register_reward("my_judge", MyJudgeReward, factory=True)   # built with the entry's options

>>> sorted(reward_table())
['accuracy', 'accuracy_shuffled', 'consistency', 'format', 'format_soft', 'format_strict', 'open_l1']
>>> get_reward("format")(["<think>x</think><answer>A</answer>"])
[1.0]
>>> get_reward("accuracy", rule="official")(["<think>x</think><answer>a. bed</answer>"], answer=["A"])
[1.0]
>>> get_reward("accuracy", settings={"accuracy_rule": "official"}).rule  # a run setting the factory reads
'official'
>>> get_reward("embodied_r.methods.format:format_reward").__name__
'embodied_r.methods.format:format_reward'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from embodied_r.methods import all_methods, import_path
from embodied_r.methods.accuracy import make_accuracy_reward
from embodied_r.methods.format import format_reward, soft_format_reward, strict_format_reward
from embodied_r.methods.random_reward import check_shuffled_options, make_shuffled_accuracy_reward

RewardFunc = Callable[..., list]


class RewardSpecError(ValueError):
    """A ``rewards:`` entry that is not a name or ``{name: {options}}``, or names no reward."""


@dataclass(frozen=True)
class RewardFactory:
    """A reward built when the run starts: ``build(**options)`` returns the reward callable.

    Its options come from the run settings named in ``settings`` (option name -> setting: a recipe key, a
    key of a recipe section as ``section.key`` such as ``judge.model``, or ``policy_model``, the model GRPO
    starts from, or ``judge``, a judge object the caller passes), then from the recipe entry's own options,
    which win. ``check(options, source)``, when given, rejects options
    that cannot work before any model loads (recipe validation calls it).
    """

    build: Callable[..., Any]
    settings: Mapping[str, str] = field(default_factory=dict)
    check: Callable[[Mapping[str, Any], str], None] | None = None

    def options(self, settings: Mapping[str, Any] | None, entry_options: Mapping[str, Any]) -> dict[str, Any]:
        """The options ``build`` is called with for these run settings and entry options."""
        from_run = {option: settings[key] for option, key in self.settings.items() if key in (settings or {})}
        return {**from_run, **entry_options}


RewardEntry = RewardFunc | RewardFactory

# The generic rewards, shared by every method; register_reward adds to this table.
REWARDS: dict[str, RewardEntry] = {
    "format": format_reward,
    "format_strict": strict_format_reward,
    "format_soft": soft_format_reward,  # shaped partial credit (ours, opt-in; not the paper's reward)
    # option rule: last-answer (default) | official, from the recipe key accuracy_rule unless the entry sets it
    "accuracy": RewardFactory(make_accuracy_reward, settings={"rule": "accuracy_rule"}),
    # the random-reward control (methods/random_reward.py): accuracy's values shuffled within each group of
    # num_generations completions, seeded by the run's seed; a gain of GRPO counts only above it
    "accuracy_shuffled": RewardFactory(
        make_shuffled_accuracy_reward, check=check_shuffled_options,
        settings={"rule": "accuracy_rule", "num_generations": "num_generations", "seed": "seed"}),
}


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


def is_reward_path(name: str) -> bool:
    """Whether a reward name is a ``"module:attr"`` path rather than a table name."""
    return ":" in name


def reward_table() -> dict[str, RewardEntry | str]:
    """Every reward a recipe can name: the methods' own rewards (still ``"module:attr"`` paths, imported when
    built), then ``REWARDS`` (a name registered with ``replace=True`` wins)."""
    table: dict[str, RewardEntry | str] = {}
    for method in all_methods():
        table.update(method.own_rewards)
    table.update(REWARDS)
    return table


def reward_entry(name: str) -> RewardEntry:
    """The function or factory ``name`` stands for (a table name or a ``"module:attr"`` path), imported now;
    a RewardSpecError that lists the known names when there is none."""
    table = reward_table()
    if not is_reward_path(name) and name not in table:
        raise RewardSpecError(f"unknown reward {name!r}; known rewards: {sorted(table)}, or a 'module:function' "
                              "path to your own (TRL's contract: fn(completions, **columns) -> list[float | None])")
    path = name if is_reward_path(name) else table[name]
    if not isinstance(path, str):
        return path
    try:
        entry = import_path(path)
    except (ImportError, ValueError) as exc:
        raise RewardSpecError(f"reward {name!r}: cannot import {path} ({exc})") from exc
    if not (isinstance(entry, RewardFactory) or callable(entry)):
        raise RewardSpecError(f"reward {name!r}: {path} is a {type(entry).__name__}, not a reward function")
    return entry


def check_reward(name: str, options: Mapping[str, Any], settings: Mapping[str, Any] | None = None,
                 source: str = "recipe") -> None:
    """What can be known about one ``rewards:`` entry before any model loads: the reward exists (a path is
    imported), a plain function gets no options (a RewardSpecError), and a factory's own ``check`` passes
    (its ValueError names ``source``)."""
    entry = reward_entry(name)
    if not isinstance(entry, RewardFactory):
        if options:
            raise RewardSpecError(f"reward {name!r} takes no options (got {sorted(options)})")
        return
    if entry.check is not None:
        entry.check(entry.options(settings, options), source)


def register_reward(
    name: str, func: Callable[..., Any] | RewardFactory, factory: bool = False, replace: bool = False
) -> None:
    """Add a reward to the table. ``factory=True``: ``func(**options)`` returns the reward callable (or pass
    a :class:`RewardFactory`)."""
    if is_reward_path(name):
        raise ValueError(f"reward name {name!r}: ':' marks a module:function path; choose a plain name")
    if name in reward_table() and not replace:
        raise ValueError(f"reward {name!r} is already registered; pass replace=True to override it")
    REWARDS[name] = RewardFactory(func) if factory and not isinstance(func, RewardFactory) else func


def get_reward(name: str, settings: Mapping[str, Any] | None = None, **options: Any) -> RewardFunc:
    """The reward callable for ``name`` (a table name or a ``"module:attr"`` path), named ``name`` (TRL names
    its metrics ``rewards/<__name__>/mean``). A factory is built from ``settings`` (the run's, see
    :class:`RewardFactory`) and ``options``; a plain function takes no options."""
    entry = reward_entry(name)
    if isinstance(entry, RewardFactory):
        reward = entry.build(**entry.options(settings, options))
        if getattr(reward, "__name__", None) != name:
            reward.__name__ = name
        return reward
    if options:
        raise TypeError(f"reward {name!r} takes no options (got {sorted(options)})")
    if getattr(entry, "__name__", None) == name:
        return entry
    return _renamed(entry, name)


def _renamed(func: Callable[..., Any], name: str) -> RewardFunc:
    # TRL reads __name__ for metric names; give recipe names ("format") rather than function names.
    def reward(*args: Any, **kwargs: Any) -> list:
        return func(*args, **kwargs)

    reward.__name__ = name
    reward.__qualname__ = name
    reward.__doc__ = func.__doc__
    return reward


__all__ = ["REWARDS", "RewardEntry", "RewardFactory", "RewardFunc", "RewardSpecError", "check_reward", "get_reward",
           "is_reward_path", "register_reward", "reward_entry", "reward_spec", "reward_table"]
