"""``embodied-r score``: metrics, reference tables and the report for completions produced elsewhere."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "score completions produced elsewhere (vLLM, an API, another harness): metrics.json and report"
DESCRIPTION = ("Score a completions file ({\"id\", \"completion\"} per line) against the questions of --data with "
               "the same scorer, reference tables (lmms-eval's names and rules) and report as `eval`; no model is "
               "loaded. Completion ids that name no question stop the run with the list; so do questions without a "
               "completion unless --missing says otherwise. Without --completions only the baselines are measured, "
               "on every question (e.g. `--baselines solver`: the exact solver's ceiling of a prompt file); "
               "metrics.json then has \"model\": null and no model scores.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from embodied_r.cli.common import add_method_argument
    from embodied_r.evaluation.score_run import MISSING_RULES, MODEL_FREE_BASELINES

    parser.add_argument("--data", required=True, metavar="SPEC",
                        help="the questions: prompt-row .jsonl, official processed .json, or NAME:PATH with NAME one "
                        "of urbanvideo, vsibench, vsibench-merged, egoschema, mvbench, synthetic, qa (no perception "
                        "needed), or MODULE:FUNCTION:PATH for a loader of your own package")
    add_method_argument(parser)
    parser.add_argument("--completions", default=None, metavar="FILE.jsonl",
                        help="one {\"id\": ..., \"completion\": \"...\"} object per line; the answer is read from the "
                        "last <answer>...</answer>, as for `eval`. Leave it out to measure only the --baselines (no "
                        "model scored; --missing and --name are then refused)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (predictions.jsonl, metrics.json, "
                        "report.html)")
    parser.add_argument("--missing", default=None, choices=list(MISSING_RULES),
                        help="questions without a completion: stop with their list (error), score them 0 as "
                        "unanswered, or leave them out; listed in metrics.json either way (default: error; only "
                        "with --completions)")
    parser.add_argument("--baselines", default="random,prior,answer-prior",
                        help=f"comma list of {', '.join(MODEL_FREE_BASELINES)}, or 'none' (default: %(default)s)")
    parser.add_argument("--prior-from", default=None, metavar="FILE",
                        help="fit the letter- and answer-prior baselines on these prompt rows (e.g. the training "
                        "split) instead of leave-one-out on the scored questions")
    parser.add_argument("--name", default=None, help="label of the run in tables (default: the completions file "
                        "name; only with --completions)")
    parser.add_argument("--no-report", action="store_true", help="skip report.html and plots")


def run(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import CLIError, method_from_args
    from embodied_r.evaluation.score_run import MODEL_FREE_BASELINES, score_run

    method_from_args(args)  # registered before any row is read
    baselines = [] if args.baselines.strip() == "none" else [b.strip() for b in args.baselines.split(",") if b.strip()]
    unknown = sorted(set(baselines) - set(MODEL_FREE_BASELINES))
    if unknown:
        raise CLIError(f"--baselines: {unknown} not available without a model; choose from "
                       f"{list(MODEL_FREE_BASELINES)} or 'none' (`embodied-r eval` runs the others)")
    if args.completions is None:
        # Refused rather than ignored: either one given suggests a forgotten --completions.
        given = [flag for flag, value in (("--missing", args.missing), ("--name", args.name)) if value is not None]
        if given:
            raise CLIError(f"{' and '.join(given)} apply to completions, and no --completions was given; pass "
                           "--completions FILE.jsonl to score a model, or drop them to measure only the baselines")
        if not baselines:
            raise CLIError("nothing to score: no --completions and --baselines none; pass --completions FILE.jsonl, "
                           f"or --baselines with some of {', '.join(MODEL_FREE_BASELINES)} (e.g. solver)")
    metrics = score_run(args.data, args.completions, args.out, missing=args.missing or "error", baselines=baselines,
                        name=args.name, report=not args.no_report, prior_from=args.prior_from)
    print_scores(metrics)
    return 0


def print_scores(metrics: dict[str, Any]) -> None:
    """The per-task table, the accounting of ids, the baselines and the reference tables (without
    completions: the baselines only)."""
    from embodied_r.cli.common import console, print_table, print_task_scores
    from embodied_r.evaluation.reference_names import reference_note, reference_rows

    out = console()
    if metrics["completions"] is None:
        out.print(f"no completions: no model scored; the baselines of {metrics['n_questions']} question(s) of "
                  f"{metrics['data']} ({metrics['n_skipped']} skipped by the loader)", markup=False)
        _print_baselines(metrics)
        return
    print_task_scores(metrics)
    overall = metrics["overall"]
    done = metrics["completions"]
    out.print(f"{done['n_scored']} question(s) scored from {done['n_completions']} completion(s); unparsed rate "
              f"{overall['unparsed_rate']:.1%}", markup=False)
    if done["n_missing"]:
        what = "scored 0 as unanswered" if done["missing_rule"] == "unanswered" else "left out"
        out.print(f"{done['n_missing']} question(s) had no completion ({what}): "
                  f"{', '.join(done['missing_ids'][:10])}{' ...' if done['n_missing'] > 10 else ''}", markup=False)
    if done["n_for_skipped_questions"]:
        out.print(f"{done['n_for_skipped_questions']} completion(s) are for questions the loader skipped (not "
                  "scored; see completions.for_skipped_questions in metrics.json)", markup=False)
    _print_baselines(metrics)
    reference = reference_rows(metrics)
    if reference:
        print_table("under the reference harness's names and rules (lmms-eval), %", ["benchmark", "metric", "score %"],
                    [[b, k, "–" if v is None else f"{v:.1f}"] for b, k, v in reference])
    note = reference_note(metrics)
    if note:
        out.print(note, markup=False)


def _print_baselines(metrics: dict[str, Any]) -> None:
    from embodied_r.cli.common import print_table
    from embodied_r.cli.eval import print_solver_table

    baselines = [[name, b.get("status"), (b.get("overall") or {}).get("micro")]
                 for name, b in metrics.get("baselines", {}).items()]
    if baselines:
        print_table("baselines", ["baseline", "status", "micro"], baselines)
    print_solver_table(metrics)
