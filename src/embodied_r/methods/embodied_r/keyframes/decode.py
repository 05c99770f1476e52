"""Open a video, read its metadata, and decode only the frames that are asked for, by timestamp.

PyAV is the main backend (OpenCV is the fallback, see ``_opencv_backend``). The PyAV path reads the
video twice: a cheap demux pass (packets only, no decoding) learns every frame's timestamp and which
frames start a group of pictures (GOP); the frames to keep are chosen from those timestamps; the
second pass decodes only what those frames depend on:

* each kept frame needs its GOP from the key frame up to its own packet in decode order (a frame of a
  closed GOP only references frames decoded before it); GOPs with nothing to keep are skipped, and so
  is the rest of a GOP after its last kept frame;
* with frame reordering (B-frames), FFmpeg's ``skip_frame`` also drops the non-reference frames that
  are not kept (nothing depends on those). Open GOPs, whose leading frames reference the previous
  GOP, are decoded whole.

Only the kept frames are converted to BGR or gray; the rest stay in the decoder's own format.
Timestamps are seconds from the first presented frame; frames come out upright (the container's
display rotation is applied), and width/height in :class:`VideoInfo` are the upright size.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from embodied_r.methods.embodied_r.keyframes.frames import Color, DecodeReport, VideoError, VideoInfo
from embodied_r.methods.embodied_r.keyframes.sampling import uniform_targets

logger = logging.getLogger(__name__)

Backend = Literal["auto", "pyav", "opencv"]


# ---------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------


def probe(path: str | Path, backend: Backend = "auto") -> VideoInfo:
    """Metadata of the first video stream of ``path``; raises :class:`VideoError` if it is not one."""
    path = _check_file(path)
    if _use_opencv(backend):
        from embodied_r.methods.embodied_r.keyframes import _opencv_backend

        return _opencv_backend.probe(path)
    from embodied_r.methods.embodied_r.keyframes import _pyav_backend

    return _pyav_backend.probe(path)


def sample_frames(path: str | Path, sample_fps: float = 1.0, *, include_last: bool = True, color: Color = "bgr",
                  backend: Backend = "auto",
                  report: DecodeReport | None = None) -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(timestamp, frame)`` at ``sample_fps``: for each target time ``k / sample_fps`` the
    nearest frame, plus the last frame when ``include_last`` (as Embodied-R's sampler does).

    Frames are HxWx3 BGR (``color="bgr"``) or HxW gray uint8. A truncated or partly corrupt file
    yields what can be decoded and records warnings in ``report``.
    """
    if not sample_fps > 0:
        raise ValueError(f"sample_fps must be > 0, got {sample_fps}")
    return _frames(path, uniform_targets(sample_fps), include_last, color, backend, report)


def read_frames_at(path: str | Path, timestamps: Sequence[float], *, color: Color = "bgr",
                   tolerance: float | None = None, backend: Backend = "auto") -> list[np.ndarray]:
    """The frames nearest to ``timestamps`` (seconds from the first frame, as ``sample_frames``
    reports them), in the order asked. Raises :class:`VideoError` when no frame lies within
    ``tolerance`` seconds of a requested time (default: two frame intervals)."""
    if not timestamps:
        return []
    wanted = sorted(set(float(t) for t in timestamps))
    got = list(_frames(path, iter(wanted), False, color, backend, None))
    by_target: dict[float, tuple[float, np.ndarray]] = {}
    times = [t for t, _ in got]
    for target in wanted:
        if not times:
            break
        nearest = min(range(len(times)), key=lambda i: (abs(times[i] - target), times[i]))
        by_target[target] = got[nearest]
    if tolerance is None:
        info = probe(path, backend)
        tolerance = 2.0 / info.fps if info.fps > 0 else 0.1
    frames = []
    for target in timestamps:
        hit = by_target.get(float(target))
        if hit is None or abs(hit[0] - float(target)) > tolerance + 1e-9:
            raise VideoError(
                f"{path}: no frame within {tolerance:.3f} s of timestamp {float(target):.3f} s "
                "(is the timestamp from another video, or is the file truncated?)"
            )
        frames.append(hit[1])
    return frames


# ---------------------------------------------------------------------------------------------------
# Opening and probing (PyAV)
# ---------------------------------------------------------------------------------------------------

def _check_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise VideoError(f"{path}: file not found")
    if not path.is_file():
        raise VideoError(f"{path}: not a file (give a video file, not a folder)")
    if path.stat().st_size == 0:
        raise VideoError(f"{path}: the file is empty (0 bytes); re-copy or re-record it")
    return path


def _use_opencv(backend: Backend) -> bool:
    if backend == "opencv":
        return True
    if backend not in ("auto", "pyav"):
        raise ValueError(f"backend must be 'auto', 'pyav' or 'opencv', got {backend!r}")
    try:
        import av  # noqa: F401
    except ImportError:
        if backend == "pyav":
            raise VideoError("PyAV is not installed: pip install 'embodied-r[video]'") from None
        logger.info("PyAV not installed; decoding with OpenCV")
        return True
    return False

# ---------------------------------------------------------------------------------------------------
# Frame selection and selective decoding (PyAV)
# ---------------------------------------------------------------------------------------------------


def _frames(path: str | Path, targets: Iterable[float], include_last: bool, color: Color, backend: Backend,
            report: DecodeReport | None) -> Iterator[tuple[float, np.ndarray]]:
    path = _check_file(path)
    report = report if report is not None else DecodeReport()
    if _use_opencv(backend):
        from embodied_r.methods.embodied_r.keyframes import _opencv_backend

        yield from _opencv_backend.frames(path, targets, include_last, color, report)
        return
    from embodied_r.methods.embodied_r.keyframes import _pyav_backend

    yield from _pyav_backend.frames(path, targets, include_last, color, report)
