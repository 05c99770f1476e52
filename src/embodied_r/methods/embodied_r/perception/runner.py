"""Turn questions + key frames into ``Perception`` records, through a backend and the on-disk cache.

For every question not yet in the output file: read its video's key frames, build one prompt per key
frame, and look each request up in the cache. Requests that miss are sent to the backend, grouped by
video so each video is decoded once; identical requests (same cache key) are sent once. Every answer
is cached the moment it arrives; a question's record is appended to the output as soon as all its
frames are known. A run killed at any moment therefore resumes with every finished request kept (in
the cache), every finished question kept (in the output, read back by ``qa_id``), and nothing done
twice. A question with a failed request is not written, so a rerun retries only what failed.

Each record's ``meta["detail"]`` is the backend's detail level (the oracle's ``words``, ``bearings``, ``map``
or ``relations``; None for a VLM). When a backend's frames carry ground-truth labels (the oracle's
``seen``: the labels shown in that key frame, and ``needs``: the labels the question needs), they are kept
in ``meta["seen"]`` (one list per frame) and ``meta["needs"]``; the frames themselves keep their five keys,
so the prompt text does not change. ``prompt_rows`` computes a question's span from them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.core.io import DataFileError, JsonlAppender, atomic_write_text, exclusive_output, iter_jsonl, read_json
from embodied_r.core.records import KeyframeSet, Perception, QARecord
from embodied_r.inference.requests import FrameRequest, FrameResult
from embodied_r.methods.embodied_r.perception.backends import PerceptionBackend
from embodied_r.methods.embodied_r.perception.cache import PerceptionCache, request_key, video_content_hash
from embodied_r.methods.embodied_r.perception.entities import extract_entities
from embodied_r.methods.embodied_r.perception.parsing import detect_leaks, parse_frame_answer, runaway_frames
from embodied_r.methods.embodied_r.perception.prompts import DEFAULT_PERCEPTION_PROMPT, build_frame_prompts

logger = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]  # (requests finished, requests to send)
MAX_REPORTED_ERRORS = 20


@dataclass
class PerceiveSummary:
    """Counts for the CLI summary. ``done``: records written now; ``already_done``: questions found in
    the output; ``cached``/``requested``: requests served from the cache / sent to the backend;
    ``failed``: questions not written; ``leaked``: written questions with an answer-leak flag."""

    questions: int = 0
    done: int = 0
    already_done: int = 0
    cached: int = 0
    requested: int = 0
    failed: int = 0
    leaked: int = 0
    leak_flags: int = 0
    parse_errors: int = 0
    runaway: int = 0  # written questions with a frame description that ran away (a VLM repeating itself)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def load_questions(qa_path: str | Path) -> list[QARecord]:
    """QARecords from a JSON Lines file; a bad line raises naming the file and line."""
    records = []
    for number, row in enumerate(iter_jsonl(qa_path), start=1):
        try:
            records.append(QARecord.from_dict(row))
        except (TypeError, ValueError) as exc:
            raise DataFileError(f"{qa_path}: record {number}: {exc}") from exc
    return records


def resolve_video(qa: QARecord, qa_dir: Path) -> Path:
    """``qa.video`` is relative to the QA file's folder unless absolute."""
    path = Path(qa.video)
    return path if path.is_absolute() else qa_dir / path


def keyframes_path(keyframes_dir: Path, video: Path) -> Path:
    return keyframes_dir / f"{video.stem}.keyframes.json"


def resize_to_max_side(image: np.ndarray, max_side: int | None) -> np.ndarray:
    """Downscale so the longer side is at most ``max_side`` (VLM image-token budgets); never upscale."""
    height, width = image.shape[:2]
    if not max_side or max(height, width) <= max_side:
        return image
    import cv2

    scale = max_side / max(height, width)
    return cv2.resize(image, (max(1, round(width * scale)), max(1, round(height * scale))),
                      interpolation=cv2.INTER_AREA)


@dataclass
class _Job:
    qa: QARecord
    video: Path
    keys: list[str]
    timestamps: list[float]
    outputs: list[str]
    entities: list[str]
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)
    failed: bool = False


