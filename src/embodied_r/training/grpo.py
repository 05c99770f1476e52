"""GRPO training of the reasoner: a thin layer over TRL's ``GRPOTrainer``.

TRL does the algorithm, generation (transformers, or vLLM colocate/server), distribution (Accelerate,
DeepSpeed) and checkpointing. This layer adds what the paper needs and TRL lacks: the reward table, the
staged reward weights, held-out evaluation with the evaluation code, per-function zero-variance shares,
sample completions as JSON Lines, a resolved config saved beside the run, and checks that fail before
training rather than during it.

Files in ``output_dir``: ``resolved_recipe.yaml``, ``grpo_config.json``, ``metrics.jsonl``,
``samples.jsonl``, ``eval.jsonl`` and ``eval/``, ``checkpoint-N/`` (TRL), ``final/`` (the model),
``runs/`` (TensorBoard, when ``report_to`` includes it), ``summary.json``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState
from trl import GRPOConfig, GRPOTrainer
from trl.extras.profiling import profiling_context
from trl.models import unwrap_model_for_generation

from embodied_r.core.columns import with_completion_prefix
from embodied_r.core.io import atomic_write_json, atomic_write_text, exclusive_output
from embodied_r.inference.context_policy import TOKEN_CUT_RULE
from embodied_r.methods.embodied_r.schedule import RewardSchedule, make_schedule_callback
from embodied_r.methods.rewards import get_reward, is_factory
from embodied_r.training import prefix_generation, shared_prefix, token_budget, zero_advantage
from embodied_r.training.callbacks import (
    EvalCallback,
    MetricsJsonl,
    StepTimer,
    TimeBudget,
    quiet_tensorboard,
    record_samples,
    sample_rows,
    zero_variance_shares,
)
from embodied_r.training.data import fit_rows_to_context, load_prompt_rows, rows_to_dataset
from embodied_r.training.host_memory import fix_mmap_threshold
from embodied_r.training.judge_gate import consistency_in_use, gate_judge
from embodied_r.training.recipe import (
    Recipe,
    RecipeError,
    check_batch_geometry,
    check_prompt_version,
    check_rule_rows,
    check_runtime,
    dump_recipe,
    global_batch,
    reward_spec,
)
from embodied_r.training.vision import data_dir, processor_for_rows
from embodied_r.training.warmup import run_format_warmup

logger = logging.getLogger(__name__)


def _every_row(inputs: Any) -> list[int]:
    return list(range(inputs["prompt_ids"].size(0)))


class EmbodiedGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` that also records sample completions and per-function zero-variance shares, and
    can prefill the assistant turn (``completion_prefix``) and encodes each group's shared prompt once in
    the log-probability passes (``shared_prefix_update``, training/shared_prefix.py)."""

    samples_path: Path | None = None
    samples_per_batch: int = 0
    completion_prefix: str = ""
    shared_prefix_update: bool = True
    shared_prefix_generation: bool = True
    max_train_batch_tokens: int | None = None
    checkpoint_over_tokens: int | None = None
    zero_variance_groups: str = "skip"  # rows with advantage 0: update | skip | drop (training/zero_advantage.py)
    left_truncate_to: int | None = None  # prompt tokens kept from the right (context_rule truncate-left-tokens)

    def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        # With max_train_batch_tokens, a micro-batch over the budget is differentiated in slices
        # (training/token_budget.py): every slice but the last runs its backward here, the last one's loss
        # is returned for the Trainer's backward, carrying the others' values for the logged loss. A
        # micro-batch whose largest slice is over checkpoint_over_tokens is computed with activation
        # checkpointing. Rows with advantage 0 are left out or dropped (zero_variance_groups,
        # training/zero_advantage.py).
        inputs, live = self._rows_to_update(model, inputs, return_outputs)
        slices, checkpoint = self._update_plan(model, inputs)
        if live is not None:
            kept = set(live)
            slices = [[r for r in rows if r in kept] for rows in slices or [_every_row(inputs)]]
            slices = [rows for rows in slices if rows]
            if not slices:
                # Nothing moves a weight this step. On one process no pass is needed at all; across processes
                # one row at scale 0 keeps every parameter in the graph, as a distributed backward needs.
                if self.accelerator.num_processes == 1:
                    return torch.zeros((), device=inputs["prompt_ids"].device, requires_grad=True)
                return self._scaled_slice_loss(model, inputs, [0]) * 0.0
        with token_budget.activation_checkpointing(model, checkpoint):
            if len(slices) <= 1 and (live is None or len(slices[0]) == inputs["prompt_ids"].size(0)):
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            done = None
            for rows in slices[:-1]:
                with self.accelerator.no_sync(model):  # gradients are reduced once, with the last slice
                    part = self._scaled_slice_loss(model, inputs, rows)
                    self.accelerator.backward(part)
                done = part.detach() if done is None else done + part.detach()
            last = self._scaled_slice_loss(model, inputs, slices[-1])
            return last if done is None else last + done

    def _rows_to_update(self, model: Any, inputs: Any, return_outputs: bool) -> tuple[Any, list[int] | None]:
        """(the inputs the update sees, the rows of them to differentiate or None for all): ``skip`` leaves
        out rows with advantage 0 (same gradient); ``drop`` also removes the groups whose rewards did not
        vary from the loss's normaliser (DAPO's dynamic sampling without resampling)."""
        if self.zero_variance_groups == "update" or not (model.training and torch.is_grad_enabled()):
            return inputs, None
        reason = ("beta > 0: a zero-advantage row still carries the KL term" if self.beta != 0
                  else "outputs are requested" if return_outputs
                  else token_budget.unsupported_reason(self, inputs))
        if reason is not None:
            self._note_once(f"zero-advantage:{reason}", logging.INFO,
                            "zero_variance_groups %s not applied (%s): every row is updated",
                            self.zero_variance_groups, reason)
            return inputs, None
        if self.zero_variance_groups == "drop":
            problem = zero_advantage.drop_unsupported_reason(self.loss_type, self.args.steps_per_generation,
                                                             self.accelerator.num_processes)
            if problem is not None:
                raise RecipeError(f"zero_variance_groups: drop is not defined for {problem}; use skip")
            groups = shared_prefix.find_groups(inputs["prompt_ids"].cpu(), inputs["prompt_mask"].cpu())
            varying = zero_advantage.rows_of_varying_groups(inputs, groups)
            if not varying:
                return inputs, []
            inputs = zero_advantage.renormalised(inputs, varying, token_budget.take_rows)
        return inputs, zero_advantage.rows_with_advantage(inputs)

    def _generate(self, prompts: list) -> Any:
        # TRL generates in the weights' dtype; with float32 weights and bf16 passes (training/precision.py)
        # sampling runs in bf16 autocast too, as fast as bf16 weights. vLLM generates on its own copy.
        if self.use_vllm:
            return super()._generate(prompts)
        with self.accelerator.autocast():
            return super()._generate(prompts)

    def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: Any,
                              has_tool_images: bool = False) -> Any:
        # Each group's prompt encoded once before sampling (training/prefix_generation.py); vLLM and TRL's
        # continuous batching keep their own paths.
        if self.use_vllm or self.use_transformers_continuous_batching:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        reason = ("shared_prefix_generation is off" if not self.shared_prefix_generation else
                  prefix_generation.unsupported_reason(self.model, self.generation_config,
                                                       bool(multimodal_fields) or has_tool_images
                                                       or any(images or [])))
        if reason is not None:
            self._note_once(f"generation:{reason}", logging.INFO, "shared-prefix generation not used (%s): TRL "
                            "encodes the prompt once per completion", reason)
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        with (profiling_context(self, "transformers.generate"),
              unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                          gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                                          generation_kwargs=self.generation_kwargs,
                                          gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs
                                          ) as unwrapped,
              torch.no_grad(),
              self._dist.summon_full_params(self.model_wrapped, recurse=False)):
            completions = prefix_generation.generate_sharing_prompts(unwrapped, [list(p) for p in prompt_ids],
                                                                     self.generation_config, self.eos_token_ids)
        return completions, None  # TRL's transformers path has no sampling log-probabilities either

    def _scaled_slice_loss(self, model: Any, inputs: Any, rows: list[int]) -> Any:
        part = super().compute_loss(model, token_budget.take_rows(inputs, rows))
        return part * token_budget.slice_scale(self.loss_type, inputs, rows)

    def _update_plan(self, model: Any, inputs: Any) -> tuple[list[list[int]], bool]:
        """(row slices for this micro-batch's backward, or [] to differentiate it whole; whether to
        checkpoint activations). Packed slices whose attention would hold too much for the backward pass
        take the per-row path (shared_prefix.stock_path_reason), so they are sized for it."""
        if not (model.training and torch.is_grad_enabled()):
            return [], False
        width = inputs["prompt_ids"].size(1) + inputs["completion_ids"].size(1)
        packed = self.shared_prefix_update and shared_prefix.unsupported_reason(model, width) is None
        slices, checkpoint = self._plan_for(model, inputs, packed)
        if packed:
            # Measured before checkpointing is switched on: all layers' probabilities, of which a checkpointed
            # pass holds one layer's at a time.
            layers = shared_prefix.unwrap(model).config.get_text_config().num_hidden_layers if checkpoint else 1
            if any(self._dense_attention_bytes(model, inputs, rows) / layers > shared_prefix.MAX_DENSE_ATTENTION_BYTES
                   for rows in slices or [_every_row(inputs)]):
                slices, checkpoint = self._plan_for(model, inputs, packed=False)
        if len(slices) > 1:
            self._note_once("budget:sliced", logging.INFO,
                            "max_train_batch_tokens %d: micro-batches over it are differentiated in slices "
                            "(first: %d rows x %d tokens in %d slices); the gradient is the same",
                            self.max_train_batch_tokens, inputs["prompt_ids"].size(0), width, len(slices))
        if checkpoint:
            self._note_once("checkpoint", logging.INFO,
                            "checkpoint_over_tokens %d: a backward pass over more tokens recomputes activations "
                            "layer by layer instead of keeping them; the gradient is the same",
                            self.checkpoint_over_tokens)
        return slices, checkpoint

    def _plan_for(self, model: Any, inputs: Any, packed: bool) -> tuple[list[list[int]], bool]:
        """Slices by ``max_train_batch_tokens`` and the checkpointing decision, for one layout."""
        groups = token_budget.prompt_groups(inputs, packed)
        slices = self._budget_slices(inputs, groups)
        largest = max(token_budget.slice_tokens(groups, rows) for rows in slices or [_every_row(inputs)])
        limit = self.checkpoint_over_tokens
        checkpoint = limit is not None and largest > limit and not shared_prefix.checkpointing_active(model)
        return slices, checkpoint

    def _budget_slices(self, inputs: Any, groups: list[token_budget.Group]) -> list[list[int]]:
        """Row slices within ``max_train_batch_tokens``, or [] to differentiate the micro-batch whole."""
        budget = self.max_train_batch_tokens
        if budget is None:
            return []
        width = inputs["prompt_ids"].size(1) + inputs["completion_ids"].size(1)
        rows = inputs["prompt_ids"].size(0)
        if rows * width <= budget:
            return []  # fits even unpacked: nothing to decide
        reason = token_budget.unsupported_reason(self, inputs)
        if reason is not None:
            self._note_once(f"budget:{reason}", logging.WARNING,
                            "max_train_batch_tokens not applied (%s): this micro-batch of %d rows x %d tokens "
                            "is differentiated whole", reason, rows, width)
            return []
        slices = token_budget.plan_slices(groups, budget)
        return slices if len(slices) > 1 else []

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: Any,
        attention_mask: Any,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra_inputs: Any,
    ) -> Any:
        # The policy loss, the reference model and the old log-probabilities all come through here. Packing
        # changes no value (shared_prefix.py); whatever it cannot reproduce exactly goes to TRL's method.
        reason, groups = shared_prefix.OFF, []
        if self.shared_prefix_update:
            reason, groups = shared_prefix.stock_path_reason(
                model, input_ids, attention_mask, logits_to_keep, compute_aux_loss, extra_inputs
            )
        if reason is not None:
            self._note_stock_path(reason)
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra_inputs,
            )
        head = shared_prefix.compact_head(model, input_ids.device, self.temperature, self.args.cast_lm_head_to_fp32)
        logps, entropies = shared_prefix.shared_prefix_logps(
            model, input_ids, attention_mask, logits_to_keep, groups, batch_size=batch_size,
            compute_entropy=compute_entropy, autocast=self.accelerator.autocast, head=head,
        )
        return logps, entropies, None

    @staticmethod
    def _dense_attention_bytes(model: Any, inputs: Any, rows: list[int]) -> int:
        mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        groups = shared_prefix.find_groups(inputs["prompt_ids"][rows].cpu(), inputs["prompt_mask"][rows].cpu())
        return shared_prefix.dense_attention_bytes(model, [[rows[i] for i in g] for g in groups], mask.cpu(),
                                                   inputs["completion_mask"].size(1))

    def _note_stock_path(self, reason: str) -> None:
        """Log once per distinct reason why a batch took TRL's per-row path."""
        level = logging.INFO if reason in shared_prefix.ROUTINE_REASONS else logging.WARNING
        self._note_once(f"prefix:{reason}", level, "shared-prefix update not used (%s): TRL encodes the prompt "
                        "once per completion for such batches; the loss is the same", reason)

    @property
    def stock_path_reasons(self) -> list[str]:
        """Why batches of this run took TRL's per-row path instead of the shared-prefix one (each reason once)."""
        noted = self.__dict__.get("_noted", ())
        return sorted(key.removeprefix("prefix:") for key in noted if key.startswith("prefix:"))

    def _note_once(self, key: str, level: int, message: str, *args: Any) -> None:
        noted = self.__dict__.setdefault("_noted", set())
        if key not in noted:
            noted.add(key)
            logger.log(level, message, *args)

    def _tokenize_prompts(self, prompts: list) -> Any:
        # TRL 1.16 renders conversational prompts with add_generation_prompt=True and has no option to
        # continue a final assistant message, so the prefix's tokens are appended to the rendered
        # prompt here. They stay on the prompt side: never sampled, never in the policy loss. Both the
        # transformers and the vLLM generation paths start from these ids.
        prompt_ids, images, multimodal_fields = super()._tokenize_prompts(prompts)
        if self.completion_prefix:
            if multimodal_fields:
                raise RecipeError(
                    "completion_prefix supports text-only prompts (this batch has image inputs)"
                )
            extra = self._tokenizer(self.completion_prefix, add_special_tokens=False)["input_ids"]
            prompt_ids = [list(ids) + list(extra) for ids in prompt_ids]
        if self.left_truncate_to is not None:
            # context_rule truncate-left-tokens: the official trainer keeps the last N prompt tokens.
            if multimodal_fields:
                raise RecipeError("context_rule truncate-left-tokens supports text-only prompts")
            prompt_ids = [list(ids)[-self.left_truncate_to:] for ids in prompt_ids]
        return prompt_ids, images, multimodal_fields

    def _calculate_rewards(
        self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any
    ) -> Any:
        # Rewards judge the whole assistant turn, prefix included (format rules are anchored at "<think>").
        completions = with_completion_prefix(completions, self.completion_prefix)
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        mode = "train" if self.model.training else "eval"
        generations = self.num_generations if mode == "train" else self.num_generations_eval
        if generations and rewards.shape[0] % generations == 0:
            for name, share in zero_variance_shares(
                rewards.cpu(), generations, self.reward_func_names
            ).items():
                self._metrics[mode][name].append(share)
        if self.samples_path is not None and self.samples_per_batch:
            self._record_samples(inputs, completions, rewards)
        return rewards

    def _record_samples(self, inputs: Any, completions: Any, rewards: Any) -> None:
        """``samples_per_batch`` completions of the whole generation batch, taken from every process in
        turn (TRL gathers the rewards in rank order, so process r's rows start at r x its batch)."""
        local = sample_rows(inputs, completions, self.samples_per_batch)
        processes = self.accelerator.num_processes
        per_process = len(completions)
        if processes > 1:
            from accelerate.utils import gather_object

            gathered = gather_object([(self.accelerator.process_index, row) for row in local])  # every rank
        else:
            gathered = [(0, row) for row in local]
        if not self.accelerator.is_main_process:
            return
        by_rank: dict[int, list[dict[str, Any]]] = {}
        for rank, row in gathered:
            by_rank.setdefault(rank, []).append(row)
        # Round-robin over the processes, so a small limit still shows every rank's prompts.
        samples = []
        for offset in range(max((len(v) for v in by_rank.values()), default=0)):
            for rank in sorted(by_rank):
                if offset < len(by_rank[rank]):
                    samples.append((rank * per_process + offset, by_rank[rank][offset]))
        record_samples(self.samples_path, int(self.state.global_step) + 1, samples, rewards.cpu(),
                       self.reward_func_names, self.reward_weights.tolist(), self.samples_per_batch)


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


