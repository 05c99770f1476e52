"""After generation: baselines, the consistency judge, and the assembled ``metrics.json`` content.

Each step records its outcome (``status: ok | not run | failed`` with a reason) instead of raising, so a
judge endpoint that is down or a baseline that cannot run never costs the model's finished predictions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.records import PromptRow
from embodied_r.core.task_table import task_table
from embodied_r.evaluation.baselines import (
    PRIORS,
    blind_rows,
    direct_answer_rows,
    lacking_reason,
    not_run,
    position_bias,
    prior_baseline,
    random_baseline,
)
from embodied_r.evaluation.benchmarks.common import LoadReport

logger = logging.getLogger(__name__)

BASELINES = ("random", "prior", "answer-prior", "direct", "vlm_only", "blind", "text-rule", "solver")


def run_baselines(names: Sequence[str], rows: Sequence[PromptRow], out: Path, engine_factory: Callable[[], Any],
                  batch_size: int, direct_max_new_tokens: int, perception: Any = None,
                  context: Any = None, prior_rows: Sequence[PromptRow] | None = None,
                  max_new_tokens: int | None = None, completion_prefix: str = "",
                  prior_source: str | None = None) -> dict[str, Any]:
    """Tables for the requested baselines, keyed by name; ``direct`` and ``blind`` prompts follow the
    ``context`` policy; the letter and answer priors are fit on ``prior_rows`` (e.g. the training split,
    read from ``prior_source``, which their tables name) when given, else leave-one-out. ``blind`` is
    generated exactly as the model's own answers were, with its ``max_new_tokens`` and ``completion_prefix``
    (required for it); ``text-rule`` and ``solver`` need no model."""
    from embodied_r.evaluation.predict import generate_resumable, prediction_context
    from embodied_r.inference.context_policy import ContextPolicy

    context = context or ContextPolicy()
    unknown = sorted(set(names) - set(BASELINES))
    if unknown:
        raise ValueError(f"unknown baseline(s) {unknown}; choose from {list(BASELINES)}")
    tables: dict[str, Any] = {}
    for name in names:
        if name == "random":
            tables[name] = random_baseline(rows)
        elif name in PRIORS:
            tables[name] = prior_baseline(rows, prior_rows, name=name)
            if prior_rows is not None:
                tables[name]["fit_on"] = f"{prior_source or 'a separate prior set'} ({len(prior_rows)} questions)"
        elif name == "direct":
            reason = lacking_reason(rows, "direct_prompt", "a direct-answer prompt")
            if reason:
                tables[name] = not_run("direct", reason)
                continue
            predictions, _, _ = generate_resumable(engine_factory, direct_answer_rows(rows),
                                                out / "baselines" / "direct.jsonl", batch_size, direct_max_new_tokens,
                                                context=context)
            table = task_table(predictions)
            table.update({"name": "direct", "status": "ok", "note": "the reasoner answering without thinking",
                          "max_new_tokens": direct_max_new_tokens, "context": prediction_context(predictions, context)})
            tables[name] = table
        elif name == "vlm_only":
            tables[name] = vlm_only_baseline(rows, perception, out)
        elif name == "blind":
            tables[name] = blind_baseline(rows, out, engine_factory, batch_size, max_new_tokens, completion_prefix,
                                          context)
        elif name == "text-rule":
            tables[name] = text_rule_baseline(rows, out)
        elif name == "solver":
            tables[name] = solver_baseline(rows, out)
    return tables


def blind_baseline(rows: Sequence[PromptRow], out: Path, engine_factory: Callable[[], Any], batch_size: int,
                   max_new_tokens: int | None, completion_prefix: str, context: Any) -> dict[str, Any]:
    """The model on the questions without their frame descriptions, into ``out/baselines/blind.jsonl``."""
    from embodied_r.core.chat import has_image
    from embodied_r.core.keyframe_chat import is_keyframe_chat
    from embodied_r.evaluation.baselines import keyframe_blind_rows
    from embodied_r.evaluation.predict import generate_resumable, prediction_context

    if max_new_tokens is None:
        raise ValueError("the blind baseline needs the model's max_new_tokens: it must generate as the model did")
    images = sum(1 for row in rows if has_image(row))
    keyframe_rows = sum(1 for row in rows if is_keyframe_chat(row.prompt))
    if images and keyframe_rows != len(rows):
        return not_run("blind", f"{images} image row(s): their video is in the images, not in frame lines that "
                                "could be removed; not run on image rows")
    # Key-frame rows (the VLM arm) lose their frames, lines and images together; text rows their descriptions,
    # as their method removes them.
    reason = None if keyframe_rows else lacking_reason(rows, "blind_prompt", "a blind prompt")
    if reason:
        return not_run("blind", reason)
    blind = keyframe_blind_rows(rows) if keyframe_rows else blind_rows(rows)
    # Same budget and completion prefix as the model's own pass (runner.run_eval): only the prompt differs.
    predictions, _, _ = generate_resumable(engine_factory, blind, out / "baselines" / "blind.jsonl", batch_size,
                                           max_new_tokens, completion_prefix=completion_prefix, context=context)
    untouched = [row.id for row in blind if not row.meta.get("blind_removed_frames")]
    table = task_table(predictions)
    table.update({"name": "blind", "status": "ok",
                  "note": "the model answering without the video (key frames and their lines removed)" if keyframe_rows
                  else "the model answering without the video description (frame lines removed)",
                  "max_new_tokens": max_new_tokens, "completion_prefix": completion_prefix,
                  "n_no_video_text": len(untouched), "no_video_text_ids": untouched[:20],
                  "context": prediction_context(predictions, context)})
    if untouched:
        table["reason"] = f"{len(untouched)} of {len(rows)} question(s) had no video text to remove (still answered)"
    return table


def text_rule_baseline(rows: Sequence[PromptRow], out: Path) -> dict[str, Any]:
    """``text_rule_baseline.text_rule_table``, with each row's result written to ``out/baselines/text-rule.jsonl``."""
    from embodied_r.core.io import write_jsonl
    from embodied_r.evaluation.text_rule_baseline import text_rule_predictions, text_rule_table

    predictions = text_rule_predictions(rows)
    (out / "baselines").mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "baselines" / "text-rule.jsonl", predictions)  # deterministic: rewritten every run
    return text_rule_table(rows, predictions)


