"""GRPO rollouts decode with a KV cache even though the Trainer sets ``model.config.use_cache = False``.

Without the cache every new token re-reads the whole ~1,000-token prompt, which on a CPU is the
difference between seconds and minutes per step; this guards TRL's explicit generation config.
"""

from __future__ import annotations

import torch

from embodied_r.training.grpo import build_trainer
from embodied_r.training.recipe import load_recipe


def test_rollouts_feed_one_new_token_per_forward(tiny_recipe) -> None:
    recipe = load_recipe(tiny_recipe(max_steps=1, max_completion_length=6))
    trainer, _ = build_trainer(recipe)
    assert trainer.model.config.use_cache is False  # what makes the guard necessary
    lengths: list[int] = []
    original = trainer.model.forward

    def spy(*args, **kwargs):
        if not torch.is_grad_enabled() and kwargs.get("input_ids") is not None:
            lengths.append(int(kwargs["input_ids"].shape[1]))
        return original(*args, **kwargs)

    trainer.model.forward = spy
    trainer.train()
    prefill, decode = lengths[0], lengths[1:]
    assert prefill > 1 and decode, lengths
    assert set(decode) == {1}, f"decoding re-reads the sequence: forward lengths {lengths}"
