"""``embodied-r eval``: batched, resumable evaluation of a reasoner on prompt rows.

Predictions are appended to ``predictions.jsonl`` batch by batch; a rerun reads the ids already there
and generates only the rest, so a killed run loses at most the batch in flight.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from embodied_r.evaluation.benchmarks.embodied_r_json import LoadReport, load_embodied_r_json
from embodied_r.evaluation.generation import generate_chats
from embodied_r.evaluation.metrics import score_answer, task_table
from embodied_r.io import DataFileError, JsonlAppender, atomic_write_json, iter_jsonl, read_json
from embodied_r.reasoning.parsing import parse_answer
from embodied_r.records import Prediction, PromptRow, RecordError

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------


def load_prompt_rows_jsonl(path: str | Path) -> tuple[list[PromptRow], LoadReport]:
    """PromptRow jsonl (what ``build-prompts`` writes); unusable rows are reported, not scored."""
    report = LoadReport()
    rows: list[PromptRow] = []
    seen: set[str] = set()
    for number, data in enumerate(iter_jsonl(path), start=1):
        try:
            row = PromptRow.from_dict(data)
        except (RecordError, TypeError) as exc:
            report.skip(str(data.get("id", f"line {number}")), f"malformed row: {exc}")
            continue
        reason = _row_problem(row, seen)
        if reason:
            report.skip(row.id, reason)
            continue
        seen.add(row.id)
        rows.append(row)
    report.kept = len(rows)
    return rows, report


def _row_problem(row: PromptRow, seen: set[str]) -> str | None:
    if row.id in seen:
        return "duplicated id (first occurrence kept)"
    if not row.prompt or not any(str(m.get("content", "")).strip() for m in row.prompt):
        return "empty prompt"
    if row.answer_type == "choice":
        if not row.options:
            return "choice question without options"
        letters = {str(o).strip()[:1].upper() for o in row.options}
        if str(row.answer).strip().upper() not in letters:
            return f"answer {row.answer!r} is not one of the option letters"
    return None


def load_eval_rows(data: str | Path, prompt_version: str = "official-v1") -> tuple[list[PromptRow], LoadReport]:
    """Rows from an official processed JSON file (``.json``) or a PromptRow file (``.jsonl``)."""
    path = Path(data)
    if not path.exists():
        raise DataFileError(f"{path}: file not found")
    if path.suffix == ".jsonl":
        return load_prompt_rows_jsonl(path)
    if path.suffix == ".json":
        return load_embodied_r_json(path, prompt_version=prompt_version)
    raise DataFileError(f"{path}: unsupported data file; give an official processed .json or a prompt-row .jsonl")


# ---------------------------------------------------------------------------------------------------
# Scoring and evaluation
# ---------------------------------------------------------------------------------------------------


def score_completion(row: PromptRow, completion: str) -> Prediction:
    """Parse and score one completion with the same functions the accuracy reward uses."""
    parsed = parse_answer(completion, row.options, row.answer_type)
    score = score_answer(parsed, row.answer, row.answer_type)
    return Prediction(
        id=row.id, task=row.task, completion=completion, parsed_answer=parsed, answer=row.answer,
        answer_type=row.answer_type, correct=score >= 1.0, score=score,
    )


def evaluate_rows(model: Any, tokenizer: Any, rows: Sequence[PromptRow], batch_size: int = 8,
                  max_new_tokens: int = 256,
                  on_predictions: Callable[[list[Prediction]], None] | None = None,
                  **sampling: Any) -> list[Prediction]:
    """Generate (greedy unless sampling args say otherwise) and score every row."""
    predictions: list[Prediction | None] = [None] * len(rows)

    def handle(indices: list[int], completions: list[str]) -> None:
        batch = [score_completion(rows[i], c) for i, c in zip(indices, completions)]
        for i, prediction in zip(indices, batch):
            predictions[i] = prediction
        if on_predictions is not None:
            on_predictions(batch)

    generate_chats(model, tokenizer, [r.prompt for r in rows], max_new_tokens=max_new_tokens,
                   batch_size=batch_size, on_batch=handle, **sampling)
    return [p for p in predictions if p is not None]


def run_eval(data: str | Path, model_name: str, out_dir: str | Path, limit: int | None = None,
             batch_size: int = 8, max_new_tokens: int = 256, dtype: str = "auto",
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Evaluate ``model_name`` on ``data``; write predictions.jsonl and metrics.json into ``out_dir``."""
    started = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, report = load_eval_rows(data)
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise DataFileError(f"{data}: no usable questions ({len(report.skipped)} skipped)")
    appender = JsonlAppender(out / "predictions.jsonl")
    _check_same_run(out, data, model_name)
    done = appender.done_keys("id")
    todo = [r for r in rows if r.id not in done]
    logger.info("%d questions, %d already done, %d to generate", len(rows), len(rows) - len(todo), len(todo))

    generated = 0
    if todo:
        from embodied_r.reasoning.models import load_reasoner

        model, tokenizer = load_reasoner(model_name, dtype=dtype)

        def persist(batch: list[Prediction]) -> None:
            nonlocal generated
            appender.extend(p.to_dict() for p in batch)
            generated += len(batch)
            if progress is not None:
                progress(len(rows) - len(todo) + generated, len(rows))

        evaluate_rows(model, tokenizer, todo, batch_size=batch_size, max_new_tokens=max_new_tokens,
                      on_predictions=persist)
    wanted = {r.id for r in rows}
    predictions = [p for p in appender.existing() if p["id"] in wanted]
    metrics = task_table(predictions)
    metrics.update({
        "model": model_name, "data": str(data), "n_questions": len(rows),
        "generated_this_run": generated, "resumed": len(rows) - len(todo),
        "skipped": report.skipped, "n_skipped": len(report.skipped),
        "generation": {"do_sample": False, "max_new_tokens": max_new_tokens, "batch_size": batch_size},
        "wall_time_s": round(time.perf_counter() - started, 2),
    })
    atomic_write_json(out / "metrics.json", metrics)
    return metrics


def _check_same_run(out: Path, data: str | Path, model_name: str) -> None:
    """Refuse to mix predictions of a different model or data set into an existing output folder."""
    stamp = out / "run.json"
    current = {"data": str(Path(data).resolve()), "model": model_name}
    if stamp.exists():
        previous = read_json(stamp)
        if previous != current:
            raise DataFileError(
                f"{out} holds a run of {json.dumps(previous)}; use another --out folder for {json.dumps(current)}"
            )
    else:
        atomic_write_json(stamp, current)
