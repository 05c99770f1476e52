"""``embodied-r demo``: the whole Embodied-R pipeline on synthetic data, on a CPU, in minutes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

HELP = ("run the whole pipeline on synthetic data: world -> key frames -> perception -> SFT on the gold answers -> "
        "eval -> GRPO -> eval -> report")
DESCRIPTION = ("Generate a small synthetic egocentric dataset, extract key frames, describe them with the oracle "
               "perception backend, fine-tune the default reasoner on the gold answers of the training questions "
               "(which also teaches it the answer format), evaluate it, train it with "
               "GRPO (format and accuracy rewards), evaluate it again (and blind, without the video text) beside "
               "the random, letter-prior, answer-prior and text-rule baselines, and write a report. Each stage's "
               "output is kept in --out and each stage's command is printed so it can be rerun alone; rerunning "
               "the demo skips finished stages.")

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/demo", help="output folder (default: %(default)s)")
    parser.add_argument("--minutes", type=float, default=15.0,
                        help="time budget that sizes the data and training on a 2-core CPU (default: 15)")
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="reasoner to start from (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes for rendering/key frames")
    parser.add_argument("--force", action="store_true", help="rerun every stage even if it finished before")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                        help="precision of training and evaluation: auto (bf16 passes where the CPU has bf16, float32 "
                        "elsewhere), float32 (the slowest CPU's arithmetic anywhere) or bfloat16 (default: auto)")
    from embodied_r.sim.world.detail_levels import DETAIL_LEVELS, SPANS  # plain names, no world code

    parser.add_argument("--tasks", default=None, metavar="T1,T2",
                        help="task types to train and evaluate on (default: last_action; `synth world` asks 12)")
    parser.add_argument("--detail", default=None, choices=DETAIL_LEVELS,
                        help="the oracle perception's detail level (default: words; docs/world.md)")
    parser.add_argument("--span", default=None, choices=SPANS,
                        help="keep only questions whose needed objects are shown in 1 key frame, in 2 at the fewest, "
                             "or in any number (default: every question)")
    parser.add_argument("--record", default=None, metavar="PATH",
                        help="also write the run's record (machine, times, every accuracy, the exact tests) as JSON, "
                             "the numbers README quotes (docs/records/demo.json)")


def run(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.demo import Stage, WorldChoice, run_demo

    out = console()

    def on_stage(stage: Stage, index: int, total: int, status: str) -> None:
        out.rule(f"[{index}/{total}] {stage.name}: {stage.what}")
        out.print(f"$ {stage.command}", markup=False, style="dim")
        if status != "running":
            out.print(status)

    tasks = None if args.tasks is None else tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    world = WorldChoice(tasks=tasks, detail=args.detail, span=args.span)
    try:
        summary = run_demo(args.out, minutes=args.minutes, model=args.model, workers=args.workers,
                           force=args.force, on_stage=on_stage, dtype=args.dtype, world=world)
    except (RuntimeError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    out.rule("demo finished")
    print_table("time per stage", ["stage", "seconds"],
                [[name, info["seconds"]] for name, info in summary["stages"].items()])
    print_before_after(summary, Path(args.out))
    out.print(f"Report: {Path(args.out) / 'report' / 'report.html'} (open it in a browser; it works offline)")
    if args.record:
        write_record(summary, Path(args.out), Path(args.record), args.minutes, args.dtype, world.flags())
    return 0


def write_record(summary: dict[str, Any], out_dir: Any, path: Any, minutes: float, dtype: str,
                 world_flags: list[str] | None = None) -> None:
    """The run's record at ``path`` (atomically), at the size the demo ran (its plan file); its command
    names the world flags the run was given."""
    from embodied_r.cli.common import console
    from embodied_r.core.io import atomic_write_json, read_json
    from embodied_r.demo import DemoSize
    from embodied_r.demo_record import demo_record

    size = DemoSize(**read_json(out_dir / "demo_plan.json")["size"])
    command = " ".join(["embodied-r demo", "--minutes", f"{minutes:g}", "--dtype", dtype, *(world_flags or [])])
    atomic_write_json(path, {"command": command,
                             **demo_record(summary, out_dir, size)})
    console().print(f"Record: {path}", markup=False)


def leading_letter(metrics: dict[str, Any]) -> str | None:
    """``"A 19/23"``: the most predicted letter and its share of the parsed choice answers."""
    bias = (metrics.get("position_bias") or {}).get("overall") or {}
    letter = bias.get("most_predicted")
    return f"{letter} {bias['predicted'][letter]}/{bias['n_parsed']}" if letter else None


def print_grpo_steps(train: dict[str, Any], metrics_file: Path | None = None) -> None:
    """How many GRPO steps ran, whether the time budget ended them before max_steps, and in how many of them
    a group's rewards differed (``metrics_file``: the train stage's metrics.jsonl)."""
    from embodied_r.cli.common import console
    from embodied_r.demo import MIN_GRPO_STEPS
    from embodied_r.training.reward_signal import steps_with_signal

    budget = train.get("time_budget") or {}
    if "global_step" not in train:
        return
    ran = int(train["global_step"])
    if budget.get("stopped_at_step"):
        console().print(f"GRPO: {ran} of {budget['max_steps']} steps; the demo's time budget "
                        f"({budget['minutes']:.1f} min for training) ended it there", markup=False)
    else:
        console().print(f"GRPO: {ran} steps", markup=False)
    signal = steps_with_signal(metrics_file, ran) if metrics_file is not None else None
    if signal is not None:
        line = f"GRPO's groups differed in reward in {signal} of {ran} steps"
        if signal == 0:
            line += ("; in every step all completions of a prompt earned one reward, so no update ran (nothing to "
                     "learn from: the SFT model already answers alike every time)")
        elif signal < ran:
            line += " (in the others every advantage was zero)"
        console().print(line, markup=False)
    if ran < MIN_GRPO_STEPS:
        console().print(f"warning: fewer than {MIN_GRPO_STEPS} GRPO steps ran, the demo's aim: the stages before "
                        "training and the evaluation after it left too little of the time budget; --minutes "
                        "gives it more time", markup=False)


def baseline_cell(metrics: dict[str, Any], name: str, task: str | None, interval: bool = True) -> str:
    """A baseline's score on a task (None: overall), from the evaluation's metrics.json, with its interval
    or without."""
    from embodied_r.core.intervals import format_interval

    table = (metrics.get("baselines") or {}).get(name) or {}
    cell = (table.get("overall") or {}) if task is None else (table.get("tasks") or {}).get(task) or {}
    score = cell.get("micro") if task is None else cell.get("score")
    return format_interval(score, cell.get("ci95") if interval else None)


SOLVER_HEADER = "solver ceiling (applies to)"


def solver_cell(metrics: dict[str, Any], task: str | None) -> str | None:
    """``"100.0 (98 %)"``: the exact solver's score on the questions its text determines, and their share."""
    table = (metrics.get("baselines") or {}).get("solver") or {}
    cell = (table.get("overall") or {}) if task is None else (table.get("tasks") or {}).get(task) or {}
    if cell.get("applicable") is None:
        return None
    ceiling = "–" if cell.get("ceiling") is None else f"{100 * cell['ceiling']:.1f}"
    return f"{ceiling} ({100 * cell['applicable']:.0f} %)"


