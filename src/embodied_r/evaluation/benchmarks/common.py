"""Pieces every benchmark loader shares: the load report, option lettering, record checks, video lookup.

A loader never stops on a bad question: it skips it with a reason (``LoadReport.skip``) or keeps it
with a warning (``LoadReport.warn``, e.g. its video is missing), and the runner writes the report into
the run's ``metrics.json``. Only a file that cannot be read at all raises ``DataFileError``.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from embodied_r.core.io import iter_jsonl
from embodied_r.core.records import QARecord, Record, RecordError
from embodied_r.core.validity import record_problem

R = TypeVar("R", bound=Record)

LETTERS = string.ascii_uppercase


@dataclass
class LoadReport:
    """What a loader kept, what it skipped and what it kept with a warning (each with a reason)."""

    kept: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def skip(self, item_id: str, reason: str) -> None:
        self.skipped.append({"id": str(item_id), "reason": reason})

    def warn(self, item_id: str, reason: str) -> None:
        self.warnings.append({"id": str(item_id), "reason": reason})

    def merge(self, other: LoadReport) -> LoadReport:
        self.kept += other.kept
        self.skipped.extend(other.skipped)
        self.warnings.extend(other.warnings)
        return self

    def reason_counts(self) -> dict[str, int]:
        """Skips grouped by the reason's first clause (ids and letters vary, the cause does not)."""
        return dict(Counter(_reason_key(s["reason"]) for s in self.skipped).most_common())

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "n_skipped": len(self.skipped), "skipped_by_reason": self.reason_counts(),
                "skipped": self.skipped, "n_warnings": len(self.warnings),
                "warnings_by_reason": dict(Counter(_reason_key(w["reason"]) for w in self.warnings)),
                "warnings": self.warnings[:200]}


def _reason_key(reason: str) -> str:
    return reason.split(":")[0].split("(")[0].strip()


def letter_options(texts: Sequence[Any]) -> list[str]:
    """VSI-style option strings from bare candidate texts.

    >>> letter_options(["left", " right "])
    ['A. left', 'B. right']
    """
    if len(texts) > len(LETTERS):
        raise ValueError(f"{len(texts)} options: at most {len(LETTERS)} can be lettered")
    return [f"{LETTERS[i]}. {str(t).strip()}" for i, t in enumerate(texts)]


def read_records(path: str | Path, cls: type[R], report: LoadReport) -> list[R]:
    """Every line of a jsonl file as ``cls`` (QARecord, PromptRow); malformed lines are reported."""
    out: list[R] = []
    for number, data in enumerate(iter_jsonl(path), start=1):
        try:
            out.append(cls.from_dict(data))
        except (RecordError, TypeError) as exc:
            report.skip(str(data.get("id", f"line {number}")), f"malformed row: {exc}")
    return out


def check_records(records: Iterable[R], report: LoadReport,
                  problem_of: Callable[[Any], str | None] | None = None) -> list[R]:
    """Keep the scorable records, first occurrence of each id; skip the rest into ``report``.
    ``problem_of`` defaults to ``record_problem`` (QARecords)."""
    kept: list[R] = []
    seen: set[str] = set()
    for record in records:
        if record.id in seen:
            report.skip(record.id, "duplicated id (first occurrence kept)")
            continue
        problem = (problem_of or record_problem)(record)
        if problem:
            report.skip(record.id, problem)
            continue
        seen.add(record.id)
        kept.append(record)
    report.kept = len(kept)
    return kept


def find_video(roots: Sequence[Path], candidates: Sequence[str]) -> Path | None:
    """The first existing ``root / candidate`` (roots and candidates tried in order), or None."""
    for root in roots:
        for candidate in candidates:
            path = root / candidate
            if path.is_file():
                return path
    return None


def attach_videos(records: list[QARecord], roots: Sequence[Path], candidates_of: Any,
                  report: LoadReport) -> None:
    """Point each record's ``video`` at the file found under ``roots``; warn (not skip) when absent.

    Missing videos only matter to stages that decode frames (perception, VLM-only baseline), which
    exclude those questions themselves; text-only evaluation from a perception file does not need them.
    ``meta["video_found"]`` records the outcome so those stages can report the exclusion.
    """
    existing_roots = [r for r in roots if r.is_dir()]
    for record in records:
        found = find_video(existing_roots, candidates_of(record)) if existing_roots else None
        record.meta["video_found"] = found is not None
        if found is not None:
            record.video = str(found)
        elif existing_roots:
            report.warn(record.id, f"video not found: {record.video} under {[str(r) for r in existing_roots]}")
