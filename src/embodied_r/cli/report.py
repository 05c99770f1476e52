"""``embodied-r report``: rebuild metrics.json, report.html and plots from eval and training run folders."""

from __future__ import annotations

import argparse

HELP = "HTML report + PNG plots from eval runs (before/after when two) and training runs (curves)"
DESCRIPTION = ("Build an offline report from one or more folders: eval outputs (metrics.json, predictions.jsonl) "
               "and training runs (metrics.jsonl or checkpoint-*/trainer_state.json).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="eval output folders and/or training run folders")
    parser.add_argument("--out", required=True, metavar="DIR", help="report folder (metrics.json, report.html, *.png)")


def run(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import console
    from embodied_r.evaluation.report import build_report

    summary = build_report(args.runs, args.out)
    console().print(f"report for {len(summary['runs'])} eval run(s) and {len(summary['training'])} training run(s): "
                    f"{args.out}/report.html ({len(summary['images'])} plot(s))", markup=False)
    return 0
