"""Instrumentation around TRL's GRPOTrainer: step timing, sample completions, metrics and evaluation.

Everything here observes training and writes files beside the run; none of it changes what is
trained, except that ``EvalCallback`` briefly switches the model to eval mode to generate.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.integrations import TensorBoardCallback

from embodied_r.core.io import JsonlAppender

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------
# Step timing: generation / rewards / update
# ---------------------------------------------------------------------------------------------------


class StepTimer(TrainerCallback):
    """Splits each optimizer step's wall time into generation, reward computation and the rest (update).

    It wraps the trainer instance's ``_generate`` and ``_calculate_rewards`` (TRL 1.16 names) rather
    than subclassing, so the benchmark can attach the same timer to a plain ``GRPOTrainer``.
    """

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self._current: dict[str, float] = {}
        self._started = 0.0
        self.trainer: Any = None

    def attach(self, trainer: Any) -> StepTimer:
        self.trainer = trainer
        for method, key in (("_generate", "generation_s"), ("_calculate_rewards", "rewards_s")):
            original = getattr(trainer, method)
            setattr(trainer, method, self._timed(original, key))
        trainer.add_callback(self)
        return self

    def _timed(self, func: Any, key: str) -> Any:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                self._current[key] = self._current.get(key, 0.0) + time.perf_counter() - start

        return wrapper

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._current = {}
        self._started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step_s = time.perf_counter() - self._started
        generation, rewards = self._current.get("generation_s", 0.0), self._current.get("rewards_s", 0.0)
        record = {
            "step": int(state.global_step),
            "step_s": step_s,
            "generation_s": generation,
            "rewards_s": rewards,
            "update_s": max(0.0, step_s - generation - rewards),
        }
        self.steps.append(record)
        metrics = self.trainer._metrics["train"]  # flushed with the next log
        for key in ("generation_s", "rewards_s", "update_s"):
            metrics[f"time/{key}"].append(record[key])


class TimeBudget(TrainerCallback):
    """Stops training after the first optimizer step that ends more than ``minutes`` after ``started``
    (a ``time.monotonic()`` reading taken before the warm-up and the judge probe, which count). The loop
    ends as after its last step: the caller saves the final model. ``stopped_at_step`` is None when the
    budget was not reached."""

    def __init__(self, minutes: float, started: float) -> None:
        self.minutes, self.started = float(minutes), started
        self.stopped_at_step: int | None = None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        elapsed = time.monotonic() - self.started
        if elapsed > 60 * self.minutes and state.global_step < state.max_steps:
            self.stopped_at_step = int(state.global_step)
            control.should_training_stop = True
            logger.warning("max_train_minutes: %.1f of %.1f minutes used after step %d of %d; stopping here",
                           elapsed / 60, self.minutes, state.global_step, state.max_steps)

    def describe(self, max_steps: int) -> dict[str, Any]:
        return {"minutes": self.minutes, "stopped_at_step": self.stopped_at_step, "max_steps": max_steps}


# ---------------------------------------------------------------------------------------------------
# Metrics and sample completions as JSON Lines
# ---------------------------------------------------------------------------------------------------


class SetMetricsTensorBoard(TensorBoardCallback):
    """TensorBoard logging that skips unset (None) metrics instead of warning about each.

    TRL logs a reward function's mean and std as None when the function returned None for every
    completion (the consistency reward before its stage); TensorBoard cannot plot None, and the stock
    callback warns twice per logging step. ``metrics.jsonl`` still records the None.
    """

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        kept = {key: value for key, value in (logs or {}).items() if value is not None}
        super().on_log(args, state, control, logs=kept, **kwargs)


def quiet_tensorboard(trainer: Any) -> None:
    """Swap the Trainer's stock TensorBoard callback (if ``report_to`` has one) for the one above."""
    if trainer.pop_callback(TensorBoardCallback) is not None:
        trainer.add_callback(SetMetricsTensorBoard())


class MetricsJsonl(TrainerCallback):
    """Appends every logged dict (rewards per function, weights, lengths, ...) to ``metrics.jsonl``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if logs and state.is_world_process_zero:
            JsonlAppender(self.path).append({"step": int(state.global_step), "epoch": state.epoch, **logs})


def sample_rows(inputs: list[dict[str, Any]], completions: list[Any], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` of this process's completions as plain rows (picklable, for a gather)."""
    from embodied_r.core.chat import completion_text

    return [{"id": inputs[i].get("id"), "task": inputs[i].get("task"), "answer": inputs[i].get("answer"),
             "completion": completion_text(completions[i])} for i in range(min(limit, len(completions)))]


