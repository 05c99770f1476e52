"""Questions + perception records -> the reasoner prompt rows that training and evaluation read.

Each row's ``prompt`` is the chat built by ``embodied_r.methods.embodied_r.prompts.build_reasoner_messages`` (the
official Embodied-R text by default), so GRPO training and evaluation see exactly the same prompt for a
question. Questions without a perception record are returned by id, never given an empty description.

Each row's ``meta`` also names the perception's detail level (``meta["detail"]``: the oracle's ``words``,
``bearings``, ``map`` or ``relations``; None for a VLM or an older record) and the question's span
(``meta["span"]``, see ``question_span``): an int, None when a label the question needs is shown in no key
frame, or ``SPAN_UNKNOWN`` when the perception carries no ground-truth labels (a VLM, or oracle perception
made before the oracle reported them). Rows are built from one detail level only: a learning claim names
its level, and a file mixing levels would blur it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

from embodied_r.core.io import DataFileError
from embodied_r.core.records import Perception, PromptRow, QARecord
from embodied_r.methods.embodied_r.perception.parsing import runaway_frames
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

SPAN_UNKNOWN = "unknown"  # meta["span"] of a row whose perception has no ground-truth labels
MAX_SPAN_TRIES = 200_000  # combinations of key frames tried before the span search gives up


# ---------------------------------------------------------------------------------------------------
# Span and detail level
# ---------------------------------------------------------------------------------------------------


def question_span(seen: Sequence[Sequence[str]], needs: Sequence[str]) -> int | None:
    """The fewest key frames whose labels together cover ``needs`` (``seen``: the labels of each frame).

    1 when nothing is needed; None when a needed label is in no frame. Exact (not greedy): frames are
    tried in combinations of increasing size, after dropping frames whose needed labels another frame
    already shows; a search over more than ``MAX_SPAN_TRIES`` combinations raises ``ValueError``.

    >>> question_span([["chair_0"], ["table_1"]], [])
    1
    >>> question_span([["chair_0", "table_1"], ["table_1"]], ["chair_0", "table_1"])
    1
    >>> question_span([["chair_0", "wall_2"], ["table_1"]], ["chair_0", "table_1"])
    2
    >>> question_span([["chair_0"], ["wall_2"]], ["chair_0", "table_1"]) is None
    True
    """
    needed = frozenset(needs)
    if not needed:
        return 1
    shown = {frozenset(labels) & needed for labels in seen}
    if frozenset().union(*shown) != needed:
        return None
    # A frame whose needed labels are a subset of another's never helps a smallest cover.
    frames = [s for s in shown if s and not any(s < other for other in shown)]
    tries = 0
    for size in range(1, len(needed) + 1):  # each needed label takes at most one frame
        for group in combinations(frames, size):
            tries += 1
            if tries > MAX_SPAN_TRIES:
                raise ValueError(f"span search over {len(needed)} needed labels in {len(frames)} key frames "
                                 f"passed {MAX_SPAN_TRIES} combinations")
            if frozenset().union(*group) == needed:
                return size
    raise AssertionError("unreachable: the frames together cover every needed label")


def perception_span(perception: Perception) -> int | str | None:
    """A question's span from its perception's ``meta["seen"]``/``meta["needs"]`` (``question_span``), or
    ``SPAN_UNKNOWN`` when the perception does not carry them for every frame."""
    seen, needs = perception.meta.get("seen"), perception.meta.get("needs")
    if not isinstance(seen, list) or not isinstance(needs, list) or len(seen) != len(perception.frames):
        return SPAN_UNKNOWN
    return question_span(seen, needs)


def common_detail(perceptions: Iterable[Perception]) -> str | None:
    """The one detail level of ``perceptions`` (None when none names one, as a VLM's); several levels are a
    ``DataFileError`` naming them."""
    levels: dict[str, str] = {}  # level -> the first question perceived at it
    for perception in perceptions:
        level = perception.meta.get("detail")
        if level is not None:
            levels.setdefault(str(level), perception.qa_id)
    if len(levels) > 1:
        names = [f"{level!r} (e.g. question {qa_id})" for level, qa_id in sorted(levels.items())]
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        raise DataFileError(f"perception file mixes detail levels {listed}; build prompts from one level "
                            "(perceive each level into its own file)")
    return next(iter(levels), None)


# ---------------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------------


def build_rows(questions: Sequence[QARecord], perceptions: Mapping[str, Perception],
               prompt_version: str) -> tuple[list[PromptRow], list[str]]:
    """Prompt rows for the questions that have perception, and the ids of those that do not.

    Perceptions of more than one detail level raise ``DataFileError`` (``common_detail``)."""
    common_detail(perceptions[qa.id] for qa in questions if qa.id in perceptions)
    rows, missing = [], []
    for qa in questions:
        perception = perceptions.get(qa.id)
        if perception is None:
            missing.append(qa.id)
            continue
        messages = build_reasoner_messages(perception.frames, qa.question, qa.options, version=prompt_version,
                                           source_question=qa.meta.get("source_question"))
        meta = {
            "source": qa.source,
            "video": qa.video,
            "prompt_version": prompt_version,
            "perception": {"backend": perception.backend, "model": perception.model,
                           "prompt_version": perception.prompt_version,
                           "leaked": bool(perception.meta.get("leaked")),
                           # Checked here too: perception files written before the check lack it.
                           "runaway": runaway_frames(perception.frames)},
            "detail": perception.meta.get("detail"),
            "span": perception_span(perception),
        }
        if qa.meta.get("question_type"):  # the benchmark's own type (VSI-Bench's level of a merged task)
            meta["question_type"] = qa.meta["question_type"]
        rows.append(PromptRow(id=qa.id, task=qa.task, prompt=messages, answer=qa.answer,
                              answer_type=qa.answer_type, options=qa.options, meta=meta))
    return rows, missing
