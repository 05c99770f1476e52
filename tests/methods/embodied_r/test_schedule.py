"""Stage schedule: weights by epoch/step and the callback that applies them to a trainer."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from embodied_r.methods.embodied_r.schedule import RewardSchedule, ScheduleError, make_schedule_callback

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