class _Run:
    """State shared by the request feeder and ``on_result`` (which may run on another thread)."""

    def __init__(self, backend: PerceptionBackend, cache: PerceptionCache, appender: JsonlAppender,
                 prompt_version: str, summary: PerceiveSummary, progress: ProgressFn | None) -> None:
        self.backend, self.cache, self.appender = backend, cache, appender
        self.prompt_version, self.summary, self.progress = prompt_version, summary, progress
        self.waiters: dict[str, list[tuple[_Job, int]]] = {}
        self.lock = threading.Lock()
        self.finished = 0
        self.total = 0

    def fail(self, job: _Job, message: str) -> None:
        if not job.failed:
            job.failed = True
            self.summary.failed += 1
            if len(self.summary.errors) < MAX_REPORTED_ERRORS:
                self.summary.errors.append(f"{job.qa.id}: {message}")

    def deliver(self, key: str, entry: dict[str, Any]) -> None:
        for job, index in self.waiters.get(key, []):
            job.entries[index] = entry
            if len(job.entries) == len(job.keys) and not job.failed:
                self.write(job)

    def on_result(self, request: FrameRequest, result: FrameResult) -> None:
        entry = None
        if result.ok:
            entry = {"text": result.text, "frame": result.frame, "attempts": result.attempts,
                     "seconds": round(result.seconds, 3), "info": result.info, "backend": self.backend.name,
                     "model": self.backend.model, "prompt_version": self.prompt_version,
                     "created": time.time()}
            self.cache.put(request.key, entry)
        with self.lock:
            if entry is None:
                for job, _ in self.waiters.get(request.key, []):
                    self.fail(job, f"frame {request.frame_index}: {result.error}")
            else:
                self.deliver(request.key, entry)
            self.finished += 1
            if self.progress:
                self.progress(self.finished, self.total)

    def write(self, job: _Job) -> None:
        frames, parse_errors, leaks = [], [], []
        seen, needs = [], None  # ground-truth labels, from a backend whose frames carry them (the oracle)
        for index, timestamp in enumerate(job.timestamps):
            entry = job.entries[index]
            truth = entry.get("frame") or {}
            if isinstance(truth.get("seen"), list) and isinstance(truth.get("needs"), list):
                seen.append([str(label) for label in truth["seen"]])
                needs = [str(label) for label in truth["needs"]] if needs is None else needs
            if entry.get("frame"):
                frame = {k: entry["frame"].get(k) for k in ("action", "delta", "q_related", "raw")}
                frame["timestamp"] = float(timestamp)
                error = None
            else:
                parsed = parse_frame_answer(entry["text"], index, timestamp, job.outputs[index])
                frame, error = parsed.frame, parsed.error
            if error:
                parse_errors.append({"frame": index, "error": error})
            text = " ".join(str(frame.get(k) or "") for k in ("delta", "q_related"))
            leaks += [{"frame": index, **leak} for leak in detect_leaks(text, job.qa.options)]
            frames.append({k: frame.get(k) for k in ("timestamp", "action", "delta", "q_related", "raw")})
        runaway = runaway_frames(frames)
        if runaway:
            logger.warning("%s: frame %d's description ran away (%s); the reasoner's context policy will drop or "
                           "cut it", job.qa.id, runaway[0]["frame"], runaway[0]["reason"])
        meta = {"parse_errors": parse_errors, "leaks": leaks, "leaked": bool(leaks), "runaway": runaway,
                "entities": job.entities, "settings": self.backend.settings(), "cache_keys": job.keys,
                # A backend that writes at a stated detail level (the oracle) names it in a `detail` attribute;
                # a VLM writes what it writes, so its level is None (unknown).
                "detail": getattr(self.backend, "detail", None)}
        if needs is not None and len(seen) == len(frames):
            # Only when every frame carries them: cache entries written before the oracle reported labels
            # do not, and a partial list would give a wrong span (prompt_rows.question_span).
            meta["seen"], meta["needs"] = seen, needs
        record = Perception(
            qa_id=job.qa.id, video=job.qa.video, backend=self.backend.name, model=self.backend.model,
            prompt_version=self.prompt_version, frames=frames, meta=meta,
        )
        self.appender.append(record.to_dict())
        self.summary.done += 1
        self.summary.parse_errors += len(parse_errors)
        self.summary.leak_flags += len(leaks)
        self.summary.leaked += bool(leaks)
        self.summary.runaway += bool(runaway)


def perceive(questions: Sequence[QARecord], qa_dir: str | Path, keyframes_dir: str | Path,
             backend: PerceptionBackend, cache: PerceptionCache, out_path: str | Path,
             prompt_version: str = DEFAULT_PERCEPTION_PROMPT, max_side: int | None = 768,
             progress: ProgressFn | None = None) -> PerceiveSummary:
    """Write one ``Perception`` record per question to ``out_path`` (JSON Lines, resumable).

    With ``cache.force`` the output is started afresh and every request is recomputed. A second process
    writing the same ``out_path`` at once is refused (``OutputLockedError``)."""
    with exclusive_output(out_path):
        return _perceive(questions, qa_dir, keyframes_dir, backend, cache, out_path, prompt_version, max_side,
                         progress)


