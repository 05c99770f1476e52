"""Training keeps float32 weights under ``dtype: auto`` where bf16 would round small updates away."""

from __future__ import annotations

import logging

import pytest
import torch
from safetensors.torch import load_file

from embodied_r.training.grpo import build_config, train
from embodied_r.training.precision import TrainingPrecision, training_precision
from embodied_r.training.recipe import load_recipe


@pytest.fixture
def bf16_cpu(monkeypatch):
    """A CPU that ``dtype: auto`` runs in bf16 (AVX-512 bf16), whatever this one has."""
    monkeypatch.setattr("embodied_r.inference.models._cpu_has_bf16", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_trains_float32_weights_with_bf16_passes(bf16_cpu, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        assert training_precision("auto") == TrainingPrecision("float32", True)
        # LoRA trains float32 adapters on a frozen base, which may stay bf16.
        assert training_precision("auto", lora=True) == TrainingPrecision("bfloat16", True)
        assert training_precision("float32") == TrainingPrecision("float32", False)
        assert training_precision("auto", bf16=False) == TrainingPrecision("float32", False)
        # DeepSpeed's bf16 optimizer keeps the float32 master copy itself.
        assert training_precision("auto", deepspeed=True) == TrainingPrecision("bfloat16", True)
        assert training_precision("bfloat16", deepspeed=True) == TrainingPrecision("bfloat16", True)
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        assert training_precision("bfloat16") == TrainingPrecision("bfloat16", True)
    assert "rounds away" in caplog.text


def test_a_deepspeed_launch_keeps_bf16_weights(bf16_cpu, monkeypatch) -> None:
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert training_precision("auto") == TrainingPrecision("bfloat16", True)


def test_the_grpo_config_loads_float32_weights_and_autocasts(bf16_cpu, tiny_recipe) -> None:
    config = build_config(load_recipe(tiny_recipe(dtype="auto")), None)
    assert config.model_init_kwargs["dtype"] == "float32" and config.bf16


def changed_share(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> float:
    """Share of the weights that differ, each compared in the dtype it was trained in."""
    changed = sum(int((after[k] != before[k].to(after[k].dtype)).sum()) for k in after)
    return changed / sum(t.numel() for t in after.values())


@pytest.mark.parametrize("dtype, weights, moved", [("auto", torch.float32, True), ("bfloat16", torch.bfloat16, False)])
def test_a_small_learning_rate_moves_the_weights_only_with_float32_weights(
        bf16_cpu, tiny_recipe, tiny_lm_dir, varying_reward, dtype: str, weights: torch.dtype, moved: bool) -> None:
    # One GRPO step at 2e-5 (Adam moves each weight by about the rate): with float32 weights nearly every
    # weight changes; kept in bf16, most updates are below half a bf16 step and round back.
    recipe = load_recipe(tiny_recipe(dtype=dtype, max_steps=1, learning_rate=2e-5, rewards=[varying_reward],
                                     save_steps=100))
    train(recipe)
    after = load_file(str(recipe.output_dir / "final" / "model.safetensors"))
    assert {t.dtype for t in after.values()} == {weights}
    share = changed_share(load_file(str(tiny_lm_dir / "model.safetensors")), after)
    assert (share > 0.9) if moved else (share < 0.5), share
