"""VSI-Bench loader: ``test-*.parquet`` or ``test.jsonl`` (+ the unzipped videos) into QARecords.

Rows have ``id, dataset, scene_name, question_type, question, options, ground_truth``; multiple-choice
rows carry ``"A. left"``-style options and a letter, numeric rows a number stored as a string
(VSI-Bench's released format). Videos are found both where lmms-eval unzips them,
``<root>/<dataset>/<scene>.mp4``, and in one flat folder, ``<root>/<scene>.mp4`` (the Embodied-R layout).

``merge_rel_direction=True`` gives the three relative-direction levels one task name, as Embodied-R's
task selection does; by default they stay apart. Either way each record keeps its level in
``meta["question_type"]``, and ``evaluation.reference_names.vsibench`` averages the levels the way
VSI-Bench reports them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, iter_jsonl
from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.common import LoadReport, attach_videos, check_records

SOURCE = "vsibench"
REQUIRED_FIELDS = ("id", "question_type", "question", "ground_truth")
MCQ_TYPES = ("object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard",
             "object_rel_distance", "route_planning", "obj_appearance_order")
NUMERIC_TYPES = ("object_counting", "object_abs_distance", "object_size_estimation", "room_size_estimation")
REL_DIRECTION = "object_rel_direction"
_DEFAULT_FILES = ("test-00000-of-00001.parquet", "test.parquet", "test.jsonl")


def resolve_vsibench_file(path: str | Path) -> Path:
    """The question file itself, or the first of the known file names inside a folder."""
    path = Path(path)
    if path.is_dir():
        for name in _DEFAULT_FILES:
            if (path / name).is_file():
                return path / name
        raise DataFileError(f"{path}: no VSI-Bench question file ({', '.join(_DEFAULT_FILES)}) in this folder")
    if not path.is_file():
        raise DataFileError(f"{path}: file not found (give VSI-Bench's test parquet/jsonl or its folder)")
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Raw rows of a parquet or jsonl question file."""
    if path.suffix == ".jsonl":
        rows = list(iter_jsonl(path))
    elif path.suffix == ".parquet":
        import pandas as pd

        try:
            rows = pd.read_parquet(path).to_dict(orient="records")
        except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file for the user
            raise DataFileError(f"{path}: cannot read as parquet ({type(exc).__name__}: {exc})") from exc
    else:
        raise DataFileError(f"{path}: expected a .parquet or .jsonl VSI-Bench file")
    if rows:
        missing = [f for f in REQUIRED_FIELDS if f not in rows[0]]
        if missing:
            raise DataFileError(f"{path}: not a VSI-Bench file, missing field(s) {missing}")
    return rows


def _options(value: Any) -> list[str] | None:
    # Parquet gives numpy arrays, jsonl lists; numeric rows have None, an empty list or NaN.
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("[") else [value]
    options = [str(o).strip() for o in list(value) if str(o).strip()]
    return options or None


def record_from_row(row: Mapping[str, Any], merge_rel_direction: bool = False) -> QARecord:
    """One QARecord; raises ``ValueError`` naming the problem for a row that is not a question."""
    question_type = str(row["question_type"])
    if question_type in NUMERIC_TYPES:
        answer_type, answer = "number", row["ground_truth"]
    elif question_type in MCQ_TYPES:
        answer_type, answer = "choice", str(row["ground_truth"]).strip().upper()
    else:
        raise ValueError(f"unknown question_type {question_type!r}")
    task = REL_DIRECTION if merge_rel_direction and question_type.startswith(REL_DIRECTION) else question_type
    dataset, scene = str(row.get("dataset") or ""), str(row.get("scene_name") or "")
    return QARecord(
        id=str(row["id"]), source=SOURCE, task=task, video=f"{dataset}/{scene}.mp4" if dataset else f"{scene}.mp4",
        question=str(row["question"]).strip(),
        options=_options(row.get("options")) if answer_type == "choice" else None,
        answer=answer, answer_type=answer_type,
        meta={"scene": scene, "dataset": dataset, "question_type": question_type},
    )


def load_vsibench(path: str | Path, videos_dir: str | Path | None = None,
                  merge_rel_direction: bool = False) -> tuple[list[QARecord], LoadReport]:
    """QARecords from a VSI-Bench question file; videos looked up under ``videos_dir`` (default: the
    file's folder) in both the ``<dataset>/<scene>.mp4`` and the flat ``<scene>.mp4`` layouts."""
    source = resolve_vsibench_file(path)
    report = LoadReport()
    records: list[QARecord] = []
    for position, row in enumerate(read_rows(source)):
        try:
            records.append(record_from_row(row, merge_rel_direction))
        except (ValueError, KeyError, TypeError) as exc:
            report.skip(str(row.get("id", f"#{position}")), f"malformed row: {exc}")
    kept = check_records(records, report)
    root = Path(videos_dir) if videos_dir is not None else source.parent
    attach_videos(kept, [root, root / "videos"],
                  lambda r: [r.video, f"{r.meta['scene']}.mp4"], report)
    return kept, report
