"""Prompt rows for GRPO: strict loading, conversion to a ``datasets.Dataset``, and a toy data set.

Training refuses bad rows outright (evaluation skips and reports them instead): a row without an
answer, a choice answer that is not one of the option letters, or a non-positive numeric answer
would otherwise earn a constant reward of 0 that looks like a model failing to learn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embodied_r.core.chat import has_image
from embodied_r.core.io import DataFileError, iter_jsonl
from embodied_r.core.keyframe_chat import is_keyframe_chat
from embodied_r.core.records import PromptRow, RecordError
from embodied_r.core.validity import row_problem
from embodied_r.methods import DEFAULT_METHOD, import_path

TOY_PREFIX = "toy:"


def load_prompt_rows(source: str | Path, limit: int | None = None) -> list[PromptRow]:
    """Prompt rows from a PromptRow ``.jsonl`` file, or the toy set for ``"toy:N"`` / ``"toy:N:SEED"``
    (the default method's smoke-test rows, ``Method.toy_rows``; use another seed for held-out rows); raises
    on any bad row.

    >>> [row.task for row in load_prompt_rows("toy:2")]
    ['appearance_order', 'object_count']
    """
    text = str(source)
    if text.startswith(TOY_PREFIX):
        parts = text[len(TOY_PREFIX) :].split(":")
        if DEFAULT_METHOD.toy_rows is None:
            raise DataFileError(f"{text}: the default method {DEFAULT_METHOD.name} has no toy rows")
        try:
            count, seed = int(parts[0] or 64), int(parts[1]) if len(parts) > 1 else 0
            rows = import_path(DEFAULT_METHOD.toy_rows)(count, seed=seed)
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
                        completion_prefix: str = "", processor: Any = None,
                        image_dir: Path | None = None) -> tuple[list[PromptRow], dict[str, Any]]:
    """Rows whose prompts fit ``limit`` tokens by ``policy``'s rule (cut rows carry ``meta.context``;
    skipped rows are left out) and a report of what was done, row by row (``ContextPolicy.report``).

    Key-frame rows are measured with their image tokens (``processor``; frames read from ``image_dir``) and
    lose their oldest key frames first (``inference.image_context``); a row where not even its latest frame
    fits, or whose frame file is missing or not an image, is a ``DataFileError`` naming it. Other image
    rows (Robot-R1's vision path, one image) are passed through unmeasured.
    """
    import dataclasses

    from embodied_r.inference.context_policy import fit_chat

    kept: list[PromptRow] = []
    records: list[tuple[str, dict[str, Any] | None]] = []
    keyframes = KeyframeFitter(processor, image_dir, policy.rule, limit, completion_prefix)
    for row in rows:
        if has_image(row) and not is_keyframe_chat(row.prompt):
            kept.append(row)
            continue
        fit = keyframes.fit(row) if has_image(row) else fit_chat(tokenizer, row.prompt, limit, policy.rule,
                                                                  completion_prefix)
        record = fit.record()
        records.append((row.id, record))
        if not fit.skipped:
            kept.append(dataclasses.replace(row, prompt=fit.messages, meta={**row.meta, "context": record})
                        if record else row)
    keyframes.raise_for_rows_without_frames()
    return kept, {**policy.report(records), "limit": limit, "total": len(rows), "kept": len(kept)}


class KeyframeFitter:
    """The context policy for key-frame rows during training, with the rows no frame fits collected."""

    def __init__(self, processor: Any, image_dir: Path | None, rule: str, limit: int, completion_prefix: str) -> None:
        self.processor, self.image_dir = processor, image_dir
        self.rule, self.limit, self.completion_prefix = rule, limit, completion_prefix
        self.counter: Any = None
        self.without_frames: list[str] = []

    def fit(self, row: PromptRow) -> Any:
        from embodied_r.core.image_files import ImageSizes
        from embodied_r.inference.image_context import NO_FRAME_FITS, ImageTokenCounter, fit_keyframe_chat

        if self.counter is None:
            if self.processor is None:
                raise DataFileError(f"row {row.id} holds key frames: measuring it needs the model's processor")
            self.counter = ImageTokenCounter(self.processor, ImageSizes(self.image_dir))
        try:
            fit = fit_keyframe_chat(self.counter, row.prompt, self.limit, self.rule, self.completion_prefix)
        except DataFileError as exc:
            raise DataFileError(f"row {row.id}: {exc}") from exc
        if fit.skipped and fit.reason.startswith(NO_FRAME_FITS):
            self.without_frames.append(f"{row.id} ({fit.reason})")
        return fit

    def raise_for_rows_without_frames(self) -> None:
        # Trained without its frames, a key-frame question would be learned blind: such rows stop the run.
        if self.without_frames:
            shown = "; ".join(self.without_frames[:3]) + (" ..." if len(self.without_frames) > 3 else "")
            raise DataFileError(f"{len(self.without_frames)} key-frame row(s) keep no frame within the prompt limit "
                                f"of {self.limit} tokens: {shown}")


def trl_vl_example(row: dict[str, Any], dataset_dir: str | Path) -> dict[str, Any]:
    """An image prompt row (Robot-R1's prompts_vl.jsonl) as TRL's GRPOTrainer wants it for a VLM:
    string-content messages (TRL inserts the image token before the first user turn), the PIL image in
    ``image``, and the reward columns."""
    from PIL import Image

    messages = []
    image_path = None
    for message in row["prompt"]:
        content = message["content"]
        if isinstance(content, list):
            image_path = next(part["image"] for part in content if part.get("type") == "image")
            content = "\n".join(part["text"] for part in content if part.get("type") == "text")
        messages.append({"role": message["role"], "content": content})
    if image_path is None:
        raise ValueError(f"row {row.get('id')}: no image entry in the prompt; is this prompts_vl.jsonl?")
    full = Path(dataset_dir) / image_path
    if not full.is_file():
        raise FileNotFoundError(f"row {row.get('id')}: image {full} not found; regenerate the dataset")
    with Image.open(full) as image:
        rgb = image.convert("RGB")
    return {"prompt": messages, "image": rgb, **reward_columns(row)}


def reward_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The columns TRL hands the reward functions besides the prompt: the row's answer and how to score it,
    and its ``prompt_version`` (which method's scorer reads it; ``methods.accuracy``).

    Answers are stored as strings: Arrow needs one type per column, and a data set can mix letter and
    numeric answers (``score_answer`` converts numbers back with ``float``).

    >>> reward_columns({"id": "q", "task": "t", "answer": 3.0, "answer_type": "number", "options": None,
    ...                 "meta": {"prompt_version": "official-v1"}})
    {'id': 'q', 'task': 't', 'answer': '3.0', 'answer_type': 'number', 'options': None, 'prompt_version': 'official-v1'}
    """
    options = row.get("options")
    return {"id": row["id"], "task": row["task"], "answer": str(row["answer"]), "answer_type": row["answer_type"],
            "options": [str(o) for o in options] if options else None,
            "prompt_version": (row.get("meta") or {}).get("prompt_version")}


def image_rows_to_dataset(rows: list[PromptRow], image_dir: str | Path) -> Any:
    """A ``datasets.Dataset`` for a vision-language policy: string-content ``prompt`` messages, the PIL
    image in ``image`` (TRL's GRPOTrainer puts it into the first user turn), and the reward columns.
    Image paths in the rows are relative to ``image_dir`` (the folder of the ``.jsonl`` file)."""
    from datasets import Dataset

    examples = []
    for row in rows:
        try:
            example = trl_vl_example(row.to_dict(), image_dir)
        except (FileNotFoundError, OSError, ValueError) as exc:
            raise DataFileError(f"image rows in {image_dir}: {exc}") from exc
        examples.append(example)
    return Dataset.from_list(examples)


def rows_to_dataset(rows: list[PromptRow], image_dir: str | Path | None = None) -> Any:
    """A ``datasets.Dataset`` with ``prompt`` (chat messages) and the reward columns (:func:`reward_columns`).
    Rows with images (all or none of them) go through :func:`image_rows_to_dataset` and need ``image_dir``.
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
        keyframe_rows = sum(is_keyframe_chat(row.prompt) for row in rows)
        if keyframe_rows:
            if keyframe_rows != len(rows):
                raise DataFileError(f"{keyframe_rows} of {len(rows)} prompt rows hold key frames and the rest other "
                                    "images; train on one kind")
            from embodied_r.training.keyframe_data import keyframe_rows_to_dataset

            return keyframe_rows_to_dataset(rows, image_dir, reward_columns)
        return image_rows_to_dataset(rows, image_dir)
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": str(m["role"]), "content": str(m["content"])} for m in row.prompt],
                **reward_columns(row.to_dict()),
            }
            for row in rows
        ]
    )
