"""UrbanVideo-Bench loader: ``MCQ.parquet`` (+ ``videos/``) into QARecords.

The parquet has ``Question_id, video_id, question_category, question, answer``; the options live
inside ``question`` after a ``Choices:``/``Choice:``/``choose:``/``Options:`` header, two to eight of
them (Action Generation runs to G/H), and the answer is the letter (UrbanVideo-Bench's released MCQ file).
Some questions were pasted with artefacts: wrapping ``\"\"\"`` or four-backtick fence lines, and an
``Answer:`` word in front of the first option. Those are cleaned before parsing; a question whose
options still cannot be read is reported and skipped, never scored as wrong.

Scenes, used for the scene-level split, follow the official preprocessing: ``EmbodiedCity_<n>``,
``RealWorld_<n>`` and ``AerialVLN_<n>_<trajectory>`` (the benchmark's video naming).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError
from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.common import LoadReport, attach_videos, check_records
from embodied_r.evaluation.benchmarks.embodied_r_json import CHOICES_HEADER_RE, parse_options_from_text

SOURCE = "urbanvideo_bench"
REQUIRED_COLUMNS = ("Question_id", "video_id", "question_category", "question", "answer")
_FENCE_LINE_RE = re.compile(r"^\s*(?:\"{2,}|`{3,}|'{3,})\s*$")
_ANSWER_PREFIX_RE = re.compile(r"^(\s*)Answer\s*:\s*(?=[A-H]\s*[.)])", re.IGNORECASE | re.MULTILINE)
_QUESTION_PREFIX_RE = re.compile(r"^\s*Question\s*:\s*", re.IGNORECASE)


def clean_question_text(text: str) -> str:
    """Drop fence/quote-only lines and an ``Answer:`` word glued to the first option.

    >>> clean_question_text('\"\"\"\\nQuestion: where?\\nchoose:\\nAnswer: A. up\\nB. down\\n\"\"\"')
    'Question: where?\\nchoose:\\nA. up\\nB. down'
    """
    lines = [line for line in str(text).splitlines() if not _FENCE_LINE_RE.match(line)]
    return _ANSWER_PREFIX_RE.sub(r"\1", "\n".join(lines)).strip()


def split_question(text: str) -> tuple[str, list[str]]:
    """``(stem, options)`` from an UrbanVideo question; options are [] when none can be read.

    >>> split_question("Question: Which way?  \\nChoices:  \\nA. left  \\nB. right  ")
    ('Which way?', ['A. left', 'B. right'])
    """
    cleaned = clean_question_text(text)
    options = parse_options_from_text(cleaned)
    headers = list(CHOICES_HEADER_RE.finditer(cleaned))
    stem = cleaned[: headers[-1].start()] if headers and options else cleaned
    stem = _QUESTION_PREFIX_RE.sub("", stem.strip())
    lines = [" ".join(line.split()) for line in stem.splitlines()]
    return "\n".join(line for line in lines if line), options


def scene_of_video(video_id: str) -> str:
    """The scene a clip belongs to (clips of one scene never straddle a split).

    >>> scene_of_video("AerialVLN_92_3NJM2BJS_4.mp4"), scene_of_video("EmbodiedCity_10_2.mp4")
    ('AerialVLN_92_3NJM2BJS', 'EmbodiedCity_10')
    >>> scene_of_video("RealWorld_9.mp4")
    'RealWorld_9'
    """
    stem = Path(str(video_id)).stem
    parts = stem.split("_")
    keep = 3 if parts[0] == "AerialVLN" else 2
    return "_".join(parts[:keep])


def _read_parquet(path: Path) -> Any:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file for the user
        raise DataFileError(f"{path}: cannot read as parquet ({type(exc).__name__}: {exc})") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise DataFileError(f"{path}: not an UrbanVideo-Bench MCQ file, missing column(s) {missing}; "
                            f"found {list(frame.columns)}")
    return frame


def resolve_mcq_path(path: str | Path) -> Path:
    """``MCQ.parquet`` itself, or the folder holding it."""
    path = Path(path)
    if path.is_dir():
        path = path / "MCQ.parquet"
    if not path.is_file():
        raise DataFileError(f"{path}: file not found (give UrbanVideo-Bench's MCQ.parquet or its folder)")
    return path


def load_urbanvideo(path: str | Path, videos_dir: str | Path | None = None) -> tuple[list[QARecord], LoadReport]:
    """QARecords from UrbanVideo-Bench's ``MCQ.parquet``; videos looked up in ``videos_dir`` (default:
    ``videos/`` beside the parquet) when that folder exists."""
    mcq = resolve_mcq_path(path)
    frame = _read_parquet(mcq)
    report = LoadReport()
    records: list[QARecord] = []
    for row in frame.itertuples(index=False):
        qid = str(row.Question_id)
        stem, options = split_question(row.question)
        answer = str(row.answer or "").strip().upper()
        if not options:
            report.skip(qid, "no options: none could be read after a Choices/choose header")
            continue
        records.append(QARecord(
            id=qid, source=SOURCE, task=str(row.question_category), video=str(row.video_id), question=stem,
            options=options, answer=answer, answer_type="choice",
            # The question text as released, for the official prompt variant (byte-exact prompts).
            meta={"scene": scene_of_video(row.video_id), "n_options": len(options),
                  "source_question": str(row.question)},
        ))
    kept = check_records(records, report)
    root = Path(videos_dir) if videos_dir is not None else mcq.parent / "videos"
    attach_videos(kept, [root], lambda r: [Path(r.video).name], report)
    return kept, report
