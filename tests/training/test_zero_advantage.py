"""Rows with advantage 0 in the GRPO update (training/zero_advantage.py): ``skip`` leaves them out with the
same loss and gradients as TRL's full update and fewer rows through the model; ``drop`` removes the groups
whose rewards did not vary from the loss's normaliser too; where exactness cannot be guaranteed every row
is updated."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from test_shared_prefix import (
    GRAD_RTOL_FP32,
    ForwardLog,
    assert_gradients_close,
    logps,
    make_batch,
    make_trainer,
    perturb,
)
from trl import GRPOTrainer

from embodied_r.training.recipe import RecipeError, load_recipe
from embodied_r.training.trainer import ReasonerGRPOTrainer
from embodied_r.training.zero_advantage import rows_of_varying_groups, rows_with_advantage, uniform_group_rows


def prepared(tiny_lm_dir: Any, tmp_path: Any, beta: float = 0.0) -> tuple[ReasonerGRPOTrainer, dict[str, Any]]:
    trainer = make_trainer(tiny_lm_dir, tmp_path, beta=beta, num_iterations=2)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    tok = trainer.processing_class
    batch = make_batch([5, 13, 8, 8], 4, 10, tok.pad_token_id, tok.eos_token_id, seed=3)
    old, _ = logps(trainer, trainer.model, batch, shared=True, batch_size=4)
    ref = logps(trainer, trainer.ref_model, batch, shared=True, batch_size=4)[0] if beta else None
    perturb(trainer.model, seed=2, scale=0.01)  # the policy moved since sampling: ratios differ from 1
    rows = batch["prompt_ids"].size(0)
    inputs = {**batch, "advantages": torch.randn(rows, generator=torch.Generator().manual_seed(7)),
              "old_per_token_logps": old, "ref_per_token_logps": ref,
              "num_items_in_batch": batch["completion_mask"].sum()}
    # Two of the four groups (rows sharing a prompt) had one reward for every completion: advantage 0.
    groups: dict[tuple[int, ...], list[int]] = {}
    for row in range(batch["prompt_ids"].size(0)):
        key = tuple(batch["prompt_ids"][row][batch["prompt_mask"][row] == 1].tolist())
        groups.setdefault(key, []).append(row)
    dead = [row for group in list(groups.values())[:2] for row in group]
    inputs["advantages"][dead] = 0.0
    return trainer, inputs


def run(trainer: ReasonerGRPOTrainer, inputs: dict[str, Any], treatment: str,
        ) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
    trainer.zero_variance_groups = treatment
    forwards = ForwardLog(trainer.model)
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    rows = sum(shape[0] for shape in forwards.take())
    forwards.handle.remove()
    grads = {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
             for n, p in trainer.model.named_parameters()}
    return loss.detach(), grads, rows


def test_skip_has_the_full_update_s_loss_and_gradients_with_fewer_rows(tiny_lm_dir, tmp_path) -> None:
    trainer, inputs = prepared(tiny_lm_dir, tmp_path)
    full_loss, full_grads, full_rows = run(trainer, inputs, "update")
    skip_loss, skip_grads, skip_rows = run(trainer, inputs, "skip")
    torch.testing.assert_close(skip_loss, full_loss, rtol=1e-5, atol=1e-6)
    assert_gradients_close(skip_grads, full_grads, GRAD_RTOL_FP32)
    assert skip_rows < full_rows  # the forward passes saw fewer completions


def test_drop_renormalises_over_the_groups_that_varied(tiny_lm_dir, tmp_path) -> None:
    trainer, inputs = prepared(tiny_lm_dir, tmp_path)
    full_loss, full_grads, _ = run(trainer, inputs, "update")
    drop_loss, drop_grads, _ = run(trainer, inputs, "drop")
    live = inputs["advantages"] != 0
    groups_tokens = float(inputs["completion_mask"][live].sum())
    # dapo divides by the tokens it counts: every token before, only the varying groups' tokens now.
    ratio = float(inputs["completion_mask"].sum()) / groups_tokens
    torch.testing.assert_close(drop_loss, full_loss * ratio, rtol=1e-4, atol=1e-6)
    assert_gradients_close(drop_grads, {k: g * ratio for k, g in full_grads.items()}, GRAD_RTOL_FP32)


def test_a_step_with_no_advantage_moves_nothing(tiny_lm_dir, tmp_path) -> None:
    trainer, inputs = prepared(tiny_lm_dir, tmp_path)
    inputs["advantages"][:] = 0.0
    for treatment in ("skip", "drop"):
        loss, grads, rows = run(trainer, inputs, treatment)
        assert float(loss) == 0.0 and rows == 0  # one process: no forward pass at all
        assert all(float(g.abs().max()) == 0.0 for g in grads.values())


def test_with_a_kl_term_every_row_is_updated(tiny_lm_dir, tmp_path, caplog) -> None:
    trainer, inputs = prepared(tiny_lm_dir, tmp_path, beta=0.04)
    _, full_grads, full_rows = run(trainer, inputs, "update")
    with caplog.at_level(logging.INFO):
        _, grads, rows = run(trainer, inputs, "skip")
    assert rows == full_rows
    assert_gradients_close(grads, full_grads, GRAD_RTOL_FP32)
    assert "beta > 0" in caplog.text


def test_a_group_whose_rewards_did_not_vary_gets_advantage_exactly_zero(tiny_lm_dir, tmp_path,
                                                                         monkeypatch) -> None:
    # Two groups of 8 (format, accuracy; weights 0.2 : 0.8): the first formatted and wrong throughout, the
    # second half right. TRL's float32 group mean of eight 0.2s is not exactly 0.2, so the first group's
    # advantages come out as one value of rounding size instead of 0; the trainer must make them 0.
    rewards = torch.tensor([[1.0, 0.0]] * 8 + [[1.0, 1.0], [1.0, 0.0]] * 4)
    total = (rewards * torch.tensor([0.2, 0.8])).nansum(dim=1)
    mean = total.view(-1, 8).mean(dim=1).repeat_interleave(8)
    std = total.view(-1, 8).std(dim=1).repeat_interleave(8)
    trl = (total - mean) / (std + 1e-4)
    trl[:8] = 1.5e-4  # the rounding value, whether or not this torch's sum happens to be exact
    groups = [list(range(8)), list(range(8, 16))]
    assert rows_with_advantage({"advantages": trl}) == list(range(16))  # as TRL hands it over: no row skipped
    assert uniform_group_rows(rewards, 8).tolist() == [True] * 8 + [False] * 8
    trainer = make_trainer(tiny_lm_dir, tmp_path)
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions",
                        lambda self, inputs: {"advantages": trl.clone()})
    for treatment in ("skip", "drop", "update"):
        trainer.zero_variance_groups = treatment
        trainer._uniform_rows = uniform_group_rows(rewards, 8)  # what _calculate_rewards leaves for this batch
        advantages = trainer._generate_and_score_completions({})["advantages"]
        assert torch.equal(advantages[8:], trl[8:])  # the group that varied keeps TRL's advantages
        if treatment == "update":
            assert torch.equal(advantages, trl)  # update stays TRL's update
        else:
            assert bool((advantages[:8] == 0).all())
            live = {"advantages": advantages}
            assert rows_with_advantage(live) == list(range(8, 16))
            assert rows_of_varying_groups(live, groups) == list(range(8, 16))


def test_the_recipe_checks_the_treatment(tiny_recipe) -> None:
    tiny_recipe = tiny_recipe()
    with pytest.raises(RecipeError, match="must be one of update, skip, drop"):
        load_recipe(tiny_recipe, overrides=["zero_variance_groups=sometimes"])
    with pytest.raises(RecipeError, match="drop is not defined for loss_type 'grpo'"):
        load_recipe(tiny_recipe, overrides=["zero_variance_groups=drop", "loss_type=grpo"])
    assert load_recipe(tiny_recipe).zero_variance_groups == "skip"
