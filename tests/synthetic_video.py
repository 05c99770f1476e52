"""Synthetic test videos with known camera motion: a camera panning over a large textured image,
with optional hard cuts and static stretches. Used by the tests and by ``benchmarks/keyframes.py``.

Everything is generated locally from a seed (no downloads). Videos are written as real mp4 files,
either with OpenCV's ``mp4v`` writer (MPEG-4 part 2, no B-frames, what ``cv2.VideoWriter`` produces)
or with PyAV's ``libx264`` (H.264 with B-frames, what phones and ffmpeg produce).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

Codec = Literal["mp4v", "h264"]


def textured_world(height: int, width: int, seed: int = 0, shapes: int | None = None) -> np.ndarray:
    """A BGR image of blurred noise plus random filled rectangles and circles (rich ORB texture)."""
    import cv2

    rng = np.random.default_rng(seed)
    world = cv2.GaussianBlur(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), (0, 0), 3)
    count = shapes if shapes is not None else max(50, height * width // 2000)
    for _ in range(count):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        color = tuple(int(v) for v in rng.integers(0, 256, 3))
        size = int(rng.integers(5, 40))
        if rng.random() < 0.5:
            cv2.rectangle(world, (x, y), (x + 2 * size, y + int(rng.integers(5, 60))), color, -1)
        else:
            cv2.circle(world, (x, y), size, color, -1)
    return world


@dataclass(frozen=True)
class Shot:
    """``seconds`` of camera motion over ``world``: pans ``speed`` frame-widths per second to the right
    (0 = static camera), starting at horizontal offset ``start`` (pixels)."""

    world: np.ndarray
    seconds: float
    speed: float = 0.0
    start: int = 0


def render_shots(shots: Iterable[Shot], width: int, height: int, fps: float) -> Iterator[np.ndarray]:
    """The frames of consecutive shots; a new shot starts with a hard cut."""
    import cv2

    for shot in shots:
        frames = int(round(shot.seconds * fps))
        max_x = shot.world.shape[1] - width - 1
        for index in range(frames):
            x = min(max_x, shot.start + shot.speed * width * index / fps)
            y = (shot.world.shape[0] - height) / 2 * (1.0 + 0.3 * np.sin(index / (2.0 * fps)))
            matrix = np.float32([[1, 0, -x], [0, 1, -y]])
            yield cv2.warpAffine(shot.world, matrix, (width, height), flags=cv2.INTER_LINEAR)


def write_video(path: str | Path, frames: Iterable[np.ndarray], fps: float, codec: Codec = "mp4v",
                *, rotation: int = 0, faststart: bool = False) -> Path:
    """Write BGR frames to an mp4. ``rotation`` (degrees counter-clockwise, h264/mp4v via PyAV only when
    non-zero) sets the container's display matrix, like a phone held sideways."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if codec == "mp4v" and not rotation and not faststart:
        return _write_opencv(path, frames, fps)
    return _write_pyav(path, frames, fps, "libx264" if codec == "h264" else "mpeg4", rotation, faststart)


def _write_opencv(path: Path, frames: Iterable[np.ndarray], fps: float) -> Path:
    import cv2

    writer = None
    try:
        for frame in frames:
            if writer is None:
                height, width = frame.shape[:2]
                writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
                if not writer.isOpened():
                    raise RuntimeError(f"{path}: OpenCV cannot write mp4v here")
            writer.write(frame)
    finally:
        if writer is not None:
            writer.release()
    return path


def _write_pyav(path: Path, frames: Iterable[np.ndarray], fps: float, encoder: str, rotation: int,
                faststart: bool) -> Path:
    from fractions import Fraction

    import av

    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as container:
        stream = None
        for frame in frames:
            if stream is None:
                stream = container.add_stream(encoder, rate=Fraction(fps).limit_denominator(1001))
                stream.height, stream.width = frame.shape[:2]
                stream.pix_fmt = "yuv420p"
                if encoder == "libx264":
                    stream.options = {"preset": "veryfast", "crf": "23"}
                if rotation:
                    stream.set_display_rotation(rotation)
            video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="bgr24")
            container.mux(stream.encode(video_frame))
        if stream is not None:
            container.mux(stream.encode(None))
    return path

