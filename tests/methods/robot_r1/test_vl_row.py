"""The image path: a tiny Qwen2.5-VL built from a config consumes prompts_vl.jsonl rows, through its
processor and through TRL's GRPOTrainer (real steps, images in the forward pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.core.io import read_jsonl
from embodied_r.training.data import trl_vl_example


def test_tiny_qwen25_vl_consumes_a_vl_row(robot_dataset: Path) -> None:
    import torch
    from tiny_models import build_tiny_qwen25_vl, build_tiny_qwen25_vl_processor

    row = read_jsonl(robot_dataset / "prompts_vl.jsonl")[0]
    example = trl_vl_example(row, robot_dataset)
    assert example["image"].size == (96, 80)
    assert all(isinstance(m["content"], str) for m in example["prompt"])
    processor = build_tiny_qwen25_vl_processor()
    # The stored row itself (image entry in the user content) renders through the chat template.
    text = processor.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    assert text.count("<|image_pad|>") == 1 and "[[A]]" in text
    inputs = processor(text=[text], images=[example["image"]], return_tensors="pt")
    grid = inputs["image_grid_thw"][0]
    expected_tokens = int(grid.prod()) // 4                       # spatial merge 2x2
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((inputs["input_ids"] == image_id).sum()) == expected_tokens
    model = build_tiny_qwen25_vl(processor.tokenizer).eval()
    with torch.no_grad():
        out = model(**inputs)
    assert out.logits.shape[:2] == inputs["input_ids"].shape
    assert torch.isfinite(out.logits).all()


def _length_reward(completions, **_):
    # Varies between completions, so a random tiny model still gets non-zero advantages and gradients.
    from embodied_r.core.chat import completion_text

    return [len(completion_text(c)) / 10.0 for c in completions]


def test_grpo_trains_a_tiny_qwen25_vl_on_image_rows(robot_dataset: Path, tmp_path: Path) -> None:
    import torch
    from tiny_models import build_tiny_qwen25_vl, build_tiny_qwen25_vl_processor

    from embodied_r.methods.rewards import REWARDS, register_reward
    from embodied_r.training.grpo import build_trainer
    from embodied_r.training.recipe import recipe_from_dict

    processor = build_tiny_qwen25_vl_processor()
    build_tiny_qwen25_vl(processor.tokenizer).save_pretrained(tmp_path / "model")
    register_reward("test_vl_length", _length_reward, replace=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        recipe = recipe_from_dict({
            "model": str(tmp_path / "model"), "dtype": "float32",
            "train_data": str(robot_dataset / "prompts_vl.jsonl"), "max_train_rows": 4,
            "output_dir": str(tmp_path / "run"), "max_steps": 2, "num_generations": 2,
            "per_device_train_batch_size": 4, "max_completion_length": 6, "learning_rate": 1e-2,
            "save_strategy": "no", "rewards": ["format", "accuracy", "test_vl_length"],
            "reward_schedule": None, "report_to": "none", "seed": 0, "sample_completions": 2})
        # Without torchvision transformers cannot load a saved Qwen2.5-VL processor, so it is passed in.
        trainer, context = build_trainer(recipe, processing_class=processor)
        assert trainer._is_vlm and context["rows"] == 4
        first = trainer.train_dataset[0]
        assert first["image"].size == (96, 80) and first["answer"] in "ABCD"
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        trainer.train()
    finally:
        torch.set_num_threads(threads)
        REWARDS.pop("test_vl_length", None)
    assert trainer.state.global_step == 2
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)}
    # The vision tower only gets gradients when the image went through the policy's forward pass.
    assert any(n.startswith("model.visual.") for n in changed), sorted(changed)[:5]
    assert any(n.startswith("model.language_model.") for n in changed)
    logged = [h for h in trainer.state.log_history if "rewards/accuracy/mean" in h]
    assert len(logged) == 2
    samples = read_jsonl(tmp_path / "run" / "samples.jsonl")
    assert samples and all(s["id"].endswith(("waypoint", "current_state", "movement")) for s in samples)


def test_image_rows_need_a_vision_language_model(robot_dataset: Path, tiny_lm_dir: Path, tmp_path: Path) -> None:
    from embodied_r.training.grpo import build_trainer
    from embodied_r.training.recipe import RecipeError, recipe_from_dict

    recipe = recipe_from_dict({
        "model": str(tiny_lm_dir), "dtype": "float32", "train_data": str(robot_dataset / "prompts_vl.jsonl"),
        "max_train_rows": 2, "output_dir": str(tmp_path / "run"), "max_steps": 1, "num_generations": 2,
        "per_device_train_batch_size": 2, "rewards": ["format", "accuracy"], "reward_schedule": None,
        "report_to": "none"})
    with pytest.raises(RecipeError, match="text tokenizer only"):
        build_trainer(recipe)
    text_eval = recipe_from_dict({**recipe.to_flat_dict(), "eval_data": str(robot_dataset / "prompts_vl.jsonl")})
    with pytest.raises(RecipeError, match="held-out evaluation during training reads text prompts only"):
        build_trainer(text_eval)


def test_train_cli_on_image_rows_then_eval_the_saved_policy(robot_dataset: Path, tmp_path: Path) -> None:
    """The image path as a user runs it: `train` loads the processor from the model folder (no
    torchvision here), saves the policy with it, and `eval` reads image rows with that saved policy."""
    import json

    import torch
    import yaml
    from tiny_vl import save_tiny_qwen25_vl

    from embodied_r.cli.main import main

    model = save_tiny_qwen25_vl(tmp_path / "model")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": str(model), "dtype": "float32", "train_data": str(robot_dataset / "prompts_vl.jsonl"),
        "max_train_rows": 2, "output_dir": str(tmp_path / "run"), "max_steps": 1, "num_generations": 2,
        "per_device_train_batch_size": 2, "max_completion_length": 4, "save_strategy": "no",
        "rewards": ["format", "accuracy"], "reward_schedule": None, "report_to": [], "seed": 0}))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["train", "--recipe", str(recipe)]) == 0
        final = tmp_path / "run" / "final"
        assert (final / "preprocessor_config.json").is_file() or (final / "processor_config.json").is_file()
        assert main(["eval", "--data", str(robot_dataset / "prompts_vl_test_out.jsonl"), "--model", str(final),
                     "--out", str(tmp_path / "eval"), "--limit", "2", "--max-new-tokens", "3", "--dtype", "float32",
                     "--no-report"]) == 0
    finally:
        torch.set_num_threads(threads)
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["input"] == "image" and metrics["n_questions"] == 2
    assert len(read_jsonl(tmp_path / "eval" / "predictions.jsonl")) == 2
