"""``accuracy_rule``: the recipe key reaches the accuracy reward GRPO trains with; a bad value stops before
any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.training.grpo import build_rewards
from embodied_r.training.recipe import RecipeError, load_recipe, recipe_from_dict

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
OPTIONS = ["A. chair", "B. bed", "C. sofa", "D. table"]
# One completion the rules score apart each way: the option's text alone (1, then 0) and a lower-case
# letter with its text (0, then 1); the last is scored alike.
COMPLETIONS = ["<think>the bed is closest</think><answer>bed</answer>",
               "<think>the chair is closest</think><answer>a. chair</answer>",
               "<think>the sofa</think><answer>C</answer>"]
COLUMNS = {"answer": ["B", "A", "C"], "answer_type": ["choice"] * 3, "options": [OPTIONS] * 3}


def accuracy_of(recipe_data: dict) -> list[float]:
    recipe = recipe_from_dict({"train_data": "toy:2", "rewards": ["format", recipe_data.pop("entry", "accuracy")],
                               "reward_schedule": None, **recipe_data})
    rewards = build_rewards(recipe, model_path="unused")
    accuracy = rewards[1]
    assert accuracy.__name__ == "accuracy"  # TRL's metric name stays rewards/accuracy under either rule
    return accuracy(COMPLETIONS, **COLUMNS)


def test_the_default_recipe_trains_with_the_last_answer_rule() -> None:
    assert recipe_from_dict({"train_data": "toy:2"}).accuracy_rule == "last-answer"
    assert accuracy_of({}) == [1.0, 0.0, 1.0]


def test_accuracy_rule_official_trains_with_the_official_rule() -> None:
    assert accuracy_of({"accuracy_rule": "official"}) == [0.0, 1.0, 1.0]


def test_a_reward_option_names_the_rule_for_that_entry() -> None:
    assert accuracy_of({"entry": {"accuracy": {"rule": "official"}}}) == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("data, message", [
    ({"accuracy_rule": "paper"}, "accuracy_rule 'paper' does not exist; use one of last-answer, official"),
    ({"accuracy_rule": None}, "accuracy_rule None does not exist"),
    ({"rewards": [{"accuracy": {"rule": "ours"}}]}, r"accuracy_rule 'ours' does not exist.*\(rewards: accuracy rule\)"),
    ({"rewards": [{"accuracy": {"gate": False}}]}, r"the accuracy reward takes no option \['gate'\]"),
])
def test_an_unknown_rule_is_a_recipe_error(data: dict, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        recipe_from_dict({"train_data": "toy:2", "reward_schedule": None, **data})


def test_train_check_refuses_an_unknown_rule(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = RECIPES / "embodied_r" / "cpu_smollm2.yaml"
    assert load_recipe(recipe, ["accuracy_rule=official"]).accuracy_rule == "official"
    assert main(["train", "--recipe", str(recipe), "--set", "accuracy_rule=paper", "--check"]) == 2
    assert "accuracy_rule 'paper' does not exist" in capsys.readouterr().err
