"""The deployed Embodied-R cascade for one video: key frames -> perception -> reasoner -> answer.

Each stage is the same code the batch stages run (``keyframes``, ``perceive``, ``build-prompts``,
``eval``), so an answer here is exactly what the pipeline would produce for that question. Work files
(key frames, perception cache) go to a folder so that asking a second question about the same video
reuses the key frames and every cached VLM request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embodied_r.core.io import atomic_write_json, read_json, read_jsonl
from embodied_r.core.records import KeyframeSet, QARecord

logger = logging.getLogger(__name__)


@dataclass
class CascadeAnswer:
    """The answer with its reasoning, the perception text it read, and seconds spent per stage."""

    question: str
    options: list[str] | None
    answer: str | float | None
    reasoning: str | None
    completion: str
    perception: list[dict[str, Any]]
    keyframe_timestamps: list[float]
    timings: dict[str, float] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    context: dict[str, Any] | None = None  # what the context policy did to the reasoner prompt, if anything

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def normalise_options(options: list[str] | None) -> list[str] | None:
    """``["left", "right"]`` -> ``["A. left", "B. right"]``; already-lettered options are kept.

    >>> normalise_options(["left", "B. right"])
    ['A. left', 'B. right']
    """
    if not options:
        return None
    out = []
    for index, text in enumerate(options):
        letter = chr(ord("A") + index)
        text = str(text).strip()
        if len(text) >= 2 and text[0].upper() == letter and text[1] in ".):":
            text = text[2:].strip()
        out.append(f"{letter}. {text}")
    return out


def answer_question(video: str | Path, question: str, options: list[str] | None, *, backend: Any,
                    reasoner: str, work_dir: str | Path, answer_type: str | None = None,
                    keyframe_strategy: str = "orb", max_new_tokens: int = 512,
                    reasoner_dtype: str = "auto", qa_meta: dict[str, Any] | None = None,
                    context: Any = None) -> CascadeAnswer:
    """Answer ``question`` about ``video`` with the perception ``backend`` and the ``reasoner`` model;
    ``context`` (a ContextPolicy) fits a prompt longer than the reasoner's context, or stops with why."""
    from embodied_r.core.parsing import extract_think, parse_answer
    from embodied_r.inference.generation import TransformersEngine
    from embodied_r.inference.models import load_reasoner
    from embodied_r.methods.embodied_r.keyframes.selection import extract_keyframes
    from embodied_r.methods.embodied_r.perception.cache import PerceptionCache
    from embodied_r.methods.embodied_r.perception.runner import keyframes_path, perceive
    from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

    video = Path(video).resolve()
    work = Path(work_dir)
    options = normalise_options(options)
    answer_type = answer_type or ("choice" if options else "open")
    timings: dict[str, float] = {}

    # 1. Key frames (reused when this video was seen before with the same strategy).
    started = time.perf_counter()
    kf_dir = work / f"keyframes-{keyframe_strategy}"
    kf_file = keyframes_path(kf_dir, video)
    if kf_file.is_file() and read_json(kf_file).get("video") == str(video):
        keyframes = KeyframeSet.from_dict(read_json(kf_file))
    else:
        keyframes = extract_keyframes(video, strategy=keyframe_strategy)  # type: ignore[arg-type]
        keyframes.video = str(video)
        atomic_write_json(kf_file, keyframes.to_dict())
    timings["keyframes_s"] = time.perf_counter() - started

    # 2. Perception of every key frame (cached per request on disk).
    started = time.perf_counter()
    # A stable id (hash() is salted per process) so reruns name the same perception record.
    digest = hashlib.sha1(json.dumps([str(video), question, options]).encode()).hexdigest()[:12]
    qa = QARecord(id=f"answer-{digest}", source="answer",
                  task="ad-hoc", video=str(video), question=question, options=options, answer="",
                  answer_type=answer_type, meta=dict(qa_meta or {}))
    out_file = work / "perception" / f"{qa.id}.jsonl"
    out_file.unlink(missing_ok=True)  # the request cache keeps finished VLM calls; the record is rebuilt
    summary = perceive([qa], video.parent, kf_dir, backend, PerceptionCache(work / "perception-cache"), out_file)
    records = read_jsonl(out_file) if out_file.exists() else []
    if not records:
        raise RuntimeError(f"perception failed: {'; '.join(summary.errors) or 'no record written'}")
    frames = records[0]["frames"]
    timings["perception_s"] = time.perf_counter() - started

    # 3. Reasoner.
    started = time.perf_counter()
    model, tokenizer = load_reasoner(reasoner, dtype=reasoner_dtype)
    timings["reasoner_load_s"] = time.perf_counter() - started
    started = time.perf_counter()
    messages = build_reasoner_messages(frames, question, options)
    engine = TransformersEngine(model, tokenizer)
    fitted = engine.fit([messages], max_new_tokens, context=context)[0]
    if fitted.skipped:
        rule = (context.rule if context is not None else "drop-frames")
        others = " or ".join(r for r in ("drop-frames", "truncate-left") if r != rule)
        raise RuntimeError(f"the reasoner prompt does not fit {reasoner}: {fitted.reason}; use --context-rule "
                           f"{others}, or a model with a longer context")
    completion = engine.generate_fitted([fitted], max_new_tokens, batch_size=1, context=context)[0]
    timings["reasoning_s"] = time.perf_counter() - started
    return CascadeAnswer(
        question=question, options=options, answer=parse_answer(completion, options, answer_type),
        reasoning=extract_think(completion), completion=completion, perception=frames,
        keyframe_timestamps=keyframes.timestamps, timings={k: round(v, 3) for k, v in timings.items()},
        models={"perception": f"{backend.name}/{backend.model}", "reasoner": reasoner}, context=fitted.record(),
    )
