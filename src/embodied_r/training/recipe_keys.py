"""The recipe's keys by section, TRL's defaults this layer reads, and the errors that name a key's section.

A recipe file stays one flat mapping; each key belongs to one of seven sections (model, data, generation,
optimisation, rewards, judge, schedule), which errors name and list. A key is one of ours (a field of
``training.recipe.Recipe``, with its default there) or a field of TRL's ``GRPOConfig``: the TRL fields this
layer reads itself are listed in a section too, with TRL's default in :data:`TRL_DEFAULTS`; every other
``GRPOConfig`` field passes through to TRL untouched.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any


class RecipeError(ValueError):
    """A recipe that cannot be used; the message says which key and what to do."""


# Our keys by section. Every field of Recipe stands in exactly one (tests/training/test_recipe.py checks it).
OUR_SECTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "model": ("model", "dtype", "attn_implementation", "lora"),
    "data": ("train_data", "eval_data", "max_train_rows", "eval_max_rows", "prompt_version", "context_rule",
             "max_prompt_tokens", "balanced_steps", "curriculum", "curriculum_pool_factor", "description"),
    "generation": ("completion_prefix", "shared_prefix_generation", "sample_completions", "eval_batch_size",
                   "eval_max_new_tokens"),
    "optimisation": ("format_warmup", "shared_prefix_update", "max_train_batch_tokens", "checkpoint_over_tokens",
                     "zero_variance_groups", "resample_rounds"),
    "rewards": ("method", "rewards", "accuracy_rule"),
    "judge": ("judge",),
    "schedule": ("reward_schedule", "max_train_minutes", "eval_every_steps"),
})
# The GRPOConfig fields this layer reads or checks itself, by section.
TRL_SECTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "model": (),
    "data": ("output_dir",),
    "generation": ("num_generations", "max_completion_length", "generation_batch_size", "steps_per_generation",
                   "temperature", "top_p", "top_k", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization",
                   "vllm_tensor_parallel_size", "vllm_server_base_url", "vllm_server_host"),
    "optimisation": ("per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "beta",
                     "epsilon", "loss_type", "scale_rewards", "importance_sampling_level", "num_iterations",
                     "weight_decay", "warmup_steps", "gradient_checkpointing", "bf16", "seed", "deepspeed",
                     "use_cpu", "ddp_timeout"),
    "rewards": ("reward_weights",),
    "judge": (),
    "schedule": ("max_steps", "num_train_epochs", "logging_steps", "save_steps"),
})
SECTION_NAMES: tuple[str, ...] = tuple(OUR_SECTIONS)
PASS_THROUGH = "TRL GRPOConfig"  # what an error calls the section of a GRPOConfig field this layer does not read

# TRL 1.16's GRPOConfig defaults of the fields this layer reads, written once (a test compares them with
# GRPOConfig). Not read from GRPOConfig itself: the batch geometry is checked before TRL is imported, so a
# cluster's commonest mistake fails in a second.
TRL_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "num_generations": 8,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "steps_per_generation": None,  # None: gradient_accumulation_steps
    "generation_batch_size": None,  # None: per device x processes x steps
    "max_completion_length": 512,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "gradient_checkpointing": True,
    "use_vllm": False,
    "vllm_mode": "colocate",
    "vllm_gpu_memory_utilization": 0.3,
    "vllm_tensor_parallel_size": 1,
    "bf16": None,  # None: decided by training/precision.py
    "deepspeed": None,
    "use_cpu": False,
    "ddp_timeout": 1800,
    "reward_weights": None,  # None: 1 per reward
    "num_iterations": 1,
    "max_steps": -1,  # -1: num_train_epochs decides
    "seed": 42,
})
# GRPOConfig values this layer sets where the recipe is silent (its own choices, not TRL's defaults).
OUR_TRL_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "logging_steps": 1,
    "report_to": "none",
    "save_strategy": "steps",
    "save_steps": 50,
})
DEFAULT_OUTPUT_DIR = "runs/grpo"  # where a recipe without output_dir writes (TRL has no default)


def trl_value(trl: Mapping[str, Any], key: str) -> Any:
    """A GRPOConfig field's value in the recipe, TRL's default (:data:`TRL_DEFAULTS`) where it is absent or null.

    >>> trl_value({"num_generations": 4}, "num_generations"), trl_value({}, "num_generations")
    (4, 8)
    """
    value = trl.get(key)
    return TRL_DEFAULTS[key] if value is None else value


def section_of(key: str) -> str | None:
    """The section a key belongs to, or None for a GRPOConfig field this layer does not read.

    >>> section_of("lora"), section_of("num_generations"), section_of("lr_scheduler_type")
    ('model', 'generation', None)
    """
    for table in (OUR_SECTIONS, TRL_SECTIONS):
        for section, keys in table.items():
            if key in keys:
                return section
    return None


def where(key: str) -> str:
    """The key's place as an error states it.

    >>> where("max_steps"), where("lr_scheduler_type")
    ('section schedule', 'TRL GRPOConfig field')
    """
    section = section_of(key)
    return f"{PASS_THROUGH} field" if section is None else f"section {section}"


def in_section(message: str, key: str) -> RecipeError:
    """A RecipeError whose ``message`` (source and problem) ends with the key's section."""
    return RecipeError(f"{message} ({where(key)})")


def key_error(source: str, key: str, problem: str) -> RecipeError:
    """The error for one key's value: ``problem`` (which names the key and what it must be) and its section.

    >>> str(key_error("r.yaml", "max_steps", "max_steps must be int, got 'abc'"))
    "r.yaml: max_steps must be int, got 'abc' (section schedule)"
    """
    return in_section(f"{source}: {problem}", key)


def keys_by_section(our_keys: Iterable[str]) -> str:
    """Our keys and the TRL fields we read, listed by section (for the unknown-key error)."""
    ours = set(our_keys)
    lines = []
    for section in SECTION_NAMES:
        names = [k for k in OUR_SECTIONS[section] if k in ours] + [f"{k} (TRL)" for k in TRL_SECTIONS[section]]
        lines.append(f"  {section}: {', '.join(names)}")
    return "\n".join(lines)


def unknown_keys_error(source: str, unknown: list[str], our_keys: Iterable[str],
                       trl_fields: Iterable[str]) -> RecipeError:
    """Unknown keys, each with its close matches and their sections, then every valid key: ours by section,
    and TRL's GRPOConfig fields."""
    ours = list(our_keys)
    trl = sorted(trl_fields)
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, ours + trl, n=3)
        suggestions = ", ".join(f"{name} ({where(name)})" for name in close)
        hints.append(f"{key!r}" + (f" (did you mean {suggestions}?)" if close else ""))
    return RecipeError(
        f"{source}: unknown key(s) {', '.join(hints)}.\nValid keys are ours, by section:\n{keys_by_section(ours)}\n"
        f"and TRL GRPOConfig fields: {', '.join(trl)}"
    )