def build_rewards(recipe: Recipe, model_path: str, judge: Any = None) -> list[Any]:
    """Reward callables in recipe order; ``judge`` (tests, evaluation) replaces the reference model."""
    funcs = []
    for entry in recipe.rewards:
        name, options = reward_spec(entry)
        if is_factory(name) and name == "consistency":
            options = {
                "policy_model": model_path,
                "reference_model": recipe.reference_model,
                "dtype": recipe.dtype,
                "judge": judge,
                "sees_letters": recipe.judge_sees_letters,
                "scoring": recipe.judge_scoring,
                "attn_implementation": recipe.attn_implementation,
                "consistency_rule": recipe.consistency_rule,
                **options,
            }
        elif is_factory(name) and name == "accuracy":
            options = {"rule": recipe.accuracy_rule, **options}  # {accuracy: {rule: ...}} still wins
        funcs.append(get_reward(name, **options))
    return funcs


def _judge_is_policy(spec: Any) -> bool:
    return spec in (None, "policy") or (isinstance(spec, dict) and spec.get("model") == "policy"
                                        and "base_url" not in spec)


def _static_weights(recipe: Recipe, n: int) -> list[float]:
    weights = recipe.trl.get("reward_weights")
    return [float(w) for w in weights] if weights is not None else [1.0] * n


