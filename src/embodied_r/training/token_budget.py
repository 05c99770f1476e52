"""Token-budget backward passes for GRPO: a micro-batch is differentiated in slices of at most
``max_train_batch_tokens`` tokens, so one long prompt cannot multiply the update's memory.

Why: TRL sizes a micro-batch in rows (``per_device_train_batch_size``) and keeps the activations of all
of them until the backward pass. A row count that fits ~700-token prompts holds several times the memory
when a prompt is 4,000 tokens long. Slicing the rows and running each slice's forward and backward in
turn keeps one slice's activations alive at a time.

Exactness: every GRPO loss TRL 1.16 has is a sum over rows (or tokens) divided by a normaliser. Each slice
computes the loss of its own rows with TRL's code; multiplied by ``slice_scale`` (the slice's share of that
normaliser) the slices' losses sum to the whole micro-batch's loss, and so do their gradients. Rows keep
their padded width, so each row is computed exactly as in the whole batch. What is not a per-row sum
(the entropy bonus and the entropy quantile mask, both means over the whole micro-batch; the MoE
auxiliary loss; image inputs other than the Qwen2-VL patch grid) is listed by ``unsupported_reason``, and
such micro-batches are differentiated whole, as TRL does. Rows with images take their own images along
(training/image_rows.py); their image tokens are prompt tokens, so every count here includes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from embodied_r.training import image_rows
from embodied_r.training.shared_prefix import checkpointing_active, find_groups, unwrap

# Losses normalised per row (a mean over rows, or a sum over rows divided by rows x a constant).
ROW_NORMALISED = ("grpo", "sapo", "dr_grpo", "luspo")
# Losses normalised by the tokens of the micro-batch.
TOKEN_NORMALISED = ("bnpo",)
# Losses normalised by a count of the whole generation batch (``num_items_in_batch``): a slice's loss is
# already its share.
GLOBALLY_NORMALISED = ("dapo", "cispo", "vespo")
SUPPORTED_LOSSES = ROW_NORMALISED + TOKEN_NORMALISED + GLOBALLY_NORMALISED


def unsupported_reason(trainer: Any, inputs: dict[str, Any]) -> str | None:
    """Why this micro-batch must be differentiated whole, or None when slices give the same gradient."""
    if trainer.loss_type not in SUPPORTED_LOSSES:
        return f"loss_type {trainer.loss_type!r} is not one of {SUPPORTED_LOSSES}"
    if getattr(trainer, "_entropy_bonus_enabled", False):
        return "the entropy bonus is a mean over the whole micro-batch"
    if trainer.top_entropy_quantile < 1.0:
        return "top_entropy_quantile < 1 masks tokens by a quantile of the whole micro-batch"
    if getattr(trainer, "aux_loss_enabled", False):
        return "the MoE auxiliary loss is requested"
    images = image_rows.slicing_problem(inputs)
    if images is not None:
        return images
    accelerator = trainer.accelerator
    if accelerator.distributed_type.name == "DEEPSPEED":
        return "DeepSpeed runs one backward per micro-batch"
    if trainer.args.n_gpu > 1:
        return "DataParallel (n_gpu > 1) averages one loss per micro-batch"
    return None


@dataclass(frozen=True)
class Group:
    """Rows with one prompt, with the tokens a forward over them processes: ``base`` once (the prompt,
    when packed) plus each row's ``row_tokens``."""

    rows: list[int]
    base: int
    row_tokens: list[int]

    @property
    def tokens(self) -> int:
        return self.base + sum(self.row_tokens)


def prompt_groups(inputs: dict[str, Any], packed: bool) -> list[Group]:
    """The micro-batch's rows grouped by prompt. Packed (the shared-prefix path), a group costs its prompt
    once plus every completion and a repeated prompt token; otherwise every row costs the padded width."""
    prompt_ids, prompt_mask = inputs["prompt_ids"].cpu(), inputs["prompt_mask"].cpu()
    completion_mask = inputs["completion_mask"].cpu()
    rows = find_groups(prompt_ids, prompt_mask)
    if not packed:
        width = prompt_ids.size(1) + completion_mask.size(1)
        return [Group(group, 0, [width] * len(group)) for group in rows]
    prompt_lengths = prompt_mask.sum(1).tolist()
    lengths = completion_mask.sum(1).tolist()
    out = []
    for group in rows:
        # As shared_prefix.packed_length: the prompt minus its last token once, then (1 + completion) per row.
        out.append(Group(group, prompt_lengths[group[0]] - 1, [lengths[r] + 1 if lengths[r] > 0 else 0 for r in group]))
    return out


