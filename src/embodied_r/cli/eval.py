"""``embodied-r eval``: evaluate a reasoner on prompt rows or official Embodied-R processed JSON."""

from __future__ import annotations

import argparse
from typing import Any

ORDER = 50


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a reasoning model: batched greedy generation, per-task accuracy, resumable",
        description="Evaluate a reasoning model on prompt rows (.jsonl from build-prompts) or an official "
        "Embodied-R processed JSON file. Predictions are written as they finish; rerunning the same "
        "command resumes.",
    )
    parser.add_argument("--data", required=True, help="prompt-row .jsonl or official processed .json")
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="built-in name, local folder or Hugging Face id (default: %(default)s)")
    parser.add_argument("--out", required=True, help="output folder (predictions.jsonl, metrics.json)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N questions")
    parser.add_argument("--batch-size", type=int, default=8, help="prompts per generate() call (default: 8)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="completion length cap (default: 256)")
    parser.add_argument("--dtype", default="auto", help="auto | bfloat16 | float32 (default: auto)")
    return parser


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.evaluation.runner import run_eval

    if args.limit is not None and args.limit <= 0:
        raise CLIError("--limit must be a positive number")
    if args.batch_size <= 0 or args.max_new_tokens <= 0:
        raise CLIError("--batch-size and --max-new-tokens must be positive")
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console(), transient=False) as bar:
        task = bar.add_task("evaluating", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        metrics = run_eval(args.data, args.model, args.out, limit=args.limit, batch_size=args.batch_size,
                           max_new_tokens=args.max_new_tokens, dtype=args.dtype, progress=progress)
    print_metrics(metrics)
    return 0


def print_metrics(metrics: dict[str, Any]) -> None:
    from embodied_r.cli.common import console, print_table

    rows = [[task, t["n"], t["score"], t["unparsed"]] for task, t in metrics["tasks"].items()]
    overall = metrics["overall"]
    rows.append(["overall (micro, sample-weighted)", overall["n"], overall["micro"], overall["unparsed"]])
    rows.append(["overall (macro, mean of tasks)", overall["n"], overall["macro"], None])
    print_table(f"{metrics['model']} on {metrics['data']}", ["task", "n", "accuracy", "unparsed"], rows)
    out = console()
    out.print(f"unparsed rate {overall['unparsed_rate']:.1%}; {metrics['resumed']} predictions resumed, "
              f"{metrics['generated_this_run']} generated this run; wall time {metrics['wall_time_s']} s")
    if metrics.get("n_skipped"):
        out.print(f"{metrics['n_skipped']} question(s) skipped as unusable (see skipped in metrics.json):")
        for item in metrics["skipped"][:10]:
            out.print(f"  {item['id']}: {item['reason']}")
