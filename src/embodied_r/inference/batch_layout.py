"""How a batch of prompts that share their first tokens is laid out for one forward pass.

Every official-format reasoner prompt starts with the same ~220 tokens (system prompt, role sentence,
video header). Those run once; each row is then ``[prefix][padding][own tokens]`` with the padding
masked and position ids taken from the mask, so every row sees exactly the positions it would see alone.
Both ``model.generate`` (``generation.generate_batch``) and the greedy loop (``greedy.greedy_decode``)
use this layout.

Questions about the same video share much more than the system prompt: the whole video description comes
before the question, so rows of one video share most of their tokens. The greedy loop can run each such
group's prefix once (``prefix_groups``); ``plan_groups`` keeps one group for the whole batch unless the
split costs clearly fewer prefill tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Rows join a group when they share at least this many tokens beyond the batch's common prefix.
MIN_GROUP_EXTRA = 32
# A split into groups is used only when it costs at most this share of the one-group layout's prefill
# tokens (each group is one more pass, and its own padding).
GROUP_SAVING = 0.9
# Backbones that build one attention mask per entry of ``config.layer_types``: only the layers named
# sliding slide (Gemma 3 alternates sliding and global layers; Qwen2 with ``max_window_layers`` at its
# depth has a ``sliding_window`` but no sliding layer). Mistral and Phi-3 slide every layer instead.
LAYER_TYPED_MODEL_TYPES = ("qwen2", "qwen3", "gemma3_text")
SLIDING = "sliding_attention"


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


def cache_keyword(model: Any) -> str:
    # transformers 5.x renamed ``past_key_values`` to ``cache`` (the old name is deprecated).
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def layer_typed(config: Any) -> bool:
    """Whether the backbone slides only the layers its ``layer_types`` names (see LAYER_TYPED_MODEL_TYPES)."""
    return (getattr(config, "model_type", None) in LAYER_TYPED_MODEL_TYPES
            and getattr(config, "layer_types", None) is not None)


def window_of(config: Any) -> int | None:
    """The narrowest attention span of a model with sliding-window or chunked layers (None: every layer
    attends to all earlier positions)."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    types = getattr(text, "layer_types", None)
    spans = []
    # Other models (Mistral, Phi-3) apply ``sliding_window`` to every layer whatever ``layer_types`` says, so
    # there a window counts unless the config turns it off; a false "narrow" only costs the shared prefix.
    window = getattr(text, "sliding_window", None)
    slides = SLIDING in types if layer_typed(text) else getattr(text, "use_sliding_window", True) is not False
    if window and slides:
        spans.append(int(window))
    chunk = getattr(text, "attention_chunk_size", None)
    if chunk and (types is None or "chunked_attention" in types):
        spans.append(int(chunk))
    return min(spans) if spans else None


def gaps_allowed(model: Any, width: int) -> bool:
    """Whether padding may sit inside rows of ``width`` positions (prompt and new tokens): not where a
    sliding window or attention chunk is narrower. transformers measures both in cache positions, padding
    included, so a gap inside the window would hide real tokens that the row alone would see; plain left
    padding stays exact there."""
    span = window_of(getattr(model, "config", None) or object())
    return span is None or width <= span


def prefix_layout(token_lists: Sequence[Sequence[int]], prefix: int, pad_id: int, device: Any) -> tuple[Any, Any]:
    """``[prefix][padding][own tokens]`` ids and mask; the padding sits where no row attends to it (with
    ``prefix`` 0: plain left padding, the layout of TRL's generation batch)."""
    import torch

    width = max(len(t) - prefix for t in token_lists)
    ids, mask = [], []
    for tokens in token_lists:
        own = list(tokens[prefix:])
        gap = width - len(own)
        ids.append(list(tokens[:prefix]) + [pad_id] * gap + own)
        mask.append([1] * prefix + [0] * gap + [1] * len(own))
    return torch.tensor(ids, device=device), torch.tensor(mask, device=device)


@dataclass(frozen=True)
class PrefixGroup:
    """Rows of a batch (indices into it) whose first ``prefix`` tokens are the same and run once."""

    rows: tuple[int, ...]
    prefix: int


def prefill_tokens(token_lists: Sequence[Sequence[int]], groups: Sequence[PrefixGroup], base: int = 0) -> int:
    """Token positions the prefill computes for ``groups``: the ``base`` tokens every row shares once, each
    group's prefix beyond them once, then its rows' own tokens padded to the group's longest.

    >>> prefill_tokens([[1, 2, 3], [1, 2, 4, 5]], [PrefixGroup((0, 1), 2)])
    6
    >>> prefill_tokens([[1, 2, 3], [1, 2, 3, 4], [1, 9, 9, 9]], [PrefixGroup((0, 1), 3), PrefixGroup((2,), 1)], 1)
    8
    """
    return base + sum(group.prefix - base + len(group.rows) * max(len(token_lists[i]) - group.prefix
                                                                  for i in group.rows)
                      for group in groups)


def prefix_groups(token_lists: Sequence[Sequence[int]], base: int,
                  min_extra: int = MIN_GROUP_EXTRA) -> list[PrefixGroup]:
    """Rows sorted by their tokens and split where neighbours share fewer than ``base + min_extra`` tokens;
    each run of two or more rows is a group sharing its common prefix, and the rows left alone form one
    group sharing ``base`` tokens (the batch's common prefix, which every group shares).

    >>> prefix_groups([[7, 1, 2, 3], [9, 9], [7, 1, 2, 4]], base=0, min_extra=2)
    [PrefixGroup(rows=(0, 2), prefix=3), PrefixGroup(rows=(1,), prefix=0)]
    """
    order = sorted(range(len(token_lists)), key=lambda i: list(token_lists[i]))
    runs: list[tuple[list[int], int]] = []
    for index in order:
        if runs:
            rows, common = runs[-1]
            shared = shared_prefix_length([token_lists[rows[-1]], token_lists[index]])
            joined = shared if len(rows) == 1 else min(common, shared)
            if joined >= base + min_extra:
                runs[-1] = (rows + [index], joined)
                continue
        runs.append(([index], base))
    groups = [PrefixGroup(tuple(rows), common) for rows, common in runs if len(rows) > 1]
    alone = tuple(rows[0] for rows, _ in runs if len(rows) == 1)
    if alone:
        groups.append(PrefixGroup(alone, base))
    return groups


def plan_groups(token_lists: Sequence[Sequence[int]], base: int) -> list[PrefixGroup]:
    """``prefix_groups`` where it saves prefill tokens (at most ``GROUP_SAVING`` of the one-group layout's),
    otherwise the whole batch as one group sharing ``base`` tokens (which every row must share)."""
    whole = [PrefixGroup(tuple(range(len(token_lists))), base)]
    if len(token_lists) < 2:
        return whole
    split = prefix_groups(token_lists, base)
    if len(split) > 1 and (prefill_tokens(token_lists, split, base)
                           <= GROUP_SAVING * prefill_tokens(token_lists, whole, base)):
        return split
    return whole
