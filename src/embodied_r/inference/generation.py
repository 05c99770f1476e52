"""Batched chat generation with a transformers model (greedy by default).

Batching is the main lever on CPU (8x throughput from batch 1 to 32 for short prompts), so prompts are
grouped by token length to waste little compute on padding, and batches are bounded by a token budget
(rows x (longest prompt + new tokens)) so that one long prompt cannot multiply memory. Every prompt is
first fitted to the model's context by the context policy (``embodied_r.inference.context_policy``).

Every official-format reasoner prompt starts with the same ~220 tokens, 15-65% of the prompt, so
``generate_batch`` runs that shared prefix once (``batch_layout``); greedy outputs are unchanged
(checked in tests against the plain path). Greedy batches of an engine go through ``greedy.greedy_decode``
(a reserved cache, finished rows leaving the batch, each video's description run once for the questions
about it) once its first batch has shown that loop to give ``model.generate``'s tokens on this model
(``TransformersEngine.greedy_loop_report``).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from embodied_r.core.chat import Messages
from embodied_r.inference.batch_layout import (
    PrefixGroup,
    cache_keyword,
    gaps_allowed,
    plan_groups,
    prefill_tokens,
    prefix_layout,
    shared_prefix_length,
)
from embodied_r.inference.context_policy import (
    ContextError,
    ContextPolicy,
    FittedPrompt,
    fit_chats,
    model_context_length,
    token_budget_batches,
)

logger = logging.getLogger(__name__)

# Below this many shared tokens the extra forward pass is not worth it.
MIN_SHARED_PREFIX = 32
# Rows of the first greedy batch decoded both ways before the loop is trusted for a model.
GREEDY_CHECK_ROWS = 2
# The check's outcome per loaded model, so a process checks each model once (training's held-out
# evaluations build a new engine each time).
_GREEDY_CHECKS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def generate_batch(model: Any, tokenizer: Any, texts: Sequence[str] | None, max_new_tokens: int,
                   do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                   share_prefix: bool = True, token_lists: Sequence[Sequence[int]] | None = None,
                   top_k: int | None = None, greedy_loop: bool = False, group_prefixes: bool = True) -> list[str]:
    """Generate one completion per already-templated text (or per ``token_lists`` entry, already
    tokenised); returns only the new text. When sampling, ``top_k`` (0: off, as TRL's GRPO default)
    replaces the model's own generation config value; None keeps it. ``greedy_loop`` decodes a greedy
    batch with ``greedy.greedy_decode`` instead of ``model.generate`` (callers check it first, as
    ``TransformersEngine`` does); with ``group_prefixes`` the loop also runs each group of rows' longer
    shared prefix once where that saves prefill (``batch_layout.plan_groups``)."""
    if token_lists is None:
        token_lists = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts or ()]
    ids = generate_ids(model, tokenizer, token_lists, max_new_tokens, do_sample=do_sample, temperature=temperature,
                       top_p=top_p, share_prefix=share_prefix, top_k=top_k, greedy_loop=greedy_loop,
                       group_prefixes=group_prefixes)
    return tokenizer.batch_decode(ids, skip_special_tokens=True)


def generate_ids(model: Any, tokenizer: Any, token_lists: Sequence[Sequence[int]], max_new_tokens: int,
                 do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0, share_prefix: bool = True,
                 top_k: int | None = None, greedy_loop: bool = False, group_prefixes: bool = True) -> list[list[int]]:
    """``generate_batch``'s completions as token ids, each up to and with its first end-of-sequence token
    (the padding ``model.generate`` adds after it left out), so two decoding paths compare token by token."""
    import torch

    kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id}
    if do_sample:
        kwargs.update(do_sample=True, temperature=temperature, top_p=top_p)
        if top_k is not None:
            kwargs["top_k"] = top_k
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    # A shared prefix puts padding inside the rows; a sliding window narrower than the rows would see it.
    share_prefix = share_prefix and gaps_allowed(model, max(map(len, token_lists), default=0) + max_new_tokens)
    prefix = common_prefix(token_lists) if share_prefix else 0
    if greedy_loop and not do_sample:
        from embodied_r.inference.greedy import greedy_decode

        groups = plan_groups(token_lists, prefix) if share_prefix and group_prefixes else None
        return greedy_decode(model, token_lists, prefix, tokenizer.pad_token_id, max_new_tokens, groups=groups)
    if prefix:
        input_ids, attention = prefix_layout(token_lists, prefix, tokenizer.pad_token_id, model.device)
        kwargs[cache_keyword(model)] = _prefix_cache(model, token_lists[0][:prefix], len(token_lists),
                                                     input_ids.shape[1] + max_new_tokens)
    else:
        input_ids, attention = prefix_layout(token_lists, 0, tokenizer.pad_token_id, model.device)
    with torch.inference_mode():
        output = model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
    from embodied_r.inference.greedy import end_token_ids

    ends = set(end_token_ids(model))
    continuations = []
    for row in output[:, input_ids.shape[1]:].tolist():
        end = next((i for i, token in enumerate(row) if token in ends), None)
        continuations.append(row if end is None else row[:end + 1])
    return continuations


def _prefix_cache(model: Any, prefix: Sequence[int], rows: int, capacity: int) -> Any:
    """Key/value cache of ``prefix`` computed once and repeated for ``rows`` rows, with room for ``capacity``
    positions where the model's layers allow (``reserved_cache``: each token ``generate`` adds is then written
    in place instead of concatenated onto every layer's keys and values)."""
    import torch
    from transformers import DynamicCache

    from embodied_r.inference.reserved_cache import reserved_cache_for

    cache = reserved_cache_for(model.config, capacity)
    cache = cache if cache is not None else DynamicCache()
    with torch.inference_mode():
        # Only the cache is wanted: one position of logits, not the prefix's length times the vocabulary.
        model(input_ids=torch.tensor([list(prefix)], device=model.device), use_cache=True, logits_to_keep=1,
              **{cache_keyword(model): cache})
    cache.batch_repeat_interleave(rows)
    return cache


def generate_chats(model: Any, tokenizer: Any, conversations: Sequence[Messages], max_new_tokens: int = 256,
                   batch_size: int = 8, on_batch: Callable[[list[int], list[str]], None] | None = None,
                   completion_prefix: str = "", context: ContextPolicy | None = None, **sampling: Any) -> list[str]:
    """Completions for many chats, batched by length within a token budget; ``on_batch(indices,
    completions)`` is called as each batch finishes so callers can persist results incrementally.

    With ``completion_prefix`` the assistant turn starts with that text and each returned completion is
    the whole turn (prefix + generated text), so parsers and judges see what a reward saw in training.
    Prompts are fitted by ``context`` (default: drop frames); a prompt the policy skips is an error here
    (``TransformersEngine.fit`` + ``generate_fitted`` let callers record it instead).
    """
    engine = TransformersEngine(model, tokenizer)
    return engine.generate_chats(conversations, max_new_tokens, batch_size, on_batch=on_batch,
                                 completion_prefix=completion_prefix, context=context, **sampling)


# ---------------------------------------------------------------------------------------------------
# Engines: one interface over transformers (default) and vLLM (when installed, on a GPU)
# ---------------------------------------------------------------------------------------------------


def batched_completions(fitted: Sequence[FittedPrompt], max_new_tokens: int, batch_size: int,
                        context: ContextPolicy | None, generate: Callable[[list[int]], list[str]],
                        on_batch: Callable[[list[int], list[str]], None] | None = None) -> list[str]:
    """The local engines' loop: token-budget batches (``generate(indices)`` answers one), each
    completion starting with its prompt's prefix, ``on_batch`` called as each batch finishes."""
    budget = (context or ContextPolicy()).max_batch_tokens
    lengths = [len(f.token_ids) + max_new_tokens for f in fitted]
    results: list[str] = [""] * len(fitted)
    for batch in token_budget_batches(lengths, budget, max(1, batch_size)):
        completions = [fitted[i].completion_prefix + text for i, text in zip(batch, generate(batch))]
        for index, completion in zip(batch, completions):
            results[index] = completion
        if on_batch is not None:
            on_batch(batch, completions)
    return results


def planned_prefill_tokens(token_lists: Sequence[Sequence[int]], batches: Sequence[Sequence[int]],
                           grouped: bool = True) -> int:
    """Prefill token positions of ``batches`` as ``generate_batch``'s greedy loop lays them out (with
    ``grouped`` False: each batch as one group, the layout without ``group_prefixes``)."""
    total = 0
    for batch in batches:
        rows = [token_lists[i] for i in batch]
        base = common_prefix(rows)
        groups = plan_groups(rows, base) if grouped else [PrefixGroup(tuple(range(len(rows))), base)]
        total += prefill_tokens(rows, groups, base)
    return total


def common_prefix(token_lists: Sequence[Sequence[int]]) -> int:
    """The batch-wide prefix ``generate_batch`` runs once (0 below ``MIN_SHARED_PREFIX`` tokens)."""
    prefix = shared_prefix_length(token_lists) if len(token_lists) > 1 else 0
    return prefix if prefix >= MIN_SHARED_PREFIX else 0


def check_sample(token_lists: Sequence[Sequence[int]]) -> tuple[list[Sequence[int]], list[PrefixGroup], int] | None:
    """Rows of a batch that would group (``plan_groups``) to check the joined layout on: two of a group and
    one other row, in two groups as the batch would have them (even where that would not pay on three rows),
    with the prefix all of them share; None for a batch that would not group."""
    base = common_prefix(token_lists)
    groups = plan_groups(token_lists, base)
    shared = [group for group in groups if len(group.rows) > 1]
    if len(groups) < 2 or not shared:
        return None
    other = next(group for group in groups if group is not shared[0])
    rows = [token_lists[i] for i in shared[0].rows[:2]] + [token_lists[other.rows[0]]]
    return rows, [PrefixGroup((0, 1), shared[0].prefix), PrefixGroup((2,), base)], base


def _require_unskipped(fitted: Sequence[FittedPrompt]) -> None:
    if any(f.skipped for f in fitted):
        raise ValueError("generate_fitted got a skipped prompt; record it instead of generating")


class Engine:
    """What every engine shares: fit prompts to the context (``fit``), then generate the fitted ones
    (``generate_fitted``, the part each engine implements); ``generate_chats`` does both."""

    tokenizer: Any

    def context_length(self) -> int:
        raise NotImplementedError

    def fit(self, conversations: Sequence[Messages], max_new_tokens: int, completion_prefix: str = "",
            context: ContextPolicy | None = None) -> list[FittedPrompt]:
        """Every conversation measured in tokens and fitted by the context policy (nothing generated)."""
        policy = context or ContextPolicy()
        limit = policy.limit(self.context_length(), max_new_tokens)
        return fit_chats(self.tokenizer, conversations, limit, policy.rule, completion_prefix)

    def generate_fitted(self, fitted: Sequence[FittedPrompt], max_new_tokens: int, batch_size: int,
                        on_batch: Callable[[list[int], list[str]], None] | None = None,
                        context: ContextPolicy | None = None, **sampling: Any) -> list[str]:
        """One completion per fitted prompt (none skipped), each starting with the prompt's completion
        prefix; ``on_batch(indices, completions)`` as batches finish."""
        raise NotImplementedError

    def generate_chats(self, conversations: Sequence[Messages], max_new_tokens: int, batch_size: int = 8,
                       on_batch: Callable[[list[int], list[str]], None] | None = None, completion_prefix: str = "",
                       context: ContextPolicy | None = None, **sampling: Any) -> list[str]:
        fitted = self.fit(conversations, max_new_tokens, completion_prefix, context)
        skipped = [(i, f) for i, f in enumerate(fitted) if f.skipped]
        if skipped:
            number, first = skipped[0]
            raise ContextError(f"{len(skipped)} prompt(s) do not fit the model (prompt {number}: {first.reason}); "
                               "shorten them, raise the context, or use the drop-frames or truncate-left rule")
        return self.generate_fitted(fitted, max_new_tokens, batch_size, on_batch=on_batch, context=context,
                                    **sampling)


class TransformersEngine(Engine):
    """Generation with an already loaded transformers model (what ``eval`` uses on CPU)."""

    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any, greedy_loop: bool = True, group_prefixes: bool = True) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.greedy_loop = greedy_loop
        # Rows of a batch that share more than the system prompt (questions about one video) have that
        # longer prefix run once per group (greedy loop only; ``batch_layout.plan_groups``).
        self.group_prefixes = group_prefixes

    def context_length(self) -> int:
        return model_context_length(self.model)

    def generate_fitted(self, fitted: Sequence[FittedPrompt], max_new_tokens: int, batch_size: int,
                        on_batch: Callable[[list[int], list[str]], None] | None = None,
                        context: ContextPolicy | None = None, **sampling: Any) -> list[str]:
        """Completions for fitted prompts (none skipped), in token-budget batches, longest first."""
        _require_unskipped(fitted)

        def generate(batch: list[int]) -> list[str]:
            token_lists = [fitted[i].token_ids for i in batch]
            loop = not sampling.get("do_sample") and self.greedy_loop_works(token_lists, max_new_tokens)
            grouped = loop and self.grouping_works(token_lists, max_new_tokens)
            return generate_batch(self.model, self.tokenizer, None, max_new_tokens, token_lists=token_lists,
                                  greedy_loop=loop, group_prefixes=grouped, **sampling)

        return batched_completions(fitted, max_new_tokens, batch_size, context, generate, on_batch)

    def greedy_loop_works(self, token_lists: Sequence[Sequence[int]], max_new_tokens: int) -> bool:
        """Whether greedy batches may use the loop: on the first call for a model, its first
        ``GREEDY_CHECK_ROWS`` rows are decoded by the loop and by ``model.generate`` as one batch, and the
        loop is used only if every token agrees; the outcome is kept for the model."""
        if not self.greedy_loop:
            return False
        report = self.greedy_loop_report
        if report is None:
            report = _GREEDY_CHECKS[self.model] = self._check_greedy_loop(token_lists[:GREEDY_CHECK_ROWS],
                                                                          max_new_tokens)
        return bool(report["used"])

    def grouping_works(self, token_lists: Sequence[Sequence[int]], max_new_tokens: int) -> bool:
        """Whether this batch (decoded by the loop) may run its rows' longer shared prefixes once per group:
        the first batch of a model that would group is checked first (``check_sample``: two rows of a group
        and one other, joined as the batch would have them, against ``model.generate``), and grouping is used
        only if every token agrees; the outcome is kept beside the loop's (``greedy_loop_report["joined"]``)."""
        if not self.group_prefixes:
            return False
        if not gaps_allowed(self.model, max(map(len, token_lists), default=0) + max_new_tokens):
            return False  # such a batch keeps plain left padding (generate_ids), so it has no groups
        report = self.greedy_loop_report
        if report is None or not report["used"]:
            return False
        if "joined" not in report:
            sample = check_sample(token_lists)
            if sample is None:
                return True  # this batch would not group; a later one that does is checked then
            report["joined"] = self._check_joined(*sample, max_new_tokens)
        return bool(report["joined"]["used"])

    @property
    def greedy_loop_report(self) -> dict[str, Any] | None:
        """The first-batch check's outcome for this engine's model (None before any greedy batch)."""
        return _GREEDY_CHECKS.get(self.model)

    def _check_greedy_loop(self, token_lists: Sequence[Sequence[int]], max_new_tokens: int) -> dict[str, Any]:
        from embodied_r.inference.greedy import unsupported_reason

        reason = unsupported_reason(self.model)
        if reason is not None:
            logger.info("greedy decoding through model.generate: %s", reason)
            return {"used": False, "reason": reason}
        rows = list(token_lists)
        return self._agreement(lambda: generate_ids(self.model, self.tokenizer, rows, max_new_tokens, greedy_loop=True,
                                                    group_prefixes=False),
                               rows, max_new_tokens, "the loop", "the first batch", "decoding through model.generate")

    def _check_joined(self, rows: list[Sequence[int]], groups: list[PrefixGroup], base: int,
                      max_new_tokens: int) -> dict[str, Any]:
        from embodied_r.inference.greedy import greedy_decode

        report = self._agreement(lambda: greedy_decode(self.model, rows, base, self.tokenizer.pad_token_id,
                                                       max_new_tokens, groups=groups),
                                 rows, max_new_tokens, "the joined layout", "the first grouped batch",
                                 "decoding batches ungrouped")
        return {**report, "checked_groups": len(groups)} if "checked_rows" in report else report

    def _agreement(self, decode: Callable[[], list[list[int]]], rows: list[Sequence[int]], max_new_tokens: int,
                   what: str, where: str, otherwise: str) -> dict[str, Any]:
        """Whether ``decode()`` gives ``model.generate``'s greedy token ids on ``rows``; an exception from it
        counts as no (``model.generate`` can always decode instead)."""
        try:
            ids = decode()
        except Exception as error:  # a path this model cannot run: the slower one decodes, as it always could
            logger.warning("%s failed on this model (%r); %s", what, error, otherwise)
            return {"used": False, "reason": f"{what} failed: {error!r}"}
        agreed = ids == generate_ids(self.model, self.tokenizer, rows, max_new_tokens)
        if not agreed:
            logger.warning("%s disagreed with model.generate on %d checked row(s); %s for this model", what,
                           len(rows), otherwise)
        return {"used": agreed, "checked_rows": len(rows), "agreed": agreed,
                **({} if agreed else {"reason": f"disagreed with model.generate on {where}"})}


