"""VLM-only baseline: the perception VLM answers each question itself from the question's key frames.

This is the "w/o" row of Embodied-R's collaboration ablation (Table 3): same VLM, same key frames, no
reasoner. It goes through the perception backend's own ``run(requests, on_result)`` contract, one
request per question carrying all its key frames, so any VLM backend (OpenAI-compatible server or local
transformers) serves it. Answers are appended to ``baselines/vlm_only.jsonl`` as they arrive
(resumable); questions whose video, key frames or request failed are reported, not scored as wrong.
The backend and each question's key frames are its method's (``Method.perception_backend`` and
``keyframe_images``), so this module imports no method.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, JsonlAppender
from embodied_r.core.records import PromptRow

ANSWER_INSTRUCTION = "Answer with the option's letter inside <answer> </answer>."
NUMBER_INSTRUCTION = "Answer with a single number inside <answer> </answer>."
FRAMES_PREAMBLE = "These are key frames of an egocentric video, oldest first."


def vlm_question_text(row: PromptRow) -> str:
    """Frames preamble, the question with its choices (as the reasoner sees them), and the instruction."""
    from embodied_r.judge.judges import question_for_judge

    instruction = ANSWER_INSTRUCTION if row.answer_type == "choice" else NUMBER_INSTRUCTION
    return f"{FRAMES_PREAMBLE}\n{question_for_judge(row.prompt, row.options)}\n{instruction}"


def run_vlm_only(rows: Sequence[PromptRow], backend: Any, keyframes_dir: str | Path, out_path: str | Path,
                 max_side: int | None = 768) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(scored predictions for ``rows``, exclusions with reasons). Each row's key frames are read by its method
    (``Method.keyframe_images``: found under ``keyframes_dir``, sized to ``max_side``); a row whose method has
    none is excluded, saying so."""
    from embodied_r.evaluation.predict import score_completion
    from embodied_r.inference.requests import FrameRequest
    from embodied_r.methods import method_for_row

    appender = JsonlAppender(out_path)
    done = appender.done_keys("id")
    excluded: list[dict[str, str]] = []
    requests: list[FrameRequest] = []
    by_id = {row.id: row for row in rows}
    for row in rows:
        if row.id in done:
            continue
        video = Path(str(row.meta.get("video") or ""))
        if not video.is_file():
            excluded.append({"id": row.id, "reason": f"video not found: {video}"})
            continue
        method = method_for_row(row.meta)
        if method.keyframe_images is None:
            excluded.append({"id": row.id, "reason": f"method {method.name} has no key-frame images"})
            continue
        try:
            stamps, images = method.read_keyframe_images(Path(keyframes_dir), video, max_side)
        except (DataFileError, ValueError, OSError) as exc:
            excluded.append({"id": row.id, "reason": f"key frames unavailable: {exc}"})
            continue
        requests.append(FrameRequest(key=f"vlm-only:{row.id}", qa_id=row.id, frame_index=0, video=video,
                                     image_timestamps=tuple(stamps), prompt=vlm_question_text(row), output="answer",
                                     images=images))
    lock = threading.Lock()

    def on_result(request: Any, result: Any) -> None:
        with lock:
            if result.ok:
                appender.append(score_completion(by_id[request.qa_id], result.text).to_dict())
            else:
                excluded.append({"id": request.qa_id, "reason": f"VLM request failed: {result.error}"})

    if requests:
        backend.run(requests, on_result)
    wanted = set(by_id)
    return [p for p in appender.existing() if p["id"] in wanted], excluded
