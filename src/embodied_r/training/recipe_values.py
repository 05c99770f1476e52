"""Each of our plain recipe keys' value: what it must be, checked in one loop (:func:`check_values`).

A check returns the problem as a sentence naming the key, or None; the error adds the key's section
(``recipe_keys``). Nested sections, the method and the rewards have their own parsers with the same kind of
message (``recipe_sections``, ``recipe_checks``, ``training.recipe``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from embodied_r.training.recipe_keys import key_error

# The orders GRPO can take its prompts in (training/curriculum.py imports the recipe, so they live here).
CURRICULA = ("none", "easy-first")
# Attention implementations and the package each needs beyond torch.
ATTENTION_PACKAGES: dict[str, str | None] = {"sdpa": None, "eager": None, "flex_attention": None,
                                             "flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_3"}


ValueCheck = Callable[[str, Any], "str | None"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def text(key: str, value: Any) -> str | None:
    return None if isinstance(value, str) else f"{key!r} must be a string, got {value!r}"


def text_or_null(key: str, value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else f"{key!r} must be a string or null, got {value!r}"


def int_or_null(key: str, value: Any) -> str | None:
    return None if value is None or _is_int(value) else f"{key!r} must be an integer or null, got {value!r}"


def non_negative_int(key: str, value: Any) -> str | None:
    # true counts as 1 here, as it always has for these keys
    return None if isinstance(value, int) and value >= 0 else f"{key!r} must be a non-negative integer, got {value!r}"


def positive_int(key: str, value: Any) -> str | None:
    return None if _is_int(value) and value >= 1 else f"{key!r} must be a positive integer, got {value!r}"


def positive_int_or_null(key: str, value: Any) -> str | None:
    if value is None or (_is_int(value) and value >= 1):
        return None
    return f"{key!r} must be a positive integer or null, got {value!r}"


def positive_number(key: str, value: Any) -> str | None:
    return None if _is_number(value) and value > 0 else f"{key!r} must be a positive number, got {value!r}"


def train_data(key: str, value: Any) -> str | None:
    if not value:
        return f"{key!r} is required (a PromptRow .jsonl file, or toy:N)"
    return None if isinstance(value, str) else f"{key!r} must be a PromptRow .jsonl file or toy:N, got {value!r}"


def completion_prefix(key: str, value: Any) -> str | None:
    if isinstance(value, str):
        return None
    return f"{key!r} must be a string (quote it in YAML: completion_prefix: \"<think>\"), got {value!r}"


def max_train_minutes(key: str, value: Any) -> str | None:
    if value is None or (_is_number(value) and value > 0):
        return None
    return f"{key!r} must be a positive number of minutes or null, got {value!r}"


def zero_variance_groups(key: str, value: Any) -> str | None:
    from embodied_r.training.zero_advantage import TREATMENTS

    return None if value in TREATMENTS else f"{key!r} must be one of {', '.join(TREATMENTS)}, got {value!r}"


def balanced_steps(key: str, value: Any) -> str | None:
    from embodied_r.training.option_rotations import MODES

    return None if value in MODES else f"{key!r} must be one of {', '.join(MODES)}; got {value!r}"


def curriculum(key: str, value: Any) -> str | None:
    return None if value in CURRICULA else f"{key!r} must be one of {', '.join(CURRICULA)}; got {value!r}"


def prompt_version(key: str, value: Any) -> str | None:
    from embodied_r.methods import prompt_versions

    if value is None or value in prompt_versions():
        return None
    return f"{key!r} must be one of {prompt_versions()} or null, got {value!r}"


def shared_prefix_path(key: str, value: Any) -> str | None:
    from embodied_r.training.path_choice import setting_problem

    return setting_problem(key, value)


def attention(key: str, value: Any) -> str | None:
    """A known attention implementation whose package is installed, or null."""
    import importlib.util

    if value is None:
        return None
    if value not in ATTENTION_PACKAGES:
        return f"{key} {value!r} must be one of {', '.join(ATTENTION_PACKAGES)} or null"
    package = ATTENTION_PACKAGES[value]
    if package is not None and importlib.util.find_spec(package) is None:
        return (f"{key} {value} needs the {package!r} package, which is not installed here (on a CUDA machine: "
                "pip install flash-attn); or use sdpa")
    return None


# Our plain keys and the check of each value; the nested ones (lora, judge, format_warmup, reward_schedule,
# context_rule with max_prompt_tokens), method and the rewards are parsed by their own code (recipe_sections,
# training.recipe) with the same kind of message.
VALUE_CHECKS: Mapping[str, ValueCheck] = {
    "train_data": train_data,
    "model": text,
    "dtype": text,
    "attn_implementation": attention,
    "eval_data": text_or_null,
    "max_train_rows": int_or_null,
    "eval_every_steps": non_negative_int,
    "eval_max_rows": non_negative_int,
    "eval_batch_size": non_negative_int,
    "eval_max_new_tokens": non_negative_int,
    "sample_completions": non_negative_int,
    "completion_prefix": completion_prefix,
    "prompt_version": prompt_version,
    "shared_prefix_update": shared_prefix_path,
    "shared_prefix_generation": shared_prefix_path,
    "max_train_batch_tokens": positive_int_or_null,
    "zero_variance_groups": zero_variance_groups,
    "resample_rounds": positive_int,
    "balanced_steps": balanced_steps,
    "curriculum": curriculum,
    "curriculum_pool_factor": positive_number,
    "checkpoint_over_tokens": positive_int_or_null,
    "max_train_minutes": max_train_minutes,
    "description": text,
}


def check_values(values: Mapping[str, Any], source: str = "recipe") -> None:
    """Each of our plain keys' value (:data:`VALUE_CHECKS`), in the recipe's key order."""
    for key, value in values.items():
        check = VALUE_CHECKS.get(key)
        problem = None if check is None else check(key, value)
        if problem is not None:
            raise key_error(source, key, problem)


def check_attention(name: str | None, source: str = "recipe") -> None:
    """A known attention implementation whose package is installed, or a RecipeError naming what to do."""
    problem = attention("attn_implementation", name)
    if problem is not None:
        raise key_error(source, "attn_implementation", problem)
