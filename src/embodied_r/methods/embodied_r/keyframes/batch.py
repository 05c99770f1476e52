"""Key frames for many videos: one JSON per video, isolated failures, resumable, worker processes.

Output layout in ``out_dir``: ``<stem>.keyframes.json`` (a ``KeyframeSet``), optionally
``<stem>.keyframes/NNN_<seconds>s.jpg``, and ``failures.jsonl`` (one line per video that failed in the
latest run). A video whose JSON exists with the same settings is skipped, so a rerun resumes.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, JsonlAppender, atomic_write_json, read_json, write_jsonl

logger = logging.getLogger(__name__)

VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".flv", ".3gp")
FAILURES_FILE = "failures.jsonl"


@dataclass(frozen=True)
class KeyframeJob:
    """The settings of one batch run (they are compared with a finished JSON to decide resuming)."""

    strategy: str = "orb"
    sample_fps: float = 1.0
    threshold: float = 0.5
    min_frames: int = 4
    max_frames: int = 32
    save_images: bool = False
    jpeg_quality: int = 90

    def matches(self, meta: dict[str, Any], sample_fps: float) -> bool:
        return (meta.get("strategy") == self.strategy and sample_fps == self.sample_fps
                and meta.get("threshold") == self.threshold and meta.get("min_frames") == self.min_frames
                and meta.get("max_frames") == self.max_frames)


def output_path(out_dir: Path, video: Path) -> Path:
    return out_dir / f"{video.stem}.keyframes.json"


def expand_inputs(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given, folders expanded to the video files directly inside them (sorted)."""
    videos: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            videos.extend(sorted(p for p in path.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES))
        else:
            videos.append(path)
    return videos


def is_done(out_dir: Path, video: Path, job: KeyframeJob) -> bool:
    target = output_path(out_dir, video)
    if not target.is_file():
        return False
    try:
        data = read_json(target)
    except DataFileError:
        return False  # a damaged result is recomputed
    if not isinstance(data, dict) or not job.matches(data.get("meta", {}), data.get("sample_fps")):
        return False
    if not job.save_images:
        return True
    images = data["meta"].get("images") or []
    return bool(images) and all((out_dir / name).is_file() for name in images)


