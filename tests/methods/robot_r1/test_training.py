"""The shipped Robot-R1 CPU recipes validate and train end to end through the CLI on `synth robot` data
(tiny model built from a config instead of the default reasoner, 2 steps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import DataFileError, read_jsonl, write_jsonl

RECIPES = Path(__file__).resolve().parents[3] / "recipes" / "robot_r1"


@pytest.mark.parametrize("name", sorted(p.name for p in RECIPES.glob("*.yaml")))
def test_recipes_pass_the_check(name: str, capsys) -> None:
    assert main(["train", "--recipe", str(RECIPES / name), "--check"]) == 0
    assert "rewards:" in capsys.readouterr().out


@pytest.mark.parametrize(("recipe", "data", "reward"), [
    ("cpu_smollm2_text.yaml", "prompts.jsonl", "accuracy"),
    ("cpu_smollm2_open_l1.yaml", "prompts_open.jsonl", "open_l1"),
])
def test_cpu_recipe_trains_through_the_cli(recipe: str, data: str, reward: str, robot_dataset: Path,
                                           tiny_lm_dir: Path, tmp_path: Path, capsys) -> None:
    import torch

    out = tmp_path / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # shared 2-core machine: one thread avoids oversubscription
    try:
        code = main(["train", "--recipe", str(RECIPES / recipe),
                     "--set", f"model={tiny_lm_dir}", "--set", "dtype=float32",
                     "--set", f"train_data={robot_dataset / data}", "--set", "max_train_rows=4",
                     "--set", f"output_dir={out}", "--set", "max_steps=2",
                     "--set", "max_completion_length=8"])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == 2 and summary["train_rows"] == 4
    assert (out / "final" / "config.json").is_file()
    metrics = read_jsonl(out / "metrics.jsonl")
    assert any(f"rewards/{reward}/mean" in m for m in metrics)
    assert f"rewards/{reward}" in capsys.readouterr().out


def test_image_rows_with_a_missing_image_or_mixed_with_text_are_refused(robot_dataset: Path,
                                                                         tmp_path: Path) -> None:
    from embodied_r.training.data import load_prompt_rows, rows_to_dataset

    vl = read_jsonl(robot_dataset / "prompts_vl.jsonl")[:2]
    text = read_jsonl(robot_dataset / "prompts.jsonl")[2:3]
    write_jsonl(tmp_path / "mixed.jsonl", vl + text)
    with pytest.raises(DataFileError, match="2 of 3 prompt rows have images"):
        rows_to_dataset(load_prompt_rows(tmp_path / "mixed.jsonl"), image_dir=robot_dataset)
    write_jsonl(tmp_path / "vl.jsonl", vl)  # image paths now point next to this file, where none exist
    with pytest.raises(DataFileError, match="not found; regenerate"):
        rows_to_dataset(load_prompt_rows(tmp_path / "vl.jsonl"), image_dir=tmp_path)
