"""GRPO of a vision-language policy on key-frame rows (Embodied-R's VLM arm) through TRL's multi-image path:
a tiny Qwen2.5-VL built from a config trains with the cascade's rewards, the consistency judge reads the
think as text, token-budget slices of image rows give the whole micro-batch's loss and gradients, the
shared-prefix paths step aside with their reason logged once, and bad input stops the run before training
with the row named."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from embodied_r.core.io import DataFileError, read_jsonl
from embodied_r.training.grpo import build_trainer
from embodied_r.training.recipe import RecipeError, recipe_from_dict


def recipe(model: Path, data: Path, out: Path, **overrides: Any) -> Any:
    values = {"model": str(model), "dtype": "float32", "train_data": str(data), "max_train_rows": 4,
              "output_dir": str(out), "max_steps": 2, "num_generations": 2, "per_device_train_batch_size": 4,
              "max_completion_length": 6, "learning_rate": 1e-2, "save_strategy": "no", "report_to": "none",
              "seed": 0, "sample_completions": 2, "rewards": ["format", "accuracy"], "reward_schedule": None}
    return recipe_from_dict({**values, **overrides})


def test_keyframe_rows_become_a_multi_image_data_set(keyframe_world: dict[str, Path], tiny_vl_model: Path,
                                                     tmp_path: Path) -> None:
    from trl.data_utils import prepare_multimodal_messages

    trainer, _ = build_trainer(recipe(tiny_vl_model, keyframe_world["frames"], tmp_path / "run"))
    row = read_jsonl(keyframe_world["frames"])[0]
    example = trainer.train_dataset[0]
    images = [p["image"] for p in row["prompt"][1]["content"] if p["type"] == "image"]
    assert len(example["images"]) == len(images) == row["meta"]["keyframes"]["shown"]
    assert all(image.mode == "RGB" for image in example["images"])
    # TRL fills the placeholders in order: each frame sits right after its own frame line.
    filled = prepare_multimodal_messages(example["prompt"], images=example["images"])
    user = filled[1]["content"]
    lines = [i for i, p in enumerate(user) if p["type"] == "text" and p["text"].startswith("\nFrame ")]
    assert [user[i + 1]["image"] for i in lines] == example["images"]
    assert example["prompt_version"] == "official-v1" and example["answer"] == str(row["answer"])


def test_grpo_trains_a_tiny_qwen25_vl_on_keyframe_rows(keyframe_world: dict[str, Path], tiny_vl_model: Path,
                                                       tmp_path: Path, varying_reward: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="embodied_r")
    trainer, context = build_trainer(recipe(
        tiny_vl_model, keyframe_world["frames"], tmp_path / "run", rewards=["format", "accuracy", varying_reward],
        reward_weights=[0.3, 0.3, 0.4], zero_variance_groups="update"))
    assert trainer._is_vlm and context["rows"] == 4
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)}
    # The vision tower has gradients only when the frames went through the policy's forward pass.
    assert any(n.startswith("model.visual.") for n in changed) and any(n.startswith("model.language_model.")
                                                                       for n in changed)
    logged = [h for h in trainer.state.log_history if "rewards/accuracy/mean" in h]
    assert len(logged) == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in logged)
    assert all(h["rewards/format/mean"] is not None for h in logged)
    samples = read_jsonl(tmp_path / "run" / "samples.jsonl")
    assert samples and {s["id"] for s in samples} <= {r["id"] for r in read_jsonl(keyframe_world["frames"])}
    # The shared-prefix sampling and update do not take image rows: each says why, once for the run.
    messages = [r.getMessage() for r in caplog.records]
    assert sum("shared-prefix generation not used (image rows)" in m for m in messages) == 1
    assert sum("shared-prefix update not used (multimodal" in m for m in messages) == 1
    assert trainer.stock_path_reasons and all("multimodal" in r for r in trainer.stock_path_reasons)


def test_the_consistency_judge_reads_the_question_and_think_as_text(keyframe_world: dict[str, Path],
                                                                    tiny_vl_model: Path, tmp_path: Path) -> None:
    """The reward gets the prompt as TRL hands it (frames filled in as images); the frozen copy of the VL
    policy, the default judge, is asked with the question block and the think only, in text."""
    from trl.data_utils import prepare_multimodal_messages

    from embodied_r.judge.judges import ReferenceJudge
    from embodied_r.training.data import load_prompt_rows, reward_columns
    from embodied_r.training.grpo import build_rewards
    from embodied_r.training.keyframe_data import keyframe_rows_to_dataset

    rows = [r for r in read_jsonl(keyframe_world["frames"]) if r["options"]][:2]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copytree(keyframe_world["frames"].parent / "keyframes.frames", tmp_path / "keyframes.frames")
    run = recipe(tiny_vl_model, tmp_path / "rows.jsonl", tmp_path / "run",
                 rewards=["format", "accuracy", {"consistency": {"gate": False}}], reward_schedule=None)
    [*_, consistency] = build_rewards(run, str(tiny_vl_model))
    assert isinstance(consistency.judge, ReferenceJudge)
    assert type(consistency.judge.model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    seen: list[tuple[list[str], list[str]]] = []
    real = consistency.judge.judge

    def spy(questions, thinks, options):
        seen.append((list(questions), list(thinks)))
        return real(questions, thinks, options)

    consistency.judge.judge = spy
    dataset = keyframe_rows_to_dataset(load_prompt_rows(tmp_path / "rows.jsonl"), tmp_path, reward_columns)
    prompts = [prepare_multimodal_messages(e["prompt"], images=e["images"]) for e in dataset]
    letters = [r["answer"] for r in rows]
    completions = [[{"role": "assistant", "content": f"<think> the frames show it </think><answer>{a}</answer>"}]
                   for a in letters]
    values = consistency(prompts=prompts, completions=completions, **{k: dataset[k] for k in
                                                                       ("answer", "answer_type", "options", "id",
                                                                        "task", "prompt_version")})
    assert len(values) == 2 and all(v in (0.0, 1.0) for v in values)
    [(questions, thinks)] = seen
    assert all(q.startswith("Question: ") and "Choices:" in q and "None" not in q for q in questions)
    assert thinks == ["the frames show it"] * 2


# ---------------------------------------------------------------------------------------------------
# Token-budget slices of image rows
# ---------------------------------------------------------------------------------------------------


def scored_inputs(trainer: Any, rows: list[int]) -> dict[str, Any]:
    """A real micro-batch of image rows as TRL hands the loss (generated, scored), with varied advantages."""
    trainer.model.train()
    examples = [trainer.train_dataset[i] for i in rows for _ in range(trainer.num_generations)]
    inputs = trainer._generate_and_score_completions(examples)
    inputs["advantages"] = torch.randn(inputs["advantages"].shape, generator=torch.Generator().manual_seed(0))
    return inputs


def loss_and_gradients(trainer: Any, inputs: dict[str, Any], budget: int | None) -> tuple[torch.Tensor, dict]:
    trainer.max_train_batch_tokens = budget
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo"])
def test_slices_of_image_rows_give_the_whole_batch_loss_and_gradients(keyframe_world, tiny_vl_model, tmp_path,
                                                                       loss_type) -> None:
    from embodied_r.training import token_budget

    trainer, _ = build_trainer(recipe(tiny_vl_model, keyframe_world["frames"], tmp_path / "run", loss_type=loss_type,
                                      max_completion_length=4, zero_variance_groups="update"))
    inputs = scored_inputs(trainer, [0, 1])
    assert token_budget.unsupported_reason(trainer, inputs) is None  # the patch grid is sliced exactly
    assert len(inputs["num_images"]) == 4 and inputs["pixel_values"].size(0) > 4
    width = inputs["prompt_ids"].size(1) + inputs["completion_ids"].size(1)
    assert len(token_budget.plan_slices(token_budget.prompt_groups(inputs, packed=False), width)) == 4
    whole_loss, whole = loss_and_gradients(trainer, inputs, None)
    sliced_loss, sliced = loss_and_gradients(trainer, inputs, width)  # one row a slice
    torch.testing.assert_close(sliced_loss, whole_loss, rtol=1e-5, atol=1e-7)
    assert whole.keys() == sliced.keys() and any(n.startswith("model.visual.") for n in whole)
    for name, grad in whole.items():
        torch.testing.assert_close(sliced[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    # Each slice took only its own rows' images.
    taken = token_budget.take_rows(inputs, [2, 3])
    assert taken["num_images"] == inputs["num_images"][2:] and taken["image_grid_thw"].size(0) == sum(
        inputs["num_images"][2:])


# ---------------------------------------------------------------------------------------------------
# Bad input: clear errors naming the row, before training
# ---------------------------------------------------------------------------------------------------


def copy_rows(keyframe_world: dict[str, Path], folder: Path, count: int = 4) -> tuple[Path, list[dict]]:
    rows = read_jsonl(keyframe_world["frames"])[:count]
    shutil.copytree(keyframe_world["frames"].parent / "keyframes.frames", folder / "keyframes.frames")
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def test_keyframe_rows_for_a_text_only_model_name_the_row(keyframe_world, tiny_lm_dir, tmp_path) -> None:
    with pytest.raises(RecipeError, match=r"train_data row scene_\S+ holds key frames .* text-only model"):
        build_trainer(recipe(tiny_lm_dir, keyframe_world["frames"], tmp_path / "run"))
    assert not list((tmp_path / "run").glob("checkpoint-*"))


@pytest.mark.parametrize("damage", ["missing", "not an image"])
def test_a_bad_frame_file_names_its_row(keyframe_world, tiny_vl_model, tmp_path, damage) -> None:
    data, rows = copy_rows(keyframe_world, tmp_path)
    frame = next(p["image"] for p in rows[2]["prompt"][1]["content"] if p["type"] == "image")
    if damage == "missing":
        (tmp_path / frame).unlink()
        message = "not found"
    else:
        (tmp_path / frame).write_bytes(b"GIF89a but not really")
        message = "is not a readable image"
    # Rows of one video share its frames: the first row that shows the damaged frame is named.
    first = next(r["id"] for r in rows if any(p.get("image") == frame for p in r["prompt"][1]["content"]))
    with pytest.raises(DataFileError, match=rf"row {first}: .*{frame}.*{message}"):
        build_trainer(recipe(tiny_vl_model, data, tmp_path / "run"))


def test_a_budget_that_leaves_no_frame_names_the_rows(keyframe_world, tiny_vl_model, tmp_path) -> None:
    with pytest.raises(DataFileError, match=r"keep no frame within the prompt limit of 100 tokens: scene_\S+ "
                                            r"\(no key frame fits"):
        build_trainer(recipe(tiny_vl_model, keyframe_world["frames"], tmp_path / "run", max_prompt_tokens=100))


def test_token_cutting_rules_are_refused_for_keyframe_rows(keyframe_world, tiny_vl_model, tmp_path) -> None:
    with pytest.raises(RecipeError, match="would cut through the image tokens of key-frame rows"):
        build_trainer(recipe(tiny_vl_model, keyframe_world["frames"], tmp_path / "run", context_rule="truncate-left"))


# ---------------------------------------------------------------------------------------------------
# Recipes
# ---------------------------------------------------------------------------------------------------

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "embodied_r"


def test_the_paper_vlm_recipe_is_the_cascade_recipe_on_key_frames(capsys) -> None:
    import yaml

    from embodied_r.cli.main import main
    from embodied_r.training.recipe import load_recipe

    path = RECIPES / "paper_vlm_qwen2.5-vl-3b.yaml"
    assert main(["train", "--recipe", str(path), "--check", "--num-processes", "8"]) == 0
    out = capsys.readouterr().out
    assert yaml.safe_load(out)["model"] == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert "32 completions (4 prompts) per optimizer step" in out
    vlm, cascade = load_recipe(path), load_recipe(RECIPES / "paper_qwen2.5-3b.yaml")
    # The ablation changes the policy and its input; the GRPO settings, rewards, schedule and judge stay.
    own = {"output_dir"}
    assert {k: v for k, v in vlm.trl.items() if k not in own} == {k: v for k, v in cascade.trl.items() if k not in own}
    assert (vlm.rewards, vlm.reward_schedule, vlm.judge) == (cascade.rewards, cascade.reward_schedule, cascade.judge)
    assert vlm.context_rule == "drop-frames" and vlm.max_prompt_tokens >= 32 * 256
    assert main(["train", "--recipe", str(path), "--check", "--num-processes", "1"]) == 2  # groups of 8 need 8


def test_the_cpu_vlm_recipe_checks(capsys) -> None:
    from embodied_r.cli.main import main

    assert main(["train", "--recipe", str(RECIPES / "cpu_vlm_tiny.yaml"), "--check"]) == 0
    assert "4 completions (2 prompts) per optimizer step" in capsys.readouterr().out
