"""Shared-prefix sampling (training/prefix_generation.py) against TRL's left-padded generation."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM, GenerationConfig

from embodied_r.training import prefix_generation
from embodied_r.training.grpo import build_trainer, train
from embodied_r.training.recipe import RecipeError, load_recipe


def stock_generate(model: Any, prompt_ids: list[list[int]], config: GenerationConfig, pad_id: int,
                   eos_ids: list[int]) -> list[list[int]]:
    """TRL's transformers path: every row left-padded into one batch, then cut at the first EOS."""
    width = max(map(len, prompt_ids))
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompt_ids])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    return prefix_generation.cut_at_eos(out[:, width:], eos_ids)


@pytest.fixture
def tiny_model(tiny_lm_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_lm_dir, dtype=torch.float32).eval()


def groups_of(generations: int) -> list[list[int]]:
    # Three prompts of different lengths, each repeated G times as TRL's sampler lays a generation batch
    # out, plus one row that shares nothing and a one-token prompt (nothing to cache).
    prompts = [[5, 9, 13, 17, 21, 25, 29], [7, 11, 15], [8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 30]]
    return [p for p in prompts for _ in range(generations)] + [[40, 41, 42, 43]] + [[6]]


@pytest.mark.parametrize("generations", [1, 2, 8])
def test_greedy_tokens_equal_trls_left_padded_generation(tiny_model, generations) -> None:
    config = GenerationConfig(max_new_tokens=12, do_sample=False, pad_token_id=3, eos_token_id=[2])
    rows = groups_of(generations)
    shared = prefix_generation.generate_sharing_prompts(tiny_model, rows, config, [2])
    with torch.no_grad():
        assert shared == stock_generate(tiny_model, rows, config, pad_id=3, eos_ids=[2])
    assert all(0 < len(c) <= 12 for c in shared)


def test_sampled_rows_of_a_group_differ_and_follow_the_model(tiny_model) -> None:
    # Sampling draws each row independently from its own cache copy: the rows of one group are not copies
    # of one another, and at a near-zero temperature they are the greedy tokens.
    torch.manual_seed(0)
    rows = groups_of(8)[:8]
    hot = GenerationConfig(max_new_tokens=10, do_sample=True, temperature=5.0, top_k=0, pad_token_id=3,
                           eos_token_id=[2])
    sampled = prefix_generation.generate_sharing_prompts(tiny_model, rows, hot, [2])
    assert len({tuple(c) for c in sampled}) > 4
    cold = GenerationConfig(max_new_tokens=10, do_sample=True, temperature=1e-4, top_k=0, pad_token_id=3,
                            eos_token_id=[2])
    greedy = GenerationConfig(max_new_tokens=10, do_sample=False, pad_token_id=3, eos_token_id=[2])
    assert (prefix_generation.generate_sharing_prompts(tiny_model, rows, cold, [2])
            == prefix_generation.generate_sharing_prompts(tiny_model, rows, greedy, [2]))


def test_the_reserved_cache_draws_the_tokens_the_growing_cache_draws(tiny_model, monkeypatch) -> None:
    from embodied_r.inference import reserved_cache

    rows = groups_of(4)
    hot = GenerationConfig(max_new_tokens=10, do_sample=True, temperature=5.0, top_k=0, pad_token_id=3,
                           eos_token_id=[2])
    made: list[Any] = []
    original = reserved_cache.reserved_cache_for
    monkeypatch.setattr(reserved_cache, "reserved_cache_for", lambda *a: made.append(original(*a)) or made[-1])
    torch.manual_seed(1)
    reserved = prefix_generation.generate_sharing_prompts(tiny_model, rows, hot, [2])
    assert made and made[0] is not None and made[0].layers[0].used > 0  # the reserved layers took the tokens
    monkeypatch.setattr(reserved_cache, "reserved_cache_for", lambda *a: None)  # the model's own growing cache
    torch.manual_seed(1)
    grown = prefix_generation.generate_sharing_prompts(tiny_model, rows, hot, [2])
    assert reserved == grown and len({tuple(c) for c in grown}) > 4


def test_completions_are_cut_after_the_first_end_token() -> None:
    cut = prefix_generation.cut_at_eos(torch.tensor([[4, 2, 3, 3], [4, 5, 6, 7], [0, 9, 2, 2]]), [2, 9])
    assert cut == [[4, 2], [4, 5, 6, 7], [0, 9]]


def test_unsupported_batches_are_named(tiny_model) -> None:
    plain = GenerationConfig(max_new_tokens=4)
    assert prefix_generation.unsupported_reason(tiny_model, plain, has_images=False) is None
    assert prefix_generation.unsupported_reason(tiny_model, plain, has_images=True) == "image rows"
    static = GenerationConfig(max_new_tokens=4, cache_implementation="static")
    assert "static" in prefix_generation.unsupported_reason(tiny_model, static, has_images=False)


def test_training_samples_through_the_shared_path_and_the_switch_turns_it_off(tiny_recipe, varying_reward, tmp_path,
                                                                             monkeypatch, caplog) -> None:
    with pytest.raises(RecipeError, match="shared_prefix_generation"):
        load_recipe(tiny_recipe(shared_prefix_generation="yes"))
    calls: list[int] = []
    original = prefix_generation.generate_sharing_prompts

    def record(model: Any, prompt_ids: list[list[int]], *args: Any) -> Any:
        calls.append(len(prompt_ids))
        return original(model, prompt_ids, *args)

    monkeypatch.setattr(prefix_generation, "generate_sharing_prompts", record)
    caplog.set_level(logging.INFO, logger="embodied_r.training.trainer")
    # true: the shared path whatever the first step's timing says (auto is tests/training/test_path_choice.py).
    summary = train(load_recipe(tiny_recipe(rewards=[varying_reward], max_steps=2, shared_prefix_generation=True)))
    assert summary["global_step"] == 2
    # The first step's self-check (the first group's 2 rows, greedy), then each step's batch: the tiny
    # recipe's 2 prompts x 2 completions.
    assert calls == [2, 4, 4]
    assert not [r for r in caplog.records if "shared-prefix generation not used" in r.getMessage()]

    calls.clear()
    trainer, _ = build_trainer(load_recipe(tiny_recipe(rewards=[varying_reward], shared_prefix_generation=False,
                                                        output_dir=str(tmp_path / "off"))))
    assert trainer.shared_prefix_generation is False
    trainer.train()
    assert calls == []
    assert any("shared_prefix_generation is off" in r.getMessage() for r in caplog.records)


def test_sampled_tokens_equal_trls_under_the_same_seed(tiny_model) -> None:
    # All rows are decoded in one call, in TRL's row order, so the sampler draws the same random numbers
    # for the same rows: equal tokens mean equal sampling distributions, not only equal argmaxes.
    config = GenerationConfig(max_new_tokens=10, do_sample=True, temperature=1.0, top_k=50, top_p=0.9,
                              pad_token_id=3, eos_token_id=[2])
    rows = groups_of(4)
    torch.manual_seed(7)
    shared = prefix_generation.generate_sharing_prompts(tiny_model, rows, config, [2])
    torch.manual_seed(7)
    with torch.no_grad():
        stock = stock_generate(tiny_model, rows, config, pad_id=3, eos_ids=[2])
    assert shared == stock
    assert len({tuple(c) for c in shared}) > 4  # sampled, not greedy
