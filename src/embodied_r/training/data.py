"""Prompt rows for GRPO: strict loading, conversion to a ``datasets.Dataset``, and a toy data set.

Training refuses bad rows outright (evaluation skips and reports them instead): a row without an
answer, a choice answer that is not one of the option letters, or a non-positive numeric answer
would otherwise earn a constant reward of 0 that looks like a model failing to learn.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from embodied_r.core.chat import has_image
from embodied_r.core.io import DataFileError, iter_jsonl
from embodied_r.core.records import PromptRow, RecordError
from embodied_r.core.validity import row_problem
from embodied_r.methods.embodied_r.prompts import build_reasoner_messages

TOY_PREFIX = "toy:"


def load_prompt_rows(source: str | Path, limit: int | None = None) -> list[PromptRow]:
    """Prompt rows from a PromptRow ``.jsonl`` file, or the toy set for ``"toy:N"`` / ``"toy:N:SEED"``
    (use another seed for held-out rows); raises on any bad row."""
    text = str(source)
    if text.startswith(TOY_PREFIX):
        parts = text[len(TOY_PREFIX) :].split(":")
        try:
            rows = toy_prompt_rows(int(parts[0] or 64), seed=int(parts[1]) if len(parts) > 1 else 0)
        except ValueError as exc:
            raise DataFileError(f"{text}: expected toy:N or toy:N:SEED with integers ({exc})") from exc
    else:
        path = Path(source)
        rows = []
        seen: set[str] = set()
        for number, data in enumerate(iter_jsonl(path), start=1):
            try:
                row = PromptRow.from_dict(data)
            except (RecordError, TypeError) as exc:
                raise DataFileError(f"{path}:{number}: not a prompt row ({exc})") from exc
            problem = row_problem(row)
            if problem:
                raise DataFileError(f"{path}:{number} (id {row.id}): {problem}; fix or remove the row")
            if row.id in seen:
                raise DataFileError(f"{path}:{number}: id {row.id!r} appears twice")
            seen.add(row.id)
            rows.append(row)
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise DataFileError(f"{source}: no prompt rows to train on")
    return rows


def fit_rows_to_context(rows: list[PromptRow], tokenizer: Any, policy: Any, limit: int,
                        completion_prefix: str = "") -> tuple[list[PromptRow], dict[str, Any]]:
    """Rows whose prompts fit ``limit`` tokens by ``policy``'s rule (cut rows carry ``meta.context``;
    skipped rows are left out) and a report of what was done, row by row (``ContextPolicy.report``).

    Image rows (Robot-R1's vision path) are passed through unmeasured: their image tokens are counted by
    the processor, not here, and their text is a few hundred tokens.
    """
    import dataclasses

    from embodied_r.inference.context_policy import fit_chat

    kept: list[PromptRow] = []
    records: list[tuple[str, dict[str, Any] | None]] = []
    for row in rows:
        if has_image(row):
            kept.append(row)
            continue
        fit = fit_chat(tokenizer, row.prompt, limit, policy.rule, completion_prefix)
        record = fit.record()
        records.append((row.id, record))
        if not fit.skipped:
            kept.append(dataclasses.replace(row, prompt=fit.messages, meta={**row.meta, "context": record})
                        if record else row)
    return kept, {**policy.report(records), "limit": limit, "total": len(rows), "kept": len(kept)}


def image_rows_to_dataset(rows: list[PromptRow], image_dir: str | Path) -> Any:
    """A ``datasets.Dataset`` for a vision-language policy: string-content ``prompt`` messages, the PIL
    image in ``image`` (TRL's GRPOTrainer puts it into the first user turn), and the reward columns.
    Image paths in the rows are relative to ``image_dir`` (the folder of the ``.jsonl`` file)."""
    from datasets import Dataset

    from embodied_r.methods.robot_r1.prompts import trl_vl_example

    examples = []
    for row in rows:
        try:
            example = trl_vl_example(row.to_dict(), image_dir)
        except (FileNotFoundError, OSError, ValueError) as exc:
            raise DataFileError(f"image rows in {image_dir}: {exc}") from exc
        example["answer"] = str(example["answer"])  # one Arrow type per column, as for text rows
        examples.append(example)
    return Dataset.from_list(examples)


def rows_to_dataset(rows: list[PromptRow], image_dir: str | Path | None = None) -> Any:
    """A ``datasets.Dataset`` with ``prompt`` (chat messages) and the reward columns.

    Answers are stored as strings: Arrow needs one type per column, and a data set can mix letter and
    numeric answers (``score_answer`` converts numbers back with ``float``). Rows with images (all or
    none of them) go through :func:`image_rows_to_dataset` and need ``image_dir``.
    """
    from datasets import Dataset

    with_images = sum(has_image(row) for row in rows)
    if with_images:
        if with_images != len(rows):
            raise DataFileError(
                f"{with_images} of {len(rows)} prompt rows have images and the rest do not; train on one "
                "kind (prompts_vl.jsonl or prompts.jsonl), not a mix"
            )
        if image_dir is None:
            raise DataFileError("prompt rows with images need the folder their image paths are relative to")
        return image_rows_to_dataset(rows, image_dir)
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": str(m["role"]), "content": str(m["content"])} for m in row.prompt],
                "id": row.id,
                "task": row.task,
                "answer": str(row.answer),
                "answer_type": row.answer_type,
                "options": [str(o) for o in row.options] if row.options else None,
            }
            for row in rows
        ]
    )


# ---------------------------------------------------------------------------------------------------
# Toy data: text-only "egocentric" episodes with exact answers, for smoke runs and benchmarks
# ---------------------------------------------------------------------------------------------------

_OBJECTS = ["chair", "sofa", "table", "lamp", "door", "bed", "plant", "television", "shelf", "window"]
_ACTIONS = ["move forward", "rotate left", "rotate right", "move forward a few steps"]


def toy_prompt_rows(n: int, seed: int = 0) -> list[PromptRow]:
    """``n`` small questions over a scripted walk, in the official prompt format.

    Two tasks alternate: ``appearance_order`` (which of four objects was seen first, a choice) and
    ``object_count`` (how many distinct objects were seen, a number). The answers follow exactly from
    the text, so a reasoner can in principle learn them; they are a smoke test, not a benchmark.

    >>> rows = toy_prompt_rows(2)
    >>> [r.task for r in rows], rows[0].answer_type, rows[1].answer_type
    (['appearance_order', 'object_count'], 'choice', 'number')
    """
    if n < 1:
        raise ValueError("the toy data set needs n >= 1")
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        seen = rng.sample(_OBJECTS, k=rng.randint(3, 6))
        frames = [
            {
                "action": None if i == 0 else rng.choice(_ACTIONS),
                "delta": f"A {obj} comes into view.",
                "q_related": "",
            }
            for i, obj in enumerate(seen)
        ]
        if index % 2 == 0:
            choices = rng.sample(seen, k=min(4, len(seen)))
            first = min(choices, key=seen.index)
            options = [f"{letter}. {obj}" for letter, obj in zip("ABCD", choices)]
            answer: str | float = "ABCD"[choices.index(first)]
            question = "Which of these objects did you see first?"
            task, answer_type = "appearance_order", "choice"
        else:
            options, answer = None, float(len(seen))
            question = "How many different objects have you seen in total?"
            task, answer_type = "object_count", "number"
        rows.append(
            PromptRow(
                id=f"toy-{seed}-{index}",
                task=task,
                prompt=build_reasoner_messages(frames, question, options),
                answer=answer,
                answer_type=answer_type,
                options=options,
                meta={"source": "toy"},
            )
        )
    return rows
