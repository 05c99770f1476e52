"""MVBench loader: ``json/<task>.json`` (+ ``video/<folder>/…``) into QARecords.

Each task file lists ``{video, question, candidates, answer[, start, end]}``; ``answer`` is the *text*
of the right candidate, so the gold letter is its position (MVBench's released format). An answer that
matches no candidate is reported and skipped. Videos are looked up in the task's folder from the
lmms-eval table, then directly under ``video/``.
"""

from __future__ import annotations

from pathlib import Path

from embodied_r.core.io import DataFileError, read_json
from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.common import LETTERS, LoadReport, attach_videos, check_records, letter_options

SOURCE = "mvbench"
# Task -> video folder under video/ (lmms-eval's DATA_LIST).
VIDEO_FOLDERS: dict[str, str] = {
    "action_sequence": "star/Charades_segment", "action_prediction": "star/Charades_segment",
    "object_interaction": "star/Charades_segment", "action_localization": "sta/sta_video_segment",
    "moving_count": "clevrer/video_validation", "moving_direction": "clevrer/video_validation",
    "moving_attribute": "clevrer/video_validation", "object_existence": "clevrer/video_validation",
    "counterfactual_inference": "clevrer/video_validation", "fine_grained_pose": "nturgbd_convert",
    "character_order": "perception/videos", "object_shuffle": "perception/videos",
    "state_change": "perception/videos", "action_count": "perception/videos",
    "egocentric_navigation": "vlnqa", "episodic_reasoning": "tvqa/video_fps3_hq_segment",
    "fine_grained_action": "Moments_in_Time_Raw/videos", "scene_transition": "scene_qa/video",
    "action_antonym": "ssv2_video_mp4", "unexpected_action": "FunQA_test/test",
}


def _normalise(text: object) -> str:
    return " ".join(str(text).split()).lower()


def load_mvbench(root: str | Path, tasks: list[str] | None = None,
                 videos_dir: str | Path | None = None) -> tuple[list[QARecord], LoadReport]:
    """QARecords from ``root/json/*.json`` (or only ``tasks``); ids are ``<task>/<position>``."""
    root = Path(root)
    json_dir = root / "json"
    if not json_dir.is_dir():
        raise DataFileError(f"{root}: no json/ folder (give the MVBench folder holding json/<task>.json)")
    files = sorted(json_dir.glob("*.json"))
    if tasks:
        wanted = set(tasks)
        files = [f for f in files if f.stem in wanted]
        missing = wanted - {f.stem for f in files}
        if missing:
            raise DataFileError(f"{json_dir}: no file for task(s) {sorted(missing)}; "
                                f"found {sorted(f.stem for f in json_dir.glob('*.json'))}")
    if not files:
        raise DataFileError(f"{json_dir}: no <task>.json files")
    report = LoadReport()
    records: list[QARecord] = []
    for path in files:
        items = read_json(path)
        if not isinstance(items, list):
            raise DataFileError(f"{path}: expected a JSON list of questions")
        for position, item in enumerate(items):
            qid = f"{path.stem}/{position}"
            if not isinstance(item, dict) or not isinstance(item.get("candidates"), list):
                report.skip(qid, "malformed item: expected an object with a candidates list")
                continue
            candidates = item["candidates"]
            matches = [i for i, c in enumerate(candidates) if _normalise(c) == _normalise(item.get("answer", ""))]
            if not matches:
                report.skip(qid, f"answer outside the options: {item.get('answer')!r} is not a candidate")
                continue
            if len(candidates) > len(LETTERS):
                report.skip(qid, f"too many candidates ({len(candidates)})")
                continue
            meta = {"scene": str(item.get("video", "")), "task_file": path.name}
            for key in ("start", "end"):
                if key in item:
                    meta[key] = item[key]
            records.append(QARecord(
                id=qid, source=SOURCE, task=path.stem, video=str(item.get("video", "")),
                question=str(item.get("question") or ""), options=letter_options(candidates),
                answer=LETTERS[matches[0]], answer_type="choice", meta=meta,
            ))
    kept = check_records(records, report)
    base = Path(videos_dir) if videos_dir is not None else root / "video"
    attach_videos(kept, [base], lambda r: [f"{VIDEO_FOLDERS.get(r.task, r.task)}/{r.video}", r.video], report)
    return kept, report
