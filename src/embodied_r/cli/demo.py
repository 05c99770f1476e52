"""``embodied-r demo``: the whole Embodied-R pipeline on synthetic data, on a CPU, in minutes."""

from __future__ import annotations

import argparse
from typing import Any

HELP = ("run the whole pipeline on synthetic data: world -> key frames -> perception -> eval -> format warm-up + "
        "GRPO -> eval -> report")
DESCRIPTION = ("Generate a small synthetic egocentric dataset, extract key frames, describe them with the oracle "
               "perception backend, evaluate the default reasoner, teach it the answer format in a few "
               "supervised steps, train it with GRPO (format, accuracy and logical-consistency rewards in three "
               "stages), evaluate again and write a report. Each stage's output is kept in --out and each "
               "stage's command is printed so it can be rerun alone; rerunning the demo skips finished stages.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/demo", help="output folder (default: %(default)s)")
    parser.add_argument("--minutes", type=float, default=15.0,
                        help="time budget that sizes the data and training on a 2-core CPU (default: 15)")
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="reasoner to start from (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes for rendering/key frames")
    parser.add_argument("--force", action="store_true", help="rerun every stage even if it finished before")


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
    print_before_after(summary, Path(args.out))
    print_judge_verdict(Path(args.out))
    out.print(f"Report: {Path(args.out) / 'report' / 'report.html'} (open it in a browser; it works offline)")
    return 0


def print_judge_verdict(out_dir: Any) -> None:
    """Say plainly whether the consistency stage of the demo's training measured anything."""
    from embodied_r.cli.common import console
    from embodied_r.core.io import read_json

    path = out_dir / "train" / "judge_probe.json"
    if not path.is_file():
        return
    probe = read_json(path)
    if probe.get("passed"):
        console().print(f"Consistency judge passed its probe: {probe.get('message')}", markup=False)
    else:
        console().print(
            "The consistency stage of this training is uninformative: its judge (the policy itself, the only "
            f"model this CPU demo has) failed the judge probe - {probe.get('message')}. Its consistency "
            "reward pays correct answers mostly when the gold letter is the judge's favourite, whatever the "
            "reasoning says. Train with a stronger reference_model or an endpoint to measure consistency "
            "(docs/consistency.md).",
            markup=False)


def leading_letter(metrics: dict[str, Any]) -> str | None:
    """``"A 19/23"``: the most predicted letter and its share of the parsed choice answers."""
    bias = (metrics.get("position_bias") or {}).get("overall") or {}
    letter = bias.get("most_predicted")
    return f"{letter} {bias['predicted'][letter]}/{bias['n_parsed']}" if letter else None


def print_grpo_steps(train: dict[str, Any]) -> None:
    """How many GRPO steps ran, and whether the time budget ended them before max_steps."""
    from embodied_r.cli.common import console

    budget = train.get("time_budget") or {}
    if "global_step" not in train:
        return
    if budget.get("stopped_at_step"):
        console().print(f"GRPO: {train['global_step']} of {budget['max_steps']} steps; the demo's time budget "
                        f"({budget['minutes']:.1f} min for warm-up and training) ended it there", markup=False)
    else:
        console().print(f"GRPO: {train['global_step']} steps", markup=False)


def print_before_after(summary: dict[str, Any], out_dir: Any = None) -> None:
    from embodied_r.cli.common import console, print_table
    from embodied_r.core.intervals import format_interval, prediction_difference
    from embodied_r.core.io import read_jsonl

    keys = [(key, label) for key, label in
            (("eval_before", "before"), ("eval_warmup", "after warm-up"), ("eval_after", "after GRPO"))
            if summary.get(key)]
    columns = [(label, summary[key]) for key, label in keys]
    if len(columns) < 2:
        return
    tasks = sorted({task for _, metrics in columns for task in metrics["tasks"]})
    rows = []
    for task in tasks:
        cells = [metrics["tasks"].get(task, {}) for _, metrics in columns]
        rows.append([task, next((c.get("n") for c in cells if c), None),
                     *[format_interval(c.get("score"), c.get("ci95")) for c in cells]])
    rows.append(["overall (micro)", columns[0][1]["overall"]["n"],
                 *[format_interval(m["overall"]["micro"], m["overall"].get("ci95")) for _, m in columns]])
    rows.append(["overall (macro)", None, *[format_interval(m["overall"]["macro"], None) for _, m in columns]])
    rows.append(["unparsed rate", None, *[m["overall"]["unparsed_rate"] for _, m in columns]])
    # One letter for most choice questions is a prior, not reading: shown beside the scores it explains.
    rows.append(["most predicted letter", None, *[leading_letter(m) for _, m in columns]])
    rates = [(m["consistency"].get("overall") or {}).get("rate") if isinstance(m.get("consistency"), dict) else None
             for _, m in columns]
    if any(rate is not None for rate in rates):
        rows.append(["logical consistency", None, *rates])
    print_table("held-out scenes: score % [95 % interval]", ["task", "n", *[label for label, _ in columns]], rows)
    print_grpo_steps(summary.get("train") or {})
    if out_dir is not None:
        predictions = {key: read_jsonl(out_dir / key / "predictions.jsonl") for key, _ in keys
                       if (out_dir / key / "predictions.jsonl").is_file()}
        labels = dict(keys)
        for first, second in (("eval_warmup", "eval_after"), ("eval_before", "eval_after")):
            if first in predictions and second in predictions:
                diff = prediction_difference(predictions[first], predictions[second])
                if diff["ci95"]:
                    low, high = diff["ci95"]
                    console().print(f"{labels[second]} vs {labels[first]}: {100 * diff['difference']:+.1f} points "
                                    f"[{100 * low:+.1f}, {100 * high:+.1f}] on {diff['n']} questions -> "
                                    f"{diff['verdict']}", markup=False)
    console().print("Scores are accuracy for multiple choice and mean relative accuracy for numeric answers. "
                    "The warm-up teaches the answer format with random answers, so any accuracy above the "
                    "baselines after it comes from GRPO or chance; a 135M model after a few minutes of CPU "
                    "training is not expected to reason well. These are the measured numbers, whatever they are.")
