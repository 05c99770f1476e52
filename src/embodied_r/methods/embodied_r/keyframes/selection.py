"""Key-frame selection: the Embodied-R overlap rule (default) and a uniform baseline.

Embodied-R (arXiv 2504.12680, §3.1; official ``extract_keyframes``) samples the video at 1 fps and
walks the samples greedily: each frame is compared with the *last key frame* through ORB features,
brute-force Hamming matching with cross-check and a RANSAC homography (current -> key frame); the
frame becomes the next key frame when the warped overlap drops below 0.5, or when no homography can be
fitted (10 matches or fewer). The first and last samples are always kept, and the count is clamped to
[4, 32] by the official even resampling.

Differences from the official code, each making it faster or sturdier, not different in spirit:
* the overlap is measured on polygons (``overlap.py``), and degenerate homographies count as a new
  view instead of producing a meaningless rasterised area;
* the key frame's features are kept, not recomputed for every pair (half the ORB work);
* frames are decoded by timestamp, only as far as needed, without re-encoding a 1-fps mp4;
* two featureless frames (a blank wall) are compared by their pixels instead of always counting as
  a new view, so a static blank shot does not produce a key frame per second.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from embodied_r.core.records import KeyframeSet
from embodied_r.methods.embodied_r.keyframes.decode import Backend, DecodeReport, VideoError, probe, sample_frames
from embodied_r.methods.embodied_r.keyframes.overlap import overlap_ratio
from embodied_r.methods.embodied_r.keyframes.pipeline import mapped_ahead, prefetched
from embodied_r.methods.embodied_r.keyframes.sampling import constrained_sampling, evenly_spaced

logger = logging.getLogger(__name__)

Strategy = Literal["orb", "uniform"]
STRATEGIES: tuple[str, ...] = ("orb", "uniform")
# Threads computing ORB features ahead of the matching (``extract_keyframes`` default; batch workers,
# one process per core, use 1: see video.batch).
FEATURE_THREADS = 2


@dataclass(frozen=True)
class OrbSettings:
    """The numbers of the ORB overlap test (defaults: the official Embodied-R code / OpenCV's ORB)."""

    nfeatures: int = 500
    min_matches: int = 10  # a homography is fitted only with MORE than this many matches
    ransac_threshold: float = 5.0  # reprojection error in pixels
    max_area_ratio: float = 16.0  # a warped outline growing or shrinking more than this is rejected
    static_diff: float = 6.0  # mean abs gray difference (0-255) under which featureless frames match


@dataclass
class _View:
    """Everything a later frame is compared against: ORB keypoints and the gray image."""

    points: np.ndarray  # (N, 2) float32 keypoint coordinates
    descriptors: np.ndarray | None
    gray: np.ndarray


def mutual_hamming_matches(query: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force Hamming matching with cross-check: the pairs that are each other's nearest
    neighbour (first index on ties), sorted by query index. Same pairs as OpenCV's
    ``BFMatcher(NORM_HAMMING, crossCheck=True).match``, about 1.5x faster here because numpy uses the
    CPU's popcount on 64-bit words.

    >>> a = np.zeros((2, 8), dtype=np.uint8); a[0, 0] = 0b1111
    >>> b = np.zeros((2, 8), dtype=np.uint8); b[1, 0] = 0b0111
    >>> mutual_hamming_matches(a, b)
    (array([0, 1]), array([1, 0]))
    """
    if query.shape[1] % 8:
        raise ValueError(f"descriptor length {query.shape[1]} bytes is not a multiple of 8")
    q = np.ascontiguousarray(query).view(np.uint64)
    t = np.ascontiguousarray(train).view(np.uint64)
    distance = np.zeros((len(q), len(t)), dtype=np.uint16)
    for word in range(q.shape[1]):
        distance += np.bitwise_count(q[:, word, None] ^ t[None, :, word])
    best_train = distance.argmin(axis=1)
    best_query = distance.argmin(axis=0)
    mutual = np.nonzero(best_query[best_train] == np.arange(len(q)))[0]
    return mutual, best_train[mutual]


class OverlapTracker:
    """Computes the overlap of a frame with a reference view (the last key frame)."""

    def __init__(self, settings: OrbSettings = OrbSettings()) -> None:
        import cv2

        self.settings = settings
        self._local = threading.local()  # one ORB detector per thread: views may be computed in parallel
        self._matcher = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)

    def view(self, gray: np.ndarray) -> _View:
        """ORB keypoints and descriptors of one gray frame (safe to call from several threads)."""
        import cv2

        orb = getattr(self._local, "orb", None)
        if orb is None:
            orb = self._local.orb = cv2.ORB_create(nfeatures=self.settings.nfeatures)
        keypoints, descriptors = orb.detectAndCompute(gray, None)
        points = cv2.KeyPoint_convert(keypoints).reshape(-1, 2) if keypoints else np.zeros((0, 2), np.float32)
        return _View(points, descriptors, gray)

    def overlap(self, reference: _View, current: _View, width: int, height: int) -> float | None:
        """Overlap in [0, 1] of ``current`` with ``reference``; None when it cannot be measured
        (too few matches, no homography, or an implausible one), which the caller treats as a new view."""
        import cv2

        settings = self.settings
        too_few = settings.min_matches + 1
        if reference.descriptors is None or current.descriptors is None or min(
            len(reference.points), len(current.points)
        ) < too_few:
            if len(reference.points) < too_few and len(current.points) < too_few:
                return self._featureless_overlap(reference, current)
            return None
        ref_idx, cur_idx = self._match(reference.descriptors, current.descriptors)
        if len(ref_idx) <= settings.min_matches:
            return None
        homography, _ = cv2.findHomography(
            current.points[cur_idx], reference.points[ref_idx], cv2.RANSAC, settings.ransac_threshold
        )
        if homography is None:
            return None
        return overlap_ratio(homography, width, height, settings.max_area_ratio)

    def _match(self, query: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if hasattr(np, "bitwise_count"):  # numpy >= 2.0
            return mutual_hamming_matches(query, train)
        matches = self._matcher.match(query, train)
        return (np.array([m.queryIdx for m in matches], dtype=np.int64),
                np.array([m.trainIdx for m in matches], dtype=np.int64))

    def _featureless_overlap(self, reference: _View, current: _View) -> float | None:
        # Blank walls give ORB nothing to match; identical-looking blank frames are the same view.
        import cv2

        if reference.gray.shape != current.gray.shape:
            return None
        small = [cv2.resize(v.gray, (32, 32), interpolation=cv2.INTER_AREA) for v in (reference, current)]
        diff = float(np.mean(np.abs(small[0].astype(np.int16) - small[1])))
        return 1.0 if diff < self.settings.static_diff else None


# ---------------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------------


def select_keyframes(frames: Iterable[tuple[float, np.ndarray]], threshold: float = 0.5,
                     settings: OrbSettings = OrbSettings(),
                     feature_threads: int = 0) -> tuple[list[float], list[tuple[int, float | None]]]:
    """Greedy overlap selection over gray frames. Returns all sampled timestamps and the key frames
    as ``(sample index, overlap with the previous key frame)``; the first and last are always kept.

    ORB features do not depend on the selection, so ``feature_threads`` threads compute them a few
    frames ahead while this thread matches (0: everything on this thread; same result either way)."""
    tracker = OverlapTracker(settings)
    times: list[float] = []
    keys: list[tuple[int, float | None]] = []
    reference: _View | None = None
    last_overlap: float | None = None

    def with_view(frame: tuple[float, np.ndarray]) -> tuple[float, _View]:
        return frame[0], tracker.view(frame[1])

    views = mapped_ahead(with_view, frames, feature_threads, depth=2 * feature_threads)
    for index, (timestamp, current) in enumerate(views):
        times.append(timestamp)
        if reference is None:
            keys.append((0, None))
            reference = current
            continue
        height, width = current.gray.shape[:2]
        last_overlap = tracker.overlap(reference, current, width, height)
        if last_overlap is None or last_overlap < threshold:
            keys.append((index, last_overlap))
            reference = current  # the new key frame's features are reused for every later frame
    if len(times) > 1 and keys[-1][0] != len(times) - 1:
        keys.append((len(times) - 1, last_overlap))
    return times, keys


def clamp_count(
    times: list[float], keys: list[tuple[int, float | None]], min_frames: int, max_frames: int
) -> tuple[list[tuple[int, float | None]], str | None]:
    """Official clamping: too few key frames -> ``min_frames`` spread over all samples (overlap
    unknown); too many -> ``max_frames`` spread over the key frames."""
    if len(keys) < min_frames and len(times) > len(keys):
        return [(i, None) for i in constrained_sampling(list(range(len(times))), min_frames)], "min"
    if len(keys) > max_frames:
        return constrained_sampling(keys, max_frames), "max"
    return keys, None


def extract_keyframes(path: str | Path, strategy: Strategy = "orb", sample_fps: float = 1.0, threshold: float = 0.5,
                      min_frames: int = 4, max_frames: int = 32, *, settings: OrbSettings = OrbSettings(),
                      backend: Backend = "auto", prefetch: int = 4,
                      feature_threads: int | None = None) -> KeyframeSet:
    """Key frames of one video as a :class:`KeyframeSet` (timestamps in seconds from the first frame).

    Raises :class:`~embodied_r.methods.embodied_r.keyframes.decode.VideoError` for a missing/unreadable
    video; a truncated or partly corrupt one gives the key frames of what could be decoded, with warnings in ``meta``.
    ``prefetch`` frames are decoded ahead in a thread (0: no thread) and ``feature_threads`` threads
    compute ORB features while the current frame is matched (default :data:`FEATURE_THREADS`); the
    key frames are the same either way.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if not 1 <= min_frames <= max_frames:
        raise ValueError(f"need 1 <= min_frames <= max_frames, got {min_frames} and {max_frames}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold is an overlap ratio in [0, 1], got {threshold}")
    started = time.perf_counter()
    info = probe(path, backend=backend)
    report = DecodeReport()
    gray = sample_frames(path, sample_fps, color="gray", backend=backend, report=report)
    if strategy == "orb":
        threads = FEATURE_THREADS if feature_threads is None else feature_threads
        times, keys = select_keyframes(prefetched(gray, prefetch), threshold, settings, threads)
    else:
        times = [timestamp for timestamp, _ in gray]
        keys = [(i, None) for i in range(len(times))]
    if not times:
        raise VideoError(f"{path}: no frame could be decoded")
    greedy_count = len(keys)
    if strategy == "uniform":
        keys, clamped = evenly_spaced(keys, max_frames), None
    else:
        keys, clamped = clamp_count(times, keys, min_frames, max_frames)
    if len(keys) < min_frames:
        report.warn(f"{path}: only {len(times)} sampled frame(s) (video of {info.duration:.2f} s); "
                    f"fewer than min_frames={min_frames} key frames")
    frames = [{"index": i, "timestamp": round(times[i], 6), "overlap": _round(ov)} for i, ov in keys]
    meta: dict[str, Any] = {
        "strategy": strategy,
        "threshold": threshold,
        "min_frames": min_frames,
        "max_frames": max_frames,
        "orb": asdict(settings) if strategy == "orb" else None,
        "sampled_frames": len(times),
        "selected_before_clamp": greedy_count,
        "clamped": clamped,
        "overlap_reference": "previous key frame of the greedy pass, before clamping",
        "fps": info.fps,
        "duration": info.duration,
        "rotation": info.rotation,
        "codec": info.codec,
        "decoder": info.backend,
        "warnings": report.warnings,
        "seconds": round(time.perf_counter() - started, 4),
    }
    return KeyframeSet(video=str(path), sample_fps=sample_fps, frames=frames, width=info.width,
                       height=info.height, meta=meta)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)