def plan_slices(groups: list[Group], budget: int) -> list[list[int]]:
    """Row indices of each slice. Whole groups are added to a slice while its tokens stay within
    ``budget``; a group over the budget is split into runs of its rows (each run pays the group's base
    again), and a single row over the budget goes alone."""
    slices: list[list[int]] = []
    current: list[int] = []
    used = 0
    for group in groups:
        if group.tokens > budget:
            if current:
                slices.append(current)
                current, used = [], 0
            part: list[int] = []
            part_used = group.base
            for row, tokens in zip(group.rows, group.row_tokens):
                if part and part_used + tokens > budget:
                    slices.append(part)
                    part, part_used = [], group.base
                part.append(row)
                part_used += tokens
            slices.append(part)
            continue
        if current and used + group.tokens > budget:
            slices.append(current)
            current, used = [], 0
        current.extend(group.rows)
        used += group.tokens
    if current:
        slices.append(current)
    return slices


def take_rows(inputs: dict[str, Any], rows: list[int]) -> dict[str, Any]:
    """The inputs of ``rows``: every tensor whose first dimension is the batch is indexed, the rows' images
    are taken with them (``image_rows.take_image_rows``); scalars and anything else
    (``num_items_in_batch``) are passed unchanged."""
    batch = inputs["prompt_ids"].size(0)
    index = torch.tensor(rows, device=inputs["prompt_ids"].device)
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if key in image_rows.IMAGE_INDEXED_KEYS:
            out[key] = value  # indexed by image or patch, not by row: taken below
        elif isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == batch:
            out[key] = value.index_select(0, index.to(value.device))
        else:
            out[key] = value
    if inputs.get("pixel_values") is not None:
        out.update(image_rows.take_image_rows(inputs, rows))
    return out


def slice_scale(loss_type: str, inputs: dict[str, Any], rows: list[int]) -> float:
    """The share of the micro-batch's loss normaliser that ``rows`` carry (see the module docstring)."""
    if loss_type in GLOBALLY_NORMALISED:
        return 1.0
    if loss_type in ROW_NORMALISED:
        return len(rows) / inputs["prompt_ids"].size(0)
    mask = inputs["completion_mask"]
    if "tool_mask" in inputs:
        mask = mask * inputs["tool_mask"]
    total = float(mask.sum().clamp(min=1.0))
    return float(mask[rows].sum()) / total


def slice_tokens(groups: list[Group], rows: list[int]) -> int:
    """Tokens a forward over ``rows`` processes: each group's base once if any of its rows is there."""
    wanted = set(rows)
    total = 0
    for group in groups:
        tokens = [t for row, t in zip(group.rows, group.row_tokens) if row in wanted]
        if tokens:
            total += group.base + sum(tokens)
    return total


@contextlib.contextmanager
def activation_checkpointing(model: Any, enable: bool) -> Iterator[None]:
    """Turn transformers' activation checkpointing on for the forward passes inside, and off again after.

    Why only for long slices: checkpointing keeps one tensor per layer instead of every intermediate one
    (the update of a 4,096-token prompt group drops from ~6 GB of activations to well under 1 GB with
    SmolLM2-135M) at the price of a second forward pass in the backward, so short micro-batches keep the
    faster path. The non-reentrant variant is used: it needs no input that requires grad (LoRA included),
    and its backward recomputes from the functions saved during the forward, so turning the flag off before
    the Trainer's backward of the last slice changes nothing.
    """
    target = unwrap(model)
    if hasattr(target, "get_base_model"):  # a PEFT model: the transformers model holds the layers and hooks
        target = target.get_base_model()
    if not enable or checkpointing_active(target):
        yield
        return
    # Enabling also hooks the input embeddings so that gradients flow through frozen ones (LoRA); those hooks
    # are this context's to remove, or every long micro-batch would add another.
    hooks_before = list(getattr(target, "_require_grads_hooks", None) or [])
    target.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    try:
        yield
    finally:
        target.activation_checkpointing_disable()
        if not hooks_before:
            target.disable_input_require_grads()
        else:
            for hook in target._require_grads_hooks:
                if hook not in hooks_before:
                    hook.remove()
            target._require_grads_hooks = hooks_before
