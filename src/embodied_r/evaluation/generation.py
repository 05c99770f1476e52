"""Batched chat generation with a transformers model (greedy by default).

Batching is the main lever on CPU (feasibility.md §3: 8x throughput from bs 1 to 32), so prompts are
grouped by token length to waste little compute on padding.

Every official-format reasoner prompt starts with the same ~220 tokens (system prompt, role sentence,
video header), 15-65% of the prompt. ``generate_batch`` therefore runs that shared prefix once, copies
its key/value cache to every row, and lays each row out as ``[prefix][padding][own tokens]`` with the
padding masked; position ids follow the attention mask, so every row sees exactly the positions it
would see alone, and greedy outputs are unchanged (checked in tests against the plain path).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from embodied_r.core.chat import Messages, render_chat


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Index batches with similar lengths, longest first (an out-of-memory shows up at once).

    >>> length_sorted_batches([5, 1, 9, 3], 2)
    [[2, 0], [3, 1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


# Below this many shared tokens the extra forward pass is not worth it.
MIN_SHARED_PREFIX = 32


def shared_prefix_length(token_lists: Sequence[Sequence[int]]) -> int:
    """Length of the common token prefix, always leaving every row at least one token of its own.

    >>> shared_prefix_length([[1, 2, 3, 4], [1, 2, 3, 9, 9], [1, 2, 5]])
    2
    >>> shared_prefix_length([[1, 2], [1, 2]])
    1
    """
    length = 0
    while all(len(t) > length + 1 for t in token_lists) and len({t[length] for t in token_lists}) == 1:
        length += 1
    return length


def _cache_keyword(model: Any) -> str:
    # transformers 5.x renamed ``past_key_values`` to ``cache`` (the old name is deprecated).
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def generate_batch(model: Any, tokenizer: Any, texts: Sequence[str], max_new_tokens: int,
                   do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                   share_prefix: bool = True) -> list[str]:
    """Generate one completion per already-templated text; returns only the new text."""
    import torch

    kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id}
    if do_sample:
        kwargs.update(do_sample=True, temperature=temperature, top_p=top_p)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    token_lists = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    prefix = shared_prefix_length(token_lists) if share_prefix and len(texts) > 1 else 0
    if prefix >= MIN_SHARED_PREFIX:
        input_ids, attention = _prefix_layout(token_lists, prefix, tokenizer.pad_token_id, model.device)
        kwargs[_cache_keyword(model)] = _prefix_cache(model, token_lists[0][:prefix], len(texts))
    else:
        encoded = tokenizer(list(texts), return_tensors="pt", padding=True, add_special_tokens=False)
        input_ids, attention = encoded["input_ids"].to(model.device), encoded["attention_mask"].to(model.device)
    with torch.inference_mode():
        output = model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
    return tokenizer.batch_decode(output[:, input_ids.shape[1]:], skip_special_tokens=True)


def _prefix_cache(model: Any, prefix: Sequence[int], rows: int) -> Any:
    """Key/value cache of ``prefix`` computed once and repeated for ``rows`` rows."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([list(prefix)], device=model.device), use_cache=True,
              **{_cache_keyword(model): cache})
    cache.batch_repeat_interleave(rows)
    return cache


def _prefix_layout(token_lists: Sequence[Sequence[int]], prefix: int, pad_id: int, device: Any) -> tuple[Any, Any]:
    """``[prefix][padding][own tokens]`` ids and mask; the padding sits where no row attends to it."""
    import torch

    width = max(len(t) - prefix for t in token_lists)
    ids, mask = [], []
    for tokens in token_lists:
        own = list(tokens[prefix:])
        gap = width - len(own)
        ids.append(list(tokens[:prefix]) + [pad_id] * gap + own)
        mask.append([1] * prefix + [0] * gap + [1] * len(own))
    return torch.tensor(ids, device=device), torch.tensor(mask, device=device)


def generate_chats(model: Any, tokenizer: Any, conversations: Sequence[Messages], max_new_tokens: int = 256,
                   batch_size: int = 8, on_batch: Callable[[list[int], list[str]], None] | None = None,
                   completion_prefix: str = "", **sampling: Any) -> list[str]:
    """Completions for many chats, batched by length; ``on_batch(indices, completions)`` is called as
    each batch finishes so callers can persist results incrementally.

    With ``completion_prefix`` the assistant turn starts with that text and each returned completion is
    the whole turn (prefix + generated text), so parsers and judges see what a reward saw in training.
    """
    texts = [render_chat(tokenizer, c, completion_prefix) for c in conversations]
    lengths = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    results: list[str] = [""] * len(texts)
    for batch in length_sorted_batches(lengths, max(1, batch_size)):
        generated = generate_batch(model, tokenizer, [texts[i] for i in batch], max_new_tokens, **sampling)
        completions = [completion_prefix + text for text in generated]
        for index, completion in zip(batch, completions):
            results[index] = completion
        if on_batch is not None:
            on_batch(batch, completions)
    return results


# ---------------------------------------------------------------------------------------------------
# Engines: one interface over transformers (default) and vLLM (when installed, on a GPU)
# ---------------------------------------------------------------------------------------------------


class TransformersEngine:
    """``generate_chats`` over an already loaded transformers model (what ``eval`` uses on CPU)."""

    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer

    def generate_chats(self, conversations: Sequence[Messages], max_new_tokens: int, batch_size: int,
                       on_batch: Callable[[list[int], list[str]], None] | None = None, completion_prefix: str = "",
                       **sampling: Any) -> list[str]:
        return generate_chats(self.model, self.tokenizer, conversations, max_new_tokens=max_new_tokens,
                              batch_size=batch_size, on_batch=on_batch, completion_prefix=completion_prefix,
                              **sampling)


class VLLMEngine:
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
        self.tokenizer = self.llm.get_tokenizer()
        self.chunk_size = max(1, int(chunk_size))

    def generate_chats(self, conversations: Sequence[Messages], max_new_tokens: int, batch_size: int = 0,
                       on_batch: Callable[[list[int], list[str]], None] | None = None,
                       do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                       completion_prefix: str = "") -> list[str]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature if do_sample else 0.0,
                                top_p=top_p if do_sample else 1.0)
        texts = [render_chat(self.tokenizer, c, completion_prefix) for c in conversations]
        results: list[str] = [""] * len(texts)
        for start in range(0, len(texts), self.chunk_size):
            indices = list(range(start, min(start + self.chunk_size, len(texts))))
            outputs = self.llm.generate([texts[i] for i in indices], params, use_tqdm=False)
            completions = [completion_prefix + (o.outputs[0].text if o.outputs else "") for o in outputs]
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
        from embodied_r.reasoning.models import resolve_model_path

        return VLLMEngine(resolve_model_path(model_name), dtype=dtype)
    from embodied_r.reasoning.models import load_reasoner

    return TransformersEngine(*load_reasoner(model_name, dtype=dtype))
