"""The GRPO trainer: TRL's ``GRPOTrainer`` with what this project's runs add, for any method's rows.

- sample completions of every generation batch with their per-function rewards (``samples.jsonl``) and the
  share of prompt groups each reward function leaves without signal (``zero_variance_groups/<name>``);
- a prefilled assistant turn (``completion_prefix``) and left truncation of prompts (``context_rule
  truncate-left-tokens``);
- each group's shared prompt encoded once, in sampling (training/prefix_generation.py) and in the
  log-probability passes (training/shared_prefix.py), with the same values as TRL's per-row encoding;
  both are checked against TRL's paths on the run's first step and, under ``auto``, timed against them
  (training/path_choice.py, training/fast_paths.py);
- token-budgeted backward passes and activation checkpointing by size (training/token_budget.py), and
  rows with advantage 0 left out of the update (training/zero_advantage.py);
- prompts in a chosen order instead of TRL's shuffle: balanced steps (training/option_rotations.py) or an
  easy-first curriculum (training/curriculum.py).

The run set-up (recipe -> config, rewards, data, this trainer) is training/grpo.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer

from embodied_r.core.columns import with_completion_prefix
from embodied_r.training import prefix_generation, shared_prefix, token_budget, zero_advantage
from embodied_r.training.callbacks import record_samples, sample_rows, zero_variance_shares
from embodied_r.training.fast_paths import FastPathsMixin
from embodied_r.training.path_choice import PER_ROW
from embodied_r.training.recipe import RecipeError

logger = logging.getLogger(__name__)


def _every_row(inputs: Any) -> list[int]:
    return list(range(inputs["prompt_ids"].size(0)))


class ReasonerGRPOTrainer(FastPathsMixin, GRPOTrainer):
    """``GRPOTrainer`` that also records sample completions and per-function zero-variance shares, and
    can prefill the assistant turn (``completion_prefix``) and encodes each group's shared prompt once in
    the log-probability passes (``shared_prefix_update``, training/shared_prefix.py) and before sampling
    (``shared_prefix_generation``): auto | true | false each, decided on the first step (FastPathsMixin)."""

    samples_path: Path | None = None
    samples_per_batch: int = 0
    completion_prefix: str = ""
    max_train_batch_tokens: int | None = None
    checkpoint_over_tokens: int | None = None
    zero_variance_groups: str = "skip"  # rows with advantage 0: update | skip | drop (training/zero_advantage.py)
    left_truncate_to: int | None = None  # prompt tokens kept from the right (context_rule truncate-left-tokens)
    # balanced_steps (training/option_rotations.py): rows per question and the rotated rows, sampled by
    # RotationSampler (letters) or BalancedAnswerSampler (answers).
    balanced_steps: str = "none"
    rotation_group: int | None = None
    rotated_rows: list[Any] | None = None
    # curriculum easy-first (training/curriculum.py): the data set indices in the order GRPO takes them.
    curriculum_order: list[int] | None = None
    # Rows of the current generation batch whose group's rewards did not vary (set by _calculate_rewards,
    # used once by _generate_and_score_completions).
    _uniform_rows: Any = None
    # zero_variance_groups resample (training/dynamic_sampling.py): generation calls a step may add, and
    # the fresh-prompt stream (built at the first resampled step).
    resample_rounds: int = 0
    _resample_stream: Any = None

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        # TRL's RepeatSampler layout (prompts per generation batch, each repeated per completion, each batch
        # per reuse), with the order chosen here instead of shuffled.
        geometry = {"batch_size": self.args.generation_batch_size // self.num_generations,
                    "mini_repeat_count": self.num_generations,
                    "repeat_count": self.num_iterations * self.args.steps_per_generation}
        if self.curriculum_order is not None:
            from embodied_r.training.curriculum import CurriculumSampler

            return CurriculumSampler(self.curriculum_order, **geometry)
        if self.balanced_steps == "none":
            return super()._get_train_sampler(dataset)
        from embodied_r.training.option_rotations import BalancedAnswerSampler, RotationSampler

        dataset = self.train_dataset if dataset is None else dataset
        geometry["seed"] = self.args.seed
        if self.balanced_steps == "answers":
            return BalancedAnswerSampler(self.rotated_rows or [], self.rotation_group or 0, **geometry)
        return RotationSampler(len(dataset), self.rotation_group or 0, **geometry)

    def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        # With max_train_batch_tokens, a micro-batch over the budget is differentiated in slices
        # (training/token_budget.py): every slice but the last runs its backward here, the last one's loss
        # is returned for the Trainer's backward, carrying the others' values for the logged loss. A
        # micro-batch whose largest slice is over checkpoint_over_tokens is computed with activation
        # checkpointing. Rows with advantage 0 are left out or dropped (zero_variance_groups,
        # training/zero_advantage.py). The first micro-batch of a run decides the update's path
        # (training/fast_paths.py) if the generation phase did not.
        if self._deciding("update"):
            self._decide_update_on(model, inputs)
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

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        output, uniform = self._scored_generation(inputs)
        if self.zero_variance_groups != "resample" or not self.model.training:
            return output
        return self._resampled(output, uniform, inputs)

    def _scored_generation(self, inputs: Any) -> tuple[Any, Any]:
        """TRL's generation output, and per row whether its group's rewards did not vary (None where not
        known). Under skip, drop and resample such a group gets advantage exactly 0 instead of the rounding
        of TRL's float32 group mean, so that it is skipped or dropped (training/zero_advantage.py)."""
        output = super()._generate_and_score_completions(inputs)
        uniform, self._uniform_rows = self._uniform_rows, None
        if (uniform is None or self.zero_variance_groups == "update"
                or self.multi_objective_aggregation != "sum_then_normalize"):
            return output, None
        advantages = output["advantages"]
        rows = advantages.shape[0]
        local = uniform[self.accelerator.process_index * rows:(self.accelerator.process_index + 1) * rows]
        if local.numel() != rows:  # TRL's process slice is this process's rows of the gathered batch
            self._note_once("uniform-groups", logging.WARNING, "zero_variance_groups %s: %d advantages for %d "
                            "rewards in view; uniform groups keep TRL's advantages", self.zero_variance_groups,
                            rows, local.numel())
            return output, None
        local = local.to(advantages.device)
        output["advantages"] = advantages.masked_fill(local.view(-1, *[1] * (advantages.dim() - 1)), 0.0)
        return output, local.cpu()

    def _resampled(self, output: Any, uniform: Any, inputs: Any) -> Any:
        """The step's batch with its uniform groups replaced by varying groups of fresh training prompts, up
        to ``resample_rounds`` more generation calls (training/dynamic_sampling.py); what stays uniform is
        dropped from the loss as under ``drop``."""
        from embodied_r.training import dynamic_sampling

        generations = self.num_generations
        # Each process would draw its own number of extra generation calls, and TRL gathers in every call.
        problem = (f"{self.accelerator.num_processes} processes" if self.accelerator.num_processes > 1
                   else "rewards whose uniform groups are not known (multi_objective_aggregation "
                        f"{self.multi_objective_aggregation!r})" if uniform is None
                   else dynamic_sampling.unsupported_reason(output, self.scale_rewards))
        if problem is not None:
            raise RecipeError(f"zero_variance_groups: resample is not defined for {problem}; use skip, or drop "
                              "on one process")
        keep = dynamic_sampling.varying_groups(uniform, generations)
        n_groups = len(inputs) // generations
        missing = n_groups - len(keep)
        parts = [(output, keep)]
        if self._resample_stream is None:
            dataset = self.train_dataset
            ids = dataset["id"] if "id" in dataset.column_names else range(len(dataset))
            self._resample_stream = dynamic_sampling.ResampleStream([str(i) for i in ids], self.args.seed + 1)
        stream = self._resample_stream
        exclude = {str(row.get("id")) for row in inputs[::generations]}
        rounds = drawn = 0
        while missing and rounds < self.resample_rounds:
            fresh = stream.take(missing, exclude)
            if not fresh:
                break
            exclude.update(stream.ids[i] for i in fresh)
            rows = [self.train_dataset[i] for i in fresh for _ in range(generations)]
            extra, extra_uniform = self._scored_generation(rows)
            rounds, drawn = rounds + 1, drawn + len(fresh)
            found = dynamic_sampling.varying_groups(extra_uniform, generations)[:missing]
            if found:
                parts.append((extra, found))
                missing -= len(found)
        if missing:  # kept so the batch keeps its shape; the update drops them as under drop
            uniform_groups = sorted(set(range(n_groups)) - set(keep))
            parts.append((output, uniform_groups[:missing]))
        metrics = self._metrics["train"]
        metrics["resample/rounds"].append(float(rounds))
        metrics["resample/prompts_drawn"].append(float(drawn))
        metrics["resample/uniform_groups_left"].append(missing / n_groups if n_groups else 0.0)
        if len(parts) == 1:
            return output
        pad = getattr(self._tokenizer, "pad_token_id", None)
        return dynamic_sampling.join_groups(parts, generations, 0 if pad is None else int(pad))

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
        if self.zero_variance_groups in ("drop", "resample"):
            problem = zero_advantage.drop_unsupported_reason(self.loss_type, self.args.steps_per_generation,
                                                             self.accelerator.num_processes)
            if problem is not None:
                raise RecipeError(f"zero_variance_groups: {self.zero_variance_groups} is not defined for {problem}; "
                                  "use skip")
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
        if self._deciding("generation"):
            self._decide_generation(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        path = self._chosen_path("generation")
        reason = ("shared_prefix_generation is off" if self._setting("generation") == "false" else
                  "the run's first step chose TRL's path (fast_paths.json)" if path == PER_ROW else
                  prefix_generation.unsupported_reason(self.model, self.generation_config,
                                                       bool(multimodal_fields) or has_tool_images
                                                       or any(images or [])))
        if reason is not None:
            self._note_once(f"generation:{reason}", logging.INFO, "shared-prefix generation not used (%s): TRL "
                            "encodes the prompt once per completion", reason)
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        # TRL's transformers path has no sampling log-probabilities either
        return self._shared_prefix_generate(prompt_ids, self.generation_config), None

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
        packed = self._chosen_path("update") != PER_ROW and shared_prefix.unsupported_reason(model, width) is None
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
        # changes no value (shared_prefix.py); whatever it cannot reproduce exactly goes to TRL's method. The
        # first no-grad pass of a run (reference or old log-probabilities) decides the path (fast_paths.py).
        if not torch.is_grad_enabled() and self._deciding("update"):
            self._decide_update(model, input_ids, attention_mask, logits_to_keep, batch_size, extra_inputs,
                                compute_aux_loss)
        path = self._chosen_path("update")
        reason, groups = shared_prefix.OFF, []
        if path == PER_ROW and self._setting("update") != "false":
            reason = shared_prefix.CHOSEN_PER_ROW
        elif path != PER_ROW:
            reason, groups = shared_prefix.stock_path_reason(
                model, input_ids, attention_mask, logits_to_keep, compute_aux_loss, extra_inputs
            )
        if reason is not None:
            self._note_stock_path(reason)
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra_inputs,
            )
        logps, entropies = self._packed_logps(model, input_ids, attention_mask, logits_to_keep, groups,
                                              batch_size=batch_size, compute_entropy=compute_entropy)
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
        self._uniform_rows = None
        if generations and rewards.shape[0] % generations == 0:
            if mode == "train" and self.zero_variance_groups != "update":
                self._uniform_rows = zero_advantage.uniform_group_rows(rewards.cpu(), generations)
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


__all__ = ["ReasonerGRPOTrainer"]
