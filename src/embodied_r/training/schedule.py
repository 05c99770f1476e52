"""Staged reward weights as a TRL callback, for any method's rewards.

TRL has no weight scheduler, but ``GRPOTrainer`` multiplies the per-function rewards by the tensor
``trainer.reward_weights`` each time it scores a generation batch, so a callback that replaces that tensor
before each step changes the weights. A recipe's ``reward_schedule`` is null (constant weights: TRL's
``reward_weights``, 1 each unless the recipe sets them), a list of stages, or a named schedule
(``NAMED_SCHEDULES``); a method names the schedule its paper trains with in ``Method.reward_schedule``.

``paper`` is Embodied-R's (arXiv 2504.12680): format:accuracy:consistency 7:3:0 in epochs 1-2, 3:7:0 in
epochs 3-4 and 1:7:2 from epoch 5 on (ω1 = format, ω2 = accuracy, ω3 = consistency, as the authors
confirmed).

The weights are a pure function of the training position (the epoch, or the optimizer step), never of
how many steps this process has run, so a resumed run picks up exactly the stage it was in.

>>> schedule = RewardSchedule.paper(["format", "accuracy", "consistency"])
>>> schedule.weights_at(epoch=2.5), schedule.weights_at(epoch=4.0)
([0.3, 0.7, 0.0], [0.1, 0.7, 0.2])
>>> RewardSchedule.paper(["format", "accuracy", "my_pkg.rewards:brevity"]).weights_at(epoch=0.0)
[0.7, 0.3, 1.0]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

# Embodied-R's three stages (arXiv 2504.12680): (first epoch of the stage, 1-based; weights by reward name)
PAPER_STAGES: tuple[tuple[int, dict[str, float]], ...] = (
    (1, {"format": 0.7, "accuracy": 0.3, "consistency": 0.0}),
    (3, {"format": 0.3, "accuracy": 0.7, "consistency": 0.0}),
    (5, {"format": 0.1, "accuracy": 0.7, "consistency": 0.2}),
)
# Schedules a recipe can name (reward_schedule: <name>).
NAMED_SCHEDULES: dict[str, tuple[tuple[int, dict[str, float]], ...]] = {"paper": PAPER_STAGES}
# The weight a named schedule gives a reward it does not name: TRL's default, the weight the reward would have
# with no schedule at all.
UNNAMED_REWARD_WEIGHT = 1.0
UNITS = ("epoch", "step")


class ScheduleError(ValueError):
    """A reward schedule that does not fit the configured rewards."""


@dataclass(frozen=True)
class Stage:
    start: float  # 1-based epoch or optimizer step at which the stage begins
    weights: tuple[float, ...]


class RewardSchedule:
    """Piecewise-constant reward weights over epochs (default) or optimizer steps.

    ``stages`` are ``{"start": N, "weights": {name: w}}`` dicts (``"epoch"``/``"step"`` accepted for
    ``"start"``); each stage must give a weight to every reward in ``reward_names`` (unknown names are
    an error), the first stage must start at 1, and starts must increase.
    """

    def __init__(
        self, reward_names: Sequence[str], stages: Sequence[Mapping[str, Any]], unit: str = "epoch"
    ) -> None:
        if unit not in UNITS:
            raise ScheduleError(f"reward_schedule unit {unit!r} must be one of {UNITS}")
        if not stages:
            raise ScheduleError("reward_schedule has no stages")
        self.reward_names = tuple(reward_names)
        self.unit = unit
        parsed: list[Stage] = []
        for number, raw in enumerate(stages, start=1):
            start = raw.get("start", raw.get(unit))
            weights = raw.get("weights")
            if start is None or not isinstance(weights, Mapping):
                raise ScheduleError(
                    f"reward_schedule stage {number}: needs 'start' (or '{unit}') and a 'weights' map"
                )
            unknown = sorted(set(weights) - set(self.reward_names))
            missing = sorted(set(self.reward_names) - set(weights))
            if unknown or missing:
                raise ScheduleError(
                    f"reward_schedule stage {number}: weights must name exactly the configured rewards "
                    f"{list(self.reward_names)} (unknown: {unknown}, missing: {missing})"
                )
            parsed.append(Stage(float(start), tuple(float(weights[name]) for name in self.reward_names)))
        if parsed[0].start != 1:
            raise ScheduleError(
                f"reward_schedule: the first stage must start at {unit} 1, not {parsed[0].start:g}"
            )
        if any(b.start <= a.start for a, b in zip(parsed, parsed[1:])):
            raise ScheduleError("reward_schedule: stage starts must strictly increase")
        self.stages = tuple(parsed)

    @classmethod
    def paper(cls, reward_names: Sequence[str]) -> RewardSchedule:
        """Embodied-R's three stages (:data:`PAPER_STAGES`) over ``reward_names``."""
        return cls.named("paper", reward_names)

    @classmethod
    def named(cls, name: str, reward_names: Sequence[str]) -> RewardSchedule:
        """The schedule ``NAMED_SCHEDULES[name]`` over ``reward_names``, by epoch.

        A reward the schedule names gets its stage weights; a reward it does not name (one added to the
        paper's terms, e.g. a ``my_pkg.rewards:fn`` of your own) keeps :data:`UNNAMED_REWARD_WEIGHT` (1.0)
        in every stage, as it would without a schedule. To weight it otherwise, write the stages out.
        """
        if name not in NAMED_SCHEDULES:
            raise ScheduleError(f"reward_schedule {name!r} is not a named schedule; use one of "
                                f"{sorted(NAMED_SCHEDULES)}, null, or a list of stages")
        names = list(reward_names)
        stages = [
            {"start": start, "weights": {n: weights.get(n, UNNAMED_REWARD_WEIGHT) for n in names}}
            for start, weights in NAMED_SCHEDULES[name]
        ]
        return cls(names, stages, unit="epoch")

    @classmethod
    def from_config(cls, spec: Any, reward_names: Sequence[str]) -> RewardSchedule | None:
        """``None`` (constant weights), a schedule name (``"paper"``), a list of stages, or
        ``{"unit": ..., "stages": [...]}``."""
        if spec is None:
            return None
        if isinstance(spec, str):
            return cls.named(spec, reward_names)
        if isinstance(spec, Sequence):
            return cls(reward_names, list(spec))
        if isinstance(spec, Mapping):
            return cls(reward_names, list(spec.get("stages") or []), unit=str(spec.get("unit", "epoch")))
        raise ScheduleError(
            f"reward_schedule {spec!r} not understood: use null, a schedule name ({', '.join(NAMED_SCHEDULES)}), "
            "or a list of stages"
        )

    def stage_index(self, *, epoch: float | None = None, step: int | None = None) -> int:
        """Index of the stage in force at ``epoch`` (completed epochs, as ``TrainerState.epoch``) or at
        optimizer ``step`` (1-based step about to run)."""
        if self.unit == "epoch":
            if epoch is None:
                raise ScheduleError("an epoch-based schedule needs the epoch")
            # TrainerState.epoch counts completed epochs as a float; the running epoch is 1-based.
            position = math.floor(epoch + 1e-6) + 1
        else:
            if step is None:
                raise ScheduleError("a step-based schedule needs the step")
            position = step
        index = 0
        for number, stage in enumerate(self.stages):
            if position >= stage.start:
                index = number
        return index

    def weights_at(self, *, epoch: float | None = None, step: int | None = None) -> list[float]:
        return list(self.stages[self.stage_index(epoch=epoch, step=step)].weights)

    def unreached(self, *, max_steps: int, epochs: int) -> list[str]:
        """Why stages never start in a run of ``max_steps`` optimizer steps over
        ``epochs`` (1-based epochs the run enters); empty when every such stage is reached.

        >>> RewardSchedule.paper(["format", "accuracy", "consistency"]).unreached(
        ...     max_steps=40, epochs=4)  # doctest: +NORMALIZE_WHITESPACE
        ['stage 3 (format 0.1, accuracy 0.7, consistency 0.2) starts at epoch 5, but this run ends in epoch 4
          (step 40): set num_train_epochs >= 5 or raise max_steps']
        """
        reasons = []
        for number, stage in enumerate(self.stages, start=1):
            position = epochs if self.unit == "epoch" else max_steps
            if position >= stage.start:
                continue
            weights = ", ".join(f"{n} {w:g}" for n, w in zip(self.reward_names, stage.weights) if w)
            if self.unit == "epoch":
                need = f"set num_train_epochs >= {stage.start:g} or raise max_steps"
                where = f"epoch {epochs} (step {max_steps})"
            else:
                need = f"set max_steps >= {stage.start:g}"
                where = f"step {max_steps}"
            reasons.append(
                f"stage {number} ({weights}) starts at {self.unit} {stage.start:g}, but this run ends in "
                f"{where}: {need}"
            )
        return reasons

    def describe(self) -> list[dict[str, Any]]:
        return [
            {"start": s.start, "unit": self.unit, "weights": dict(zip(self.reward_names, s.weights))}
            for s in self.stages
        ]


