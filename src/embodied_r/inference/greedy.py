"""Greedy decoding in a plain loop: the evaluation path, cheaper per token than ``model.generate`` on CPU.

Measured on SmolLM2-135M (float32, 2 cores, test prompts of ~365 tokens, 128 new tokens at most), the
step of ``model.generate`` spends about a third of its time in the key/value cache's ``torch.cat`` (every
layer's keys and values copied every token) and keeps decoding rows that already ended. This loop
differs in three ways, none of which changes a greedy token:

- the cache is reserved once per batch (``reserved_cache``) and each new token is written in place;
- a row that emits an end-of-sequence token leaves the batch (its cache rows are dropped), so a batch
  costs its rows' own lengths, not ``rows x longest``;
- only the last position's logits are computed (``logits_to_keep=1``).

The layout is ``batch_layout.prefix_layout``'s (a shared prefix run once, padding masked, position ids
from the mask), so each row sees exactly what it would see alone. ``unsupported_reason`` names what
would make the loop differ from ``generate`` (logits processors in the model's generation config, cache
types other than attention), and the engine checks the loop against ``generate`` on its first batch
(``generation.TransformersEngine``) before trusting it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from embodied_r.inference.batch_layout import PrefixGroup, cache_keyword, prefix_layout

# Generation-config fields that make greedy decoding something other than the argmax of the logits, with
# the values at which they do nothing. A model whose config sets any of them is decoded by ``generate``.
NEUTRAL_GENERATION_FIELDS: dict[str, tuple[Any, ...]] = {
    "repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "bad_words_ids": (None,),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "sequence_bias": (None,),
    "exponential_decay_length_penalty": (None,),
    "stop_strings": (None,),
    "num_beams": (None, 1),
    "guidance_scale": (None, 1.0),
    "encoder_repetition_penalty": (None, 1.0),
    "watermarking_config": (None,),
    "max_time": (None,),
}


def unsupported_reason(model: Any) -> str | None:
    """Why the loop would not decode ``model`` as ``generate`` does greedily, or None when it would."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return "not a decoder-only transformers model"
    from embodied_r.inference.reserved_cache import attention_only

    layers = attention_only(config)
    if layers is not None:
        return layers
    import inspect

    if "logits_to_keep" not in inspect.signature(model.forward).parameters:
        return "the model's forward takes no logits_to_keep"
    generation_config = getattr(model, "generation_config", None)
    for field, neutral in NEUTRAL_GENERATION_FIELDS.items():
        value = getattr(generation_config, field, None)
        if value not in neutral:
            return f"the model's generation config sets {field}={value!r}"
    if not end_token_ids(model):
        return "the model's generation config names no end-of-sequence token"
    return None


