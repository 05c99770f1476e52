"""The image parts of chat prompt rows: finding them, and the files or PIL images they name.

Image rows (Robot-R1's ``prompts_vl.jsonl``) hold ``{"type": "image", "image": PATH}`` parts in the user
content, with PATH relative to the data file's folder; both image engines of ``eval`` read them here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embodied_r.core.chat import Messages
from embodied_r.core.image_files import image_size, resolve_image
from embodied_r.core.io import DataFileError


def image_parts(messages: Messages) -> Iterator[dict[str, Any]]:
    """The ``{"type": "image", ...}`` parts of ``messages``, in prompt order."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            yield from (part for part in content if isinstance(part, dict) and part.get("type") == "image")


def load_images(messages: Messages, image_dir: Path | None) -> list[Any]:
    """PIL RGB images of ``messages``' image parts (a part may already hold a PIL image)."""
    from PIL import Image

    images = []
    for part in image_parts(messages):
        value = part.get("image")
        if isinstance(value, Image.Image):
            images.append(value.convert("RGB"))
            continue
        path = resolve_image(value, image_dir)
        image_size(path)  # a file that is not an image fails here, naming it
        try:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        except OSError as exc:  # a header that reads but pixels that do not (a truncated JPEG)
            raise DataFileError(f"{path} is not a readable image ({exc})") from exc
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
