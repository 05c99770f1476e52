"""Loader for our synthetic datasets (``embodied-r synth world`` / ``synth robot``).

Both write ``questions.jsonl`` of QARecords into their output folder, with ``video`` relative to that
folder (world) or empty (robot questions are text/image-path based). The records already have the
schema; this loader checks them like any benchmark's and resolves video paths.
"""

from __future__ import annotations

from pathlib import Path

from embodied_r.core.io import DataFileError
from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.common import LoadReport, check_records, read_records


def resolve_questions_file(path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        path = path / "questions.jsonl"
    if not path.is_file():
        raise DataFileError(f"{path}: file not found (give a synthetic dataset folder with questions.jsonl, "
                            "made by `embodied-r synth`)")
    return path


def load_synthetic(path: str | Path) -> tuple[list[QARecord], LoadReport]:
    """QARecords from a synthetic dataset folder (or its ``questions.jsonl``)."""
    source = resolve_questions_file(path)
    root = source.parent
    report = LoadReport()
    records = read_records(source, QARecord, report)
    for record in records:
        record.meta.setdefault("scene", record.meta.get("scene_name") or Path(record.video).stem or record.id)
        if record.video:
            video = root / record.video
            record.meta["video_found"] = video.is_file()
            if video.is_file():
                record.video = str(video)
            else:
                report.warn(record.id, f"video not found: {video}")
    return check_records(records, report), report
