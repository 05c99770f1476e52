"""The trainer's side of the fast-path choice (training/path_choice.py): running both paths on a run's first
batch, agreeing across processes, and the record.

``FastPathsMixin`` goes before TRL's ``GRPOTrainer`` in ``ReasonerGRPOTrainer``'s bases. A decision is made
only inside a training step of a run (``training_step``, or ``check_fast_paths`` for ``train --check-paths``),
at points every process reaches together: the update at the first no-grad log-probability pass of a step
(the reference model's or the old policy's, under ``torch.no_grad`` in TRL's generation phase) or at the
start of the first ``compute_loss``, and sampling at the first generation call. Outside a run (direct calls,
as the tests make) an undecided ``auto`` behaves as ``true`` without a check.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer
from trl.extras.profiling import profiling_context
from trl.models import unwrap_model_for_generation

from embodied_r.training import path_choice, prefix_generation, shared_prefix
from embodied_r.training.path_choice import PER_ROW, SHARED, Measurement, PathRecord

logger = logging.getLogger(__name__)

NAMES = ("update", "generation")
# The inputs TRL's loss passes to the model besides the tokens (GRPOTrainer._compute_loss, TRL 1.16).
EXTRA_INPUTS = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
                "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    """The model without dropout for the duration (the check compares deterministic values, and draws no
    random numbers, so the run's random stream is the same with or without it)."""
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


def greedy(config: Any, new_tokens: int) -> Any:
    """A copy of a generation config that decodes greedily, at most ``new_tokens`` tokens."""
    out = copy.deepcopy(config)
    limit = out.max_new_tokens or new_tokens
    out.do_sample = False
    out.max_new_tokens = min(new_tokens, limit)
    for name in ("temperature", "top_p", "top_k", "min_p"):
        setattr(out, name, None)
    return out


class FastPathsMixin:
    """Shared-prefix paths that check themselves on first use and, under ``auto``, are timed against TRL's."""

    shared_prefix_update: bool | str = "auto"
    shared_prefix_generation: bool | str = "auto"
    fast_paths_path: Path | None = None  # where the record is written (fast_paths.json); None: nowhere

    # ---- state -------------------------------------------------------------------------------------

    def _records(self) -> dict[str, PathRecord]:
        return self.__dict__.setdefault("_fast_path_records", {})

    def _setting(self, name: str) -> str:
        return path_choice.setting_name(getattr(self, f"shared_prefix_{name}"))

    def _chosen_path(self, name: str) -> str | None:
        """shared-prefix | per-row once decided (or forced by ``false``); None while undecided."""
        if self._setting(name) == "false":
            return PER_ROW
        record = self._records().get(name)
        return record.path if record is not None else None

    def _deciding(self, name: str) -> bool:
        """Whether this call is where ``name``'s path gets decided: inside a run's training step, not yet
        decided, and not switched off."""
        return (self.__dict__.get("_in_run_step", False) and self.model.training
                and self._setting(name) != "false" and self._chosen_path(name) is None)

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        self.__dict__["_in_run_step"] = True
        try:
            return super().training_step(model, inputs, num_items_in_batch)
        finally:
            self.__dict__["_in_run_step"] = False

    def keep_fast_paths(self, path: Path) -> None:
        """A resumed run keeps the paths its first start chose (``path``: its fast_paths.json), so that its
        steps compute as the uninterrupted run's would; a kept shared-prefix path is checked again."""
        if not path.is_file():
            return
        try:
            earlier = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            logger.warning("%s unreadable (%s): the fast paths are chosen again", path, exc)
            return
        for name in NAMES:
            old = earlier.get(name) or {}
            if self._setting(name) != "auto":
                continue  # true and false choose by themselves
            if old.get("path") == SHARED:
                self.__dict__.setdefault("_kept", {})[name] = old  # decided again as under true: checked
            elif old.get("path") == PER_ROW:
                self._records()[name] = PathRecord(
                    setting="auto", path=PER_ROW, check=old.get("check"), timings_s=old.get("timings_s"),
                    reason=f"kept from the run's earlier start ({old.get('reason')})", step=old.get("step"),
                    kept_from_earlier_start=True)

    # ---- the paths ---------------------------------------------------------------------------------

    def _packed_logps(self, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                      groups: list[list[int]], batch_size: int | None = None,
                      compute_entropy: bool = False) -> tuple[Any, Any]:
        head = shared_prefix.compact_head(model, input_ids.device, self.temperature, self.args.cast_lm_head_to_fp32)
        return shared_prefix.shared_prefix_logps(
            model, input_ids, attention_mask, logits_to_keep, groups, batch_size=batch_size,
            compute_entropy=compute_entropy, autocast=self.accelerator.autocast, head=head,
        )

    def _per_row_logps(self, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                       batch_size: int | None = None) -> Any:
        return GRPOTrainer._get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                                              batch_size=batch_size)[0]

    def _shared_prefix_generate(self, prompt_ids: list, config: Any) -> list[list[int]]:
        """Completions of ``prompt_ids`` with each distinct prompt encoded once (training/prefix_generation.py)."""
        with (profiling_context(self, "transformers.generate"),
              unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                          gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                                          generation_kwargs=self.generation_kwargs,
                                          gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs
                                          ) as unwrapped,
              torch.no_grad(),
              self._dist.summon_full_params(self.model_wrapped, recurse=False)):
            return prefix_generation.generate_sharing_prompts(unwrapped, [list(p) for p in prompt_ids], config,
                                                              self.eos_token_ids)

    def _per_row_generate(self, prompt_ids: list, config: Any, *args: Any) -> list[list[int]]:
        """TRL's own transformers sampling of ``prompt_ids`` under ``config`` instead of the run's."""
        run_config, self.generation_config = self.generation_config, config
        try:
            return GRPOTrainer._generate_single_turn(self, prompt_ids, *(args or (None, {}, 1)))[0]
        finally:
            self.generation_config = run_config

    # ---- decisions ---------------------------------------------------------------------------------

    def _decide_update_on(self, model: Any, inputs: dict[str, Any]) -> None:
        """The update's decision on a micro-batch as ``compute_loss`` gets it."""
        input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        extra = {key: inputs.get(key) for key in EXTRA_INPUTS}
        self._decide_update(model, input_ids, attention_mask, inputs["completion_ids"].size(1), None, extra,
                            bool(getattr(self, "aux_loss_enabled", False)))

    def _decide_update(self, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                       batch_size: int | None, extra_inputs: dict[str, Any], compute_aux_loss: bool) -> None:
        started = time.perf_counter()
        setting = self._effective_setting("update")
        with torch.no_grad():  # packable as a no-grad pass: the backward's memory cap is the loss's own choice
            reason, groups = shared_prefix.stock_path_reason(model, input_ids, attention_mask, logits_to_keep,
                                                             compute_aux_loss, extra_inputs)
        if reason is not None:
            local = Measurement(unavailable=reason)
        else:
            local = self._measure_update(model, input_ids, attention_mask, logits_to_keep, batch_size, groups, setting)
        local.cost_s = time.perf_counter() - started
        self._conclude("update", setting, local)

    def _measure_update(self, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                        batch_size: int | None, groups: list[list[int]], setting: str) -> Measurement:
        completion_mask = attention_mask[:, -logits_to_keep:]
        scored = ([i for i in g if bool(completion_mask[i].any())] for g in groups)
        whole = next((g for g in scored if len(g) > 1), None)  # the first group with two scored rows
        if whole is None:
            return Measurement(unavailable="no prompt group has two rows with an unmasked completion")
        group = whole[:path_choice.CHECK_ROWS]
        rows = torch.tensor(group, device=input_ids.device)
        ids, mask = input_ids[rows], attention_mask[rows]
        sync = torch.cuda.synchronize if input_ids.is_cuda else None
        tolerance = path_choice.logp_tolerance(shared_prefix.unwrap(model), bool(self.args.bf16 or self.args.fp16))
        paths = {SHARED: lambda: self._packed_logps(model, ids, mask, logits_to_keep, [list(range(len(group)))],
                                                    batch_size)[0],
                 PER_ROW: lambda: self._per_row_logps(model, ids, mask, logits_to_keep, batch_size)}
        with torch.no_grad(), eval_mode(model):
            # The check's calls are the first timed round (the model has sampled before: no cold start).
            (packed, shared_s), (stock, per_row_s) = (path_choice.timed(paths[SHARED], sync),
                                                      path_choice.timed(paths[PER_ROW], sync))
            check = path_choice.compare_logps(packed, stock, mask[:, -logits_to_keep:], tolerance)
            check["rows"], check["group_rows"] = len(group), len(whole)
            if check["passed"] and setting == "auto":
                estimates = {name: lambda run=run: path_choice.timed(run, sync)[1] for name, run in paths.items()}
                return self._timings(check, estimates, {SHARED: shared_s, PER_ROW: per_row_s})
        return Measurement(check=check)

    @staticmethod
    def _timings(check: dict[str, Any], estimates: dict[str, Any], first: dict[str, float]) -> Measurement:
        """The check with both paths' median seconds (path_choice.measure) and how many rounds they took."""
        calls: list[str] = []
        counted = {name: (lambda name=name, run=run: calls.append(name) or run()) for name, run in estimates.items()}
        timings = path_choice.measure(counted, first=first)
        return Measurement(check=check, timings_s=timings, rounds=1 + len(calls) // max(1, len(estimates)))

    def _decide_generation(self, prompt_ids: list, images: Any, multimodal_fields: Any, num_generations: Any,
                           has_tool_images: bool) -> None:
        started = time.perf_counter()
        setting = self._effective_setting("generation")
        reason = prefix_generation.unsupported_reason(self.model, self.generation_config,
                                                      bool(multimodal_fields) or has_tool_images or any(images or []))
        if reason is not None:
            local = Measurement(unavailable=reason)
        else:
            first_prompt, first_rows = prefix_generation.prompt_groups([list(p) for p in prompt_ids])[0]
            group = [first_prompt] * min(len(first_rows), path_choice.CHECK_ROWS)
            config = greedy(self.generation_config, path_choice.CHECK_NEW_TOKENS)
            budget = int(self.generation_config.max_new_tokens or path_choice.CHECK_NEW_TOKENS)
            paths = {SHARED: lambda: self._shared_prefix_generate(group, config),
                     PER_ROW: lambda: self._per_row_generate(group, config)}
            with eval_mode(self.model):
                # Sampling is the run's first model call: one token of a short prompt first, so that neither
                # timed path pays the cold start.
                self._per_row_generate([first_prompt[-8:]], greedy(self.generation_config, 1))
                (shared, shared_s), (stock, per_row_s) = (self._timed_generation(paths[SHARED], budget),
                                                          self._timed_generation(paths[PER_ROW], budget))
                check = path_choice.compare_tokens(shared, stock)
                check["group_rows"] = len(first_rows)
                check["timed_new_tokens"], check["timings_for_new_tokens"] = max(map(len, stock), default=0), budget
                local = Measurement(check=check)
                if check["passed"] and setting == "auto":
                    estimates = {name: lambda run=run: self._timed_generation(run, budget)[1]
                                 for name, run in paths.items()}
                    local = self._timings(check, estimates, {SHARED: shared_s, PER_ROW: per_row_s})
        local.cost_s = time.perf_counter() - started
        self._conclude("generation", setting, local)

    def _timed_generation(self, run: Any, budget: int) -> tuple[list[list[int]], float]:
        """(the completions ``run`` writes, the seconds it would take for ``budget`` new tokens), from the
        start times of its forward passes (path_choice.extrapolate)."""
        sync = torch.cuda.synchronize if self.accelerator.device.type == "cuda" else (lambda: None)
        embeddings = shared_prefix.unwrap(self.model).get_input_embeddings()
        with path_choice.ForwardClock(embeddings, sync) as clock:
            sync()
            start = time.perf_counter()
            out = run()
            sync()
            end = time.perf_counter()
        return out, path_choice.extrapolate(start, clock.starts, end, max(map(len, out), default=0), budget)

    def _effective_setting(self, name: str) -> str:
        kept = self.__dict__.get("_kept", {}).get(name)
        return "true" if kept is not None and kept["path"] == SHARED else self._setting(name)

    def _conclude(self, name: str, setting: str, local: Measurement) -> None:
        """Agree on one result across processes, decide, record and log it; nothing when no process's batch
        could take the fast path (the next batch decides)."""
        if self.accelerator.num_processes > 1:
            from accelerate.utils import gather_object

            everyone = gather_object([local])  # every rank reaches this call with its own measurement
        else:
            everyone = [local]
        result = path_choice.combine(everyone)
        if result is None:
            return
        path, reason = path_choice.decide(setting, result)
        timings = {key: round(value, 6) for key, value in result.timings_s.items()} if result.timings_s else None
        record = PathRecord(setting=self._setting(name), path=path, check=result.check, timings_s=timings,
                            timing_rounds=result.rounds if timings else None,
                            timing_noise=round(path_choice.CLEAR_RATIO - 1, 4) if timings else None, reason=reason,
                            cost_s=round(result.cost_s, 4), step=int(self.state.global_step) + 1)
        kept = self.__dict__.get("_kept", {}).get(name)
        if kept is not None:
            record.kept_from_earlier_start = True
            record.timings_s = kept.get("timings_s")
            record.reason = f"kept from the run's earlier start ({kept.get('reason')}); now: {reason}"
        self._records()[name] = record
        failed = not (result.check or {}).get("passed", False)
        logger.log(logging.WARNING if failed else logging.INFO, path_choice.describe(name, record))
        self.write_fast_paths()

    # ---- the record --------------------------------------------------------------------------------

    @property
    def fast_paths(self) -> dict[str, dict[str, Any]]:
        """The run's record: per fast path, the setting, the path taken, the check, both timings and why."""
        out = {}
        for name in NAMES:
            record = self._records().get(name)
            if record is None:
                setting = self._setting(name)
                reason = f"shared_prefix_{name}: false" if setting == "false" else self._why_undecided(name)
                record = PathRecord(setting=setting, path=PER_ROW, reason=reason)
            out[name] = record.to_dict()
        return out

    def _why_undecided(self, name: str) -> str:
        if name == "generation" and (getattr(self, "use_vllm", False)
                                     or getattr(self, "use_transformers_continuous_batching", False)):
            return "not used: vLLM (which caches prefixes itself) or continuous batching samples"
        prefix = "prefix:" if name == "update" else "generation:"
        noted = sorted(key.removeprefix(prefix) for key in self.__dict__.get("_noted", ()) if key.startswith(prefix))
        return ("no batch so far could take the shared-prefix path"
                + (f" ({'; '.join(noted)})" if noted else ""))

    def write_fast_paths(self) -> None:
        if self.fast_paths_path is not None and self.accelerator.is_main_process:
            from embodied_r.core.io import atomic_write_json

            atomic_write_json(self.fast_paths_path, self.fast_paths)

    def check_fast_paths(self) -> dict[str, dict[str, Any]]:
        """``train --check-paths``: the first generation batch through the run's own code (sampling, rewards,
        the update's log-probabilities), deciding both fast paths as a run's first step does; no weight moves."""
        self.model.train()
        batch = next(iter(self.get_train_dataloader()))
        self.__dict__["_in_run_step"] = True
        try:
            inputs = self._prepare_inputs(batch)
            if self._deciding("update"):
                self._decide_update_on(self.model, inputs)
        finally:
            self.__dict__["_in_run_step"] = False
            self.model.eval()
        return self.fast_paths


__all__ = ["FastPathsMixin", "eval_mode", "greedy"]
