"""Whether a question or a prompt row can be scored: one set of rules for loading, training and evaluation;
and the shape check every recipe section shares.

Evaluation skips and reports a row these checks refuse; training refuses the whole file, since such a row
would earn a constant reward of 0 that looks like a model failing to learn. Either way the same rows
are refused, so nothing trains that evaluation could not score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from embodied_r.core.chat import last_user_text
from embodied_r.core.parsing import option_letters
from embodied_r.core.records import PromptRow, QARecord


def record_problem(record: QARecord) -> str | None:
    """Why a question cannot be scored, or None when it can."""
    if not str(record.question).strip():
        return "empty question"
    if record.answer_type == "choice":
        if not record.options:
            return "no options: a choice question needs its options to be scored"
        # The scorer's lettering (core.parsing), so a row is refused exactly when its answer could not score.
        letters = list(option_letters(record.options))
        if len(set(letters)) != len(letters):
            return f"repeated option letters {letters}"
        if str(record.answer).strip().upper() not in letters:
            return f"answer outside the options: {record.answer!r} is not one of {letters}"
    elif record.answer_type == "number":
        try:
            value = float(record.answer)
        except (TypeError, ValueError):
            return f"numeric answer {record.answer!r} is not a number"
        # MRA divides by the target (VSI-Bench guarantees y > 0).
        if not math.isfinite(value) or value <= 0:
            return f"numeric answer {record.answer!r} must be a positive number for MRA"
    return None


def row_problem(row: PromptRow) -> str | None:
    """Why a prompt row cannot be scored, or None: an empty prompt, no answer, or what
    :func:`record_problem` refuses in its question."""
    if not row.prompt or not any(
        str(m.get("content", "")).strip() for m in row.prompt if isinstance(m, dict)
    ):
        return "empty prompt"
    if row.answer is None or str(row.answer).strip() == "":
        return "no answer"
    as_question = QARecord(id=row.id, source="prompt-row", task=row.task, video="",
                           question=last_user_text(row.prompt), options=row.options, answer=row.answer,
                           answer_type=row.answer_type)
    return record_problem(as_question)


def section_keys(value: Any, section: str, valid: Sequence[str], example: str, source: str,
                 error: type[Exception] = ValueError) -> None:
    """Refuse a recipe section that is not a mapping or names a key outside ``valid`` (listed in the error)."""
    if not isinstance(value, dict):
        raise error(f"{source}: '{section}' must be a mapping like {example} or null")
    unknown = sorted(set(value) - set(valid))
    if unknown:
        raise error(f"{source}: {section}: unknown key(s) {unknown}; valid: {list(valid)}")
