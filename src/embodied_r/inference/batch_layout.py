"""How a batch of prompts that share their first tokens is laid out for one forward pass.

Every official-format reasoner prompt starts with the same ~220 tokens (system prompt, role sentence,
video header). Those run once; each row is then ``[prefix][padding][own tokens]`` with the padding
masked and position ids taken from the mask, so every row sees exactly the positions it would see alone.
Both ``model.generate`` (``generation.generate_batch``) and the greedy loop (``greedy.greedy_decode``)
use this layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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


