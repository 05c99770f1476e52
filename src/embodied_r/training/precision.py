"""Which dtype the trained weights are kept in, and whether the forward passes run in bf16 autocast.

An Adam step moves each weight by about the learning rate. bf16 keeps 8 significant bits, so a weight of
0.05 can only move in steps of 2**-12 (about 2.4e-4): an update of 5e-5 applied to bf16 weights rounds
back to the same weight. Measured on SmolLM2-135M's bf16 weights, one such step at 5e-5 leaves 92 % of
them unchanged (84 % at 1e-4, 98 % at 1e-5), so full fine-tuning with bf16 weights mostly does not
train. ``dtype: auto`` therefore keeps the weights being trained in float32 and runs the passes in bf16
autocast where bf16 is available (mixed precision, as DeepSpeed's bf16 optimizer does with its fp32
master copy). LoRA keeps a bf16 base: the base is frozen and PEFT keeps the adapters in float32. Under
DeepSpeed bf16 weights are right: its bf16 optimizer keeps the float32 master copy itself. Elsewhere an
explicit ``dtype: bfloat16`` is honoured (half the weight memory) with a warning.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingPrecision:
    weights: str  # the dtype name given to from_pretrained
    bf16_autocast: bool


def deepspeed_launch() -> bool:
    """Launched by ``accelerate launch`` with a DeepSpeed config (accelerate sets this variable)."""
    return os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() in ("1", "true")


def training_precision(dtype: str, lora: bool = False, bf16: bool | None = None,
                       deepspeed: bool = False) -> TrainingPrecision:
    """The precision to train with for a recipe's ``dtype`` (and TRL's ``bf16`` key when the recipe
    sets it); ``lora``: only adapters are trained; ``deepspeed``: the recipe sets a DeepSpeed config."""
    from embodied_r.inference.models import torch_dtype_name

    name = torch_dtype_name(dtype)
    master_copy_elsewhere = lora or deepspeed or deepspeed_launch()
    if dtype == "auto" and name == "bfloat16" and not master_copy_elsewhere:
        return TrainingPrecision("float32", True if bf16 is None else bool(bf16))
    if name == "bfloat16" and not master_copy_elsewhere:
        logger.warning("dtype bfloat16: the trained weights are kept in bf16, where an update smaller than about "
                       "1/256 of a weight rounds away (at a learning rate of 5e-5 most of a small model's weights "
                       "do not move); dtype: auto keeps them in float32 with bf16 passes")
    return TrainingPrecision(name, name == "bfloat16" if bf16 is None else bool(bf16))