def solver_baseline(rows: Sequence[PromptRow], out: Path) -> dict[str, Any]:
    """``solver_baseline.solver_table``, with each row's result written to ``out/baselines/solver.jsonl``. A
    solver that raises is a bug: unlike a judge that is down, its exception is not recorded but raised."""
    from embodied_r.core.io import write_jsonl
    from embodied_r.evaluation.solver_baseline import solver_predictions, solver_table

    predictions = solver_predictions(rows)
    (out / "baselines").mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "baselines" / "solver.jsonl", predictions)  # deterministic: rewritten every run
    return solver_table(rows, predictions)


def vlm_only_baseline(rows: Sequence[PromptRow], perception: Any, out: Path) -> dict[str, Any]:
    """The perception VLM answering from the key frames, or precisely why it did not run."""
    backend = getattr(perception, "backend", None)
    if not backend:
        return not_run("vlm_only", "no perception backend given (--perception-backend openai|transformers "
                                   "with --keyframes): VLM-only answers need a VLM")
    if backend == "oracle":
        return not_run("vlm_only", "the oracle backend writes simulator ground truth; it cannot answer questions")
    reason = lacking_reason(rows, "perception_backend", "a perception stage") \
        or lacking_reason(rows, "keyframe_images", "key-frame images")
    if reason:
        return not_run("vlm_only", reason)
    from embodied_r.evaluation.vlm_only import run_vlm_only
    from embodied_r.methods import DEFAULT_METHOD, method_for_row

    # The backend is the rows' method's (one VLM answers them all); no rows: the default method's, as before.
    methods = {method.name: method for method in (method_for_row(row.meta) for row in rows)}
    if len(methods) > 1:
        return not_run("vlm_only", f"the questions belong to several methods ({', '.join(sorted(methods))}), each "
                                   "with its own perception backend; evaluate them apart")
    method = next(iter(methods.values()), DEFAULT_METHOD)
    predictions, excluded = run_vlm_only(rows, method.make_perception_backend(backend, **perception.options),
                                         perception.keyframes, out / "baselines" / "vlm_only.jsonl")
    table = task_table(predictions)
    table.update({"name": "vlm_only", "status": "ok" if predictions else "failed",
                  "note": f"{backend} VLM answering from the key frames", "excluded": excluded,
                  "n_excluded": len(excluded)})
    if not predictions:
        table["reason"] = f"no question could be answered ({len(excluded)} excluded, e.g. " \
                          f"{excluded[0]['reason'] if excluded else 'none'})"
    return table


