"""``embodied-r demo``: the whole Embodied-R pipeline on synthetic data, on a CPU, in minutes."""

from __future__ import annotations

import argparse
from typing import Any

ORDER = 1


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo",
        help="run the whole pipeline on synthetic data: world -> key frames -> perception -> eval -> GRPO -> eval -> report",
        description="Generate a small synthetic egocentric dataset, extract key frames, describe them with the "
        "oracle perception backend, evaluate the default reasoner, train it with GRPO (format, accuracy and "
        "logical-consistency rewards in three stages), evaluate again and write a report. Each stage's "
        "output is kept in --out and each stage's command is printed so it can be rerun alone; rerunning "
        "the demo skips finished stages.",
    )
    parser.add_argument("--out", default="runs/demo", help="output folder (default: %(default)s)")
    parser.add_argument("--minutes", type=float, default=15.0,
                        help="time budget that sizes the data and training on a 2-core CPU (default: 15)")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="reasoner to start from (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes for rendering/key frames")
    parser.add_argument("--force", action="store_true", help="rerun every stage even if it finished before")
    return parser


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.demo import Stage, run_demo

    out = console()

    def on_stage(stage: Stage, index: int, total: int, status: str) -> None:
        out.rule(f"[{index}/{total}] {stage.name}: {stage.what}")
        out.print(f"$ {stage.command}", markup=False, style="dim")
        if status != "running":
            out.print(status)

    try:
        summary = run_demo(args.out, minutes=args.minutes, model=args.model, workers=args.workers,
                           force=args.force, on_stage=on_stage)
    except (RuntimeError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    out.rule("demo finished")
    print_table("time per stage", ["stage", "seconds"],
                [[name, info["seconds"]] for name, info in summary["stages"].items()])
    print_before_after(summary)
    out.print(f"Report: {Path(args.out) / 'report' / 'report.html'} (open it in a browser; it works offline)")
    return 0


def print_before_after(summary: dict[str, Any]) -> None:
    from embodied_r.cli.common import console, print_table

    before, after = summary.get("eval_before"), summary.get("eval_after")
    if not before or not after:
        return
    rows = []
    for task in sorted(set(before["tasks"]) | set(after["tasks"])):
        b, a = before["tasks"].get(task, {}), after["tasks"].get(task, {})
        rows.append([task, b.get("n"), b.get("score"), a.get("score")])
    for key in ("micro", "macro"):
        rows.append([f"overall ({key})", before["overall"]["n"], before["overall"][key], after["overall"][key]])
    rows.append(["unparsed rate", None, before["overall"]["unparsed_rate"], after["overall"]["unparsed_rate"]])
    for name, metrics in (("before", before), ("after", after)):
        consistency = metrics.get("consistency", {}) if isinstance(metrics.get("consistency"), dict) else {}
        if consistency.get("rate") is not None:
            rows.append([f"logical consistency ({name})", consistency.get("n"), consistency.get("rate"), None])
    print_table("held-out scenes: before vs after GRPO", ["task", "n", "before", "after"], rows)
    console().print("Scores are accuracy for multiple choice and mean relative accuracy for numeric answers; "
                    "a small model after a few minutes of CPU training is not expected to reason well — "
                    "these are the measured numbers, whatever they are.")
