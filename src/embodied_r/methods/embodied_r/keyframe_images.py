"""The key frames a key-frame prompt row shows, sized to a declared pixel budget and written once per video.

The paper's VLM arm (Embodied-R §4, "VLLM-RL": Qwen2.5-VL-3B trained with RL on the video itself) reads
the frames as images, so their size is what its prompt costs: a Qwen2.5-VL image of ``w x h`` pixels takes
``(w / 28) x (h / 28)`` tokens (14-pixel patches, merged 2 x 2). ``build-prompts --input keyframes`` therefore
resizes every key frame to at most ``max_pixels`` pixels, with both sides multiples of ``pixel_multiple``
(the size Qwen2.5-VL's processor would resize it to anyway), and writes it beside the prompt rows; the
processor then leaves it as it is, and what the context policy counts is what the model reads.

>>> budget_size(1280, 720, 200704, 28)  # an UrbanVideo-Bench frame at the default budget: 21 x 12 tokens
(588, 336)
>>> budget_size(160, 120, 200704, 28)   # a small frame is rounded to the multiple, not enlarged further
(168, 112)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from embodied_r.core.io import DataFileError

# Qwen2.5-VL: 14-pixel patches, merged 2 x 2 into one language-model token.
PIXEL_MULTIPLE = 28
# 256 tokens a frame for Qwen2.5-VL: 32 key frames (the paper's clamp) take 8,192 image tokens.
DEFAULT_MAX_PIXELS = 256 * PIXEL_MULTIPLE * PIXEL_MULTIPLE
DEFAULT_MAX_FRAMES = 32  # Embodied-R clamps key frames to [4, 32] (Zhao et al., 2025)
JPEG_QUALITY = 95


class KeyframeBudgetError(DataFileError):
    """A frame count or pixel budget that leaves no frame to show."""


@dataclass(frozen=True)
class KeyframeBudget:
    """How many key frames a row shows (the latest ones) and how many pixels each may have."""

    max_frames: int = DEFAULT_MAX_FRAMES
    max_pixels: int = DEFAULT_MAX_PIXELS
    pixel_multiple: int = PIXEL_MULTIPLE

    def __post_init__(self) -> None:
        if self.max_frames < 1:
            raise KeyframeBudgetError(f"--max-frames {self.max_frames} leaves no frame; give at least 1")
        if self.pixel_multiple < 1:
            raise KeyframeBudgetError(f"--pixel-multiple must be positive, got {self.pixel_multiple}")
        if self.max_pixels < self.pixel_multiple ** 2:
            raise KeyframeBudgetError(
                f"--max-pixels {self.max_pixels} leaves no frame: the smallest frame is {self.pixel_multiple} x "
                f"{self.pixel_multiple} = {self.pixel_multiple ** 2} pixels (one image token for Qwen2.5-VL); "
                f"the default is {DEFAULT_MAX_PIXELS} (256 tokens a frame)")

    def describe(self) -> dict[str, int]:
        return {"max_frames": self.max_frames, "max_pixels": self.max_pixels, "pixel_multiple": self.pixel_multiple}


def budget_size(width: int, height: int, max_pixels: int, multiple: int) -> tuple[int, int]:
    """The frame size within ``max_pixels`` with both sides multiples of ``multiple``, the aspect ratio kept
    as nearly as the multiple allows (Qwen2.5-VL's ``smart_resize`` without its lower bound)."""
    if width < 1 or height < 1:
        raise KeyframeBudgetError(f"a frame of {width} x {height} pixels has no pixels")
    w = max(multiple, round(width / multiple) * multiple)
    h = max(multiple, round(height / multiple) * multiple)
    if w * h > max_pixels:
        scale = math.sqrt(width * height / max_pixels)
        w = max(multiple, math.floor(width / scale / multiple) * multiple)
        h = max(multiple, math.floor(height / scale / multiple) * multiple)
    while w * h > max_pixels:  # a very thin frame, whose short side was raised to one multiple
        if w >= h:
            w -= multiple
        else:
            h -= multiple
    return w, h


@dataclass
class FrameWriter:
    """Writes budget-sized copies of key frames into ``folder`` (once per source frame), returning their
    paths relative to ``base`` (the prompt rows' folder) and their sizes."""

    folder: Path
    base: Path
    budget: KeyframeBudget
    written: dict[Path, tuple[str, tuple[int, int]]] = field(default_factory=dict)

    def write(self, source: Path, video: str) -> tuple[str, tuple[int, int]]:
        if source in self.written:
            return self.written[source]
        from PIL import Image, UnidentifiedImageError

        target = self.folder / video / f"{source.stem}.jpg"
        try:
            with Image.open(source) as image:
                rgb = image.convert("RGB")
        except (UnidentifiedImageError, OSError) as exc:
            raise DataFileError(f"key frame {source} is not a readable image ({exc}); rerun `embodied-r keyframes "
                                "--save-images` for its video") from exc
        size = budget_size(rgb.width, rgb.height, self.budget.max_pixels, self.budget.pixel_multiple)
        if size != rgb.size:
            rgb = rgb.resize(size, Image.Resampling.BICUBIC)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_suffix(".jpg.tmp")
        rgb.save(temporary, format="JPEG", quality=JPEG_QUALITY)
        temporary.replace(target)  # a killed run never leaves half a frame under the final name
        self.written[source] = (target.relative_to(self.base).as_posix(), size)
        return self.written[source]


__all__ = ["DEFAULT_MAX_FRAMES", "DEFAULT_MAX_PIXELS", "PIXEL_MULTIPLE", "FrameWriter", "KeyframeBudget",
           "KeyframeBudgetError", "budget_size"]
