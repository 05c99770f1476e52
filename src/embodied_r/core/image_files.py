"""Image files named by prompt rows: resolving their paths and reading their sizes without decoding them.

Image parts of prompt rows hold ``{"type": "image", "image": PATH}`` with PATH relative to the data
file's folder. Training, evaluation and the context policy all resolve and check them here, so a missing
frame or a file that is not an image fails with one message naming the row and the file, before any
model runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError

MISSING_HINT = ("image paths in prompt rows are relative to the data file's folder (regenerate the rows, or keep "
                "the .jsonl beside its images)")


def resolve_image(value: Any, image_dir: Path | None) -> Path:
    """The file an image part names: absolute as given, relative to ``image_dir`` (the data file's folder)."""
    path = Path(str(value))
    full = path if path.is_absolute() or image_dir is None else image_dir / path
    if not full.is_file():
        raise DataFileError(f"image {full} not found; {MISSING_HINT}")
    return full


def image_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` of an image file, read from its header (the pixels are not decoded). A file that
    is not an image, or whose header is broken, is a ``DataFileError`` naming it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            size = image.size
            image.verify()  # checks what can be checked without decoding (PNG chunks, JPEG markers)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataFileError(f"{path} is not a readable image ({type(exc).__name__}: {exc})") from exc
    return int(size[0]), int(size[1])


class ImageSizes:
    """Sizes of image parts, each file read once (rows of one video share their frames)."""

    def __init__(self, image_dir: Path | None) -> None:
        self.image_dir = image_dir
        self._sizes: dict[Path, tuple[int, int]] = {}

    def __call__(self, part: Any) -> tuple[int, int]:
        path = resolve_image(part.get("image"), self.image_dir)
        if path not in self._sizes:
            self._sizes[path] = image_size(path)
        return self._sizes[path]


__all__ = ["ImageSizes", "image_size", "resolve_image"]