def _perceive(questions: Sequence[QARecord], qa_dir: str | Path, keyframes_dir: str | Path,
              backend: PerceptionBackend, cache: PerceptionCache, out_path: str | Path, prompt_version: str,
              max_side: int | None, progress: ProgressFn | None) -> PerceiveSummary:
    started = time.perf_counter()
    qa_dir, keyframes_dir = Path(qa_dir), Path(keyframes_dir)
    if cache.force and Path(out_path).exists():
        atomic_write_text(out_path, "")
    appender = JsonlAppender(out_path)
    appender.path.touch()  # an existing (possibly empty) output says the stage ran
    done_ids = appender.done_keys("qa_id")
    summary = PerceiveSummary(questions=len(questions))
    run = _Run(backend, cache, appender, prompt_version, summary, progress)
    requests: dict[str, FrameRequest] = {}
    keyframe_sets: dict[Path, KeyframeSet | str] = {}
    extra_settings = {"max_side": max_side} if backend.needs_images else {}

    for qa in questions:
        if qa.id in done_ids:
            summary.already_done += 1
            continue
        done_ids.add(qa.id)  # a duplicate id in the QA file is perceived once
        video = resolve_video(qa, qa_dir)
        job = _Job(qa, video, [], [], [], extract_entities(qa.question, qa.meta))
        kf_file = keyframes_path(keyframes_dir, video)
        if kf_file not in keyframe_sets:
            try:
                keyframe_sets[kf_file] = KeyframeSet.from_dict(read_json(kf_file))
            except (DataFileError, ValueError) as exc:
                keyframe_sets[kf_file] = f"no usable key frames ({exc}); run `embodied-r keyframes` first"
        kfs = keyframe_sets[kf_file]
        if isinstance(kfs, str) or not kfs.frames:
            run.fail(job, kfs if isinstance(kfs, str) else f"{kf_file}: no key frames listed")
            continue
        if video.is_file():
            video_hash = video_content_hash(video)
        elif backend.needs_images:
            run.fail(job, f"{video}: video file not found")
            continue
        else:  # the oracle reads poses, not pixels; key on the video name instead
            video_hash = f"name:{qa.video}"
        job.timestamps = kfs.timestamps
        prompts = build_frame_prompts(qa.question, qa.options, job.timestamps, prompt_version, job.entities)
        extra = dict(extra_settings)
        if backend.per_question:
            extra.update(qa_id=qa.id, question=qa.question, options=qa.options)
        for prompt in prompts:
            key = request_key(video_hash=video_hash, image_timestamps=prompt.image_timestamps,
                              prompt_version=prompt_version, prompt_text=prompt.text, entities=job.entities,
                              backend=backend.name, model=backend.model, settings=backend.settings(), extra=extra)
            job.keys.append(key)
            job.outputs.append(prompt.output)
            run.waiters.setdefault(key, []).append((job, prompt.frame_index))
            if key not in requests:
                requests[key] = FrameRequest(key, qa.id, prompt.frame_index, video, prompt.image_timestamps,
                                             prompt.text, prompt.output,
                                             context={"qa": qa, "timestamps": job.timestamps})

    pending: list[FrameRequest] = []
    for key, request in requests.items():
        entry = cache.get(key)
        if entry is None:
            pending.append(request)
        else:
            summary.cached += 1
            run.deliver(key, entry)
    summary.requested = run.total = len(pending)
    if pending:
        feed = _with_images(pending, max_side, run) if backend.needs_images else iter(pending)
        backend.run(feed, run.on_result)
    summary.seconds = time.perf_counter() - started
    return summary


def _with_images(pending: list[FrameRequest], max_side: int | None, run: _Run) -> Iterator[FrameRequest]:
    """Yield requests with their images attached, decoding each video once for all its requests."""
    from embodied_r.methods.embodied_r.keyframes.decode import read_frames_at

    by_video: dict[Path, list[FrameRequest]] = {}
    for request in pending:
        by_video.setdefault(request.video, []).append(request)
    for video, group in by_video.items():
        wanted = sorted({t for r in group for t in r.image_timestamps})
        try:
            images = dict(zip(wanted, (resize_to_max_side(f, max_side) for f in read_frames_at(video, wanted))))
        except (DataFileError, ValueError, OSError) as exc:
            for request in group:
                run.on_result(request, FrameResult(error=f"cannot read frames of {video}: {exc}"))
            continue
        for request in group:
            request.images = [images[t] for t in request.image_timestamps]
            yield request  # the backend drops request.images once it has used them