def end_token_ids(model: Any) -> list[int]:
    """The end-of-sequence ids of the model's generation config (one id or a list)."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = ids if isinstance(ids, (list, tuple)) else [ids]
    return [int(i) for i in ids if i is not None]


def greedy_decode(model: Any, token_lists: Sequence[Sequence[int]], prefix: int, pad_id: int,
                  max_new_tokens: int, groups: Sequence[PrefixGroup] | None = None) -> list[list[int]]:
    """Greedy continuation ids of every row, each ending with its end-of-sequence token when one came.

    ``prefix`` leading tokens, the same in every row, are run once and shared (0: none). ``groups``
    (``batch_layout.plan_groups``, each sharing at least ``prefix`` tokens) go one step further: each
    group's longer prefix runs once on top of that, its rows are prefilled together, and the groups'
    caches are joined, right-aligned, into one batch that decodes as usual. Raises ``ValueError`` for a
    model the loop does not reproduce (``unsupported_reason``) and for groups that do not fit the batch."""
    import torch

    from embodied_r.inference.reserved_cache import reserved_cache_for, right_aligned

    reason = unsupported_reason(model)
    if reason is not None:
        raise ValueError(f"greedy_decode cannot decode this model exactly: {reason}")
    groups = list(groups) if groups else [PrefixGroup(tuple(range(len(token_lists))), prefix)]
    if sorted(row for group in groups for row in group.rows) != list(range(len(token_lists))):
        raise ValueError("the prefix groups must name every row of the batch exactly once")
    if any(group.prefix < prefix for group in groups):
        raise ValueError(f"every prefix group must share at least the batch's {prefix} common tokens")
    device = model.device
    keyword = cache_keyword(model)
    ends = torch.tensor(end_token_ids(model), device=device)
    with torch.inference_mode():
        base = None
        if prefix:
            base = reserved_cache_for(model.config, prefix)
            model(input_ids=torch.tensor([list(token_lists[0][:prefix])], device=device), use_cache=True,
                  logits_to_keep=1, **{keyword: base})
        if len(groups) == 1:
            cache, mask, last_position, logits = _prefill(model, token_lists, groups[0].prefix, pad_id,
                                                          max_new_tokens, base)
        else:
            parts = [_prefill(model, [token_lists[i] for i in group.rows], group.prefix, pad_id, 0, base)
                     for group in groups]
            width = max(part[1].shape[1] for part in parts)
            cache = right_aligned([part[0] for part in parts], width + max_new_tokens)
            mask = torch.cat([torch.nn.functional.pad(part[1], (width - part[1].shape[1], 0)) for part in parts])
            last_position = torch.cat([part[2] for part in parts])
            logits = torch.cat([part[3] for part in parts])
            del parts  # the groups' own caches, copied into the joined one: not kept through decoding
        rows = torch.tensor([row for group in groups for row in group.rows], device=device)
        continuations: list[list[int]] = [[] for _ in token_lists]
        for step in range(max_new_tokens):
            chosen = logits.argmax(-1)
            for row, token in zip(rows.tolist(), chosen.tolist()):
                continuations[row].append(token)
            going = ~torch.isin(chosen, ends)
            if step == max_new_tokens - 1 or not bool(going.any()):
                break
            if not bool(going.all()):
                keep = going.nonzero().squeeze(-1)
                rows, chosen, mask, last_position = rows[keep], chosen[keep], mask[keep], last_position[keep]
                cache.batch_select_indices(keep)
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
            last_position = last_position + 1
            logits = model(input_ids=chosen[:, None], attention_mask=mask, position_ids=last_position[:, None],
                           use_cache=True, logits_to_keep=1, **{keyword: cache}).logits[:, -1]
    return continuations


def _prefill(model: Any, token_lists: Sequence[Sequence[int]], prefix: int, pad_id: int, room: int,
             base: Any | None) -> tuple[Any, Any, Any, Any]:
    """One group's prefill in ``prefix_layout``: its ``prefix`` once (continuing the ``base`` cache of the
    tokens every group shares, when there is one), then every row's own tokens. Returns the cache (with
    ``room`` free positions), the mask, each row's last position id and its last-position logits."""
    from embodied_r.inference.reserved_cache import reserved_cache_for

    keyword = cache_keyword(model)
    ids, mask = prefix_layout(token_lists, prefix, pad_id, model.device)
    cache = reserved_cache_for(model.config, ids.shape[1] + room)
    done = 0
    if base is not None:
        for layer, shared in zip(cache.layers, base.layers):
            layer.update(shared.keys, shared.values)
        done = base.get_seq_length()
    if prefix > done:
        model(input_ids=ids[:1, done:prefix], use_cache=True, logits_to_keep=1, **{keyword: cache})
    if prefix:
        cache.batch_repeat_interleave(len(token_lists))
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids[:, prefix:], attention_mask=mask, position_ids=positions[:, prefix:],
                   use_cache=True, logits_to_keep=1, **{keyword: cache}).logits[:, -1]
    return cache, mask, positions[:, -1], logits
