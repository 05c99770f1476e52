"""TRL's ``GRPOConfig`` values in a recipe: types, ranges and choices TRL itself checks only deep inside
training (or on the cluster), the vLLM settings, and what this machine needs for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from embodied_r.training.recipe_keys import TRL_DEFAULTS, RecipeError, key_error, trl_value
from embodied_r.training.recipe_sections import OptimisationSettings

VLLM_MODES = ("colocate", "server")

# Ranges TRL and torch only enforce deep inside training (or not at all); checked before anything loads.
_POSITIVE = ("learning_rate", "num_train_epochs", "temperature", "per_device_train_batch_size",
             "gradient_accumulation_steps", "max_completion_length", "logging_steps", "save_steps", "ddp_timeout")
_NON_NEGATIVE = ("beta", "top_k", "warmup_steps", "weight_decay", "epsilon", "num_iterations")
# String values TRL 1.16 accepts but checks only inside the loss or the reward scaling, i.e. on a
# cluster after the models are loaded and the first rollout is done.
TRL_CHOICES: dict[str, tuple[Any, ...]] = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none", True, False),
    "importance_sampling_level": ("token", "sequence"),
}


def check_trl_values(trl: Mapping[str, Any], source: str = "recipe") -> None:
    """Types of GRPOConfig values (from the field's type), nulls where this layer reads TRL's default, and
    the ranges above, each as one clear line."""
    check_trl_types(trl, source)
    for key, default in TRL_DEFAULTS.items():
        # This layer reads TRL's default for a null; TRL itself would be given the null.
        if key in trl and trl[key] is None and default is not None:
            raise key_error(source, key, f"{key} must be {type(default).__name__}, got None (leave it out for "
                                         f"TRL's default {default!r})")
    for key in _POSITIVE:
        if key in trl and trl[key] is not None and not trl[key] > 0:
            raise key_error(source, key, f"{key} must be positive, got {trl[key]!r}")
    for key in _NON_NEGATIVE:
        if key in trl and trl[key] is not None and trl[key] < 0:
            raise key_error(source, key, f"{key} must be non-negative, got {trl[key]!r}")
    if trl.get("max_steps") is not None and (trl["max_steps"] == 0 or trl["max_steps"] < -1):
        raise key_error(source, "max_steps",
                        f"max_steps must be positive (or -1 for num_train_epochs), got {trl['max_steps']!r}")
    generations = trl.get("num_generations")
    if generations is not None and generations < 2:
        raise key_error(source, "num_generations", "num_generations must be at least 2 (GRPO compares completions "
                                                   f"of one prompt), got {generations!r}")
    if trl.get("top_p") is not None and not 0 < trl["top_p"] <= 1:
        raise key_error(source, "top_p", f"top_p must be in (0, 1], got {trl['top_p']!r}")


def check_trl_types(trl: Mapping[str, Any], source: str = "recipe") -> None:
    """Each scalar GRPOConfig field's value against the field's type (an int fits a float field)."""
    import dataclasses
    import types
    import typing

    from trl import GRPOConfig

    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    for key, value in trl.items():
        field_info = fields.get(key)
        if field_info is None or value is None:
            continue
        kind = field_info.type
        allowed = set(typing.get_args(kind)) if isinstance(kind, types.UnionType) else {kind}
        scalar = allowed & {int, float, bool, str}
        if not scalar or allowed - scalar - {type(None)}:
            continue  # enums, lists and mixed types: TRL's own checks apply
        if not _matches(value, scalar):
            names = " or ".join(sorted(t.__name__ for t in scalar))
            raise key_error(source, key, f"{key} must be {names}, got {value!r}")


def _matches(value: Any, scalar: set[type]) -> bool:
    """Whether a YAML value fits a field typed with these scalar types (an int fits a float field)."""
    if isinstance(value, bool):
        return bool in scalar
    if isinstance(value, int):
        return bool(scalar & {int, float})
    if isinstance(value, float):
        return float in scalar
    return isinstance(value, str) and str in scalar


def check_trl_choices(trl: Mapping[str, Any], source: str = "recipe") -> None:
    """Values of TRL's enumerated string keys, each checked against what TRL 1.16 implements."""
    for key, choices in TRL_CHOICES.items():
        if key in trl and trl[key] not in choices:
            raise key_error(source, key, f"{key} {trl[key]!r} must be one of {', '.join(map(repr, choices))}")


def check_rollout_settings(trl: Mapping[str, Any], source: str = "recipe") -> None:
    """Configuration errors of the GPU-only vLLM paths, caught without a GPU (TRL checks them only when
    it starts vLLM, i.e. after the model has been loaded on the cluster)."""
    if not trl.get("use_vllm"):
        return
    mode = trl_value(trl, "vllm_mode")
    if mode not in VLLM_MODES:
        raise key_error(source, "vllm_mode", f"vllm_mode {mode!r} must be one of {VLLM_MODES}")
    if mode == "colocate":
        share = trl_value(trl, "vllm_gpu_memory_utilization")
        if not isinstance(share, (int, float)) or not 0 < float(share) < 1:
            raise key_error(source, "vllm_gpu_memory_utilization",
                            "vllm_gpu_memory_utilization must be in (0, 1) in colocate mode (the rest of the GPU "
                            f"trains), got {share!r}")
        for key in ("vllm_server_base_url", "vllm_server_host"):
            if trl.get(key) not in (None, "0.0.0.0"):
                raise key_error(source, key, f"{key} is set but vllm_mode is colocate; set vllm_mode: server")
    tp = trl_value(trl, "vllm_tensor_parallel_size")
    if not isinstance(tp, int) or tp < 1:
        raise key_error(source, "vllm_tensor_parallel_size",
                        f"vllm_tensor_parallel_size must be a positive integer, got {tp!r}")


def check_runtime(optimisation: OptimisationSettings, use_vllm: bool) -> None:
    """Checks that depend on this machine: vLLM and DeepSpeed need their packages and CUDA."""
    import importlib.util

    import torch

    if use_vllm:
        if not torch.cuda.is_available():
            raise RecipeError(
                "use_vllm needs a CUDA GPU; on this machine set use_vllm: false (transformers generate)"
            )
        if importlib.util.find_spec("vllm") is None:
            raise RecipeError(
                "use_vllm needs vLLM: pip install 'trl[vllm]' (TRL 1.16 supports vLLM 0.22-0.31)"
            )
    if optimisation.deepspeed and importlib.util.find_spec("deepspeed") is None:
        raise RecipeError(
            "the recipe sets deepspeed but the package is missing: pip install 'embodied-r[deepspeed]'"
        )
