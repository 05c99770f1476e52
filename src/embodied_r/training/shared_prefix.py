"""Shared-prefix policy update for GRPO: each group's prompt is encoded once, not once per completion.

Why: GRPO scores G completions of the same prompt. TRL's ``GRPOTrainer`` re-encodes that prompt in every
row of the log-probability pass (policy loss, reference model, old log-probabilities), so with
~700-token prompts and ~100-token completions most of the update's compute is the same prompt, G times.

How: the rows of a batch whose prompt tokens are identical form a group, and each group becomes one
packed sequence::

    [prompt minus its last token] [last prompt token, completion 1] ... [last prompt token, completion G]

with a block attention mask (a completion block attends causally to the shared prompt and to earlier
tokens of its own block, never to another completion) and position ids that equal the columns the
tokens have in TRL's padded rows (each block restarts at ``prompt_length - 1``). Every completion token
then sees exactly the keys, values and positions it sees in TRL's row, so its log-probability, its
entropy and their gradients are the same: the gradient that the prompt receives is the sum of what
its G copies receive in the stock computation (Prefix Grouper, Liu et al., arXiv 2506.05433, shows this
equivalence for self-attention split into a shared prefix and per-completion suffixes; this module
realises it with one masked forward pass instead of a custom attention operator). The last prompt
token is repeated at the start of every block because its hidden state predicts each completion's
first token, and TRL's fused LM head scores one label per position.

On GPUs the model is called through TRL's fused LM head (``fused_lm_head=True`` with pre-shifted labels),
so temperature, logit scaling, soft-capping and ``cast_lm_head_to_fp32`` are applied exactly as in the
stock path; on CPUs only the completion columns go through the model's own LM head (``CompactHead``).
``unsupported_reason`` lists what this packing cannot reproduce exactly; the trainer then uses TRL's own
method.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from embodied_r.inference.batch_layout import SLIDING, layer_typed

# Attention implementations that take a custom 4D mask as is: SDPA (boolean, True = attend) and eager
# (additive float). Flash attention takes no dense mask; flex attention needs a BlockMask.
SUPPORTED_ATTENTION = ("sdpa", "eager")
# Decoder-only text models whose backbone takes ``position_ids`` and a 4D mask through
# transformers' masking_utils (which returns a 4D mask unchanged) and uses rotary positions. Models that
# derive positions from the 2D mask (OPT) or mix in other inputs are not packed.
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral", "gemma3_text")
# Of those, the layer-typed backbones (batch_layout.LAYER_TYPED_MODEL_TYPES) also take a dict of 4D masks
# keyed by layer type as is: each sliding-window layer then gets the block mask cut to its window, so rows
# wider than the window pack exactly too (Gemma 3 alternates five 512-token sliding layers with one global
# layer). Mistral builds one mask for all layers.
IGNORE_INDEX = -100  # the label value TRL's fused head skips
# Reasons for the stock path that are routine rather than a limitation worth a warning.
OFF = "shared_prefix_update is off"
NO_SHARED_PROMPT = "no two rows of this micro-batch share a prompt"
CHOSEN_PER_ROW = "the run's first step chose the per-row path (fast_paths.json, training/path_choice.py)"
ROUTINE_REASONS = frozenset({OFF, NO_SHARED_PROMPT, CHOSEN_PER_ROW})


@dataclass(frozen=True)
class PackedBatch:
    """Packed sequences (one per group, right-padded to the longest) and where each scored token goes."""

    input_ids: torch.Tensor  # (S, L)
    position_ids: torch.Tensor  # (S, L)
    segments: torch.Tensor  # (S, L): 0 shared prompt, 1..G completion blocks, -1 filler
    shift_labels: torch.Tensor  # (S, L): the token each position predicts, IGNORE_INDEX where none
    source: tuple[torch.Tensor, torch.Tensor]  # (sequence, position) of each scored token in the pack
    target: tuple[torch.Tensor, torch.Tensor]  # (row, column) of that token in TRL's (B, C) layout


def unwrap(model: Any) -> Any:
    """The model under DDP-style wrappers (``.module``), which is where ``config`` lives."""
    while hasattr(model, "module") and not hasattr(model, "config"):
        model = model.module
    return model


def checkpointing_active(model: Any) -> bool:
    """Whether the model's decoder layers recompute their activations in the backward pass."""
    return any(getattr(module, "gradient_checkpointing", False) for module in unwrap(model).modules())