def _trainer_callback_base() -> type:
    from transformers import TrainerCallback

    return TrainerCallback


def make_schedule_callback(schedule: RewardSchedule, trainer: Any) -> Any:
    """A ``TrainerCallback`` that applies ``schedule`` to ``trainer`` (an instance of GRPOTrainer)."""

    class RewardScheduleCallback(_trainer_callback_base()):  # type: ignore[misc]
        """Sets ``trainer.reward_weights`` before every optimizer step and logs them as metrics."""

        def __init__(self) -> None:
            self.schedule, self.trainer = schedule, trainer
            self.current_stage: int | None = None
            self.unreached: list[str] = []

        def apply(self, state: Any) -> list[float]:
            import torch

            index = self.schedule.stage_index(
                epoch=float(state.epoch or 0.0), step=int(state.global_step) + 1
            )
            weights = list(self.schedule.stages[index].weights)
            current = self.trainer.reward_weights
            # Keep extra entries TRL appended (an environment's reward has a fixed weight 1).
            extra = current[len(weights) :] if len(current) > len(weights) else torch.ones(0)
            self.trainer.reward_weights = torch.cat(
                [torch.tensor(weights, dtype=torch.float32), extra.float()]
            )
            for func, weight in zip(self.trainer.reward_funcs, weights):
                if hasattr(func, "set_weight"):
                    func.set_weight(weight)
            if index != self.current_stage:
                logger.info(
                    "reward stage %d from %s %s (global step %d): %s",
                    index + 1,
                    self.schedule.unit,
                    f"{self.schedule.stages[index].start:g}",
                    state.global_step,
                    dict(zip(self.schedule.reward_names, weights)),
                )
                self.current_stage = index
            metrics = self.trainer._metrics["train"]  # averaged and flushed by GRPOTrainer.log
            metrics["reward_stage"].append(float(index + 1))
            for name, weight in zip(self.schedule.reward_names, weights):
                metrics[f"reward_weight/{name}"].append(weight)
            return weights

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # On resume the loaded state is already in place here, so the right stage is set at once.
            self.apply(state)
            self.unreached = self.schedule.unreached(
                max_steps=int(state.max_steps or 0), epochs=int(state.num_train_epochs or 0)
            )
            for reason in self.unreached:
                logger.warning("reward schedule: %s", reason)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.apply(state)

    return RewardScheduleCallback()