class VLLMEngine(Engine):
    """Offline vLLM generation (continuous batching on a GPU), greedy unless sampling args say otherwise.

    vLLM schedules all prompts it is given at once, so conversations are submitted in chunks of
    ``chunk_size``; each finished chunk is handed to ``on_batch`` so the runner persists it (a killed
    run loses at most one chunk).
    """

    name = "vllm"

    def __init__(self, model_path: str, dtype: str = "auto", chunk_size: int = 512, seed: int = 0,
                 gpu_memory_utilization: float = 0.85, max_model_len: int | None = None) -> None:
        from vllm import LLM

        kwargs: dict[str, Any] = {"model": model_path, "dtype": dtype, "seed": seed,
                                  "gpu_memory_utilization": gpu_memory_utilization}
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        self.llm = LLM(**kwargs)
        self.max_model_len = max_model_len
        self.tokenizer = self.llm.get_tokenizer()
        self.chunk_size = max(1, int(chunk_size))

    def context_length(self) -> int:
        config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        return int(getattr(config, "max_model_len", 0) or self.max_model_len or 0) or model_context_length(None)

    def generate_fitted(self, fitted: Sequence[FittedPrompt], max_new_tokens: int, batch_size: int = 0,
                        on_batch: Callable[[list[int], list[str]], None] | None = None,
                        context: ContextPolicy | None = None, do_sample: bool = False, temperature: float = 1.0,
                        top_p: float = 1.0) -> list[str]:
        """Completions for fitted prompts (vLLM batches by its own KV-cache budget, in chunks here)."""
        from vllm import SamplingParams

        _require_unskipped(fitted)
        params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature if do_sample else 0.0,
                                top_p=top_p if do_sample else 1.0)
        # The fitted token ids, as the transformers engine generates from them: a prompt cut on tokens
        # (truncate-left-tokens) has no text form.
        prompts = [{"prompt_token_ids": list(f.token_ids)} for f in fitted]
        results: list[str] = [""] * len(prompts)
        for start in range(0, len(prompts), self.chunk_size):
            indices = list(range(start, min(start + self.chunk_size, len(prompts))))
            outputs = self.llm.generate([prompts[i] for i in indices], params, use_tqdm=False)
            completions = [fitted[i].completion_prefix + (o.outputs[0].text if o.outputs else "")
                           for i, o in zip(indices, outputs)]
            for index, completion in zip(indices, completions):
                results[index] = completion
            if on_batch is not None:
                on_batch(indices, completions)
        return results


def vllm_available() -> bool:
    """vLLM is importable and a CUDA device is present (vLLM does not run on this project's CPU path)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def make_engine(model_name: str, engine: str = "auto", dtype: str = "auto") -> Any:
    """``transformers`` | ``vllm`` | ``auto`` (vLLM when available, else transformers)."""
    if engine not in ("auto", "transformers", "vllm"):
        raise ValueError(f"unknown engine {engine!r}; choose auto, transformers or vllm")
    if engine == "vllm" or (engine == "auto" and vllm_available()):
        if not vllm_available():
            raise RuntimeError("--engine vllm needs the vllm package and a CUDA GPU "
                               "(pip install 'embodied-r[vllm]'); use --engine transformers on CPU")
        from embodied_r.inference.models import resolve_model_path

        return VLLMEngine(resolve_model_path(model_name), dtype=dtype)
    from embodied_r.inference.models import load_reasoner

    return TransformersEngine(*load_reasoner(model_name, dtype=dtype))
