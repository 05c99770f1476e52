"""The recipe's checks that need no model: each key's value, TRL's values, the rewards, and the combinations.

``training.recipe.validate`` runs them in one pass when a recipe loads, before anything heavy; each error
names the key, its section (``recipe_keys``) and what the value must be. The checks that need the rows or
this machine (``check_rule_rows``, ``training.recipe.check_prompt_version``, ``check_runtime``) run in
``build_trainer`` before any model loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from embodied_r.training.recipe_keys import RecipeError, in_section, key_error
from embodied_r.training.recipe_sections import BatchGeometry, OptimisationSettings

# ---------------------------------------------------------------------------------------------------
# The rewards
# ---------------------------------------------------------------------------------------------------


def reward_spec(entry: Any) -> tuple[str, dict[str, Any]]:
    """:func:`embodied_r.methods.rewards.reward_spec`, its error a ``RecipeError``."""
    from embodied_r.methods.rewards import RewardSpecError
    from embodied_r.methods.rewards import reward_spec as parse

    try:
        return parse(entry)
    except RewardSpecError as exc:
        raise RecipeError(str(exc)) from None


def check_reward_entries(rewards: Any, settings: Mapping[str, Any], accuracy_rule: Any,
                         source: str = "recipe") -> None:
    """``rewards`` is a non-empty list of rewards that exist, each built from options that pass its own check
    with the run's ``settings`` (a ``module:function`` path is imported now), none listed twice; the
    accuracy rules exist; the consistency rule is set in the judge section only."""
    from embodied_r.methods.rewards import reward_table

    if not isinstance(rewards, list):
        raise key_error(source, "rewards", f"'rewards' must be a list of reward names or module:function paths, "
                                           f"got {rewards!r}")
    if not rewards:
        raise key_error(source, "rewards", f"'rewards' is empty; list at least one of {sorted(reward_table())} "
                                           "or a module:function path")
    check_rewards(rewards, settings, source)
    names = [reward_spec(entry)[0] for entry in rewards]
    if len(set(names)) != len(names):
        raise key_error(source, "rewards", f"a reward is listed twice in {names}")
    check_accuracy_rules(accuracy_rule, rewards, source)
    if any(reward_spec(e)[0] == "consistency" and "consistency_rule" in reward_spec(e)[1] for e in rewards):
        # One place for the rule, so the training rows are checked against the rule that is used.
        raise key_error(source, "rewards", "set the rule in the recipe section (judge: {rule: ...}), not as an "
                                           "option of the consistency reward")


def check_rewards(rewards: Sequence[Any], settings: Mapping[str, Any], source: str = "recipe") -> None:
    """Each entry names a reward, a plain function gets no options, and a reward built from options passes its
    own check with the run's settings (``methods.rewards.check_reward``), all before any model loads."""
    from embodied_r.methods.rewards import RewardSpecError, check_reward

    for entry in rewards:
        name, options = reward_spec(entry)
        try:
            check_reward(name, options, settings, source)
        except RewardSpecError as exc:
            raise key_error(source, "rewards", str(exc)) from None
        except ValueError as exc:  # a factory's own check, which names the source itself
            raise in_section(str(exc), "rewards") from exc


def check_accuracy_rules(accuracy_rule: Any, rewards: Sequence[Any], source: str = "recipe") -> None:
    """``accuracy_rule``, and a ``{accuracy: {rule: ...}}`` entry's rule, name rules that exist (the
    accuracy reward takes no other option)."""
    from embodied_r.core.scoring import check_accuracy_rule

    rules = [("accuracy_rule", accuracy_rule)]
    for entry in rewards:
        name, options = reward_spec(entry)
        if name != "accuracy":
            continue
        unknown = sorted(set(options) - {"rule"})
        if unknown:
            raise key_error(source, "rewards", f"the accuracy reward takes no option {unknown}; set accuracy_rule "
                                               "instead")
        if "rule" in options:
            rules.append(("rewards: accuracy rule", options["rule"]))
    for place, rule in rules:
        try:
            check_accuracy_rule(rule, source)
        except ValueError as exc:
            raise in_section(f"{exc} ({place})", "accuracy_rule") from None


