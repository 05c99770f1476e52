"""``embodied-r score``: the metrics of completions produced elsewhere (vLLM, an API, another harness).

The completions file holds one ``{"id": ..., "completion": "..."}`` object per line (other keys are
ignored). Each completion is scored as ``eval`` scores its own (``predict.score_completion``), and
``metrics.json`` with its reference tables, ``predictions.jsonl`` (each row with its ``reference`` scores
where a reference applies) and ``report.html`` are assembled by the same functions. Nothing is
generated, so no model is loaded: the baselines that need one (direct, blind, VLM-only) and the
consistency judge are not run.

Ids are compared as text (a number id as its decimal digits). No completion is dropped without a word:

- an id that names no question of the data stops the run with the list (a wrong data file or id scheme),
  except a question the loader skipped, which is reported with the loader's reason;
- a question without a completion stops the run with the list, unless ``missing`` is ``"unanswered"``
  (scored 0, as an empty completion) or ``"leave-out"`` (not scored); either way its id is listed in
  ``metrics.json`` → ``completions``;
- a line that is not an object with a text ``id`` and a string ``completion``, or an id given twice, is
  an error naming its line.

Without a completions file no model is scored: ``metrics.json`` holds the model-free baselines of all the
questions (e.g. the solver's ceiling of a prompt file) with ``"model": null`` and ``"completions": null``,
and no model table (``tasks``, ``overall``, ``reference``, ``position_bias``); no predictions.jsonl is
written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import (
    DataFileError,
    atomic_write_json,
    claimed_folder,
    iter_jsonl_values,
    read_json,
    require_file,
    write_jsonl,
)
from embodied_r.core.records import PromptRow, QARecord
from embodied_r.evaluation.benchmarks.common import LoadReport

MISSING_RULES = ("error", "unanswered", "leave-out")
# Baselines that need no model: they read the questions' answers and options (text-rule and solver: their
# prompts).
MODEL_FREE_BASELINES = ("random", "prior", "answer-prior", "text-rule", "solver")
_LISTED = 20  # ids quoted in an error message or in metrics.json before "and N more"


# ---------------------------------------------------------------------------------------------------
# Reading the completions and the questions
# ---------------------------------------------------------------------------------------------------


def read_completions(path: str | Path) -> dict[str, str]:
    """Completion text by id, in file order; any malformed line or repeated id is a DataFileError."""
    path = require_file(path, "completions file")
    completions: dict[str, str] = {}
    first_line: dict[str, int] = {}
    # core.io reads the lines: a line that is not UTF-8, binary or not JSON is an error naming its line.
    for number, value in iter_jsonl_values(path, tolerate_torn_tail=False):
        qid, completion = _completion_line(path, number, value)
        if qid in completions:
            raise DataFileError(f"{path}:{number}: id {qid!r} already given on line {first_line[qid]}; "
                                "keep one completion per question")
        completions[qid] = completion
        first_line[qid] = number
    if not completions:
        raise DataFileError(f"{path}: holds no completions (expected one {{\"id\", \"completion\"}} object per line)")
    return completions


def _completion_line(path: Path, number: int, obj: Any) -> tuple[str, str]:
    where = f"{path}:{number}"
    if not isinstance(obj, dict) or "id" not in obj or "completion" not in obj:
        raise DataFileError(f"{where}: expected an object with \"id\" and \"completion\"")
    qid, completion = obj["id"], obj["completion"]
    # bool is an int to Python; a float id (12.0) would not match "12" and is refused rather than guessed.
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid).strip() == "":
        raise DataFileError(f"{where}: id must be a non-empty string or an integer, got {qid!r}")
    if not isinstance(completion, str):
        raise DataFileError(f"{where}: completion must be a string (\"\" for no answer), "
                            f"got {type(completion).__name__}")
    return str(qid), completion


def scoring_rows(data: str) -> tuple[list[PromptRow], LoadReport]:
    """The questions of ``data`` as rows to score: a prompt-row or official processed file as ``eval``
    reads it, or a loader spec's questions (no perception needed: nothing is prompted)."""
    from embodied_r.evaluation.benchmarks.registry import load_qa, parse_spec
    from embodied_r.evaluation.inputs import load_prompt_file

    spec = parse_spec(data)
    if spec.loader is None:
        return load_prompt_file(spec.path)
    records, report = load_qa(spec)
    return [_row_of(record) for record in records], report


