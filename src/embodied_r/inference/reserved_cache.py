"""A key/value cache that reserves its room once: each new token is an in-place write, not a concatenation.

``transformers``' ``DynamicLayer`` grows by ``torch.cat``, which copies every layer's keys and values at
every generated token; on SmolLM2-135M at 16 rows of ~400 tokens that copy was about a third of a CPU
decode step. Used by the evaluation's greedy loop (``greedy.greedy_decode``) and GRPO's sampling
(``training.prefix_generation``); it imports transformers at the top, so those import it where they use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer


class ReservedLayer(DynamicLayer):
    """Room for ``capacity`` positions, allocated at the first write; ``keys`` and ``values`` are views of
    the part in use. Dropping or repeating rows (``batch_select_indices``, ``batch_repeat_interleave``)
    keeps the room."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity, self.used = capacity, 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            rows, heads = key_states.shape[:2]
            self.key_room = key_states.new_empty(rows, heads, self.capacity, key_states.shape[-1])
            self.value_room = value_states.new_empty(rows, heads, self.capacity, value_states.shape[-1])
        added = key_states.shape[-2]
        if self.used + added > self.capacity:
            raise RuntimeError(f"the reserved cache holds {self.capacity} positions; {self.used} are used and "
                               f"{added} more were written")
        self.key_room[:, :, self.used:self.used + added] = key_states
        self.value_room[:, :, self.used:self.used + added] = value_states
        self.used += added
        self._view()
        return self.keys, self.values

    def _view(self) -> None:
        self.keys = self.key_room[:, :, :self.used]
        self.values = self.value_room[:, :, :self.used]

    # Every method of DynamicLayer that changes the keys or values is overridden: the inherited ones would set
    # ``keys``/``values`` alone and the next ``update`` would bring the room's old state back.

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if not self.is_initialized:  # a layer nothing was written to (as DynamicLayer: nothing to select)
            return
        self.key_room = self.key_room.index_select(0, indices)
        self.value_room = self.value_room.index_select(0, indices)
        self._view()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if not self.is_initialized:
            return
        self.key_room = self.key_room.repeat_interleave(repeats, dim=0)
        self.value_room = self.value_room.repeat_interleave(repeats, dim=0)
        self._view()

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        self.batch_select_indices(beam_idx)

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` positions (DynamicLayer's convention: a negative count)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative number of positions to remove, got {tokens_to_remove}")
        if tokens_to_remove == 0 or not self.is_initialized:
            return
        self.used = max(0, self.used + tokens_to_remove)
        self._view()

    def reset(self) -> None:
        self.used = 0
        super().reset()  # drops keys, values and is_initialized; the room is reallocated at the next write


def right_aligned(caches: Sequence[DynamicCache], capacity: int) -> DynamicCache:
    """One reserved cache holding every cache's rows in order, each cache's positions ending at the same
    column (the longest cache's width). The columns before a shorter cache's start hold zeros; the caller's
    attention mask must leave them out."""
    widths = [cache.get_seq_length() for cache in caches]
    width = max(widths)
    if width > capacity:
        raise ValueError(f"caches of {width} positions do not fit a reserved cache of {capacity}")
    merged = reserved_cache(len(caches[0].layers), capacity)
    for number, layer in enumerate(merged.layers):
        parts = [cache.layers[number] for cache in caches]
        keys, values = parts[0].keys, parts[0].values
        rows = sum(part.keys.shape[0] for part in parts)
        layer.lazy_initialization(keys, values)
        layer.key_room = keys.new_zeros(rows, keys.shape[1], capacity, keys.shape[-1])
        layer.value_room = values.new_zeros(rows, values.shape[1], capacity, values.shape[-1])
        start = 0
        for part, part_width in zip(parts, widths):
            end = start + part.keys.shape[0]
            layer.key_room[start:end, :, width - part_width:width] = part.keys
            layer.value_room[start:end, :, width - part_width:width] = part.values
            start = end
        layer.used = width
        layer._view()
    return merged


def reserved_cache(num_layers: int, capacity: int) -> DynamicCache:
    """A ``DynamicCache`` of ``num_layers`` reserved layers of ``capacity`` positions each."""
    cache = DynamicCache()
    Cache.__init__(cache, layers=[ReservedLayer(capacity) for _ in range(num_layers)])
    return cache


# Cache layer kinds a reserved layer stands in for: attention whose keys and values only grow (a sliding
# window is then enforced by the attention mask, as with a full ``DynamicLayer``).
ATTENTION_LAYER_TYPES = {"full_attention", "sliding_attention", "chunked_attention"}


def attention_only(config: Any) -> str | None:
    """Why a reserved cache cannot stand in for ``config``'s own cache (None when it can)."""
    text_config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types = set(getattr(text_config, "layer_types", None) or ["full_attention"])
    if not layer_types <= ATTENTION_LAYER_TYPES:
        return f"cache layer types {sorted(layer_types - ATTENTION_LAYER_TYPES)} are not plain attention"
    if "reuse" in (getattr(text_config, "kv_sharing_modes", None) or ()):
        return "some layers reuse another layer's keys and values (kv_sharing_modes)"
    return None


def reserved_cache_for(config: Any, capacity: int) -> DynamicCache | None:
    """A reserved cache for a model of ``config`` (its decoder's layer count), or None where its layers are not
    plain attention."""
    if attention_only(config) is not None:
        return None
    text_config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return reserved_cache(int(text_config.num_hidden_layers), capacity)
