"""Questions + perception records -> the reasoner prompt rows that training and evaluation read.

Each row's ``prompt`` is the chat built by ``embodied_r.methods.embodied_r.prompts.build_reasoner_messages`` (the
official Embodied-R text by default), so GRPO training and evaluation see exactly the same prompt for a
question. Questions without a perception record are returned by id, never given an empty description.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from embodied_r.core.records import Perception, PromptRow, QARecord
from embodied_r.methods.embodied_r.perception.parsing import runaway_frames
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages


def build_rows(questions: Sequence[QARecord], perceptions: Mapping[str, Perception],
               prompt_version: str) -> tuple[list[PromptRow], list[str]]:
    """Prompt rows for the questions that have perception, and the ids of those that do not."""
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
        }
        if qa.meta.get("question_type"):  # the benchmark's own type (VSI-Bench's level of a merged task)
            meta["question_type"] = qa.meta["question_type"]
        rows.append(PromptRow(id=qa.id, task=qa.task, prompt=messages, answer=qa.answer,
                              answer_type=qa.answer_type, options=qa.options, meta=meta))
    return rows, missing
