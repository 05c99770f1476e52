"""Sampling a GRPO group with its prompt encoded once (the generation half of the shared prefix).

TRL's transformers path samples a generation batch as one left-padded ``generate`` call: every one of a
group's G rows carries the same prompt, so the prompt is encoded G times before the first new token.
Here the distinct prompts are encoded once each (one left-padded batch of them), each prompt's key/value
cache is copied to its rows, and one ``generate`` call continues every row: each row's tokens are drawn
from the same distribution as TRL's (greedy decoding gives the same tokens, tested), only the prompt is
not recomputed. Measured against TRL's layout: ``benchmarks/sampling.py`` (docs/performance.md).

Used for text rows on the plain transformers path; vLLM (which caches prefixes itself), continuous
batching, image rows and a configured ``cache_implementation`` keep TRL's path, and the trainer says why.
"""

from __future__ import annotations

from typing import Any

import torch


def unsupported_reason(model: Any, generation_config: Any, has_images: bool) -> str | None:
    """Why this batch cannot share its prompts' encoding (None when it can)."""
    if has_images:
        return "image rows"
    if getattr(generation_config, "cache_implementation", None):
        return f"cache_implementation {generation_config.cache_implementation!r} is set"
    if getattr(model.config, "is_encoder_decoder", False):
        return "encoder-decoder model"
    return None


def prompt_groups(prompt_ids: list[list[int]]) -> list[tuple[list[int], list[int]]]:
    """(prompt, row indices) for each distinct prompt, in the order first seen.

    >>> prompt_groups([[1, 2], [1, 2], [3], [1, 2]])
    [([1, 2], [0, 1, 3]), ([3], [2])]
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, ids in enumerate(prompt_ids):
        groups.setdefault(tuple(ids), []).append(index)
    return [(list(ids), rows) for ids, rows in groups.items()]


def cut_at_eos(completions: torch.Tensor, eos_token_ids: list[int]) -> list[list[int]]:
    """Each row's tokens up to and including its first end-of-sequence token (TRL's rule).

    >>> cut_at_eos(torch.tensor([[5, 2, 7], [5, 6, 7]]), [2])
    [[5, 2], [5, 6, 7]]
    """
    is_eos = torch.isin(completions, torch.tensor(eos_token_ids, device=completions.device))
    out = []
    for row, eos in zip(completions.tolist(), is_eos.tolist()):
        end = eos.index(True) + 1 if True in eos else len(row)
        out.append(row[:end])
    return out


def generate_sharing_prompts(model: Any, prompt_ids: list[list[int]], generation_config: Any,
                             eos_token_ids: list[int]) -> list[list[int]]:
    """Completion token ids for every row of ``prompt_ids`` (in order); rows with the same prompt share
    one encoding of it. ``model`` is the unwrapped model, called under ``torch.no_grad``.

    The distinct prompts are left-padded into one batch (the layout TRL gives the whole generation batch)
    and encoded together; each row then gets a copy of its prompt's cache, and all rows are sampled in
    one ``generate`` call, so the decoding steps of different prompts share their forward passes."""
    from transformers import DynamicCache

    from embodied_r.inference.batch_layout import cache_keyword, prefix_layout
    from embodied_r.inference.reserved_cache import reserved_cache_for

    device = next(model.parameters()).device
    groups = prompt_groups(prompt_ids)
    owner = torch.empty(len(prompt_ids), dtype=torch.long)  # the distinct prompt of each row
    for index, (_, rows) in enumerate(groups):
        owner[rows] = index
    owner = owner.to(device)
    pad_id = generation_config.pad_token_id if generation_config.pad_token_id is not None else eos_token_ids[0]
    padded, mask = prefix_layout([ids for ids, _ in groups], 0, pad_id, device)
    width = padded.shape[1]
    cache = None
    if width > 1:
        # All but the last prompt token go into the cache; generate feeds the last one itself, which gives
        # it the logits of the first new token. Positions count real tokens only, as generate's do.
        # Room for every token this call will write, where the model's layers allow (each new token is then
        # an in-place write instead of a concatenation; the tokens drawn are the same).
        max_new = getattr(generation_config, "max_new_tokens", None)
        cache = reserved_cache_for(model.config, width + max_new) if max_new else None
        cache = cache if cache is not None else DynamicCache(config=model.config)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        model(input_ids=padded[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
              use_cache=True, logits_to_keep=1, **{cache_keyword(model): cache})
        cache.batch_select_indices(owner)
    generated = model.generate(input_ids=padded[owner], attention_mask=mask[owner], generation_config=generation_config,
                               **{cache_keyword(model): cache})
    return cut_at_eos(generated[:, width:], eos_token_ids)
