"""OpenCV fallback decoder (used when PyAV is missing, or with ``backend="opencv"``).

``grab()`` decodes without converting, and only kept frames are ``retrieve()``d. OpenCV cannot go back
one frame, so a frame is kept when it is the first one past ``target - half a frame interval`` — the
nearest frame for constant-rate videos (the PyAV path picks the exact nearest frame by timestamp).
OpenCV applies the display rotation itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.methods.embodied_r.keyframes.frames import Color, DecodeReport, VideoError, VideoInfo


def _capture(path: Path) -> Any:
    import cv2

    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        raise VideoError(f"{path}: OpenCV cannot open it as a video (not a video, or corrupt)")
    return capture


def probe(path: Path) -> VideoInfo:
    import cv2

    capture = _capture(path)
    try:
        fps = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        # OpenCV reports the clockwise angle; VideoInfo uses counter-clockwise like PyAV.
        rotation = int(round(-capture.get(cv2.CAP_PROP_ORIENTATION_META) / 90.0)) * 90 % 360
        codec_id = int(capture.get(cv2.CAP_PROP_FOURCC))
        codec = "".join(chr((codec_id >> (8 * i)) & 0xFF) for i in range(4)).strip("\x00 ")
    finally:
        capture.release()
    if count <= 0 and fps <= 0:
        raise VideoError(f"{path}: OpenCV reports no frames and no frame rate: not a readable video")
    duration = count / fps if fps > 0 else 0.0
    return VideoInfo(str(path), fps, count, duration, width, height, rotation, codec, "opencv")


def frames(
    path: Path, targets: Iterable[float], include_last: bool, color: Color, report: DecodeReport
) -> Iterator[tuple[float, np.ndarray]]:
    import cv2

    capture = _capture(path)
    try:
        fps = float(capture.get(cv2.CAP_PROP_FPS) or 25.0)
        half = 0.5 / fps
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        target_iter = iter(targets)
        target = next(target_iter, None)
        first: float | None = None
        index = -1
        last_time: float | None = None
        last_yielded: float | None = None
        while capture.grab():
            index += 1
            report.frames_decoded += 1
            millis = capture.get(cv2.CAP_PROP_POS_MSEC)
            raw_time = millis / 1000.0 if millis > 0 or index == 0 else index / fps
            first = raw_time if first is None else first
            last_time = raw_time - first
            take = False
            while target is not None and last_time > target - half:
                take = True
                target = next(target_iter, None)
            if include_last and index == count - 1:
                take = True  # OpenCV cannot go back once grab() fails, so catch the last frame here
            if take:
                last_yielded = last_time
                yield last_time, _retrieve(capture, color, path)
            if target is None and not include_last:
                return
        if last_time is None:
            raise VideoError(f"{path}: no frame could be decoded")
        if include_last and last_time != last_yielded:
            report.warn(f"{path}: OpenCV's frame count ({count}) is wrong; the last frame was not kept")
    finally:
        capture.release()


def _retrieve(capture: Any, color: Color, path: Path) -> np.ndarray:
    import cv2

    ok, image = capture.retrieve()
    if not ok or image is None:
        raise VideoError(f"{path}: OpenCV could not convert a decoded frame")
    return cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if color == "gray" else image
