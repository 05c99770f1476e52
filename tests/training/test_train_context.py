"""Training prompts follow the recipe's context policy: an over-long row is cut or left out, and
``context.json`` lists it; a recipe with a bad rule is refused by ``--check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import write_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.training.grpo import train
from embodied_r.training.recipe import RecipeError, load_recipe


def _short_rows(n: int) -> list[dict]:
    return [PromptRow(id=f"t{i}", task="direction", answer="B", options=["A. left", "B. right"],
                      prompt=[{"role": "user", "content": f"Frame 0: chair {i} right. Question: where? Choices: "
                               "A. left B. right"}]).to_dict() for i in range(n)]


def _long_row() -> dict:
    repeated = "chair right " * 17_000  # ~200,000 characters: far over the tiny model's 4,096 tokens
    content = f"header\nFrame 0: table ahead.\nFrame 1: {repeated}\nFrame 2: chair right.\nQuestion: where? Choices: " \
              "A. left B. right"
    return PromptRow(id="long", task="direction", answer="B", options=["A. left", "B. right"],
                     prompt=[{"role": "user", "content": content}]).to_dict()


@pytest.mark.parametrize(("rule", "action", "kept"), [("drop-frames", "dropped-frames", 4),
                                                      ("skip", "skipped", 3)])
def test_an_over_long_training_row_is_fitted_or_left_out(rule: str, action: str, kept: int, tiny_recipe) -> None:
    path = tiny_recipe(max_steps=1, context_rule=rule, save_steps=100)
    recipe = load_recipe(path)
    rows = _short_rows(3) + [_long_row()]
    write_jsonl(recipe.train_data, rows)
    summary = train(recipe)
    assert summary["global_step"] == 1
    report = json.loads((recipe.output_dir / "context.json").read_text())
    assert report["total"] == 4 and report["kept"] == kept and report["actions"] == {action: 1}
    detail = report["rows"][0]
    assert detail["id"] == "long" and detail["prompt_tokens"] > report["limit"] == 4096 - 12
    assert summary["prompt_context"]["affected"] == 1
    if rule == "drop-frames":
        assert detail["frames_dropped"] == 2 and detail["kept_tokens"] <= report["limit"]


def test_fitted_rows_keep_the_question_and_say_what_was_cut(tiny_lm_dir: Path) -> None:
    from transformers import AutoTokenizer

    from embodied_r.inference.context_policy import ContextPolicy
    from embodied_r.training.data import fit_rows_to_context

    rows = [PromptRow.from_dict(r) for r in _short_rows(2) + [_long_row()]]
    fitted, report = fit_rows_to_context(rows, AutoTokenizer.from_pretrained(tiny_lm_dir), ContextPolicy(), 4000)
    assert [r.id for r in fitted] == ["t0", "t1", "long"] and fitted[:2] == rows[:2]
    content = fitted[2].prompt[0]["content"]
    assert "chair right chair right" not in content and content.endswith("Choices: A. left B. right")
    assert "Frame 2: chair right." in content and fitted[2].meta["context"]["action"] == "dropped-frames"
    assert rows[2].prompt[0]["content"].count("chair right") > 1000  # the caller's row is not modified
    assert report["affected"] == 1 and report["rows"][0]["id"] == "long"


def test_every_row_skipped_is_a_clear_error(tiny_recipe) -> None:
    recipe = load_recipe(tiny_recipe(context_rule="skip", max_prompt_tokens=5))
    with pytest.raises(RecipeError, match="no training row fits the model's context under the skip rule"):
        train(recipe)


def test_check_refuses_bad_context_keys(tiny_recipe, capsys) -> None:
    path = tiny_recipe()
    assert main(["train", "--recipe", str(path), "--set", "context_rule=middle", "--check"]) == 2
    assert "unknown context rule 'middle'" in capsys.readouterr().err
    assert main(["train", "--recipe", str(path), "--set", "max_prompt_tokens=abc", "--check"]) == 2
    assert "max_prompt_tokens must be a positive integer" in capsys.readouterr().err
    assert not Path(load_recipe(path).output_dir).exists()


def test_the_format_warm_up_leaves_out_prompts_it_cannot_fit(tiny_lm_dir: Path) -> None:
    from embodied_r.training.warmup import WarmupError, rows_within

    rows = [PromptRow.from_dict(r) for r in _short_rows(2) + [_long_row()]]
    assert [r.id for r in rows_within(rows, str(tiny_lm_dir), 4096)] == ["t0", "t1"]
    with pytest.raises(WarmupError, match="every prompt is longer than max_length 100"):
        rows_within(rows, str(tiny_lm_dir), 100)


def test_token_rule_cuts_trls_prompt_ids_from_the_left(tiny_recipe) -> None:
    from embodied_r.training.grpo import build_trainer

    trainer, context = build_trainer(load_recipe(tiny_recipe(context_rule="truncate-left-tokens",
                                                             max_prompt_tokens=40)))
    assert trainer.left_truncate_to == 40 and context["prompt_context"]["limit"] == 40
    prompt = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "where " * 60}]
    trainer.left_truncate_to = None
    (whole,), _, _ = trainer._tokenize_prompts([prompt])
    trainer.left_truncate_to = 40
    (cut,), _, _ = trainer._tokenize_prompts([prompt])
    assert len(whole) > 40 and list(cut) == list(whole)[-40:]
