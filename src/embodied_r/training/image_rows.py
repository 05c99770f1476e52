"""Taking some rows of a GRPO micro-batch that holds images (Qwen2-VL family layout), for token-budget
slices and zero-advantage skipping (training/token_budget.py, training/zero_advantage.py).

TRL passes the loss a vision-language micro-batch as ``pixel_values`` (every image's patches, concatenated
over the batch: ``(patches, features)``), ``image_grid_thw`` (one ``(t, h, w)`` patch grid per image) and
``num_images`` (images per row, a list), plus ``mm_token_type_ids`` per token of each row (indexed like the
prompt ids). A row's images are its own: Qwen2.5-VL encodes each image alone
(its vision blocks attend within one image) and places it by the row's own tokens, so computing some rows
with only their images gives each of them exactly what the whole micro-batch gives it, and the slices of
a micro-batch together give its loss and gradient (tested). Image tokens are prompt tokens, so a slice's
token count (``prompt_ids`` x rows) includes them.

Other layouts (tiles, per-row pixel tensors) are not sliced: ``slicing_problem`` says so,
and the trainer differentiates such a micro-batch whole.
"""

from __future__ import annotations

from typing import Any

import torch

# Inputs TRL passes the loss for image rows (trl 1.16 ``_get_per_token_logps_and_entropies``).
MULTIMODAL_KEYS = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
                   "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")
# Per-token inputs, one row per prompt (TRL pads them with zeros over the completion): indexed like the ids.
ROW_INDEXED_KEYS = ("token_type_ids", "mm_token_type_ids")
# Indexed by image or by patch, not by row.
IMAGE_INDEXED_KEYS = tuple(key for key in MULTIMODAL_KEYS if key not in ROW_INDEXED_KEYS)
# The patch-grid layout of the Qwen2-VL family, which rows can be taken from exactly.
GRID_KEYS = ("pixel_values", "image_grid_thw", "num_images")


def slicing_problem(inputs: dict[str, Any]) -> str | None:
    """Why rows cannot be taken from this micro-batch's image inputs exactly (None: no images, or the
    patch-grid layout)."""
    present = [key for key in IMAGE_INDEXED_KEYS if inputs.get(key) is not None]
    if present and set(present) != set(GRID_KEYS):
        return f"image inputs ({', '.join(present)}) other than the Qwen2-VL patch grid ({', '.join(GRID_KEYS)})"
    return None


def take_image_rows(inputs: dict[str, Any], rows: list[int]) -> dict[str, Any]:
    """``pixel_values``, ``image_grid_thw`` and ``num_images`` of ``rows`` only, in their order."""
    num_images = [int(n) for n in inputs["num_images"]]
    grid = inputs["image_grid_thw"]  # (images, 3)
    patches = grid.prod(-1).tolist()  # patches per image
    first_image = [0]
    for count in num_images:
        first_image.append(first_image[-1] + count)
    first_patch = [0]
    for count in patches:
        first_patch.append(first_patch[-1] + int(count))
    images = [i for row in rows for i in range(first_image[row], first_image[row + 1])]
    patch_rows = [p for i in images for p in range(first_patch[i], first_patch[i + 1])]
    pixel_values = inputs["pixel_values"]
    return {
        "pixel_values": pixel_values.index_select(0, torch.tensor(patch_rows, dtype=torch.long,
                                                                  device=pixel_values.device)),
        "image_grid_thw": grid.index_select(0, torch.tensor(images, dtype=torch.long, device=grid.device)),
        "num_images": [num_images[row] for row in rows],
    }


__all__ = ["GRID_KEYS", "IMAGE_INDEXED_KEYS", "MULTIMODAL_KEYS", "ROW_INDEXED_KEYS", "slicing_problem",
           "take_image_rows"]