# The answer-free baselines share one column, as points (their intervals say nothing about the model).
GUESSES = ("random", "prior", "answer-prior")  # the order of GUESSES_HEADER
GUESSES_HEADER = "random / letter prior / answer prior"


def print_before_after(summary: dict[str, Any], out_dir: Any = None) -> None:
    """Per task: each evaluation's score with its own n, the same model blind, and the baselines; then
    GRPO against the SFT model and against its blind self, by the exact paired test."""
    from embodied_r.cli.common import console, print_table
    from embodied_r.core.intervals import format_comparison, format_interval, prediction_difference
    from embodied_r.core.io import read_jsonl

    sft, after = summary.get("eval_sft"), summary.get("eval_after")
    if not sft or not after:
        return
    tasks = sorted(set(sft["tasks"]) | set(after["tasks"]))
    rows = []
    for task in [*tasks, None]:
        cells = [m["tasks"].get(task, {}) if task else {"n": m["overall"]["n"], "score": m["overall"]["micro"],
                                                        "ci95": m["overall"].get("ci95")} for m in (sft, after)]
        rows.append([task or "all (micro)",
                     *[f"{format_interval(c.get('score'), c.get('ci95'))} (n={c.get('n', 0)})" for c in cells],
                     baseline_cell(after, "blind", task), baseline_cell(after, "text-rule", task),
                     solver_cell(after, task),
                     " / ".join(baseline_cell(after, name, task, interval=False) for name in GUESSES)])
    rows.append(["most predicted letter", leading_letter(sft), leading_letter(after), None, None, None, None])
    print_table("held-out scenes: score % [95 % interval] (accuracy; MRA for numbers)",
                ["task", "after SFT", "after GRPO", "GRPO model blind", "text rule", SOLVER_HEADER, GUESSES_HEADER],
                rows)
    ceiling = ((after.get("baselines") or {}).get("text-rule") or {}).get("overall", {}).get("ceiling")
    if ceiling is not None:
        console().print(f"answerable ceiling: the text states the answer of {100 * ceiling:.1f} % of the "
                        "questions of task types with a text rule", markup=False)
    print_grpo_steps(summary.get("train") or {}, None if out_dir is None else out_dir / "train" / "metrics.jsonl")
    if out_dir is None:
        return
    predictions = {name: read_jsonl(out_dir / name / "predictions.jsonl") for name in ("eval_sft", "eval_after")
                   if (out_dir / name / "predictions.jsonl").is_file()}
    blind = out_dir / "eval_after" / "baselines" / "blind.jsonl"
    if blind.is_file():
        predictions["blind"] = read_jsonl(blind)
    for first, second, label in (("eval_sft", "eval_after", "after GRPO - after SFT"),
                                 ("blind", "eval_after", "after GRPO - the same model blind")):
        if first in predictions and second in predictions:
            diff = prediction_difference(predictions[first], predictions[second])
            if diff["n"]:
                test = diff["test"] + " test" + ("" if diff["method"] == "exact" else f", {diff['method']}")
                console().print(f"{label} (points; exact {test}): {format_comparison(diff)}", markup=False)
    console().print("Scores are accuracy for multiple choice and mean relative accuracy for numeric answers. "
                    "GRPO starts from the SFT model, so a change from it is GRPO's or chance's, which the exact "
                    "test weighs; a score the blind model or the text rule also reaches is not reading. These "
                    "are the measured numbers, whatever they are.")
