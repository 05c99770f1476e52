"""The image parts of chat prompt rows: finding them, and the files or PIL images they name.

Image rows (Robot-R1's ``prompts_vl.jsonl``) hold ``{"type": "image", "image": PATH}`` parts in the user
content, with PATH relative to the data file's folder; both image engines of ``eval`` read them here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodied_r.core.chat import Messages
from embodied_r.core.io import DataFileError


def image_parts(messages: Messages) -> Iterator[dict[str, Any]]:
    """The ``{"type": "image", ...}`` parts of ``messages``, in prompt order."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            yield from (part for part in content if isinstance(part, dict) and part.get("type") == "image")


def resolve_image(value: Any, image_dir: Path | None) -> Path:
    """The file an image part names: absolute as given, relative to ``image_dir`` (the data file's folder)."""
    path = Path(str(value))
    full = path if path.is_absolute() or image_dir is None else image_dir / path
    if not full.is_file():
        raise DataFileError(f"image {full} not found; image paths in prompt rows are relative to the data file's "
                            "folder (regenerate the dataset, or keep prompts_vl.jsonl beside its images/)")
    return full


def load_images(messages: Messages, image_dir: Path | None) -> list[Any]:
    """PIL RGB images of ``messages``' image parts (a part may already hold a PIL image)."""
    from PIL import Image

    images = []
    for part in image_parts(messages):
        value = part.get("image")
        if isinstance(value, Image.Image):
            images.append(value.convert("RGB"))
            continue
        with Image.open(resolve_image(value, image_dir)) as image:
            images.append(image.convert("RGB"))
    return images


def prompt_text(messages: Messages) -> str:
    """All text parts of ``messages`` (to look for frame descriptions)."""
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "\n".join(parts)


__all__ = ["image_parts", "load_images", "prompt_text", "resolve_image"]
