"""``embodied-r eval``: batched, resumable evaluation of a reasoner on prompt rows or any benchmark.

Predictions are appended to ``predictions.jsonl`` batch by batch; a rerun reads the ids already there
and generates only the rest, so a killed run loses at most the batch in flight. The same holds for the
direct-answer baseline (``baselines/direct.jsonl``) and the consistency judge (``judgements.jsonl``).
``metrics.json`` is rewritten atomically at the end with per-task tables (micro and macro averages,
MRA for numeric tasks, unparsed and empty answers counted), the exclusions report, the baselines, the
position-bias report and the logical-consistency rate; ``report.html`` is then built from it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.io import DataFileError, JsonlAppender, atomic_write_json, claimed_folder, read_json, read_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.benchmarks.common import LoadReport
from embodied_r.evaluation.benchmarks.registry import parse_spec
from embodied_r.evaluation.predict import generate_resumable, prediction_context
from embodied_r.evaluation.settings import EvalSettings
from embodied_r.inference.context_policy import ContextPolicy

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------------


def load_eval_rows(data: str | Path, prompt_version: str | None = None,
                   perception: Any = None, out_dir: str | Path | None = None) -> tuple[list[PromptRow], LoadReport]:
    """Rows from a processed ``.json``, a PromptRow ``.jsonl``, or a loader spec with its perception
    (``embodied_r.evaluation.inputs``)."""
    from embodied_r.evaluation.inputs import load_inputs

    return load_inputs(data, prompt_version=prompt_version, perception=perception, out_dir=out_dir)


def run_eval(data: str | Path, model_name: str, out_dir: str | Path, settings: EvalSettings | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Evaluate ``model_name`` on ``data``; write predictions.jsonl, metrics.json (and report.html) into ``out_dir``.

    ``settings`` (default: ``EvalSettings()``) says how; see ``evaluation.settings``. Baselines may be
    ``random``, ``prior``, ``answer-prior``, ``direct``, ``vlm_only``, ``blind``, ``text-rule`` and ``solver``; of
    them only ``blind`` gets the completion prefix (with the same ``max_new_tokens``: it is the model's own pass
    without the frame descriptions). A judge turns on the logical-consistency rate, with the judge's probe. What the
    context policy did is recorded per prediction and counted in ``metrics.json``'s ``context``; the
    settings a recipe gave are recorded under ``generation``. Image rows are answered by a
    vision-language model (``evaluation.vl_generation``), and the input used is recorded as ``input``.

    With a ``shard`` the run writes into ``out_dir/shard-i-of-n`` (one process or GPU per shard); a later
    run without ``shard`` on the same ``out_dir`` merges the shards' predictions (same model, data and
    settings, checked) and generates only what none of them holds. The accuracy rule ``official``
    rescores the reasoner's answers as Embodied-R's released reward read them
    (``evaluation.accuracy_rule``).
    """
    settings = settings or EvalSettings()  # its values were checked when it was built: before anything loads
    gen, base, judge = settings.generation, settings.baselines, settings.judge
    context = gen.context
    started = time.perf_counter()
    out = Path(out_dir)
    if settings.shard is not None:
        out = out / shard_folder_name(*settings.shard)
    if out.exists() and not out.is_dir():
        raise DataFileError(f"--out {out}: is a file; give a folder for predictions.jsonl and metrics.json")
    from embodied_r.evaluation.analysis import assemble_metrics, run_baselines, run_consistency

    with claimed_folder(out):  # one writer per folder; a run that fails before writing leaves none behind
        rows, load_report = load_eval_rows(data, prompt_version=gen.prompt_version, perception=settings.perception,
                                           out_dir=out)
        from embodied_r.evaluation.baselines import PRIORS
        from embodied_r.evaluation.inputs import load_prior_rows, resolve_input

        # Before any generation: a bad --prior-from file fails at once, not after the model's answers.
        prior_rows = (load_prior_rows(base.prior_data)
                      if base.prior_data is not None and set(PRIORS) & set(base.names) else None)
        used_input = resolve_input(rows, settings.prompt_input, data)
        if used_input == "image":
            from embodied_r.evaluation.vl_generation import require_vision_model

            require_vision_model(model_name)  # a text model would read the text and never see the image
        if settings.limit is not None:
            rows = rows[:settings.limit]
        if settings.shard is not None:
            rows = rows[settings.shard[0]::settings.shard[1]]
        if not rows:
            if load_report.skipped:
                raise DataFileError(f"{data}: no usable questions ({len(load_report.skipped)} skipped: "
                                    f"{load_report.reason_counts()})")
            raise DataFileError(f"{data}: holds no questions")
        write_stamp = _check_same_run(out, data, model_name, gen.completion_prefix, context)
        if settings.shard is None:
            merge_shards(out, rows, data, model_name, gen.completion_prefix, context)
        cache: dict[str, Any] = {}

        def engine_factory() -> Any:
            if "engine" not in cache:
                if used_input == "image":
                    from embodied_r.evaluation.vl_generation import make_vl_engine

                    # Image paths in the rows are relative to the data file's folder.
                    cache["engine"] = make_vl_engine(model_name, engine=gen.engine, dtype=gen.dtype,
                                                     image_dir=Path(parse_spec(str(data)).path).parent)
                else:
                    from embodied_r.inference.generation import make_engine

                    cache["engine"] = make_engine(model_name, engine=gen.engine, dtype=gen.dtype)
                write_stamp()  # only a model that loads claims the folder (a typo leaves it free)
            return cache["engine"]

        predictions, generated, duplicates = generate_resumable(
            engine_factory, rows, out / "predictions.jsonl", gen.batch_size, gen.max_new_tokens, progress,
            completion_prefix=gen.completion_prefix, context=context)
        text_only = {"direct"} if used_input == "image" else set()  # its prompt is rebuilt from text
        baseline_tables = run_baselines([b for b in base.names if b not in text_only], rows, out, engine_factory,
                                        gen.batch_size, base.direct_max_new_tokens, settings.perception,
                                        context=context, prior_rows=prior_rows, max_new_tokens=gen.max_new_tokens,
                                        completion_prefix=gen.completion_prefix, prior_source=str(base.prior_data))
        from embodied_r.evaluation.accuracy_rule import apply_accuracy_rule

        predictions = apply_accuracy_rule(out, rows, settings.accuracy_rule, predictions, baseline_tables)
        if text_only & set(base.names):
            from embodied_r.evaluation.baselines import not_run

            baseline_tables["direct"] = not_run("direct", "the direct-answer prompt is rebuilt as text, which would "
                                                "leave the image out; not run on image rows")
        consistency = run_consistency(judge.spec, judge.model, model_name, gen.dtype, rows, predictions, out,
                                      sees_letters=judge.sees_letters, scoring=judge.scoring,
                                      probe_cases=judge.probe_cases)
        engine_name = cache["engine"].name if "engine" in cache else None
        metrics = assemble_metrics(predictions, rows, baseline_tables, consistency, load_report)
        metrics.update({
            "model": model_name, "data": str(data), "input": used_input, "n_questions": len(rows),
            "accuracy_rule": settings.accuracy_rule,
            "duplicate_predictions_ignored": duplicates,
            "context": prediction_context(predictions, context),
            "generated_this_run": generated, "resumed": len(rows) - generated,
            "skipped": load_report.skipped, "n_skipped": len(load_report.skipped),
            "generation": {"do_sample": False, "max_new_tokens": gen.max_new_tokens, "batch_size": gen.batch_size,
                           "engine": engine_name or gen.engine, "input": used_input,
                           "prompt_version": gen.prompt_version or rows[0].meta.get("prompt_version"),
                           "completion_prefix": gen.completion_prefix, "from_recipe": gen.from_recipe,
                           # Whether greedy batches went through the checked loop (None: no local model ran).
                           "greedy_loop": getattr(cache.get("engine"), "greedy_loop_report", None)},
            "perception": (settings.perception.describe()
                           if settings.perception is not None and settings.perception.given else None),
            "wall_time_s": round(time.perf_counter() - started, 2),
        })
        write_stamp()
        atomic_write_json(out / "metrics.json", metrics)
        if settings.report:
            from embodied_r.evaluation.report import build_report

            build_report([out], out)
        return metrics