def unsupported_reason(model: Any, sequence_length: int) -> str | None:
    """Why ``model`` cannot take the packed layout exactly, or None when it can."""
    model = unwrap(model)
    config = getattr(model, "config", None)
    if config is None:
        return f"{type(model).__name__} has no config"
    if config.get_text_config() is not config:
        return f"{config.model_type} is a composite (vision-language) model"
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        return f"model type {config.model_type!r} is not one of {SUPPORTED_MODEL_TYPES}"
    attention = getattr(config, "_attn_implementation", None)
    if attention not in SUPPORTED_ATTENTION:
        return f"attention implementation {attention!r} takes no custom 4D mask (supported: {SUPPORTED_ATTENTION})"
    if not getattr(config, "is_causal", True) or getattr(config, "use_bidirectional_attention", False):
        return "the model is configured as bidirectional"
    window = overridden_window(config)
    if window is not None and sequence_length > window:
        # The 4D mask replaces the sliding-window mask too; that is exact only while rows fit in the window.
        return f"rows of {sequence_length} tokens exceed the sliding window of {window}"
    peft_config = getattr(model, "active_peft_config", None)
    if peft_config is not None and getattr(peft_config, "is_prompt_learning", False):
        return "prompt-learning PEFT adapters prepend virtual tokens"
    return None


def overridden_window(config: Any) -> int | None:
    """The sliding window that one packed block mask would replace, or None. Backbones that take a mask
    per layer type slide only the layers ``layer_types`` names: those get the block mask cut to the window
    (:func:`packed_masks`), and a config with a ``sliding_window`` but no sliding layer (Qwen2 with
    ``use_sliding_window`` and ``max_window_layers`` at the depth) has no window to replace."""
    window = getattr(config, "sliding_window", None)
    if window is None or layer_typed(config):
        return None
    return int(window)


def sliding_masks_apply(config: Any) -> bool:
    """Whether the backbone takes a mask per layer type and has sliding-window layers to give one."""
    return (layer_typed(config) and getattr(config, "sliding_window", None) is not None
            and SLIDING in config.layer_types)


def layout_problem(prompt_mask: torch.Tensor, completion_mask: torch.Tensor) -> str | None:
    """Why the masks are not TRL's layout (left-padded prompts, right-padded completions), or None."""
    if prompt_mask.size(1) == 0 or not bool(prompt_mask[:, -1].all()):
        return "a prompt is empty or not left-padded"
    if bool((prompt_mask[:, 1:] < prompt_mask[:, :-1]).any()):
        return "a prompt mask has a hole (prompts must be left-padded)"
    if bool((completion_mask[:, 1:] > completion_mask[:, :-1]).any()):
        return "a completion mask has a hole (completions must be right-padded)"
    return None


