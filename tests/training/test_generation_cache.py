"""GRPO rollouts decode with a KV cache even though the Trainer sets ``model.config.use_cache = False``.

Without the cache every new token re-reads the whole ~1,000-token prompt, which on a CPU is the
difference between seconds and minutes per step; this guards TRL's explicit generation config, on TRL's
sampling path and on the shared-prefix one (one prefill of the distinct prompts, then one token per forward).
"""

from __future__ import annotations

import pytest
import torch

from embodied_r.training.grpo import build_trainer
from embodied_r.training.recipe import load_recipe


def forward_shapes(tiny_recipe, shared: bool) -> list[tuple[int, int]]:
    """(rows, tokens) of every no-grad forward of one training step's sampling."""
    # The update's first-step check and timing (no-grad passes) are left out; sampling is forced either way.
    recipe = load_recipe(tiny_recipe(max_steps=1, max_completion_length=6, shared_prefix_generation=shared,
                                     shared_prefix_update=False))
    trainer, _ = build_trainer(recipe)
    assert trainer.model.config.use_cache is False  # what makes the guard necessary
    shapes: list[tuple[int, int]] = []
    original = trainer.model.forward

    def spy(*args, **kwargs):
        if not torch.is_grad_enabled() and kwargs.get("input_ids") is not None:
            shapes.append(tuple(kwargs["input_ids"].shape))
        return original(*args, **kwargs)

    trainer.model.forward = spy
    trainer.train()
    return shapes


def prefills_and_decodes(shapes: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """The forward shapes cut where a forward reads more than one token: ``[[prefill, decode...], ...]``."""
    runs: list[list[tuple[int, int]]] = []
    for shape in shapes:
        if shape[1] > 1 or not runs:
            runs.append([shape])
        else:
            runs[-1].append(shape)
    return runs


@pytest.mark.parametrize("shared", [False, True], ids=["trl-sampling", "shared-prefix-sampling"])
def test_rollouts_feed_one_new_token_per_forward(tiny_recipe, shared: bool) -> None:
    shapes = forward_shapes(tiny_recipe, shared)
    runs = prefills_and_decodes(shapes)
    # Under true the first step's self-check runs before the rollout: a one-token warm-up call, then the first
    # group decoded greedily both ways.
    assert len(runs) == (4 if shared else 1), f"forward shapes {shapes}"
    for check in runs[:-1]:
        assert {tokens for _, tokens in check[1:]} <= {1}, f"the check re-reads the sequence: {shapes}"
    prefill, *decode = runs[-1]
    # TRL's path prefills all 4 rows of the tiny recipe (2 prompts x 2 completions); the shared path
    # prefills the 2 distinct prompts, then decodes every row together.
    assert prefill[0] == (2 if shared else 4) and prefill[1] > 1 and decode, f"forward shapes {shapes}"
    assert {tokens for _, tokens in decode} == {1}, f"decoding re-reads the sequence: forward shapes {shapes}"
    assert {rows for rows, _ in decode} == {4}, f"forward shapes {shapes}"