def record_samples(path: Path, step: int, samples: list[tuple[int, dict[str, Any]]], rewards: Any, names: list[str],
                   weights: list[float], limit: int) -> None:
    """Write up to ``limit`` sample completions of a generation batch with their per-function rewards;
    ``samples`` pairs each row with its position in the (gathered) ``rewards``."""
    rows = []
    for position, sample in samples[:limit]:
        values = [float(v) for v in rewards[position].tolist()]
        rows.append({
            "step": step, **sample,
            "rewards": {n: (None if v != v else v) for n, v in zip(names, values)},  # NaN -> None
            "weights": {n: round(float(w), 6) for n, w in zip(names, weights)},  # float32 -> readable
        })
    JsonlAppender(path).extend(rows)


def zero_variance_shares(rewards: Any, num_generations: int, names: list[str]) -> dict[str, float]:
    """Per reward function, the share of prompt groups whose completions all got the same reward.

    Such groups give that function no learning signal (GRPO advantages are relative within a group);
    TRL's ``frac_reward_zero_std`` reports the same for the weighted total only.
    """
    import torch

    grouped = rewards.view(-1, num_generations, rewards.shape[-1])
    out = {}
    for index, name in enumerate(names):
        column = grouped[:, :, index]
        valid = ~torch.isnan(column).any(dim=1)
        if valid.any():
            spread = column[valid].max(dim=1).values - column[valid].min(dim=1).values
            out[f"zero_variance_groups/{name}"] = float((spread.abs() < 1e-8).float().mean())
    return out


# ---------------------------------------------------------------------------------------------------
# Held-out evaluation with the evaluation's generation and scoring (embodied_r.prediction)
# ---------------------------------------------------------------------------------------------------


class EvalCallback(TrainerCallback):
    """Scores held-out prompt rows with ``prediction.evaluate_rows`` (greedy, as ``eval`` does) before
    training, every ``every_steps`` optimizer steps, and at the end; writes ``eval.jsonl`` and predictions."""

    def __init__(self, rows: list[Any], out_dir: str | Path, every_steps: int = 0, batch_size: int = 8,
                 max_new_tokens: int = 256, completion_prefix: str = "", context: Any = None) -> None:
        self.rows, self.out_dir = rows, Path(out_dir)
        self.context = context  # the recipe's context policy (None: the default one)
        self.every_steps, self.batch_size, self.max_new_tokens = every_steps, batch_size, max_new_tokens
        self.completion_prefix = completion_prefix  # the training prompts' prefill, so scores compare
        self.trainer: Any = None
        self.results: list[dict[str, Any]] = []

    def _done_steps(self) -> set[int]:
        path = self.out_dir / "eval.jsonl"
        return {int(r["step"]) for r in JsonlAppender(path).existing()} if path.exists() else set()

    def evaluate(self, model: Any, tokenizer: Any, step: int) -> dict[str, Any]:
        from embodied_r.core.task_table import task_table
        from embodied_r.prediction import evaluate_rows

        was_training, padding_side = model.training, tokenizer.padding_side
        model.eval()
        tokenizer.padding_side = "left"  # batched generation with a decoder-only model
        started = time.perf_counter()
        try:
            predictions = evaluate_rows(
                model,
                tokenizer,
                self.rows,
                batch_size=self.batch_size,
                max_new_tokens=self.max_new_tokens,
                completion_prefix=self.completion_prefix,
                context=self.context,
            )
        finally:
            tokenizer.padding_side = padding_side
            if was_training:
                model.train()
        table = task_table([p.to_dict() for p in predictions])
        result = {
            "step": step,
            "n": table["overall"]["n"],
            "score": table["overall"]["micro"],
            "ci95": table["overall"]["ci95"],
            "macro": table["overall"]["macro"],
            "unparsed_rate": table["overall"]["unparsed_rate"],
            "tasks": {k: v["score"] for k, v in table["tasks"].items()},
            "task_n": {k: v["n"] for k, v in table["tasks"].items()},
            "seconds": round(time.perf_counter() - started, 2),
        }
        JsonlAppender(self.out_dir / "eval" / f"predictions_step{step:06d}.jsonl").extend(
            p.to_dict() for p in predictions
        )
        JsonlAppender(self.out_dir / "eval.jsonl").append(result)
        self.results.append(result)
        logger.info(
            "eval at step %d: score %.3f on %d rows (unparsed %.2f)",
            step,
            result["score"] or 0.0,
            result["n"],
            result["unparsed_rate"] or 0.0,
        )
        return result

    def _run(self, state: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        if not state.is_world_process_zero or int(state.global_step) in self._done_steps():
            return None
        return self.evaluate(kwargs["model"], kwargs["processing_class"], int(state.global_step))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._run(state, kwargs)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.every_steps and state.global_step % self.every_steps == 0:
            result = self._run(state, kwargs)
            if result is not None and self.trainer is not None:
                metrics = self.trainer._metrics["train"]  # logged with this step's metrics
                metrics["eval/score"].append(float(result["score"] or 0.0))
                metrics["eval/unparsed_rate"].append(float(result["unparsed_rate"] or 0.0))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        result = self._run(state, kwargs)
        if result is not None:
            logger.info("final held-out score %s", json.dumps({k: result[k] for k in ("step", "score", "n")}))
