"""What decoding hands around: the colour mode, the probe's ``VideoInfo``, the ``DecodeReport`` of
problems met, ``VideoError``, and the upright rotation. The backends and ``decode`` import these; none
of them imports ``decode``, so decode.py can choose a backend without an import cycle."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from embodied_r.core.io import DataFileError

# The decoders' warnings keep one logger name, the decoding module's.
logger = logging.getLogger("embodied_r.methods.embodied_r.keyframes.decode")

Color = Literal["bgr", "gray"]


class VideoError(DataFileError):
    """A video that cannot be opened or decoded; the message names the file and what to do."""


@dataclass(frozen=True)
class VideoInfo:
    """What ``probe`` learns about a video. ``width``/``height`` are the upright (displayed) size;
    ``rotation`` is the display rotation in degrees counter-clockwise that decoding applies.
    ``frame_count`` comes from the container, or is estimated from duration × fps when it says nothing."""

    path: str
    fps: float
    frame_count: int
    duration: float
    width: int
    height: int
    rotation: int
    codec: str
    backend: str


@dataclass
class DecodeReport:
    """Problems met while decoding (filled in by the decoders; empty for a healthy file)."""

    warnings: list[str] = field(default_factory=list)
    decode_errors: int = 0
    frames_decoded: int = 0

    def warn(self, message: str) -> None:
        logger.warning(message)
        self.warnings.append(message)


def rotate_upright(image: np.ndarray, rotation: int) -> np.ndarray:
    """Apply a counter-clockwise display rotation of 0/90/180/270 degrees."""
    import cv2

    codes = {90: cv2.ROTATE_90_COUNTERCLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_CLOCKWISE}
    return cv2.rotate(image, codes[rotation]) if rotation in codes else image