def check_rule_rows(rule: str, reward_names: list[str], rows: list[Any], source: str = "train_data") -> None:
    """``judge.rule: shuffled-options`` needs options to shuffle: a RecipeError, before any model
    loads, when the consistency reward is used and some multiple-choice row has fewer than two options or
    no row is multiple choice."""
    if rule != "shuffled-options" or "consistency" not in reward_names:
        return

    def field(row: Any, key: str) -> Any:
        return row.get(key) if isinstance(row, dict) else getattr(row, key, None)

    choice = [row for row in rows if (field(row, "answer_type") or "choice") == "choice"]
    bare = [str(field(row, "id")) for row in choice if len(field(row, "options") or []) < 2]
    if bare or not choice:
        which = f"{len(bare)} multiple-choice row(s) without options (e.g. {', '.join(bare[:3])})" if bare else \
            "no multiple-choice rows"
        raise RecipeError(
            f"{source}: judge.rule: shuffled-options re-reads each think with the options shuffled, but "
            f"the rows have {which}; give rows with their options, or use judge.rule: judge"
        )


# ---------------------------------------------------------------------------------------------------
# Combinations of keys
# ---------------------------------------------------------------------------------------------------


def check_schedule_or_weights(has_schedule: bool, has_weights: bool, source: str = "recipe") -> None:
    if has_schedule and has_weights:
        raise key_error(source, "reward_schedule", "set either reward_weights (static) or reward_schedule, not both")


def check_zero_variance_groups(treatment: str, batch: BatchGeometry, optimisation: OptimisationSettings,
                               orders: Mapping[str, str], source: str = "recipe") -> None:
    """``drop`` and ``resample`` only where the loss's normaliser is in view, and ``resample`` with per-group
    advantages and the prompt order to itself (``orders``: balanced_steps and curriculum)."""
    from embodied_r.training.zero_advantage import drop_unsupported_reason

    if treatment in ("drop", "resample"):
        reason = drop_unsupported_reason(optimisation.loss_type, batch.steps, 1)
        if reason is not None:
            raise key_error(source, "zero_variance_groups", f"zero_variance_groups: {treatment} is not defined for "
                                                            f"{reason}; use skip")
    if treatment != "resample":
        return
    if optimisation.scale_rewards not in ("group", "none", True, False):
        raise key_error(source, "zero_variance_groups", "zero_variance_groups: resample needs per-group advantages; "
                                                        f"scale_rewards {optimisation.scale_rewards!r} scales them "
                                                        "across the batch")
    for key, value in orders.items():
        if value != "none":
            raise key_error(source, "zero_variance_groups", "zero_variance_groups: resample draws fresh prompts in "
                                                            f"its own order, which would undo {key} {value}; use drop")


def check_curriculum(order: str, balanced: str, reward_names: Sequence[str], source: str = "recipe") -> None:
    """easy-first has what it ranks rows by (the accuracy reward) and the order to itself
    (``balanced_steps: none``)."""
    if order == "none":
        return
    if balanced != "none":
        raise key_error(source, "curriculum", f"curriculum {order} and balanced_steps {balanced} both choose the "
                                              "order of the prompts; set one of them to none")
    if "accuracy" not in reward_names:
        raise key_error(source, "curriculum", f"curriculum {order} ranks rows by the accuracy reward, which the "
                                              f"recipe's rewards {list(reward_names)} do not include; add accuracy "
                                              "or set curriculum: none")


def check_checkpointing(over_tokens: int | None, optimisation: OptimisationSettings, source: str = "recipe") -> None:
    if over_tokens is not None and optimisation.gradient_checkpointing:
        raise key_error(source, "checkpoint_over_tokens",
                        "'checkpoint_over_tokens' decides which backward passes are checkpointed, but "
                        "gradient_checkpointing (true unless set: TRL's GRPOConfig default) checkpoints every one: "
                        "set gradient_checkpointing: false, or checkpoint_over_tokens: null")
