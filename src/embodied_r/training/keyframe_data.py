"""Key-frame prompt rows as a ``datasets.Dataset`` for TRL's multi-image GRPO path.

TRL's ``GRPOTrainer`` (1.16) takes a vision-language model's images from an ``images`` column (a list per
row) and puts them, in order, into the prompt's ``{"type": "image"}`` placeholders
(``trl.data_utils.prepare_multimodal_messages``); a prompt without placeholders gets them all before its
first user turn, which is how Robot-R1's single image is placed. Key-frame rows interleave frame lines and
frames, so here every message keeps its content as parts, each image part becomes a placeholder where it
stands, and ``images`` lists the frame files in the same order.

The files are listed by path and decoded when a batch reads them (``datasets.Image``), so a data set of
many 32-frame rows holds paths, not pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from embodied_r.core.image_files import resolve_image
from embodied_r.core.io import DataFileError
from embodied_r.core.keyframe_chat import is_image_part
from embodied_r.core.records import PromptRow


def keyframe_example(row: PromptRow, image_dir: Path) -> dict[str, Any]:
    """One data-set example's prompt and images: parts-only messages with image placeholders, and the frame
    paths in the same order (the reward columns are the caller's, as for every other row)."""
    messages: list[dict[str, Any]] = []
    images: list[str] = []
    for message in row.prompt:
        content = message["content"]
        if isinstance(content, str):
            # One Arrow type for every message's content: a list of {type, text} parts.
            messages.append({"role": str(message["role"]), "content": [{"type": "text", "text": content}]})
            continue
        parts = []
        for part in content:
            if is_image_part(part):
                try:
                    images.append(str(resolve_image(part.get("image"), image_dir).resolve()))
                except DataFileError as exc:
                    raise DataFileError(f"row {row.id}: {exc}") from exc
                parts.append({"type": "image", "text": None})  # a placeholder TRL fills from ``images``
            else:
                parts.append({"type": "text", "text": str(part.get("text") or "")})
        messages.append({"role": str(message["role"]), "content": parts})
    return {"prompt": messages, "images": images}


def keyframe_rows_to_dataset(rows: list[PromptRow], image_dir: str | Path,
                             columns: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """A ``datasets.Dataset`` of key-frame rows, with ``columns(row dict)`` (the reward columns) beside each
    prompt, whose ``images`` are decoded (RGB) only when read."""
    from datasets import Dataset, Image, List

    examples = [{**keyframe_example(row, Path(image_dir)), **columns(row.to_dict())} for row in rows]
    # Paths are stored; each frame is decoded when its batch is read.
    return Dataset.from_list(examples).cast_column("images", List(Image(mode="RGB")))


__all__ = ["keyframe_example", "keyframe_rows_to_dataset"]