def _row_of(record: QARecord) -> PromptRow:
    meta: dict[str, Any] = {"source": record.source}
    if record.meta.get("question_type"):  # VSI-Bench's own type, the level of a merged relative direction
        meta["question_type"] = record.meta["question_type"]
    return PromptRow(id=record.id, task=record.task, prompt=[{"role": "user", "content": record.question}],
                     answer=record.answer, answer_type=record.answer_type, options=record.options, meta=meta)


# ---------------------------------------------------------------------------------------------------
# Matching completions to questions
# ---------------------------------------------------------------------------------------------------


def _listing(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_LISTED])
    return shown + (f" and {len(ids) - _LISTED} more" if len(ids) > _LISTED else "")


def match_completions(rows: Sequence[PromptRow], completions: dict[str, str], report: LoadReport,
                      missing: str) -> tuple[list[tuple[PromptRow, str]], dict[str, Any]]:
    """(row, completion) pairs to score and the accounting of ids, or a DataFileError that lists the
    unknown ids, or the missing ones when ``missing`` is ``"error"``."""
    if missing not in MISSING_RULES:
        raise DataFileError(f"missing rule {missing!r} not known; choose one of {', '.join(MISSING_RULES)}")
    known = {row.id for row in rows}
    skipped = {item["id"]: item["reason"] for item in report.skipped}
    unknown = [qid for qid in completions if qid not in known and qid not in skipped]
    if unknown:
        raise DataFileError(f"{len(unknown)} completion id(s) name no question of the data: {_listing(unknown)}; "
                            f"the data's ids look like {_listing([row.id for row in rows][:3])}")
    absent = [row.id for row in rows if row.id not in completions]
    if absent and missing == "error":
        raise DataFileError(f"{len(absent)} of {len(rows)} question(s) have no completion: {_listing(absent)}; "
                            "pass --missing unanswered to score them 0 or --missing leave-out to score the rest")
    pairs = [(row, completions.get(row.id, "")) for row in rows if row.id in completions or missing == "unanswered"]
    of_skipped = [{"id": qid, "reason": skipped[qid]} for qid in completions if qid in skipped]
    accounting = {"n_completions": len(completions), "n_scored": len(pairs), "missing_rule": missing,
                  "n_missing": len(absent), "missing_ids": absent[:200],
                  "n_for_skipped_questions": len(of_skipped), "for_skipped_questions": of_skipped[:200]}
    return pairs, accounting


# ---------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------


def _claim_stamp(out: Path, data: str, completions: Path | None) -> dict[str, str | None]:
    """The folder's ``run.json`` for this scoring; refuses a folder that holds another run (an eval run
    or other completions, or none), and predictions of unknown origin."""
    from embodied_r.evaluation.benchmarks.registry import parse_spec

    spec = parse_spec(data)
    resolved = str(Path(spec.path).resolve())
    current = {"data": f"{spec.loader}:{resolved}" if spec.loader else resolved,
               "completions": None if completions is None else str(completions.resolve())}
    stamp = out / "run.json"
    if stamp.exists():
        previous = read_json(stamp)
        if previous != current:
            raise DataFileError(f"{out} holds a run of {json.dumps(previous)}; use another --out folder")
    elif (out / "predictions.jsonl").exists():
        raise DataFileError(f"{out} holds predictions.jsonl of another run (no run.json); use another --out folder")
    return current


