"""The ``completion_prefix`` recipe key: the prefix is prompt-side in training, the rewards and the
held-out evaluation see prefix + completion, and training and evaluation render the same tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.core.chat import render_chat
from embodied_r.methods.format import format_steps
from embodied_r.training import trainer
from embodied_r.training.data import load_prompt_rows
from embodied_r.training.grpo import train
from embodied_r.training.recipe import RecipeError, load_recipe

PREFIX = "<think>"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_prefix_is_prompt_side_and_rewarded_with_the_completion(tiny_recipe, tiny_lm_dir, monkeypatch) -> None:
    from transformers import AutoTokenizer

    seen: list[list[int]] = []
    original = trainer.ReasonerGRPOTrainer._generate_single_turn

    def spy(self, prompt_ids, *args, **kwargs):
        seen.extend(list(p) for p in prompt_ids)
        return original(self, prompt_ids, *args, **kwargs)

    monkeypatch.setattr(trainer.ReasonerGRPOTrainer, "_generate_single_turn", spy)
    first = load_recipe(tiny_recipe())
    heldout = str(Path(first.train_data).parent / "heldout.jsonl")
    recipe = load_recipe(
        tiny_recipe(
            max_steps=1,
            rewards=["format_soft", "format"],
            completion_prefix=PREFIX,
            eval_data=heldout,
            eval_max_new_tokens=4,
            sample_completions=4,
            save_steps=100,
        )
    )
    train(recipe)

    # Generation started from exactly what evaluation renders with the same prefix, for every row.
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_lm_dir))
    rendered = {
        tuple(tokenizer(render_chat(tokenizer, row.prompt, PREFIX), add_special_tokens=False)["input_ids"])
        for row in load_prompt_rows(recipe.train_data)
    }
    prefix_ids = tokenizer(PREFIX, add_special_tokens=False)["input_ids"]
    assert len(seen) == 4 and all(p[-len(prefix_ids):] == prefix_ids for p in seen)
    assert {tuple(p) for p in seen} <= rendered

    # The rewards saw prefix + completion: every sample opens the think block, so format_soft >= 0.25.
    samples = read_jsonl(recipe.output_dir / "samples.jsonl")
    assert len(samples) == 4
    for sample in samples:
        assert sample["completion"].startswith(PREFIX)
        assert sample["rewards"]["format_soft"] == 0.25 * format_steps(sample["completion"]) >= 0.25

    # Held-out evaluation in training used the same prefix, and it is part of each stored completion.
    predictions = read_jsonl(recipe.output_dir / "eval" / "predictions_step000000.jsonl")
    assert len(predictions) == 2 and all(p["completion"].startswith(PREFIX) for p in predictions)


def test_completion_prefix_must_be_text(tiny_recipe) -> None:
    with pytest.raises(RecipeError, match="completion_prefix"):
        load_recipe(tiny_recipe(completion_prefix=["<think>"]))


def test_warmstart_recipe_loads_with_prefix_and_soft_format() -> None:
    recipe_path = Path(__file__).resolve().parents[2] / "recipes" / "embodied_r" / "cpu_smollm2_warmstart.yaml"
    recipe = load_recipe(recipe_path)
    assert recipe.completion_prefix == PREFIX
    assert recipe.reward_names[:2] == ["format_soft", "format"]
    official = load_recipe(recipe_path.with_name("cpu_smollm2.yaml"))
    assert official.completion_prefix == "" and "format_soft" not in official.reward_names