def shard_folder_name(index: int, count: int) -> str:
    return f"shard-{index}-of-{count}"


def merge_shards(out: Path, rows: Sequence[Any], data: str | Path, model_name: str, completion_prefix: str,
                 context: ContextPolicy | None) -> int:
    """Append to ``out/predictions.jsonl`` the predictions the ``out/shard-*`` folders hold for ``rows``
    and it does not; each shard must be a run of the same model, data and settings. Returns how many."""
    shards = sorted(p for p in out.glob("shard-*-of-*") if (p / "predictions.jsonl").is_file())
    if not shards:
        return 0
    wanted = {row.id for row in rows}
    appender = JsonlAppender(out / "predictions.jsonl")
    have = appender.done_keys("id")
    added = 0
    for folder in shards:
        _check_same_run(folder, data, model_name, completion_prefix, context)  # raises on a mismatch
        new = [p for p in read_jsonl(folder / "predictions.jsonl") if p["id"] in wanted and p["id"] not in have]
        appender.extend(new)
        have.update(p["id"] for p in new)
        added += len(new)
    logger.info("merged %d predictions from %d shard folder(s) of %s", added, len(shards), out)
    return added


def _check_same_run(out: Path, data: str | Path, model_name: str, completion_prefix: str = "",
                    context: ContextPolicy | None = None) -> Callable[[], None]:
    """Refuse to mix predictions of a different model, data set, completion prefix or prompt rule into an
    existing output folder; returns the function that stamps the folder (called once the model has
    loaded)."""
    stamp = out / "run.json"
    spec = parse_spec(str(data))
    resolved = str(Path(spec.path).resolve())
    current = {"data": f"{spec.loader}:{resolved}" if spec.loader else resolved, "model": model_name}
    if completion_prefix:  # only when set, so folders stamped without a prefix key still resume
        current["completion_prefix"] = completion_prefix
    if context is not None and (context.rule, context.max_prompt_tokens) != (ContextPolicy().rule, None):
        # Only a non-default rule is stamped, so folders from before the policy existed still resume; the
        # batch budget changes memory, not results, and is free to change between runs.
        current["context"] = {"rule": context.rule, "max_prompt_tokens": context.max_prompt_tokens}
    if stamp.exists():
        previous = read_json(stamp)
        if previous != current:
            raise DataFileError(
                f"{out} holds a run of {json.dumps(previous)}; use another --out folder for {json.dumps(current)}"
            )
        return lambda: None

    def write() -> None:
        if not stamp.exists():
            atomic_write_json(stamp, current)

    return write
