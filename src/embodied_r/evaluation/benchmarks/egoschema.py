"""EgoSchema loader: ``questions.json`` + ``subset_answers.json`` (+ ``videos/<q_uid>.mp4``).

``questions.json`` lists ``{q_uid, question, "option 0" … "option 4"}``; ``subset_answers.json`` maps
``{q_uid: 0..4}`` for the public 500-question subset, the only part that can be scored offline
(EgoSchema's released format). Questions without a public answer are counted, not listed one by one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, read_json
from embodied_r.core.records import QARecord
from embodied_r.evaluation.benchmarks.common import LETTERS, LoadReport, attach_videos, check_records, letter_options

SOURCE = "egoschema"
N_OPTIONS = 5
TASK = "egoschema_subset"


def _options(item: dict[str, Any]) -> list[str] | None:
    texts = [item.get(f"option {i}") for i in range(N_OPTIONS)]
    if any(t is None or not str(t).strip() for t in texts):
        return None
    return letter_options(texts)


def load_egoschema(root: str | Path, videos_dir: str | Path | None = None) -> tuple[list[QARecord], LoadReport]:
    """QARecords for the questions of ``root/questions.json`` that ``root/subset_answers.json`` answers."""
    root = Path(root)
    if not root.is_dir():
        raise DataFileError(f"{root}: not a folder (give the EgoSchema folder with questions.json and "
                            "subset_answers.json)")
    questions = read_json(root / "questions.json")
    answers = read_json(root / "subset_answers.json")
    if not isinstance(questions, list):
        raise DataFileError(f"{root / 'questions.json'}: expected a JSON list of questions")
    if not isinstance(answers, dict):
        raise DataFileError(f"{root / 'subset_answers.json'}: expected a JSON object {{q_uid: index}}")
    report = LoadReport()
    records: list[QARecord] = []
    unanswered = 0
    for position, item in enumerate(questions):
        if not isinstance(item, dict) or "q_uid" not in item:
            report.skip(f"#{position}", "malformed item: expected an object with q_uid")
            continue
        uid = str(item["q_uid"])
        if uid not in answers:
            unanswered += 1
            continue
        options = _options(item)
        try:
            index = int(answers[uid])
        except (TypeError, ValueError):
            report.skip(uid, f"answer outside the options: {answers[uid]!r} is not an option index")
            continue
        if not 0 <= index < N_OPTIONS:
            report.skip(uid, f"answer outside the options: index {index} not in 0..{N_OPTIONS - 1}")
            continue
        records.append(QARecord(
            id=uid, source=SOURCE, task=TASK, video=f"{uid}.mp4", question=str(item.get("question") or ""),
            options=options, answer=LETTERS[index], answer_type="choice", meta={"scene": uid},
        ))
    kept = check_records(records, report)
    missing_answers = set(answers) - {str(q.get("q_uid")) for q in questions if isinstance(q, dict)}
    for uid in sorted(missing_answers):
        report.warn(uid, "answer without a question in questions.json")
    if unanswered:
        report.warn("*", f"not scorable offline: {unanswered} question(s) have no public answer "
                         "(only the subset in subset_answers.json can be scored)")
    base = Path(videos_dir) if videos_dir is not None else root / "videos"
    attach_videos(kept, [base, root], lambda r: [r.video, r.video[:-4] + ".MP4"], report)
    return kept, report