def run_consistency(spec: str | None, judge_model: str | None, model_name: str, dtype: str,
                    rows: Sequence[PromptRow], predictions: Sequence[dict[str, Any]], out: Path,
                    sees_letters: bool = False, scoring: str | None = None,
                    probe_cases: int | None = None) -> dict[str, Any]:
    """The logical-consistency rate with ``spec``'s judge, its probe (``probe_cases`` content cases, the
    probe's default when None) and identity flags, or why it was not measured."""
    if not spec:
        return {"status": "not run", "reason": "no --judge given"}
    from embodied_r.judge.identity import judge_flags
    from embodied_r.judge.rate import consistency_summary, judge_predictions, make_judge

    try:
        judge = make_judge(spec, model_name, judge_model=judge_model, dtype=dtype, sees_letters=sees_letters,
                           scoring=scoring)
        probe = probe_for_eval(judge, rows, out, probe_cases)
        judgements = judge_predictions(judge, {r.id: r for r in rows}, predictions, out / "judgements.jsonl")
    except Exception as exc:  # noqa: BLE001 - recorded in metrics.json; predictions are already safe on disk
        logger.error("consistency judge failed: %s", exc)
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}", "judge": spec}
    name = getattr(judge, "name", spec)
    flags = judge_flags(spec, name, model_name)
    if probe.get("passed") is False:
        flags.append("weak judge: it failed its probe, so this rate does not measure consistency")
    for flag in flags:
        logger.warning("consistency judge %s: %s", name, flag)
    return {"status": "ok", "judge": name, "sees_letters": sees_letters, "scoring": getattr(judge, "scoring", None),
            "probe": probe, "flags": flags,
            **consistency_summary(judgements)}


def probe_for_eval(judge: Any, rows: Sequence[PromptRow], out: Path, cases: int | None = None) -> dict[str, Any]:
    """The judge probe on the evaluated questions (reused from ``out/judge_probe.json`` when the judge
    and the number of cases are the same), or why it could not run."""
    from embodied_r.judge.probe import DEFAULT_CASES, ProbeError, probe_fingerprint, probe_record

    cases = cases or DEFAULT_CASES
    # The default adds nothing to the fingerprint, so a probe saved without a case count is reused.
    fingerprint = probe_fingerprint(judge, rows, **({} if cases == DEFAULT_CASES else {"cases": cases}))
    try:
        return probe_record(judge, rows, out / "judge_probe.json", fingerprint, n_cases=cases)
    except ProbeError as exc:
        return {"passed": None, "message": f"probe not run: {exc}", "fingerprint": fingerprint}


def assemble_metrics(predictions: Sequence[dict[str, Any]], rows: Sequence[PromptRow], baselines: dict[str, Any],
                     consistency: dict[str, Any], load_report: LoadReport) -> dict[str, Any]:
    """The model's task table plus everything reported beside it."""
    from embodied_r.evaluation.reference_names import reference_metrics

    metrics = task_table(predictions)
    # Rows the context policy skipped have no completion by design; they are counted in ``context``.
    empty = [p for p in predictions if not str(p.get("completion", "")).strip()
             and (((p.get("meta") or {}).get("context") or {}).get("action") != "skipped")]
    metrics["overall"]["empty_completions"] = len(empty)
    for task, table in metrics["tasks"].items():
        table["empty_completions"] = sum(1 for p in empty if p["task"] == task)
        table["metric"] = "MRA" if any(p["task"] == task and p.get("answer_type") == "number"
                                       for p in predictions) else "accuracy"
    # The reference harness's names and aggregation (lmms-eval), beside ours; the official Embodied-R script's
    # parser reads only the answers of methods that write them in its format.
    from embodied_r.methods import method_for_row

    embodied_r_ids = {row.id for row in rows if method_for_row(row.meta).embodied_r_script_format}
    # Merged relative-direction rows keep their level here, and the reference averages by level.
    question_types = {row.id: str(row.meta["question_type"]) for row in rows if row.meta.get("question_type")}
    metrics["reference"] = reference_metrics(predictions, embodied_r_ids, question_types)
    metrics["position_bias"] = position_bias(predictions)
    metrics["baselines"] = baselines
    metrics["consistency"] = consistency
    metrics["loader"] = load_report.to_dict()
    return metrics
