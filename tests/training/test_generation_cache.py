"""GRPO rollouts decode with a KV cache even though the Trainer sets ``model.config.use_cache = False``.

Without the cache every new token re-reads the whole ~1,000-token prompt, which on a CPU is the
difference between seconds and minutes per step; this guards TRL's explicit generation config, on TRL's
sampling path and on the shared-prefix one (a prefill per distinct prompt, then one token per forward).
"""

from __future__ import annotations

import pytest
import torch

from embodied_r.training.grpo import build_trainer
from embodied_r.training.recipe import load_recipe


def forward_lengths(tiny_recipe, shared: bool) -> list[int]:
    recipe = load_recipe(tiny_recipe(max_steps=1, max_completion_length=6, shared_prefix_generation=shared))
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
    return lengths


def prefills_and_decodes(lengths: list[int]) -> list[list[int]]:
    """The forward lengths cut where a forward reads more than one token: ``[[prefill, decode...], ...]``."""
    runs: list[list[int]] = []
    for length in lengths:
        if length > 1 or not runs:
            runs.append([length])
        else:
            runs[-1].append(length)
    return runs


@pytest.mark.parametrize("shared", [False, True], ids=["trl-sampling", "shared-prefix-sampling"])
def test_rollouts_feed_one_new_token_per_forward(tiny_recipe, shared: bool) -> None:
    lengths = forward_lengths(tiny_recipe, shared)
    runs = prefills_and_decodes(lengths)
    # TRL's path prefills the whole left-padded batch once; the shared path prefills each distinct prompt.
    assert len(runs) == (2 if shared else 1), f"forward lengths {lengths}"
    for prefill, *decode in runs:
        assert prefill > 1 and decode, f"forward lengths {lengths}"
        assert set(decode) == {1}, f"decoding re-reads the sequence: forward lengths {lengths}"
