"""Stage schedule: weights by epoch/step and the callback that applies them to a trainer."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from embodied_r.training.schedule import RewardSchedule, ScheduleError, make_schedule_callback

NAMES = ["format", "accuracy", "consistency"]


@pytest.mark.parametrize(
    "completed_epochs, expected",
    [
        (0.0, [0.7, 0.3, 0.0]),
        (1.99, [0.7, 0.3, 0.0]),
        (2.0, [0.3, 0.7, 0.0]),
        (3.5, [0.3, 0.7, 0.0]),
        (4.0, [0.1, 0.7, 0.2]),
        (11.9, [0.1, 0.7, 0.2]),
    ],
)
def test_paper_schedule(completed_epochs: float, expected: list[float]) -> None:
    assert RewardSchedule.paper(NAMES).weights_at(epoch=completed_epochs) == expected


def test_step_schedule_and_subset_of_rewards() -> None:
    schedule = RewardSchedule(
        ["format", "accuracy"],
        [
            {"step": 1, "weights": {"format": 1, "accuracy": 0}},
            {"step": 3, "weights": {"format": 0, "accuracy": 1}},
        ],
        unit="step",
    )
    assert [schedule.weights_at(step=s) for s in (1, 2, 3, 9)] == [[1, 0], [1, 0], [0, 1], [0, 1]]
    assert RewardSchedule.paper(["format", "accuracy"]).weights_at(epoch=4) == [0.1, 0.7]


@pytest.mark.parametrize(
    "stages, message",
    [
        ([{"start": 2, "weights": {"format": 1, "accuracy": 1, "consistency": 0}}], "must start"),
        ([{"start": 1, "weights": {"format": 1, "accuracy": 1}}], "missing"),
        ([{"start": 1, "weights": {"format": 1, "accuracy": 1, "consistency": 0, "extra": 1}}], "unknown"),
        (
            [
                {"start": 1, "weights": {"format": 1, "accuracy": 1, "consistency": 0}},
                {"start": 1, "weights": {"format": 1, "accuracy": 1, "consistency": 0}},
            ],
            "increase",
        ),
        ([{"weights": {}}], "needs 'start'"),
    ],
)
def test_bad_schedules(stages: list, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        RewardSchedule(NAMES, stages)


def test_callback_sets_weights_logs_them_and_informs_rewards() -> None:
    class WeightAware:
        weight = None

        def set_weight(self, weight: float) -> None:
            self.weight = weight

    aware = WeightAware()
    trainer = SimpleNamespace(
        reward_weights=torch.tensor([1.0, 1.0, 1.0, 1.0]),  # 4th: an environment reward
        reward_funcs=[None, None, aware],
        _metrics={"train": defaultdict(list)},
    )
    callback = make_schedule_callback(RewardSchedule.paper(NAMES), trainer)
    for epoch, expected in ((0.5, [0.7, 0.3, 0.0]), (2.0, [0.3, 0.7, 0.0]), (4.25, [0.1, 0.7, 0.2])):
        callback.on_step_begin(None, SimpleNamespace(epoch=epoch, global_step=10), None)
        assert trainer.reward_weights.tolist() == pytest.approx(expected + [1.0])
        assert aware.weight == pytest.approx(expected[2])
    metrics = trainer._metrics["train"]
    assert metrics["reward_stage"] == [1.0, 2.0, 3.0]
    assert metrics["reward_weight/consistency"] == pytest.approx([0.0, 0.0, 0.2])


def test_the_paper_schedule_gives_a_reward_it_does_not_name_a_constant_weight() -> None:
    schedule = RewardSchedule.paper(["format_soft", "format", "accuracy", "consistency", "pkg.mod:extra"])
    for epoch, paper in ((0.0, [0.7, 0.3, 0.0]), (2.0, [0.3, 0.7, 0.0]), (6.0, [0.1, 0.7, 0.2])):
        assert schedule.weights_at(epoch=epoch) == [1.0, *paper, 1.0]
    with pytest.raises(ScheduleError, match="not a named schedule"):
        RewardSchedule.from_config("papr", NAMES)


RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_no_schedule_means_constant_weights_and_each_embodied_r_recipe_names_its_own() -> None:
    from embodied_r.demo import DemoSize, training_recipe
    from embodied_r.methods import EMBODIED_R
    from embodied_r.training.grpo import build_config
    from embodied_r.training.recipe import load_recipe, recipe_from_dict

    # Embodied-R's rewards without a schedule: constant weights (TRL's 1 each), not the paper's stages.
    bare = recipe_from_dict({"train_data": "toy:2", "rewards": ["format", "accuracy", "consistency"]})
    assert bare.sections.schedule is None and build_config(bare, None).reward_weights is None
    # So every Embodied-R recipe says which weights it trains with; the paper recipe names the paper's.
    for path in sorted((RECIPES / "embodied_r").glob("*.yaml")):
        assert "reward_schedule" in yaml.safe_load(path.read_text()), path.name
        assert load_recipe(path).sections.schedule is not None, path.name
    paper = load_recipe(RECIPES / "embodied_r" / "paper_qwen2.5-3b.yaml")
    assert paper.reward_schedule == EMBODIED_R.reward_schedule == "paper"
    assert paper.sections.schedule.describe() == RewardSchedule.paper(NAMES).describe()
    # The demo's weights are its own constant 0.2 : 0.8, as before.
    demo = recipe_from_dict(training_recipe(Path("demo"), DemoSize.for_minutes(15), "smollm2-135m-instruct"))
    assert demo.sections.schedule is None and build_config(demo, None).reward_weights == [0.2, 0.8]