def _gate_consistency(
    recipe: Recipe, rewards: list[Any], rows: list[Any], schedule: RewardSchedule | None
) -> dict[str, Any] | None:
    """Probe the consistency reward's judge when some stage weights it; None when none does."""
    stages = [list(s.weights) for s in schedule.stages] if schedule else [_static_weights(recipe, len(rewards))]
    consistency = consistency_in_use(rewards, stages)
    if consistency is None:
        return None
    return gate_judge(consistency, rows, recipe.output_dir, recipe.sections.judge_probe,
                      recipe.allow_weak_judge, PartialState().is_main_process)


def existing_checkpoints(output_dir: Path) -> list[Path]:
    """TRL checkpoint folders in ``output_dir``, oldest first (complete or not)."""
    found = [p for p in output_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def is_complete_checkpoint(folder: Path) -> bool:
    """The Trainer writes ``trainer_state.json`` last (after weights, optimizer and RNG state), so a
    checkpoint is complete when that file exists and parses; a kill during a save leaves it without."""
    import json

    state = folder / "trainer_state.json"
    try:
        return state.is_file() and isinstance(json.loads(state.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def drop_partial_checkpoints(output_dir: Path) -> list[str]:
    """Remove checkpoint folders a kill left half-written; returns their names (logged by the caller)."""
    import shutil

    partial = [p for p in existing_checkpoints(output_dir) if not is_complete_checkpoint(p)]
    for folder in partial:
        shutil.rmtree(folder, ignore_errors=True)
    return [p.name for p in partial]


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
    fitted, report = fit_rows_to_context(rows, tokenizer, policy, limit, recipe.completion_prefix)
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
) -> tuple[EmbodiedGRPOTrainer, dict[str, Any]]:
    """Everything up to (not including) ``trainer.train()``; all input checks happen here.
    ``processing_class`` replaces the tokenizer/processor TRL would load from the model folder."""
    from embodied_r.inference.models import resolve_model_path

    started = time.monotonic()  # max_train_minutes counts the warm-up and the judge probe

    output_dir = recipe.output_dir
    checkpoints = existing_checkpoints(output_dir)
    complete = [p for p in checkpoints if is_complete_checkpoint(p)]
    if resume and not checkpoints:
        raise RecipeError(f"--resume: no checkpoint-* folder in {output_dir}; run without --resume to start")
    if not resume and checkpoints:
        partial = [p.name for p in checkpoints if p not in complete]
        note = (f" ({', '.join(partial)} {'is' if len(partial) == 1 else 'are'} incomplete: a save was interrupted; "
                "--resume removes it and continues from the last complete checkpoint"
                + (f", {complete[-1].name})" if complete else ", or starts over when there is none)")
                ) if partial else ""
        raise RecipeError(
            f"{output_dir} already has {checkpoints[-1].name}{note}; pass --resume to continue that run, or set "
            "output_dir to a new folder"
        )
    if resume:
        dropped = drop_partial_checkpoints(output_dir) if PartialState().is_main_process else []
        if dropped:
            logger.warning(
                "--resume: removed incomplete checkpoint(s) %s (a save was interrupted); %s", ", ".join(dropped),
                f"continuing from {complete[-1].name}" if complete else "no complete checkpoint: starting over",
            )
    check_runtime(recipe)
    # Before any data, warm-up or model: a batch that does not hold whole groups on this many processes.
    check_batch_geometry(recipe.trl, PartialState().num_processes)
    rows = load_prompt_rows(recipe.train_data, recipe.max_train_rows)
    eval_rows = load_prompt_rows(recipe.eval_data)[: recipe.eval_max_rows] if recipe.eval_data else []
    check_prompt_version(recipe, rows, "train_data")
    check_prompt_version(recipe, eval_rows, "eval_data")
    check_rule_rows(recipe.consistency_rule, recipe.reward_names, rows, "train_data")
    model_path = resolve_model_path(recipe.model)
    rows, prompt_context = _fit_to_context(recipe, rows, model_path, processing_class)
    train_dataset = rows_to_dataset(rows, image_dir=data_dir(recipe.train_data))  # image rows: Robot-R1
    schedule, warmup = recipe.sections.schedule, recipe.sections.warmup
    # The reference judge is loaded before GRPOConfig exists: once TrainingArguments has set up DeepSpeed
    # ZeRO-3, from_pretrained would shard it across ranks, and each rank judges a different number of
    # completions, so a sharded judge would deadlock. A replicated frozen copy has no collectives.
    # A judge other than the policy is loaded, and probed, before the warm-up, so a judge that cannot be
    # loaded or reached, or fails its probe, stops the run before any training.
    judge_first = judge is not None or not _judge_is_policy(recipe.reference_model)
    rewards = build_rewards(recipe, model_path, judge=judge) if judge_first else []
    probe = _gate_consistency(recipe, rewards, rows, schedule) if judge_first else None
    if warmup is not None:
        # GRPO (and the "policy" consistency judge) start from the warmed-up model.
        model_path = run_format_warmup(warmup, rows, model_path, output_dir, recipe.dtype,
                                       recipe.attn_implementation)
    if not judge_first:
        rewards = build_rewards(recipe, model_path, judge=judge)
        probe = _gate_consistency(recipe, rewards, rows, schedule)
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
    trainer = EmbodiedGRPOTrainer(
        model=model_path,
        reward_funcs=rewards,
        args=args,
        train_dataset=train_dataset,
        processing_class=processor_for_rows(recipe, rows, eval_rows, model_path, processing_class),
        peft_config=recipe.sections.lora.peft_config() if recipe.sections.lora else None,
        callbacks=callbacks,
    )
    trainer.samples_path = output_dir / "samples.jsonl"
    trainer.samples_per_batch = recipe.sample_completions
    trainer.completion_prefix = recipe.completion_prefix
    trainer.shared_prefix_update = recipe.shared_prefix_update
    trainer.shared_prefix_generation = recipe.shared_prefix_generation
    trainer.max_train_batch_tokens = recipe.max_train_batch_tokens
    trainer.checkpoint_over_tokens = recipe.checkpoint_over_tokens
    trainer.zero_variance_groups = recipe.zero_variance_groups
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
        "resume_from": str(complete[-1]) if resume and complete else None,
    }
    return trainer, context


def rehearse(recipe: Recipe, num_processes: int) -> dict[str, Any]:
    """``train --check``: what a cluster would reject, found here without loading a model or data: the
    recipe's values (checked when it loaded), the batch geometry for ``num_processes``, and TRL's own
    ``GRPOConfig``. Returns the global batch per optimizer step."""
    schedule = recipe.sections.schedule
    build_config(recipe, schedule, num_processes=num_processes)
    return global_batch(recipe.trl, num_processes)


def save_resolved(recipe: Recipe, trainer: GRPOTrainer, context: dict[str, Any]) -> None:
    """Write the resolved recipe, TRL's full config and library versions beside the run."""
    import torch
    import transformers
    import trl

    out = recipe.output_dir
    path = out / "resolved_recipe.yaml"
    text = dump_recipe(recipe)
    if path.exists() and path.read_text(encoding="utf-8") != text:
        logger.warning(
            "%s differs from this run's recipe; the previous one is kept as %s",
            path,
            path.with_suffix(".previous.yaml").name,
        )
        atomic_write_text(path.with_suffix(".previous.yaml"), path.read_text(encoding="utf-8"))
    atomic_write_text(path, text)
    schedule = context.get("schedule")
    atomic_write_json(
        out / "grpo_config.json",
        {
            "grpo_config": trainer.args.to_dict(),
            "reward_functions": list(trainer.reward_func_names),
            "reward_schedule": schedule.describe() if schedule else None,
            "model_path": context["model_path"],
            "versions": {
                "trl": trl.__version__,
                "transformers": transformers.__version__,
                "torch": torch.__version__,
            },
        },
    )


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
    final_dir = recipe.output_dir / "final"
    trainer.save_model(str(final_dir))
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(str(final_dir))
    history = [
        h for h in trainer.state.log_history if "loss" in h or any(k.startswith("rewards/") for k in h)
    ]
    evaluator, budget = context["evaluator"], context["time_budget"]
    summary = {
        "output_dir": str(recipe.output_dir),
        "global_step": int(trainer.state.global_step),
        "epoch": trainer.state.epoch,
        "train_rows": context["rows"],
        "prompt_context": context["prompt_context"],
        "train_loss": output.training_loss,
        "last_log": history[-1] if history else {},
        "eval": evaluator.results if evaluator else [],
        "step_times": context["timer"].steps,
        "judge_probe": _probe_summary(context["judge_probe"]),
        "schedule_unreached": schedule_warnings(trainer),
        "time_budget": budget.describe(int(trainer.state.max_steps)) if budget else None,
        "final_model": str(final_dir),
    }
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


def _probe_summary(probe: dict[str, Any] | None) -> dict[str, Any] | None:
    if probe is None:
        return None
    keys = ("judge", "passed", "allowed_weak", "agreement", "top_letter", "top_letter_share", "message")
    return {key: probe.get(key) for key in keys}


def schedule_warnings(trainer: Any) -> list[str]:
    """What the schedule callback warned about at the start (stages the run never reached)."""
    return [reason for cb in trainer.callback_handler.callbacks for reason in getattr(cb, "unreached", [])]


__all__ = ["EmbodiedGRPOTrainer", "build_config", "build_trainer", "train", "warm_up_only"]