def process_video(video: str, out_dir: str, job: KeyframeJob) -> dict[str, Any]:
    """Extract, write the JSON (and images) atomically; return a status row. Never raises for a bad
    video: the error becomes the row, so one video cannot stop a batch."""
    from embodied_r.methods.embodied_r.keyframes.selection import extract_keyframes

    try:
        keyframes = extract_keyframes(video, job.strategy, job.sample_fps,  # type: ignore[arg-type]
                                      job.threshold, job.min_frames, job.max_frames)
        if job.save_images:  # images first: the JSON, written last, is what marks the video done
            keyframes.meta["images"] = _save_images(Path(video), Path(out_dir), keyframes.timestamps,
                                                    job.jpeg_quality)
        atomic_write_json(output_path(Path(out_dir), Path(video)), keyframes.to_dict())
    except (DataFileError, ValueError, OSError, RuntimeError) as exc:
        return {"video": video, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 - an unexpected bug: keep the traceback in the record
        return {"video": video, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()}
    return {"video": video, "ok": True, "frames": len(keyframes.frames),
            "warnings": keyframes.meta.get("warnings", []), "seconds": keyframes.meta.get("seconds")}


def _save_images(video: Path, out_dir: Path, timestamps: list[float], quality: int) -> list[str]:
    """Write the key frames as JPEG; returns their paths relative to ``out_dir``."""
    import cv2

    from embodied_r.methods.embodied_r.keyframes.decode import read_frames_at

    folder = out_dir / f"{video.stem}.keyframes"
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for number, (timestamp, image) in enumerate(zip(timestamps, read_frames_at(video, timestamps))):
        ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
        if not ok:
            raise RuntimeError(f"{video}: JPEG encoding failed for the frame at {timestamp:.3f} s")
        target = folder / f"{number:03d}_{timestamp:.3f}s.jpg"
        temporary = target.with_suffix(".jpg.tmp")
        temporary.write_bytes(data.tobytes())
        temporary.replace(target)
        names.append(f"{folder.name}/{target.name}")
    return names


def uses_workers(workers: int, videos: int) -> bool:
    """Whether :func:`run_batch` starts worker processes for this many videos."""
    return workers > 1 and videos > 1


def _configure_worker() -> None:
    # One process per core already: OpenCV's own threads would only oversubscribe the cores (FFmpeg
    # decodes on one thread by default). The extractor keeps its decoding thread and one ORB thread,
    # which pick up the idle core when the other worker has run out of videos.
    import cv2

    from embodied_r.methods.embodied_r.keyframes import selection

    cv2.setNumThreads(1)
    selection.FEATURE_THREADS = 1


def worker_context() -> multiprocessing.context.BaseContext:
    """How to start the worker processes: ``fork`` where it is safe, ``spawn`` otherwise.

    A spawned worker starts an interpreter and imports PyAV, numpy, OpenCV and this package (0.35 s wall,
    0.55 s CPU here; a four-video folder takes ~2.5 s with two workers). A forked one inherits all but
    OpenCV, which it imports after the fork. Forking is safe only from a process that runs no other
    Python thread (a progress bar's refresh thread may hold the stdout lock at the moment of the fork)
    and has not loaded OpenCV, whose thread pool a child would inherit half-initialised. Linux only:
    macOS system libraries are not fork-safe.
    """
    if sys.platform.startswith("linux") and threading.active_count() == 1 and "cv2" not in sys.modules:
        import av  # noqa: F401 - loaded once here, inherited by the forked workers

        from embodied_r.methods.embodied_r.keyframes import selection  # noqa: F401
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def run_batch(videos: Sequence[Path], out_dir: Path, job: KeyframeJob, workers: int = 1,
              on_result: Callable[[dict[str, Any]], None] | None = None, on_tick: Callable[[], None] | None = None,
              tick_seconds: float = 0.5) -> list[dict[str, Any]]:
    """Process ``videos`` (already filtered to those not done); failures go to ``failures.jsonl``
    as they happen and the file is rewritten at the end to list only this run's failures.

    With worker processes, ``on_tick`` is called at least every ``tick_seconds`` while they work (a
    progress display can redraw from this thread instead of from its own, which would stop the
    workers from being forked)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    failures_path = out_dir / FAILURES_FILE
    failures_path.unlink(missing_ok=True)
    appender = JsonlAppender(failures_path)
    results: list[dict[str, Any]] = []

    def record(row: dict[str, Any]) -> None:
        results.append(row)
        if not row["ok"]:
            appender.append({"video": row["video"], "error": row["error"], "settings": asdict(job)})
            logger.warning("%s failed: %s", row["video"], row["error"])
        if on_result is not None:
            on_result(row)

    if not uses_workers(workers, len(videos)):
        for video in videos:
            record(process_video(str(video), str(out_dir), job))
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=worker_context(),
                                 initializer=_configure_worker) as pool:
            # Largest files first (size: a free proxy for the work), so that a long video does not
            # start last and run alone at the end.
            ordered = sorted(videos, key=_size_or_zero, reverse=True)
            pending = {pool.submit(process_video, str(v), str(out_dir), job) for v in ordered}
            while pending:
                finished, pending = wait(pending, timeout=tick_seconds, return_when=FIRST_COMPLETED)
                for future in finished:
                    record(future.result())
                if on_tick is not None:
                    on_tick()
    failed = [r for r in results if not r["ok"]]
    if failed:
        write_jsonl(failures_path, [{"video": r["video"], "error": r["error"], "settings": asdict(job)}
                                    for r in failed])
    else:
        failures_path.unlink(missing_ok=True)
    return results


def _size_or_zero(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # a missing file fails in its worker, with a clear message
