"""GRPO training of the reasoner, for any method's rows: the run set-up around TRL's ``GRPOTrainer``.

TRL does the algorithm, generation (transformers, or vLLM colocate/server), distribution (Accelerate,
DeepSpeed) and checkpointing. This layer adds what the papers need and TRL lacks: rewards by name or path
(``methods.rewards``), staged reward weights (``training.schedule``), a judge probed before it pays a
reward, held-out evaluation with the evaluation code, a resolved config saved beside the run
(``training.run_record``), checks that fail before training rather than during it, and the trainer
subclass (``training.trainer``).

Files in ``output_dir``: ``resolved_recipe.yaml``, ``grpo_config.json``, ``metrics.jsonl``,
``samples.jsonl``, ``curriculum.jsonl`` (``curriculum: easy-first``), ``eval.jsonl`` and ``eval/``,
``checkpoint-N/`` (TRL), ``final/`` (the model), ``runs/`` (TensorBoard, when ``report_to`` includes it),
``fast_paths.json`` (the shared-prefix paths' check, timings and choice on the first step), ``summary.json``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from accelerate import PartialState
from trl import GRPOConfig

from embodied_r.core.io import atomic_write_json, exclusive_output
from embodied_r.inference.context_policy import TOKEN_CUT_RULE
from embodied_r.methods.rewards import get_reward
from embodied_r.training.callbacks import EvalCallback, MetricsJsonl, StepTimer, TimeBudget, quiet_tensorboard
from embodied_r.training.checkpoints import resume_checkpoint
from embodied_r.training.data import fit_rows_to_context, load_prompt_rows, rows_to_dataset
from embodied_r.training.host_memory import fix_mmap_threshold
from embodied_r.training.judge_gate import gate_judge, judged_reward_in_use
from embodied_r.training.recipe import (
    Recipe,
    RecipeError,
    check_batch_geometry,
    check_prompt_version,
    check_rule_rows,
    check_runtime,
    global_batch,
    reward_spec,
    run_settings,
)
from embodied_r.training.run_record import run_summary, save_resolved
from embodied_r.training.schedule import RewardSchedule, make_schedule_callback
from embodied_r.training.trainer import ReasonerGRPOTrainer
from embodied_r.training.vision import data_dir, processor_for_rows
from embodied_r.training.warmup import run_format_warmup

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------------


def resolve_precision(recipe: Recipe) -> tuple[str, bool]:
    """(weights dtype name, bf16 autocast flag) for this machine (training/precision.py), unless the recipe
    fixed them."""
    from embodied_r.training.precision import training_precision

    bf16 = recipe.trl.get("bf16")
    precision = training_precision(recipe.dtype, lora=recipe.lora is not None,
                                   bf16=None if bf16 is None else bool(bf16),
                                   deepspeed=bool(recipe.trl.get("deepspeed")))
    return precision.weights, precision.bf16_autocast


def build_config(recipe: Recipe, schedule: RewardSchedule | None, num_processes: int | None = None) -> GRPOConfig:
    """``GRPOConfig`` from the recipe's TRL keys plus this layer's defaults; the batch geometry is
    checked for ``num_processes`` (default: the running processes)."""
    import torch

    from embodied_r.inference.models import hub_kernel_kwargs

    dtype_name, bf16 = resolve_precision(recipe)
    values: dict[str, Any] = {
        "output_dir": str(recipe.output_dir),
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "steps",
        "save_steps": 50,
        **recipe.trl,
        "bf16": bf16,
        "model_init_kwargs": {"dtype": dtype_name, **hub_kernel_kwargs(),
                              **({"attn_implementation": recipe.attn_implementation}
                                 if recipe.attn_implementation else {})},
    }
    if not torch.cuda.is_available():
        values.setdefault("use_cpu", True)
    if schedule is not None:
        values["reward_weights"] = schedule.weights_at(epoch=0.0, step=1)
    running = PartialState().num_processes
    batch = check_batch_geometry(recipe.trl, running if num_processes is None else num_processes)
    if num_processes is not None and num_processes != running and not values.get("generation_batch_size"):
        # Rehearsing another world size in this one process: TRL would size the generation batch by the
        # processes it sees, so it is given the batch those processes will have.
        values["generation_batch_size"] = batch
    try:
        return GRPOConfig(**values)
    except (TypeError, ValueError) as exc:
        raise RecipeError(f"TRL rejected the configuration: {exc}") from exc


def reward_settings(recipe: Recipe, model_path: str, judge: Any = None) -> dict[str, Any]:
    """The run settings a reward built from options may read (``methods.rewards.RewardFactory``): the
    recipe's keys, the model GRPO starts from (``policy_model``) and a caller's ``judge`` object (tests and
    evaluation give one in place of the reference model)."""
    return {**run_settings(recipe), "policy_model": model_path, "judge": judge}


def build_rewards(recipe: Recipe, model_path: str, judge: Any = None) -> list[Any]:
    """Reward callables in recipe order, each built from its entry's options and the run's settings."""
    settings = reward_settings(recipe, model_path, judge)
    return [get_reward(name, settings, **options) for name, options in map(reward_spec, recipe.rewards)]


def _judge_is_policy(spec: Any) -> bool:
    return spec in (None, "policy") or (isinstance(spec, dict) and spec.get("model") == "policy"
                                        and "base_url" not in spec)


def _static_weights(recipe: Recipe, n: int) -> list[float]:
    weights = recipe.trl.get("reward_weights")
    return [float(w) for w in weights] if weights is not None else [1.0] * n


def _gate_judge(
    recipe: Recipe, rewards: list[Any], rows: list[Any], schedule: RewardSchedule | None
) -> dict[str, Any] | None:
    """Probe the judge of a judge-paid reward (consistency) when some stage weights it; None when none does."""
    stages = [list(s.weights) for s in schedule.stages] if schedule else [_static_weights(recipe, len(rewards))]
    judged = judged_reward_in_use(rewards, stages)
    if judged is None:
        return None
    return gate_judge(judged, rows, recipe.output_dir, recipe.sections.judge.probe,
                      recipe.sections.judge.allow_weak, PartialState().is_main_process)


# ---------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------


def _fit_to_context(recipe: Recipe, rows: list[Any], model_path: str,
                    processing_class: Any) -> tuple[list[Any], dict[str, Any]]:
    """The training rows after the recipe's context policy (prompt + completion must fit the model);
    what was cut or skipped is written to ``context.json`` and logged."""
    from transformers import AutoConfig, AutoTokenizer

    from embodied_r.inference.context_policy import model_context_length

    tokenizer = getattr(processing_class, "tokenizer", processing_class) or AutoTokenizer.from_pretrained(model_path)
    policy = recipe.sections.context
    budget = int(recipe.trl.get("max_completion_length") or GRPOConfig.max_completion_length)
    limit = policy.limit(model_context_length(AutoConfig.from_pretrained(model_path)), budget)
    fitted, report = fit_rows_to_context(rows, tokenizer, policy, limit, recipe.completion_prefix,
                                         processor=processing_class, image_dir=data_dir(recipe.train_data))
    if PartialState().is_main_process:
        atomic_write_json(recipe.output_dir / "context.json", report)
    if report["affected"]:
        logger.warning("context policy %s (limit %d prompt tokens): %d of %d training row(s) affected %s; see %s",
                       policy.rule, limit, report["affected"], len(rows), report["actions"],
                       recipe.output_dir / "context.json")
    if not fitted:
        raise RecipeError(f"{recipe.train_data}: no training row fits the model's context under the "
                          f"{policy.rule} rule (limit {limit} prompt tokens); see {recipe.output_dir / 'context.json'}")
    return fitted, {k: v for k, v in report.items() if k != "rows"}  # the per-row list stays in context.json


def build_trainer(
    recipe: Recipe, resume: bool = False, judge: Any = None, processing_class: Any = None
) -> tuple[ReasonerGRPOTrainer, dict[str, Any]]:
    """Everything up to (not including) ``trainer.train()``; all input checks happen here.
    ``processing_class`` replaces the tokenizer/processor TRL would load from the model folder."""
    from embodied_r.inference.models import resolve_model_path

    started = time.monotonic()  # max_train_minutes counts the warm-up and the judge probe

    output_dir = recipe.output_dir
    resume_from = resume_checkpoint(recipe.output_dir, resume, PartialState().is_main_process)
    check_runtime(recipe)
    # Before any data, warm-up or model: a batch that does not hold whole groups on this many processes.
    generation_batch = check_batch_geometry(recipe.trl, PartialState().num_processes)
    rows = load_prompt_rows(recipe.train_data, recipe.max_train_rows)
    eval_rows = load_prompt_rows(recipe.eval_data)[: recipe.eval_max_rows] if recipe.eval_data else []
    check_prompt_version(recipe, rows, "train_data")
    check_prompt_version(recipe, eval_rows, "eval_data")
    check_rule_rows(recipe.sections.judge.rule, recipe.reward_names, rows, "train_data")
    model_path = resolve_model_path(recipe.model)
    # Image rows need the processor here already: key-frame rows are measured with their image tokens.
    processing_class = processor_for_rows(recipe, rows, eval_rows, model_path, processing_class)
    rows, prompt_context = _fit_to_context(recipe, rows, model_path, processing_class)
    rotation_group, train_rows = None, rows
    if recipe.balanced_steps != "none":
        from embodied_r.training.option_rotations import check_answer_classes, gold_text, rotated_rows

        try:  # after fitting: a rotation only reorders the choice lines; the warm-up keeps the rows as they are
            train_rows, rotation_group = rotated_rows(rows)
            if recipe.balanced_steps == "answers":
                check_answer_classes([gold_text(row) for row in rows], rotation_group)
        except ValueError as exc:
            raise RecipeError(f"{recipe.train_data}: {exc}") from None
        prompts = generation_batch // int(recipe.trl.get("num_generations", 8))
        if prompts % rotation_group:
            raise RecipeError(f"balanced_steps: a step samples {prompts} prompts, which cannot hold whole "
                              f"blocks of {rotation_group} (the number of options); make it a multiple of "
                              f"{rotation_group}")
    if recipe.curriculum != "none":
        from embodied_r.training.curriculum import check_curriculum_rows

        check_curriculum_rows(train_rows, recipe.train_data)
    # Image rows (Robot-R1, key frames) are read with their images from the data folder.
    train_dataset = rows_to_dataset(train_rows, image_dir=data_dir(recipe.train_data))
    schedule, warmup = recipe.sections.schedule, recipe.sections.warmup
    # The reference judge is loaded before GRPOConfig exists: once TrainingArguments has set up DeepSpeed
    # ZeRO-3, from_pretrained would shard it across ranks, and each rank judges a different number of
    # completions, so a sharded judge would deadlock. A replicated frozen copy has no collectives.
    # A judge other than the policy is loaded, and probed, before the warm-up, so a judge that cannot be
    # loaded or reached, or fails its probe, stops the run before any training.
    judge_first = judge is not None or not _judge_is_policy(recipe.sections.judge.model)
    rewards = build_rewards(recipe, model_path, judge=judge) if judge_first else []
    probe = _gate_judge(recipe, rewards, rows, schedule) if judge_first else None
    if warmup is not None:
        # GRPO (and the "policy" consistency judge) start from the warmed-up model.
        model_path = run_format_warmup(warmup, rows, model_path, output_dir, recipe.dtype,
                                       recipe.attn_implementation)
    if not judge_first:
        rewards = build_rewards(recipe, model_path, judge=judge)
        probe = _gate_judge(recipe, rewards, rows, schedule)
    curriculum = None
    if recipe.curriculum != "none":
        from embodied_r.training.curriculum import difficulty_pass

        # From the model GRPO starts from, before TRL's config sets up DeepSpeed (curriculum.py).
        curriculum = difficulty_pass(recipe, train_rows, model_path, rewards[recipe.reward_names.index("accuracy")],
                                     resolve_precision(recipe)[0], PartialState().num_processes)
    args = build_config(recipe, schedule)
    if schedule is None:
        for func, weight in zip(rewards, _static_weights(recipe, len(rewards))):
            if hasattr(func, "set_weight"):
                func.set_weight(weight)  # a static weight of 0 skips the reference entirely
    for func in rewards:
        if hasattr(func, "num_generations"):
            func.num_generations = int(args.num_generations)  # the consistency term is dropped by whole group

    callbacks: list[Any] = [MetricsJsonl(output_dir / "metrics.jsonl")]
    evaluator = None
    if eval_rows:
        evaluator = EvalCallback(
            eval_rows,
            output_dir,
            recipe.eval_every_steps,
            recipe.eval_batch_size,
            recipe.eval_max_new_tokens,
            completion_prefix=recipe.completion_prefix,
            context=recipe.sections.context,
        )
        callbacks.append(evaluator)
    trainer = ReasonerGRPOTrainer(
        model=model_path,
        reward_funcs=rewards,
        args=args,
        train_dataset=train_dataset,
        processing_class=processing_class,
        peft_config=recipe.sections.lora.peft_config() if recipe.sections.lora else None,
        callbacks=callbacks,
    )
    trainer.samples_path = output_dir / "samples.jsonl"
    trainer.samples_per_batch = recipe.sample_completions
    trainer.completion_prefix = recipe.completion_prefix
    trainer.shared_prefix_update = recipe.shared_prefix_update
    trainer.shared_prefix_generation = recipe.shared_prefix_generation
    trainer.fast_paths_path = output_dir / "fast_paths.json"
    if resume_from is not None:
        trainer.keep_fast_paths(trainer.fast_paths_path)  # the resumed steps compute as the first start's did
    trainer.max_train_batch_tokens = recipe.max_train_batch_tokens
    trainer.checkpoint_over_tokens = recipe.checkpoint_over_tokens
    trainer.zero_variance_groups = recipe.zero_variance_groups
    trainer.resample_rounds = recipe.resample_rounds
    trainer.rotation_group = rotation_group
    trainer.balanced_steps = recipe.balanced_steps
    trainer.rotated_rows = train_rows if rotation_group else None
    trainer.curriculum_order = curriculum.order if curriculum else None
    if recipe.context_rule == TOKEN_CUT_RULE:
        trainer.left_truncate_to = int(prompt_context["limit"])
    if evaluator is not None:
        evaluator.trainer = trainer
        if trainer.accelerator.num_processes > 1:
            # Generating on the main process alone would deadlock ZeRO-3 (all ranks hold weight shards).
            logger.warning(
                "held-out evaluation during training is off with %d processes; run `embodied-r eval` "
                "on the saved checkpoints instead",
                trainer.accelerator.num_processes,
            )
            trainer.remove_callback(evaluator)
            evaluator = None
    if schedule is not None:
        trainer.add_callback(make_schedule_callback(schedule, trainer))
    budget = TimeBudget(recipe.max_train_minutes, started) if recipe.max_train_minutes else None
    if budget is not None:
        trainer.add_callback(budget)
    quiet_tensorboard(trainer)
    timer = StepTimer().attach(trainer)
    context = {
        "rows": len(rows),
        "prompt_context": prompt_context,
        "eval_rows": len(eval_rows),
        "schedule": schedule,
        "timer": timer,
        "time_budget": budget,
        "evaluator": evaluator,
        "model_path": model_path,
        "resume": resume,
        "judge_probe": probe,
        "curriculum": curriculum.describe() if curriculum else None,
        "resume_from": str(resume_from) if resume_from is not None else None,
    }
    return trainer, context


def rehearse(recipe: Recipe, num_processes: int) -> dict[str, Any]:
    """``train --check``: what a cluster would reject, found here without loading a model or data: the
    recipe's values (checked when it loaded), the batch geometry for ``num_processes``, and TRL's own
    ``GRPOConfig``. Returns the global batch per optimizer step."""
    schedule = recipe.sections.schedule
    build_config(recipe, schedule, num_processes=num_processes)
    return global_batch(recipe.trl, num_processes)


def check_paths(recipe: Recipe) -> dict[str, Any]:
    """``train --check-paths``: build the run as ``train`` does, then take its first generation batch through
    sampling, rewards and the update's log-probabilities, deciding the shared-prefix paths as the first step
    does (training/path_choice.py); returns the record. No weight moves and no fast_paths.json is written."""
    with exclusive_output(recipe.output_dir):
        trainer, _ = build_trainer(recipe)
        trainer.fast_paths_path = None
        return trainer.check_fast_paths()


def process_state(recipe: Recipe) -> PartialState:
    """The process group, created here with the recipe's ``ddp_timeout``: this layer needs the process
    state before TRL's config exists, and accelerate creates the group once, on first use, so a timeout
    given later would never apply. Without CUDA (or with ``use_cpu``) the launcher's processes are joined
    over gloo: accelerate only does that when asked (``cpu=True``), and otherwise leaves every rank a
    separate one-process run, each training alone into the same output_dir."""
    from datetime import timedelta

    import torch

    cpu = bool(recipe.trl.get("use_cpu")) or not torch.cuda.is_available()
    return PartialState(cpu=cpu, timeout=timedelta(seconds=int(recipe.trl.get("ddp_timeout") or 1800)))


def train(recipe: Recipe, resume: bool = False, judge: Any = None) -> dict[str, Any]:
    """Train with ``recipe``; returns a summary (steps, last metrics, held-out scores)."""
    import torch

    if not torch.cuda.is_available():
        fix_mmap_threshold()  # CPU training: freed activations go back to the OS (host_memory.py)
    state = process_state(recipe)
    # One writer per run folder: the main process holds the lock (other ranks of the same run share it).
    lock = exclusive_output(recipe.output_dir) if state.is_main_process else contextlib.nullcontext()
    with lock:
        return _train_locked(recipe, resume, judge)


def _train_locked(recipe: Recipe, resume: bool, judge: Any) -> dict[str, Any]:
    trainer, context = build_trainer(recipe, resume=resume, judge=judge)
    if trainer.accelerator.is_main_process:
        recipe.output_dir.mkdir(parents=True, exist_ok=True)
        save_resolved(recipe, trainer, context)
    output = trainer.train(resume_from_checkpoint=context["resume_from"])
    trainer.write_fast_paths()  # written when each path was decided; now with what no batch decided too
    final_dir = recipe.output_dir / "final"
    trainer.save_model(str(final_dir))
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(str(final_dir))
    summary = run_summary(recipe, trainer, context, output.training_loss, final_dir)
    if trainer.accelerator.is_main_process:
        atomic_write_json(recipe.output_dir / "summary.json", summary)
    return summary


def warm_up_only(recipe: Recipe) -> str:
    """The recipe's format warm-up alone (``train --warmup-only``), on the rows GRPO will train on; returns
    the warmed-up model's folder (``output_dir/warmup/model``), which a later ``train`` of the same recipe
    reuses. Lets a caller evaluate the warm-up before GRPO starts (the demo times its evaluations by it)."""
    from embodied_r.inference.models import resolve_model_path

    warmup = recipe.sections.warmup
    if warmup is None:
        raise RecipeError("--warmup-only: the recipe has no format_warmup (or its steps are 0)")
    with exclusive_output(recipe.output_dir):
        rows = load_prompt_rows(recipe.train_data, recipe.max_train_rows)
        check_prompt_version(recipe, rows, "train_data")
        model_path = resolve_model_path(recipe.model)
        rows, _ = _fit_to_context(recipe, rows, model_path, None)  # the rows build_trainer warms up on
        return run_format_warmup(warmup, rows, model_path, recipe.output_dir, recipe.dtype,
                                 recipe.attn_implementation)


__all__ = ["build_config", "build_rewards", "build_trainer", "check_paths", "rehearse", "reward_settings", "train",
           "warm_up_only"]
