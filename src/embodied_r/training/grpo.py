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
from dataclasses import dataclass
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
from embodied_r.training.recipe import Recipe, RecipeError, check_prompt_version, reward_spec, run_settings
from embodied_r.training.recipe_checks import check_rule_rows
from embodied_r.training.recipe_keys import OUR_TRL_DEFAULTS
from embodied_r.training.recipe_trl import check_runtime
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

    optimisation = recipe.sections.optimisation
    precision = training_precision(recipe.dtype, lora=recipe.lora is not None, bf16=optimisation.bf16,
                                   deepspeed=optimisation.deepspeed)
    return precision.weights, precision.bf16_autocast


def build_config(recipe: Recipe, schedule: RewardSchedule | None, num_processes: int | None = None) -> GRPOConfig:
    """``GRPOConfig`` from the recipe's TRL keys (every GRPOConfig field passes through) plus this layer's
    defaults; the batch geometry is checked for ``num_processes`` (default: the running processes)."""
    import torch

    from embodied_r.inference.models import hub_kernel_kwargs

    dtype_name, bf16 = resolve_precision(recipe)
    values: dict[str, Any] = {
        "output_dir": str(recipe.output_dir),
        **OUR_TRL_DEFAULTS,
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
    batch = recipe.sections.batch.with_processes(running if num_processes is None else num_processes)
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


def _gate_judge(recipe: Recipe, rewards: list[Any], rows: list[Any]) -> dict[str, Any] | None:
    """Probe the judge of a judge-paid reward (consistency) when some stage weights it; None when none does."""
    sections = recipe.sections
    stages = ([list(s.weights) for s in sections.schedule.stages] if sections.schedule
              else [sections.rewards.static_weights()])
    judged = judged_reward_in_use(rewards, stages)
    if judged is None:
        return None
    return gate_judge(judged, rows, recipe.output_dir, sections.judge.probe, sections.judge.allow_weak,
                      PartialState().is_main_process)


# ---------------------------------------------------------------------------------------------------
# The run's inputs, in the order build_trainer takes them
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRows:
    """The rows a run trains and evaluates on, checked against the recipe before any model loads."""

    rows: list[Any]  # training rows, as loaded
    eval_rows: list[Any]  # held-out rows (at most eval_max_rows)
    generation_batch: int  # completions per generation batch on the running processes


def _checked_rows(recipe: Recipe) -> RunRows:
    """This machine's packages, the batch geometry on the running processes, and the rows against the
    recipe: everything that needs no model, before any loads."""
    sections = recipe.sections
    check_runtime(sections.optimisation, sections.generation.use_vllm)
    # Before any data, warm-up or model: a batch that does not hold whole groups on this many processes.
    generation_batch = sections.batch.with_processes(PartialState().num_processes)
    rows = load_prompt_rows(recipe.train_data, recipe.max_train_rows)
    eval_rows = load_prompt_rows(recipe.eval_data)[: recipe.eval_max_rows] if recipe.eval_data else []
    check_prompt_version(recipe, rows, "train_data")
    check_prompt_version(recipe, eval_rows, "eval_data")
    check_rule_rows(sections.judge.rule, recipe.reward_names, rows, "train_data")
    return RunRows(rows, eval_rows, generation_batch)


def _fit_to_context(recipe: Recipe, rows: list[Any], model_path: str,
                    processing_class: Any) -> tuple[list[Any], dict[str, Any]]:
    """The training rows after the recipe's context policy (prompt + completion must fit the model);
    what was cut or skipped is written to ``context.json`` and logged."""
    from transformers import AutoConfig, AutoTokenizer

    from embodied_r.inference.context_policy import model_context_length

    tokenizer = getattr(processing_class, "tokenizer", processing_class) or AutoTokenizer.from_pretrained(model_path)
    policy = recipe.sections.context
    budget = recipe.sections.generation.max_completion_length
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


@dataclass(frozen=True)
class PromptOrder:
    """The rows GRPO samples, in the recipe's order (balanced_steps; TRL's shuffle otherwise)."""

    rows: list[Any]  # the fitted rows, or their option rotations under balanced_steps
    rotation_group: int | None  # rows per question under balanced_steps, else None


def _prompt_order(recipe: Recipe, rows: list[Any], generation_batch: int) -> PromptOrder:
    """The fitted rows as GRPO will sample them; a RecipeError when balanced steps cannot be built from them
    or the curriculum cannot rank them."""
    order = PromptOrder(rows, None)
    if recipe.balanced_steps != "none":
        order = _balanced_rows(recipe, rows, generation_batch)
    if recipe.curriculum != "none":
        from embodied_r.training.curriculum import check_curriculum_rows

        check_curriculum_rows(order.rows, recipe.train_data)
    return order


def _balanced_rows(recipe: Recipe, rows: list[Any], generation_batch: int) -> PromptOrder:
    from embodied_r.training.option_rotations import check_answer_classes, gold_text, rotated_rows

    try:  # after fitting: a rotation only reorders the choice lines; the warm-up keeps the rows as they are
        train_rows, rotation_group = rotated_rows(rows)
        if recipe.balanced_steps == "answers":
            check_answer_classes([gold_text(row) for row in rows], rotation_group)
    except ValueError as exc:
        raise RecipeError(f"{recipe.train_data}: {exc}") from None
    prompts = generation_batch // recipe.sections.batch.num_generations
    if prompts % rotation_group:
        raise RecipeError(f"balanced_steps: a step samples {prompts} prompts, which cannot hold whole "
                          f"blocks of {rotation_group} (the number of options); make it a multiple of "
                          f"{rotation_group}")
    return PromptOrder(train_rows, rotation_group)


@dataclass(frozen=True)
class Policy:
    """The model GRPO starts from (after the format warm-up, if any), its rewards and the judge's probe."""

    model_path: str
    rewards: list[Any]
    probe: dict[str, Any] | None  # judge_probe.json's record; None when no judge is paid


def _policy_and_rewards(recipe: Recipe, rows: list[Any], model_path: str, judge: Any) -> Policy:
    """The format warm-up (when the recipe has one), the rewards and the judge's probe, in the order that
    fails soonest.

    The reference judge is loaded before GRPOConfig exists: once TrainingArguments has set up DeepSpeed
    ZeRO-3, from_pretrained would shard it across ranks, and each rank judges a different number of
    completions, so a sharded judge would deadlock. A replicated frozen copy has no collectives. A judge
    other than the policy is loaded, and probed, before the warm-up, so a judge that cannot be loaded or
    reached, or fails its probe, stops the run before any training; the "policy" judge is the warmed-up model.
    """
    warmup = recipe.sections.warmup
    judge_first = judge is not None or not _judge_is_policy(recipe.sections.judge.model)
    early = _gated_rewards(recipe, rows, model_path, judge) if judge_first else None
    if warmup is not None:
        model_path = run_format_warmup(warmup, rows, model_path, recipe.output_dir, recipe.dtype,
                                       recipe.attn_implementation)
    rewards, probe = early if early is not None else _gated_rewards(recipe, rows, model_path, judge)
    return Policy(model_path, rewards, probe)


def _gated_rewards(recipe: Recipe, rows: list[Any], model_path: str,
                   judge: Any) -> tuple[list[Any], dict[str, Any] | None]:
    """The rewards for a policy at ``model_path``, and the probe of their judge (None when none is paid)."""
    rewards = build_rewards(recipe, model_path, judge=judge)
    return rewards, _gate_judge(recipe, rewards, rows)


def _curriculum(recipe: Recipe, train_rows: list[Any], policy: Policy) -> Any:
    """easy-first: the rows' difficulty for the model GRPO starts from, scored before TRL's config sets up
    DeepSpeed (training/curriculum.py); None for curriculum none."""
    if recipe.curriculum == "none":
        return None
    from embodied_r.training.curriculum import difficulty_pass

    accuracy = policy.rewards[recipe.reward_names.index("accuracy")]
    return difficulty_pass(recipe, train_rows, policy.model_path, accuracy, resolve_precision(recipe)[0],
                           PartialState().num_processes)


def _set_reward_options(recipe: Recipe, rewards: list[Any], args: GRPOConfig) -> None:
    """What rewards take from the run: their constant weight (none under a schedule, whose callback sets it)
    and the group size."""
    if recipe.sections.schedule is None:
        for func, weight in zip(rewards, recipe.sections.rewards.static_weights()):
            if hasattr(func, "set_weight"):
                func.set_weight(weight)  # a static weight of 0 skips the reference entirely
    for func in rewards:
        if hasattr(func, "num_generations"):
            func.num_generations = int(args.num_generations)  # the consistency term is dropped by whole group


def _evaluator(recipe: Recipe, eval_rows: list[Any]) -> EvalCallback | None:
    if not eval_rows:
        return None
    return EvalCallback(eval_rows, recipe.output_dir, recipe.eval_every_steps, recipe.eval_batch_size,
                        recipe.eval_max_new_tokens, completion_prefix=recipe.completion_prefix,
                        context=recipe.sections.context)


def _configure_trainer(trainer: ReasonerGRPOTrainer, recipe: Recipe, order: PromptOrder, curriculum: Any,
                       prompt_context: dict[str, Any], resumed: bool) -> None:
    """The recipe's settings that TRL's config does not carry (training/trainer.py reads them)."""
    output_dir = recipe.output_dir
    trainer.samples_path = output_dir / "samples.jsonl"
    trainer.samples_per_batch = recipe.sample_completions
    trainer.completion_prefix = recipe.completion_prefix
    trainer.shared_prefix_update = recipe.shared_prefix_update
    trainer.shared_prefix_generation = recipe.shared_prefix_generation
    trainer.fast_paths_path = output_dir / "fast_paths.json"
    if resumed:
        trainer.keep_fast_paths(trainer.fast_paths_path)  # the resumed steps compute as the first start's did
    trainer.max_train_batch_tokens = recipe.max_train_batch_tokens
    trainer.checkpoint_over_tokens = recipe.checkpoint_over_tokens
    trainer.zero_variance_groups = recipe.zero_variance_groups
    trainer.resample_rounds = recipe.resample_rounds
    trainer.rotation_group = order.rotation_group
    trainer.balanced_steps = recipe.balanced_steps
    trainer.rotated_rows = order.rows if order.rotation_group else None
    trainer.curriculum_order = curriculum.order if curriculum else None
    if recipe.context_rule == TOKEN_CUT_RULE:
        trainer.left_truncate_to = int(prompt_context["limit"])


def _keep_evaluator(trainer: ReasonerGRPOTrainer, evaluator: EvalCallback | None) -> EvalCallback | None:
    """The held-out evaluator, bound to the trainer; None (and removed) with several processes."""
    if evaluator is None:
        return None
    evaluator.trainer = trainer
    if trainer.accelerator.num_processes > 1:
        # Generating on the main process alone would deadlock ZeRO-3 (all ranks hold weight shards).
        logger.warning("held-out evaluation during training is off with %d processes; run `embodied-r eval` "
                       "on the saved checkpoints instead", trainer.accelerator.num_processes)
        trainer.remove_callback(evaluator)
        return None
    return evaluator


def _add_step_callbacks(trainer: ReasonerGRPOTrainer, recipe: Recipe, started: float) -> tuple[Any, Any]:
    """The reward schedule's, the time budget's and the step timer's callbacks; returns (budget, timer)."""
    schedule = recipe.sections.schedule
    if schedule is not None:
        trainer.add_callback(make_schedule_callback(schedule, trainer))
    budget = TimeBudget(recipe.max_train_minutes, started) if recipe.max_train_minutes else None
    if budget is not None:
        trainer.add_callback(budget)
    quiet_tensorboard(trainer)
    return budget, StepTimer().attach(trainer)


# ---------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------


def build_trainer(
    recipe: Recipe, resume: bool = False, judge: Any = None, processing_class: Any = None
) -> tuple[ReasonerGRPOTrainer, dict[str, Any]]:
    """Everything up to (not including) ``trainer.train()``; all input checks happen here, those that need
    no model before any loads. ``processing_class`` replaces the tokenizer/processor TRL would load from the
    model folder."""
    from embodied_r.inference.models import resolve_model_path

    started = time.monotonic()  # max_train_minutes counts the warm-up and the judge probe
    resume_from = resume_checkpoint(recipe.output_dir, resume, PartialState().is_main_process)
    inputs = _checked_rows(recipe)
    model_path = resolve_model_path(recipe.model)
    # Image rows need the processor here already: key-frame rows are measured with their image tokens.
    processing_class = processor_for_rows(recipe, inputs.rows, inputs.eval_rows, model_path, processing_class)
    rows, prompt_context = _fit_to_context(recipe, inputs.rows, model_path, processing_class)
    order = _prompt_order(recipe, rows, inputs.generation_batch)
    # Image rows (Robot-R1, key frames) are read with their images from the data folder.
    train_dataset = rows_to_dataset(order.rows, image_dir=data_dir(recipe.train_data))
    policy = _policy_and_rewards(recipe, rows, model_path, judge)
    curriculum = _curriculum(recipe, order.rows, policy)
    args = build_config(recipe, recipe.sections.schedule)
    _set_reward_options(recipe, policy.rewards, args)
    evaluator = _evaluator(recipe, inputs.eval_rows)
    lora = recipe.sections.lora
    trainer = ReasonerGRPOTrainer(
        model=policy.model_path, reward_funcs=policy.rewards, args=args, train_dataset=train_dataset,
        processing_class=processing_class, peft_config=lora.peft_config() if lora else None,
        callbacks=[MetricsJsonl(recipe.output_dir / "metrics.jsonl"), *([evaluator] if evaluator is not None else [])],
    )
    _configure_trainer(trainer, recipe, order, curriculum, prompt_context, resumed=resume_from is not None)
    evaluator = _keep_evaluator(trainer, evaluator)
    budget, timer = _add_step_callbacks(trainer, recipe, started)
    context = {
        "rows": len(rows),
        "prompt_context": prompt_context,
        "eval_rows": len(inputs.eval_rows),
        "schedule": recipe.sections.schedule,
        "timer": timer,
        "time_budget": budget,
        "evaluator": evaluator,
        "model_path": policy.model_path,
        "resume": resume,
        "judge_probe": policy.probe,
        "curriculum": curriculum.describe() if curriculum else None,
        "resume_from": str(resume_from) if resume_from is not None else None,
    }
    return trainer, context


def rehearse(recipe: Recipe, num_processes: int) -> dict[str, Any]:
    """``train --check``: what a cluster would reject, found here without loading a model or data: the
    recipe's values (checked when it loaded), the batch geometry for ``num_processes``, and TRL's own
    ``GRPOConfig``. Returns the global batch per optimizer step."""
    build_config(recipe, recipe.sections.schedule, num_processes=num_processes)
    return recipe.sections.batch.per_optimizer_step(num_processes)


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

    optimisation = recipe.sections.optimisation
    cpu = optimisation.use_cpu or not torch.cuda.is_available()
    return PartialState(cpu=cpu, timeout=timedelta(seconds=optimisation.ddp_timeout))


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