def score_run(data: str, completions: str | Path | None, out_dir: str | Path, missing: str = "error",
              baselines: Sequence[str] = ("random", "prior", "answer-prior"), name: str | None = None,
              report: bool = True, prior_from: str | Path | None = None) -> dict[str, Any]:
    """Score ``completions`` against the questions of ``data``; write predictions.jsonl, metrics.json
    (and report.html) into ``out_dir`` and return the metrics. ``baselines`` may name the model-free ones
    (``MODEL_FREE_BASELINES``); the two priors are fit on the prompt rows of ``prior_from`` when given (else
    leave-one-out); ``name`` labels the run (default: the completions file's name). ``completions=None``
    scores no model: only the baselines, of every question (``missing`` and ``name`` do not apply)."""
    from embodied_r.evaluation.analysis import assemble_metrics, run_baselines
    from embodied_r.evaluation.predict import score_completion
    from embodied_r.evaluation.reference_names import row_question_types, with_item_reference

    started = time.perf_counter()
    unknown = sorted(set(baselines) - set(MODEL_FREE_BASELINES))
    if unknown:
        raise DataFileError(f"baseline(s) {unknown} need a model; `score` runs {list(MODEL_FREE_BASELINES)} "
                            "(use `embodied-r eval` for the others)")
    if completions is None and not baselines:
        raise DataFileError("nothing to score: no completions file and no baselines; give completions or "
                            f"baselines from {list(MODEL_FREE_BASELINES)}")
    completions_path = None if completions is None else require_file(completions, "completions file")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataFileError(f"--out {out}: is a file; give a folder for predictions.jsonl and metrics.json")
    prior_rows = None
    from embodied_r.evaluation.baselines import PRIORS

    if prior_from is not None and set(PRIORS) & set(baselines):
        from embodied_r.evaluation.inputs import load_prior_rows

        prior_rows = load_prior_rows(prior_from)
    if completions_path is None:
        return _baselines_only(data, out, list(baselines), report, prior_rows, prior_from, started)
    texts = read_completions(completions_path)
    rows, load_report = scoring_rows(data)
    if not rows:
        raise DataFileError(f"{data}: holds no usable questions ({load_report.reason_counts() or 'empty'})")
    pairs, accounting = match_completions(rows, texts, load_report, missing)
    if not pairs:
        raise DataFileError(f"{completions_path}: no completion is for a question that can be scored "
                            f"({accounting['n_for_skipped_questions']} are for questions the loader skipped)")
    with claimed_folder(out):
        stamp = _claim_stamp(out, data, completions_path)
        scored_rows = [row for row, _ in pairs]
        question_types = row_question_types(scored_rows)
        # Each row carries its own reference score where a reference applies (what metrics.json averages).
        predictions = [with_item_reference(score_completion(row, text).to_dict(), question_types)
                       for row, text in pairs]

        tables = run_baselines(list(baselines), scored_rows, out, _no_engine, batch_size=1, direct_max_new_tokens=1,
                               prior_rows=prior_rows, prior_source=str(prior_from))
        consistency = {"status": "not run", "reason": "scored from a completions file: no judge was run"}
        metrics = assemble_metrics(predictions, scored_rows, tables, consistency, load_report)
        metrics.update({
            "model": name or completions_path.name, "data": str(data), "source": "score",
            "completions": {"file": str(completions_path), **accounting},
            "n_questions": len(scored_rows), "skipped": load_report.skipped, "n_skipped": len(load_report.skipped),
            "wall_time_s": round(time.perf_counter() - started, 2),
        })
        write_jsonl(out / "predictions.jsonl", predictions)
        atomic_write_json(out / "metrics.json", metrics)
        atomic_write_json(out / "run.json", stamp)
        if report:
            from embodied_r.evaluation.report import build_report

            build_report([out], out)
    return metrics


def _no_engine() -> Any:  # the model-free baselines never ask for one
    raise RuntimeError("score loads no model")


def _baselines_only(data: str, out: Path, baselines: list[str], report: bool, prior_rows: Any,
                    prior_from: str | Path | None, started: float) -> dict[str, Any]:
    """The run without completions: the baselines of every question, and no model in ``metrics.json``."""
    from collections import Counter

    from embodied_r.evaluation.analysis import run_baselines

    rows, load_report = scoring_rows(data)
    if not rows:
        raise DataFileError(f"{data}: holds no usable questions ({load_report.reason_counts() or 'empty'})")
    with claimed_folder(out):
        stamp = _claim_stamp(out, data, None)
        tables = run_baselines(baselines, rows, out, _no_engine, batch_size=1, direct_max_new_tokens=1,
                               prior_rows=prior_rows, prior_source=str(prior_from))
        # "model": null and "completions": null say that no model was scored; there is no model table
        # (tasks, overall, reference, position_bias) for a reader to mistake for one.
        metrics = {
            "model": None, "data": str(data), "source": "score", "completions": None,
            "n_questions": len(rows), "questions_per_task": dict(sorted(Counter(row.task for row in rows).items())),
            "baselines": tables, "loader": load_report.to_dict(),
            "skipped": load_report.skipped, "n_skipped": len(load_report.skipped),
            "wall_time_s": round(time.perf_counter() - started, 2),
        }
        atomic_write_json(out / "metrics.json", metrics)
        atomic_write_json(out / "run.json", stamp)
        if report:
            from embodied_r.evaluation.report import build_report

            build_report([out], out)
    return metrics
