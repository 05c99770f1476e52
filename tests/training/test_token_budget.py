"""Token-budget backward passes (training/token_budget.py): a micro-batch differentiated in slices has the
loss and every parameter gradient of the whole micro-batch, for each loss normalisation TRL has, on both
the shared-prefix and TRL's per-row path; what cannot be sliced exactly is differentiated whole, logged."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
import torch
from test_shared_prefix import (
    GRAD_RTOL_FP32,
    ForwardLog,
    assert_gradients_close,
    grpo_inputs,
    loss_and_gradients,
    make_batch,
    make_trainer,
    perturb,
)

from embodied_r.training import token_budget
from embodied_r.training.grpo import train
from embodied_r.training.recipe import RecipeError, load_recipe
from embodied_r.training.trainer import ReasonerGRPOTrainer

# One loss of each normalisation: per row (grpo, dr_grpo), per token of the micro-batch (bnpo), by the
# generation batch's token count (dapo, TRL's default).
LOSSES = ["grpo", "dr_grpo", "bnpo", "dapo"]


def sliced_and_whole(trainer: ReasonerGRPOTrainer, inputs: dict[str, Any], shared: bool, budget: int,
                     ) -> tuple[tuple[torch.Tensor, dict[str, torch.Tensor]],
                                tuple[torch.Tensor, dict[str, torch.Tensor]],
                                list[tuple[int, int]]]:
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # what Trainer sets at the start of each step
    forwards = ForwardLog(trainer.model)
    trainer.max_train_batch_tokens = None
    whole = loss_and_gradients(trainer, inputs, shared)
    forwards.take()
    trainer.max_train_batch_tokens = budget
    sliced = loss_and_gradients(trainer, inputs, shared)
    shapes = forwards.take()
    forwards.handle.remove()
    return whole, sliced, shapes


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("loss_type", LOSSES)
def test_slices_give_the_whole_batch_loss_and_gradients(tiny_lm_dir, tmp_path, loss_type, shared) -> None:
    trainer = make_trainer(tiny_lm_dir, tmp_path, beta=0.04, num_iterations=2)
    trainer.loss_type = loss_type
    perturb(trainer.ref_model, seed=1)  # the KL term has a gradient
    tok = trainer.processing_class
    # 4 prompts x 4 completions, one truncated and one fully masked row; a budget below one group's tokens,
    # so some groups are split across slices too.
    batch = make_batch([5, 13, 8, 8], 4, 10, tok.pad_token_id, tok.eos_token_id, seed=3, mask_truncated=True)
    inputs = grpo_inputs(trainer, batch, shared, seed=7)
    perturb(trainer.model, seed=2, scale=0.01)
    width = batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
    budget = 2 * width if not shared else 40

    (whole_loss, whole_grads), (sliced_loss, sliced_grads), shapes = sliced_and_whole(trainer, inputs, shared, budget)

    torch.testing.assert_close(sliced_loss, whole_loss, rtol=1e-5, atol=1e-7)
    assert_gradients_close(sliced_grads, whole_grads, GRAD_RTOL_FP32)
    assert len(shapes) >= 3, shapes  # really sliced
    if not shared:  # rows keep the batch's width; no forward holds more than the budget
        assert all(rows * columns <= budget for rows, columns in shapes), shapes


def test_within_budget_the_batch_is_not_sliced(tiny_lm_dir, tmp_path) -> None:
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([5, 9], 2, 6, tok.pad_token_id, tok.eos_token_id)
    inputs = grpo_inputs(trainer, batch, shared=False, seed=1)
    rows, width = batch["prompt_ids"].size(0), batch["prompt_ids"].size(1) + 6
    _, _, shapes = sliced_and_whole(trainer, inputs, shared=False, budget=rows * width)
    assert shapes == [(rows, width)]


def test_a_loss_that_is_not_a_per_row_sum_is_differentiated_whole(tiny_lm_dir, tmp_path, caplog) -> None:
    # top_entropy_quantile < 1 masks by a quantile of the whole micro-batch: slices would change it.
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    trainer.top_entropy_quantile = 0.5
    tok = trainer.processing_class
    batch = make_batch([5, 9, 7], 2, 6, tok.pad_token_id, tok.eos_token_id)
    inputs = grpo_inputs(trainer, batch, shared=True, seed=1)
    caplog.set_level(logging.INFO, logger="embodied_r.training.trainer")
    for _ in range(2):
        (whole_loss, _), (loss, _), shapes = sliced_and_whole(trainer, inputs, shared=True, budget=8)
        assert len(shapes) == 1 and torch.equal(loss, whole_loss)
    notes = [r for r in caplog.records if "max_train_batch_tokens not applied" in r.getMessage()]
    assert len(notes) == 1 and "top_entropy_quantile" in notes[0].getMessage()
    assert notes[0].levelno == logging.WARNING


def group(rows: list[int], base: int, each: int) -> token_budget.Group:
    return token_budget.Group(rows, base, [each] * len(rows))


def test_plan_keeps_groups_whole_while_they_fit_and_splits_the_rest() -> None:
    groups = [group([0, 1], 10, 5), group([2, 3], 10, 5), group([4, 5, 6, 7], 10, 10), group([8], 0, 99)]
    # 20 + 20 fit in 45; the 50-token group splits into runs of (10 + 10 + 10) and (10 + 10 + 10); the
    # 99-token row goes alone.
    assert token_budget.plan_slices(groups, 45) == [[0, 1, 2, 3], [4, 5, 6], [7], [8]]
    assert token_budget.plan_slices(groups, 1000) == [[0, 1, 2, 3, 4, 5, 6, 7, 8]]


def test_slice_scales_sum_to_one() -> None:
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]])
    inputs = {"prompt_ids": torch.zeros(4, 2), "completion_mask": mask}
    halves = ([0, 3], [1, 2])
    for loss_type in ("grpo", "bnpo"):
        assert math.isclose(sum(token_budget.slice_scale(loss_type, inputs, rows) for rows in halves), 1.0)
    assert token_budget.slice_scale("bnpo", inputs, [0, 3]) == pytest.approx(2 / 6)
    assert token_budget.slice_scale("dapo", inputs, [0, 3]) == 1.0  # its normaliser is the generation batch's


def test_recipe_checks_the_budget(tiny_recipe) -> None:
    for bad in (0, -5, "abc", True, 1.5):
        with pytest.raises(RecipeError, match="max_train_batch_tokens"):
            load_recipe(tiny_recipe(max_train_batch_tokens=bad))


def test_a_training_run_with_a_small_budget_slices_and_finishes(tiny_recipe, varying_reward, caplog) -> None:
    caplog.set_level(logging.INFO, logger="embodied_r.training.trainer")
    recipe = load_recipe(tiny_recipe(rewards=[varying_reward, "format"], max_train_batch_tokens=64,
                                     save_steps=100))
    summary = train(recipe)
    assert summary["global_step"] == 2 and math.isfinite(summary["train_loss"])
    assert any("differentiated in slices" in r.getMessage() for r in caplog.records)


def test_slices_are_sized_for_the_per_row_path_when_packs_would_not_fit(tiny_lm_dir, tmp_path, monkeypatch) -> None:
    # Packs whose dense attention would exceed the cap go the per-row way; their slices then count rows at
    # the padded width, so no forward holds more than the budget.
    from embodied_r.training import shared_prefix

    monkeypatch.setattr(shared_prefix, "MAX_DENSE_ATTENTION_BYTES", 1)
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([5, 13, 8, 8], 4, 10, tok.pad_token_id, tok.eos_token_id, seed=3)
    inputs = grpo_inputs(trainer, batch, shared=True, seed=7)
    width = batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
    (whole_loss, whole_grads), (loss, grads), shapes = sliced_and_whole(trainer, inputs, shared=True,
                                                                         budget=3 * width)
    assert all(rows * columns <= 3 * width for rows, columns in shapes) and len(shapes) >= 5, shapes
    torch.testing.assert_close(loss, whole_loss, rtol=1e-5, atol=1e-7)
    assert_gradients_close(grads, whole_grads, GRAD_RTOL_FP32)


class LayerCalls:
    """How many times the first decoder layer's MLP started: twice per backward pass when checkpointed
    (the layer's ``forward`` is what is recomputed, so the modules inside it run again; a pre-hook, because
    the recomputation stops as soon as the last saved tensor is back, before the MLP returns)."""

    def __init__(self, model: Any) -> None:
        self.count = 0
        self.handle = model.model.layers[0].mlp.register_forward_pre_hook(self._record)

    def _record(self, *_: Any) -> None:
        self.count += 1


@pytest.mark.parametrize("budget", [None, 40])
@pytest.mark.parametrize("shared", [True, False])
def test_checkpointing_long_backward_passes_keeps_loss_and_gradients(tiny_lm_dir, tmp_path, shared, budget) -> None:
    trainer = make_trainer(tiny_lm_dir, tmp_path, beta=0.04, num_iterations=2)
    perturb(trainer.ref_model, seed=1)
    tok = trainer.processing_class
    batch = make_batch([5, 13, 8, 8], 4, 10, tok.pad_token_id, tok.eos_token_id, seed=3, mask_truncated=True)
    inputs = grpo_inputs(trainer, batch, shared, seed=7)
    perturb(trainer.model, seed=2, scale=0.01)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    trainer.max_train_batch_tokens = budget if shared else (budget and 2 * (batch["prompt_ids"].size(1) + 10))
    calls = LayerCalls(trainer.model)
    trainer.checkpoint_over_tokens = None
    plain_loss, plain_grads = loss_and_gradients(trainer, inputs, shared)
    plain_calls, calls.count = calls.count, 0
    trainer.checkpoint_over_tokens = 1  # every backward pass holds more
    loss, grads = loss_and_gradients(trainer, inputs, shared)
    torch.testing.assert_close(loss, plain_loss, rtol=1e-5, atol=1e-7)
    assert_gradients_close(grads, plain_grads, GRAD_RTOL_FP32)
    assert calls.count == 2 * plain_calls  # each layer's forward ran again in the backward
    assert not trainer.model.is_activation_checkpointing  # only for the update: generation stays fast
    calls.count = 0
    trainer.checkpoint_over_tokens = 10**6  # nothing is that long: the fast path
    loss_and_gradients(trainer, inputs, shared)
    assert calls.count == plain_calls


def test_checkpointing_leaves_no_embedding_hooks_behind_with_lora(tiny_lm_dir, tmp_path) -> None:
    from peft import LoraConfig, get_peft_model

    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([5, 9], 2, 6, tok.pad_token_id, tok.eos_token_id)
    inputs = grpo_inputs(trainer, batch, shared=True, seed=1)
    trainer.model = get_peft_model(trainer.model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    trainer.checkpoint_over_tokens = 1
    base = trainer.model.get_base_model()
    embedding_hooks = len(base.get_input_embeddings()._forward_hooks)
    for _ in range(3):
        trainer.model.zero_grad(set_to_none=True)
        trainer.compute_loss(trainer.model, inputs).backward()
    lora_grads = [p.grad for name, p in trainer.model.named_parameters() if "lora_" in name and p.requires_grad]
    assert lora_grads and any(float(g.abs().sum()) > 0 for g in lora_grads)  # gradients reach the adapters
    assert len(base.get_input_embeddings()._forward_hooks) == embedding_hooks
    assert not base.is_activation_checkpointing


def test_checkpointed_packs_are_held_one_layer_at_a_time(tiny_lm_dir, tmp_path, monkeypatch) -> None:
    # A pack whose dense attention over all layers is over the cap but one layer's is not stays on the
    # shared-prefix path when checkpointed (its backward holds one layer's probabilities at a time).
    from embodied_r.training import shared_prefix

    trainer = make_trainer(tiny_lm_dir, tmp_path)
    tok = trainer.processing_class
    batch = make_batch([5, 13], 4, 10, tok.pad_token_id, tok.eos_token_id, seed=3)
    inputs = grpo_inputs(trainer, batch, shared=True, seed=7)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    everything = list(range(batch["prompt_ids"].size(0)))
    held = trainer._dense_attention_bytes(trainer.model, inputs, everything)
    monkeypatch.setattr(shared_prefix, "MAX_DENSE_ATTENTION_BYTES", held - 1)
    forwards = ForwardLog(trainer.model)
    trainer.checkpoint_over_tokens = None
    loss_and_gradients(trainer, inputs, shared=True)
    assert forwards.take() == [tuple(batch["prompt_ids"].shape[:1]) + (batch["prompt_ids"].size(1) + 10,)]
    trainer.checkpoint_over_tokens = 1
    loss_and_gradients(trainer, inputs, shared=True)
    packs = forwards.take()
    assert packs and all(rows == 2 for rows, _ in packs), packs  # two packed sequences, forward and recompute


def test_recipe_checks_the_checkpoint_threshold(tiny_recipe) -> None:
    for bad in (0, -5, "abc", True, 1.5):
        with pytest.raises(RecipeError, match="checkpoint_over_tokens"):
            load_recipe(tiny_recipe(checkpoint_over_tokens=bad, gradient_checkpointing=False))
    recipe = load_recipe(tiny_recipe(checkpoint_over_tokens=2048, gradient_checkpointing=False))
    assert recipe.checkpoint_over_tokens == 2048
    # TRL's GRPOConfig checkpoints every batch unless told otherwise: the threshold would do nothing.
    for conflicting in ({}, {"gradient_checkpointing": True}):
        with pytest.raises(RecipeError, match="set gradient_checkpointing: false"):
            load_recipe(tiny_recipe(checkpoint_over_tokens=2048, **conflicting))


def test_a_training_run_checkpoints_long_backward_passes_and_finishes(tiny_recipe, varying_reward, caplog) -> None:
    caplog.set_level(logging.INFO, logger="embodied_r.training.trainer")
    recipe = load_recipe(tiny_recipe(rewards=[varying_reward, "format"], checkpoint_over_tokens=8,
                                     gradient_checkpointing=False, save_steps=100))
    summary = train(recipe)
    assert summary["global_step"] == 2 and math.isfinite(summary["train_loss"])
    assert any("recomputes activations layer by layer" in r.getMessage() for r in caplog.records)