def find_groups(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> list[list[int]]:
    """Rows whose prompt tokens (and so their left padding) are identical, in order of first row.

    TRL shuffles a generation batch before slicing it into micro-batches, so members of a group need
    not be adjacent, and a micro-batch may hold only some of them: groups are found by comparing
    tokens, never assumed from row order.
    """
    keys = prompt_ids.masked_fill(prompt_mask == 0, -1)
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    groups: dict[int, list[int]] = {}
    for row, key in enumerate(inverse.tolist()):
        groups.setdefault(key, []).append(row)
    return list(groups.values())


def _pack_group(
    prompt: torch.Tensor, prompt_width: int, completions: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, positions, segments, shift labels) of one group; ``prompt`` holds its real tokens only."""
    start = prompt_width - prompt.numel()  # left padding: TRL's positions count the pad columns
    ids = [prompt[:-1]]
    positions = [torch.arange(start, prompt_width - 1)]
    segments = [torch.zeros(prompt.numel() - 1, dtype=torch.long)]
    labels = [torch.full((prompt.numel() - 1,), IGNORE_INDEX, dtype=torch.long)]
    for block, completion in enumerate(completions, start=1):
        length = completion.numel()
        ids.append(torch.cat([prompt[-1:], completion]))
        positions.append(torch.arange(prompt_width - 1, prompt_width + length))
        segments.append(torch.full((length + 1,), block, dtype=torch.long))
        labels.append(torch.cat([completion, torch.tensor([IGNORE_INDEX])]))
    return torch.cat(ids), torch.cat(positions), torch.cat(segments), torch.cat(labels)


def pack_groups(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                completion_mask: torch.Tensor, groups: list[list[int]]) -> PackedBatch:
    """Pack ``groups`` (lists of row indices; all on CPU) into one right-padded batch of sequences.

    Completions with no unmasked token are left out: TRL's path returns zeros for them, and so does
    the gather (their output entries are never written)."""
    width = prompt_ids.size(1)
    lengths = completion_mask.sum(1).tolist()
    sequences, source_seq, source_pos, target_row, target_col = [], [], [], [], []
    for group in groups:
        kept = [row for row in group if lengths[row] > 0]
        prompt = prompt_ids[group[0], width - int(prompt_mask[group[0]].sum()):]
        packed = _pack_group(prompt, width, [completion_ids[row, : lengths[row]] for row in kept])
        offset = prompt.numel() - 1  # the first block starts after the shared prompt
        for row in kept:
            length = int(lengths[row])
            source_seq.append(torch.full((length,), len(sequences), dtype=torch.long))
            source_pos.append(torch.arange(offset, offset + length))
            target_row.append(torch.full((length,), row, dtype=torch.long))
            target_col.append(torch.arange(length))
            offset += length + 1
        sequences.append(packed)
    longest = max(ids.numel() for ids, *_ in sequences)

    def stack(index: int, fill: int) -> torch.Tensor:
        out = torch.full((len(sequences), longest), fill, dtype=torch.long)
        for i, parts in enumerate(sequences):
            out[i, : parts[index].numel()] = parts[index]
        return out

    return PackedBatch(
        input_ids=stack(0, 0),
        position_ids=stack(1, 0),
        segments=stack(2, -1),
        shift_labels=stack(3, IGNORE_INDEX),
        source=(torch.cat(source_seq), torch.cat(source_pos)),
        target=(torch.cat(target_row), torch.cat(target_col)),
    )


def block_mask(segments: torch.Tensor, attention: str, dtype: torch.dtype, positions: torch.Tensor | None = None,
               window: int | None = None) -> torch.Tensor:
    """The (S, 1, L, L) mask: causal, and a key is visible when it is the shared prompt or in the
    query's own block. Filler positions (segment -1, after every real token) see the prompt and earlier
    filler, so no query row is fully masked: the result then does not depend on how a kernel treats
    such a row (some return NaN, and a NaN activation times a zero gradient is NaN in the weight
    gradient).

    With ``window`` (a sliding-window layer's mask) a key is visible only within ``window`` of the query
    in ``positions``, the columns of TRL's padded rows: transformers' sliding mask counts columns
    (``key > query - window``), padding included, and the packed positions are exactly those columns. A
    query always sees itself, so no row is emptied."""
    length = segments.size(1)
    causal = torch.ones(length, length, dtype=torch.bool, device=segments.device).tril()
    same_block = segments[:, :, None] == segments[:, None, :]
    shared = (segments == 0)[:, None, :]
    allowed = causal & (same_block | shared)
    if window is not None:
        if positions is None:
            raise ValueError("a sliding-window block mask needs the packed positions")
        allowed = allowed & (positions[:, None, :] > positions[:, :, None] - window)
    allowed = allowed.unsqueeze(1)
    if attention == "sdpa":
        return allowed
    # Eager attention adds the mask to the scores, as transformers' own eager mask does.
    return torch.zeros(allowed.shape, dtype=dtype, device=segments.device).masked_fill(
        ~allowed, torch.finfo(dtype).min
    )


def chunk_groups(groups: list[list[int]], sizes: list[int], budget: int) -> list[list[int]]:
    """Indices of ``groups`` per forward pass so that (sequences x longest) stays within ``budget``
    tokens, the padded size of the stock chunk; a group larger than the budget goes alone."""
    chunks: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index, size in enumerate(sizes):
        if current and (len(current) + 1) * max(longest, size) > budget:
            chunks.append(current)
            current, longest = [], 0
        current.append(index)
        longest = max(longest, size)
    if current:
        chunks.append(current)
    return chunks


def packed_length(group: list[int], prompt_lengths: list[int], lengths: list[int]) -> int:
    """Tokens of ``group``'s packed sequence: the prompt once, then each unmasked completion behind a
    repeat of the prompt's last token (``lengths`` are completion lengths, 0 for a masked row)."""
    kept = [lengths[row] for row in group if lengths[row] > 0]
    return prompt_lengths[group[0]] - 1 + sum(kept) + len(kept)


def shared_prefix_logps(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                        groups: list[list[int]], batch_size: int | None = None, compute_entropy: bool = False,
                        autocast: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
                        head: CompactHead | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probabilities (and entropies) of each row's completion, shaped (B, logits_to_keep)
    and zero where the completion mask is 0, as TRL's ``_get_per_token_logps_and_entropies`` returns.

    ``model`` must carry TRL's fused LM head (``add_fused_lm_head``), used where ``head`` is None or the
    pack is too wide for it; ``groups`` come from ``find_groups``; ``batch_size`` bounds the padded tokens
    of one forward as it bounds TRL's rows."""
    device = input_ids.device
    cpu_ids, cpu_mask = input_ids.cpu(), attention_mask.cpu()
    prompt_ids, completion_ids = cpu_ids[:, :-logits_to_keep], cpu_ids[:, -logits_to_keep:]
    prompt_mask, completion_mask = cpu_mask[:, :-logits_to_keep], cpu_mask[:, -logits_to_keep:]
    lengths = completion_mask.sum(1).tolist()
    prompt_lengths = prompt_mask.sum(1).tolist()
    groups = [g for g in groups if any(lengths[row] > 0 for row in g)]
    if not groups:
        raise ValueError("no completion token is unmasked in this batch: use TRL's method for it "
                         "(stock_path_reason says so)")
    sizes = [packed_length(g, prompt_lengths, lengths) for g in groups]
    budget = (batch_size or input_ids.size(0)) * input_ids.size(1)
    logps_parts, entropy_parts, targets = [], [], []
    for chunk in chunk_groups(groups, sizes, budget):
        packed = pack_groups(prompt_ids, prompt_mask, completion_ids, completion_mask, [groups[i] for i in chunk])
        chunk_logps, chunk_entropies = _score(model, packed, device, compute_entropy, autocast, head)
        logps_parts.append(chunk_logps)
        entropy_parts.append(chunk_entropies)
        targets.append(packed.target)
    target = (torch.cat([t[0] for t in targets]).to(device), torch.cat([t[1] for t in targets]).to(device))
    rows = input_ids.size(0)
    logps = scatter_rows(torch.cat(logps_parts), target, rows, logits_to_keep)
    if not compute_entropy:
        return logps, None
    return logps, scatter_rows(torch.cat(entropy_parts), target, rows, logits_to_keep)


def _score(model: Any, packed: PackedBatch, device: torch.device, compute_entropy: bool,
           autocast: Callable[[], contextlib.AbstractContextManager[Any]],
           head: CompactHead | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One forward of ``packed``; the scored tokens' log-probabilities (and entropies), in pack order.

    With ``head``, only the columns from the first scored position on go through the LM head (the
    model's own ``logits_to_keep``) and only the scored tokens are normalised; otherwise TRL's fused LM
    head scores every position of the pack, as it does on devices without Triton."""
    base = unwrap(model)
    mask = packed_masks(base.config, packed.segments.to(device), packed.position_ids.to(device), base.dtype)
    source = (packed.source[0].to(device), packed.source[1].to(device))
    inputs = {"input_ids": packed.input_ids.to(device), "attention_mask": mask,
              "position_ids": packed.position_ids.to(device)}
    first = int(packed.source[1].min())
    keep = packed.input_ids.size(1) - first
    if head is not None and head.fits(packed.input_ids.size(0) * keep, base):
        with autocast():
            outputs = model(**inputs, logits_to_keep=keep, use_cache=False)
        logits = outputs.logits[source[0], source[1] - first].float() / head.temperature
        log_probs = torch.log_softmax(logits, dim=-1)
        labels = packed.shift_labels.to(device)[source]
        values = log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1) if compute_entropy else None
        return values, entropy
    with autocast():
        outputs = model(**inputs, shift_labels=packed.shift_labels.to(device), fused_lm_head=True)
    return outputs.log_probs[source], outputs.entropy[source] if compute_entropy else None


def packed_masks(config: Any, segments: torch.Tensor, positions: torch.Tensor,
                 dtype: torch.dtype) -> torch.Tensor | dict[str, torch.Tensor]:
    """The attention mask the backbone is given: one block mask, or (:func:`sliding_masks_apply`) a dict
    of one per layer type, the sliding layers' cut to the window."""
    attention = config._attn_implementation
    full = block_mask(segments, attention, dtype)
    if not sliding_masks_apply(config):
        return full
    sliding = block_mask(segments, attention, dtype, positions, config.sliding_window)
    return {layer_type: sliding if layer_type == SLIDING else full for layer_type in set(config.layer_types)}


@dataclass(frozen=True)
class CompactHead:
    """Scoring only the completion columns with the model's own LM head, instead of TRL's fused head.

    Why: off Triton devices (CPUs), TRL's fused head projects and normalises every position of a sequence,
    prompt included, and keeps whole tiles of vocabulary-wide logits for the backward pass: for a 4,096-token
    prompt that is most of the update's memory, and with ~700-token prompts most of the head's compute is on
    positions nobody scores. The values are the same: logits over the temperature, log-softmax in fp32
    (:func:`compact_head` leaves a model with final-logit soft-capping or logit scaling to TRL's head, which
    applies them). The logits are materialised, so a pack whose
    kept columns would exceed ``max_logit_bytes`` uses TRL's fused, tiled head."""

    temperature: float
    max_logit_bytes: int = 2**30

    def fits(self, positions: int, model: Any) -> bool:
        vocab = model.config.get_text_config().vocab_size
        return positions * vocab * 4 <= self.max_logit_bytes


def compact_head(model: Any, device: torch.device, temperature: float,
                 cast_lm_head_to_fp32: bool) -> CompactHead | None:
    """The compact head where it computes what TRL's fused head does, else None (TRL's head). On CUDA and
    other Triton devices TRL's head already scores only the completion positions, in tiles."""
    config = unwrap(model).config.get_text_config()
    if device.type != "cpu" or getattr(config, "final_logit_softcapping", None) is not None:
        return None
    if getattr(config, "logits_scaling", None) is not None or getattr(config, "logit_scale", None) is not None:
        return None
    if cast_lm_head_to_fp32 and unwrap(model).dtype != torch.float32:
        return None  # TRL projects in fp32 then; the model's own head projects in its dtype
    return CompactHead(temperature)


def scatter_rows(
    values: torch.Tensor, target: tuple[torch.Tensor, torch.Tensor], rows: int, width: int
) -> torch.Tensor:
    """A (rows, width) tensor, zero except ``values`` at ``target``; differentiable in ``values``."""
    out = values.new_zeros(rows, width)
    return out.index_put(target, values)


def stock_path_reason(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                      compute_aux_loss: bool, extra_inputs: dict[str, Any]) -> tuple[str | None, list[list[int]]]:
    """(why TRL's own method must compute this batch, or None; the prompt groups when packing applies)."""
    given = sorted(name for name, value in extra_inputs.items() if value is not None)
    if given:
        return f"multimodal or extra model inputs ({', '.join(given)})", []
    if compute_aux_loss:
        return "the MoE load-balancing loss is requested (compute_aux_loss)", []
    if not 0 < logits_to_keep < input_ids.size(1):
        return f"logits_to_keep {logits_to_keep} leaves no prompt column in rows of {input_ids.size(1)}", []
    reason = unsupported_reason(model, input_ids.size(1))
    if reason is None:
        reason = layout_problem(attention_mask[:, :-logits_to_keep], attention_mask[:, -logits_to_keep:])
    if reason is not None:
        return reason, []
    if not bool(attention_mask[:, -logits_to_keep:].any()):
        return "no completion token is unmasked", []
    groups = find_groups(input_ids[:, :-logits_to_keep], attention_mask[:, :-logits_to_keep])
    if all(len(group) == 1 for group in groups):
        return NO_SHARED_PROMPT, []
    if torch.is_grad_enabled():
        held = dense_attention_bytes(model, groups, attention_mask, logits_to_keep)
        if held > MAX_DENSE_ATTENTION_BYTES:
            return (f"the packed sequences' attention would hold {held / 2**30:.1f} GiB for the backward pass "
                    f"(over {MAX_DENSE_ATTENTION_BYTES / 2**30:.0f} GiB; TRL's rows use the memory-efficient "
                    "causal kernel)"), []
    return None, groups


# A block mask sends SDPA to its math kernel, which keeps every layer's attention probabilities
# (heads x length^2) for the backward pass: ~2 GB for the demo's two ~900-token packs with SmolLM2, ~20 GB
# for one pack of a 4,096-token prompt (~0.7 GB with activation checkpointing, which holds one layer's at a
# time). Above this the per-row path (causal, memory-efficient) is used.
MAX_DENSE_ATTENTION_BYTES = 4 * 2**30


def dense_attention_bytes(model: Any, groups: list[list[int]], attention_mask: torch.Tensor,
                          logits_to_keep: int) -> int:
    """Bytes the packed forward keeps for the backward pass in attention probabilities: layers x heads x
    the sum of each pack's length squared x the element size (one layer's worth while activations are
    checkpointed: the backward recomputes them a layer at a time)."""
    config = unwrap(model).config.get_text_config()
    layers = 1 if checkpointing_active(model) else config.num_hidden_layers
    prompt_lengths = attention_mask[:, :-logits_to_keep].sum(1).tolist()
    lengths = attention_mask[:, -logits_to_keep:].sum(1).tolist()
    squares = sum(packed_length(g, prompt_lengths, lengths) ** 2 for g in groups)
    element = torch.finfo(unwrap(model).dtype).bits // 8
    return int(layers * config.num_attention_heads * squares * element)
