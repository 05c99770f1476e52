"""DAPO's dynamic sampling with the resampling (recipe ``zero_variance_groups: resample``).

``drop`` (training/zero_advantage.py) takes the groups whose rewards did not vary out of the loss and its
normaliser, so a step whose groups all agree moves nothing. DAPO (Yu et al., 2025, section 3.2) also
*refills* the batch: it keeps sampling prompts until the batch holds only groups whose rewards vary.
Here, after a step's generation, every uniform group is replaced, where possible, by a varying group of
a fresh training prompt: up to ``resample_rounds`` further generation calls per step, each for as many
fresh prompts as groups are still missing. Groups still uniform after the last round stay in the batch
and are dropped from the loss as under ``drop``, so the batch keeps its shape and the update its
definition; the cost of a step grows with the share of uniform groups.

Fresh prompts come from a seeded permutation of the training rows (``ResampleStream``), skipping rows
already in the step. Each group's advantages are computed within its own generation call, exactly as
TRL computes them per group (``scale_rewards: group``); a batch-wide scale would mix calls, so it is
refused. Text rows only: image inputs carry per-image tensors that are not joined here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

# Output keys of TRL's _generate_and_score_completions that are joined here, by how they are padded.
LEFT_PADDED = ("prompt_ids", "prompt_mask")
RIGHT_PADDED = ("completion_ids", "completion_mask", "old_per_token_logps", "sampling_per_token_logps",
                "ref_per_token_logps")
PER_ROW = ("advantages",)  # one value per row, or per token (right-padded like the completion)
JOINED = (*LEFT_PADDED, *RIGHT_PADDED, *PER_ROW, "num_items_in_batch")


def unsupported_reason(output: dict[str, Any], scale_rewards: str) -> str | None:
    """Why a generation output cannot be resampled, or None.

    >>> unsupported_reason({"prompt_ids": 0, "pixel_values": 0}, "group")
    'pixel_values in the batch (resample joins text rows only)'
    >>> unsupported_reason({"prompt_ids": 0}, "batch")
    "scale_rewards 'batch' (advantages are scaled across the batch, not per group)"
    """
    extra = sorted(key for key, value in output.items() if key not in JOINED and value is not None)
    if extra:
        return f"{', '.join(extra)} in the batch (resample joins text rows only)"
    if scale_rewards not in ("group", "none", False):
        return f"scale_rewards {scale_rewards!r} (advantages are scaled across the batch, not per group)"
    return None


def varying_groups(uniform_rows: torch.Tensor, num_generations: int) -> list[int]:
    """Indices of the groups (``num_generations`` consecutive rows each) not flagged uniform.

    >>> varying_groups(torch.tensor([True, True, False, False, True, True]), 2)
    [1]
    """
    flags = uniform_rows.view(-1, num_generations)[:, 0]
    return [int(i) for i in torch.nonzero(~flags).flatten().tolist()]


class ResampleStream:
    """Training-row indices in a seeded random order, endlessly (a new permutation each pass), skipping
    rows whose id the caller names (the step's own prompts, and those drawn for it already).

    >>> stream = ResampleStream(["a", "b", "c", "d"], seed=0)
    >>> sorted(stream.take(4, exclude=set()))
    [0, 1, 2, 3]
    >>> 2 in stream.take(3, exclude={"c"})
    False
    """

    def __init__(self, ids: Sequence[str], seed: int) -> None:
        if not ids:
            raise ValueError("resampling needs at least one training row")
        self.ids = list(ids)
        self.generator = torch.Generator().manual_seed(seed)
        self.pending: list[int] = []

    def take(self, count: int, exclude: set[str]) -> list[int]:
        """``count`` indices of rows whose id is not in ``exclude`` (fewer when the data has fewer such rows)."""
        count = min(count, sum(1 for row_id in self.ids if row_id not in exclude))
        out: list[int] = []
        for _ in range(2 * len(self.ids) + count):  # at most two passes beyond what is needed
            if len(out) == count:
                break
            if not self.pending:
                self.pending = torch.randperm(len(self.ids), generator=self.generator).tolist()
            index = self.pending.pop()
            if self.ids[index] not in exclude and index not in out:
                out.append(index)
        return out


def _pad_to(tensor: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    missing = width - tensor.shape[1]
    if missing <= 0:
        return tensor
    pad = torch.full((tensor.shape[0], missing, *tensor.shape[2:]), value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([pad, tensor] if left else [tensor, pad], dim=1)


def join_groups(parts: Sequence[tuple[dict[str, Any], list[int]]], num_generations: int,
                pad_token_id: int) -> dict[str, Any]:
    """One generation output holding, in order, the listed groups of each part (part output, group
    indices): prompts left-padded and completions right-padded to the widest part (pad token, mask 0,
    log-probabilities 0), and ``num_items_in_batch`` counted again over the joined completions.

    >>> def part(prompt, completion, advantage):
    ...     return {"prompt_ids": torch.tensor([prompt] * 2),
    ...             "prompt_mask": torch.ones(2, len(prompt), dtype=torch.long),
    ...             "completion_ids": torch.tensor([completion] * 2),
    ...             "completion_mask": torch.ones(2, len(completion), dtype=torch.long),
    ...             "advantages": torch.tensor([advantage, -advantage]), "num_items_in_batch": torch.tensor(0)}
    >>> joined = join_groups([(part([5, 6], [7], 1.0), [0]), (part([8], [9, 9], 0.5), [0])], 2, pad_token_id=0)
    >>> joined["prompt_ids"].tolist(), joined["completion_ids"].tolist()
    ([[5, 6], [5, 6], [0, 8], [0, 8]], [[7, 0], [7, 0], [9, 9], [9, 9]])
    >>> joined["prompt_mask"].tolist()[2], joined["advantages"].tolist(), int(joined["num_items_in_batch"])
    ([0, 1], [1.0, -1.0, 0.5, -0.5], 6)
    """
    keys = [key for key in JOINED[:-1] if parts[0][0].get(key) is not None]
    for output, _ in parts:
        present = [key for key in JOINED[:-1] if output.get(key) is not None]
        if present != keys:
            raise ValueError(f"generation outputs differ in their tensors: {present} vs {keys}")
    pieces: dict[str, list[torch.Tensor]] = {key: [] for key in keys}
    for output, groups in parts:
        rows = [g * num_generations + k for g in groups for k in range(num_generations)]
        index = torch.tensor(rows, dtype=torch.long, device=output["prompt_ids"].device)
        for key in keys:
            pieces[key].append(output[key].index_select(0, index))
    joined: dict[str, Any] = {}
    for key, tensors in pieces.items():
        if key in PER_ROW and tensors[0].dim() == 1:
            joined[key] = torch.cat(tensors)
            continue
        width = max(t.shape[1] for t in tensors)
        left = key in LEFT_PADDED
        value = pad_token_id if key in ("prompt_ids", "completion_ids") else 0
        joined[key] = torch.cat([_pad_to(t, width, value, left) for t in tensors])
    total = joined["completion_mask"].sum()
    previous = parts[0][0].get("num_items_in_batch")
    joined["num_items_in_batch"] = total.to(previous.dtype) if isinstance(previous, torch.Tensor) else int(total)
    return joined
