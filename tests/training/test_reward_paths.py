"""A reward named by its ``module:function`` path: from a module outside the package, with no registration,
it trains through ``embodied-r train``, and the paper schedule gives it a constant weight of 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.training.recipe import RecipeError, load_recipe

REWARD_MODULE = '''
def brevity(completions, **columns):
    """TRL's contract: completions and the data set's columns in, one float (or None) per completion out."""
    assert "answer" in columns and len(columns["answer"]) == len(completions)
    return [1.0 / (1.0 + len(str(c))) for c in completions]
'''
REWARD = "user_rewards_outside:brevity"


@pytest.fixture
def reward_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "user_rewards_outside.py").write_text(REWARD_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    return REWARD


def test_a_reward_named_by_path_trains_through_the_cli(tiny_recipe, reward_module: str) -> None:
    recipe = tiny_recipe(rewards=["format", "accuracy", reward_module], reward_schedule="paper")
    run = load_recipe(recipe).output_dir
    assert main(["train", "--recipe", str(recipe)]) == 0

    logs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [log for log in logs if f"rewards/{reward_module}/mean" in log]
    assert [log["step"] for log in steps] == [1, 2]
    # The paper's stage 1 weights format and accuracy 7:3; a reward it does not name keeps weight 1.
    assert all((log["reward_weight/format"], log["reward_weight/accuracy"], log[f"reward_weight/{reward_module}"])
               == pytest.approx((0.7, 0.3, 1.0)) for log in steps)
    assert all(0.0 < log[f"rewards/{reward_module}/mean"] < 1.0 for log in steps)
    config = json.loads((run / "grpo_config.json").read_text())
    assert config["reward_functions"] == ["format", "accuracy", reward_module]
    assert config["reward_schedule"][0]["weights"] == {"format": 0.7, "accuracy": 0.3, reward_module: 1.0}


def test_a_path_that_does_not_import_stops_the_recipe(tiny_recipe, reward_module: str) -> None:
    with pytest.raises(RecipeError, match="user_rewards_outside:nothing_here.*has no attribute 'nothing_here'"):
        load_recipe(tiny_recipe(rewards=["format", "user_rewards_outside:nothing_here"]))
    with pytest.raises(RecipeError, match=f"reward '{reward_module}' takes no options"):
        load_recipe(tiny_recipe(rewards=["format", {reward_module: {"scale": 2}}]))
