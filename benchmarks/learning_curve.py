r"""Does GRPO teach the reasoner? A held-out learning curve on synthetic scenes, beside supervised fine-tuning.

One command builds the data, trains and evaluates; every stage is resumable (a finished one is skipped
when the script is run again, so a second GRPO arm reuses the data, the warm-up and its evaluation):

1. data: synthetic rooms -> key frames -> oracle perception -> split *by scene* -> prompts (the demo's
   stages with more scenes), so every evaluated question comes from a room never trained on;
2. one task type (``--holdout-task``) is removed from the training rows: neither arm ever sees it;
3. the format warm-up (random answers: it teaches the structure, not the answers);
4. GRPO from the warmed-up model (``embodied-r train``), a checkpoint every ``--eval-every`` steps;
5. supervised fine-tuning from the same model on the same rows, as many prompts per step and as many
   steps, with the gold answers in the warm-up's template (the paper's RL-versus-SFT question);
6. every checkpoint, the warmed-up model and the SFT model evaluated on the held-out questions with
   ``embodied-r eval`` (greedy, the same settings), with the random and letter-prior baselines.

Printed, and written to ``OUT/learning_curve.json`` and ``OUT/learning_curve.png``: held-out accuracy per
evaluated step, overall and per task, with 95 % intervals, and the paired difference from the warm-up
model with its interval and verdict, separately for the task types trained on and the held-out one.

    python benchmarks/learning_curve.py --out runs/learning                       # default arm
    python benchmarks/learning_curve.py --out runs/learning --arm lr2e-5 --set learning_rate=2e-5

The run in which GRPO learned to read (the last action only, a warm-up whose think quotes the last frame;
docs/learning.md, sixth run):

    python benchmarks/learning_curve.py --out runs/reading --scenes 400 --max-frames 6 --tasks last_action \
        --eval-tasks last_action --warmup-think latest-frame --warmup-steps 48 --arm g8-lr1e-5 \
        --prompts 2 --generations 8 --learning-rate 1e-5 --steps 40 --eval-every 20

``--set`` overrides any recipe key of the GRPO arm (YAML values, dotted keys for nested ones); each arm
is its own folder, and the summary and plot show every arm found in ``OUT``. ``--dtype`` fixes the
precision of every model stage (``auto`` gives bf16 passes on a CPU with bf16 and float32 elsewhere, so
the same command differs between machines); one ``OUT`` holds one precision.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from embodied_r.core.intervals import format_interval, paired_difference
from embodied_r.core.io import atomic_write_json, atomic_write_text, read_json, read_jsonl, write_jsonl
from embodied_r.core.task_table import task_table
from embodied_r.demo import DemoSize, expand_globs, plan, run_stage_process, training_recipe
from embodied_r.training.recipe import merge_overrides, parse_overrides

DATA_STAGES = ("world", "keyframes", "perception", "split", "prompts-train", "prompts-test")
WARMUP = "warmup"
SFT = "sft"


class Progress:
    """Finished stages in ``OUT/state.json`` (atomic), with their wall time and peak memory."""

    def __init__(self, out: Path) -> None:
        self.path = out / "state.json"
        self.done: dict[str, Any] = read_json(self.path) if self.path.is_file() else {}

    def run(self, name: str, argv: list[str]) -> None:
        if name in self.done:
            return
        started = time.perf_counter()
        print(f"  {name}: embodied-r {' '.join(argv[:1])} ...", flush=True)
        code, peak_kib = run_stage_process(argv)
        if code != 0:
            raise SystemExit(f"stage {name} failed (exit {code}): embodied-r {' '.join(argv)}")
        self.record(name, started, peak_kib / 2**20)

    def record(self, name: str, started: float, peak_gib: float | None = None) -> None:
        seconds = round(time.perf_counter() - started, 1)
        self.done[name] = {"seconds": seconds, **({"peak_rss_gib": round(peak_gib, 2)} if peak_gib else {})}
        atomic_write_json(self.path, self.done)
        print(f"  {name}: done in {seconds:.0f} s", flush=True)


def check_dtype(out: Path, dtype: str, progress: Progress) -> None:
    """Every model stage of one ``OUT`` runs in one precision: the warm-up, its evaluation and the arms
    are reused across runs, so a second run with another ``--dtype`` would compare models trained in
    different precisions. An ``OUT`` from before this option ran with ``auto``."""
    path = out / "dtype.txt"
    trained = path.read_text(encoding="utf-8").strip() if path.is_file() else None
    if trained is None and WARMUP in progress.done:
        trained = "auto"
    if trained is None:
        atomic_write_text(path, dtype + "\n")
    elif trained != dtype:
        raise SystemExit(f"{out} holds models trained with --dtype {trained}, not {dtype}: choose another --out "
                         f"(its data folder can be copied to skip the data stages)")


def build_data(args: argparse.Namespace, progress: Progress) -> tuple[Path, Path]:
    """The demo's data stages into ``OUT/data``; returns (training rows without the held-out task, test rows)."""
    data = args.out / "data"
    size = DemoSize(scenes=args.scenes, seconds=args.seconds, per_task=args.per_task, train_steps=0,
                    eval_limit=0, max_new_tokens=args.max_new_tokens)
    for stage in plan(data, size, args.model, workers=2):
        if stage.name not in DATA_STAGES:
            continue
        argv = list(stage.argv)
        if stage.name == "split":
            argv[argv.index("--ratios") + 1] = f"{1 - args.test_share:.2f},0.0,{args.test_share:.2f}"
        if stage.name == "keyframes":
            argv[argv.index("--max-frames") + 1] = str(args.max_frames)
        if stage.name.startswith("prompts-"):
            argv += ["--prompt-version", args.prompt_version]
        progress.run(f"data:{stage.name}", expand_globs(argv))  # the videos exist once "world" has run
    built = {r["meta"].get("prompt_version") for r in read_jsonl(data / "prompts" / "test.jsonl")}
    if built != {args.prompt_version}:
        raise SystemExit(f"{data} holds prompts built with {sorted(map(str, built))}, not --prompt-version "
                         f"{args.prompt_version}: choose another --out")
    train_rows = [r for r in read_jsonl(data / "prompts" / "train.jsonl") if r["task"] != args.holdout_task]
    if args.tasks:
        train_rows = [r for r in train_rows if r["task"] in set(args.tasks.split(","))]
    train = args.out / "train.jsonl"
    write_jsonl(train, train_rows)  # rewritten each run: a changed --holdout-task is then refused by the warm-up
    test = data / "prompts" / "test.jsonl"
    if args.eval_tasks:
        # Fewer task types evaluated: each evaluation costs seconds per question here, so a run that
        # trains on one task type can afford more of its held-out questions.
        test, evaluated = args.out / "test.jsonl", set(args.eval_tasks.split(","))
        write_jsonl(test, [r for r in read_jsonl(data / "prompts" / "test.jsonl") if r["task"] in evaluated])
    if len(read_jsonl(test)) < 150:
        print(f"  note: {len(read_jsonl(test))} held-out questions (fewer than 150); raise --scenes", flush=True)
    return train, test


def last_action_in_text(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many ``last_action`` questions a perfect reader could answer: those whose latest key frame's
    line names the gold option's action. The perception text names the dominant motion between two key
    frames, and the question asks for the video's final, ~2 s motion, so the two agree only when the last
    two key frames are close together (few key frames per video spread them out).

    >>> text = "Frame 0: Observe: a bed.\\nFrame 1: After Rotate left, Observe: x"
    >>> row = {"task": "last_action", "answer": "B", "options": ["A. Move forward", "B. Rotate left"],
    ...        "prompt": [{"role": "user", "content": text}]}
    >>> last_action_in_text([row, {**row, "answer": "A"}, {**row, "task": "object_count"}])
    {'questions': 2, 'stated': 1}
    """
    from embodied_r.core.parsing import option_texts
    from embodied_r.methods.embodied_r.prompts import latest_frame_action

    asked = [r for r in rows if r["task"] == "last_action"]
    stated = 0
    for row in asked:
        gold = option_texts(row["options"]).get(row["answer"])
        stated += latest_frame_action(row["prompt"][-1]["content"]) == f"After {gold}"
    return {"questions": len(asked), "stated": stated}


# The choice words of the option-first and latest-frame warm-up thinks (training.warmup.choice_parts):
# "... and choose <option text>, which is option <letter>."
THINK_CHOICE_RE = re.compile(r"\bchoose (?P<text>.+?), which is option [A-Z]\b")


def reading(predictions: Any, rows: dict[str, dict[str, Any]]) -> dict[str, int]:
    """What the ``last_action`` answers read (the sixth run's evidence, docs/learning.md): how often the
    answered letter is the option of the action the latest frame's line names (``letter_is_latest_action``;
    a model that reads), how many thinks make a choice in the warm-up's words (``think_choices``), and how
    many of those choose the latest frame's action (``think_choice_is_latest_action``), the answered
    letter's option (``think_choice_is_letter``; the think explains the answer) or a text that is no option
    at all (``think_choice_not_an_option``).

    >>> text = "Frame 0: Observe: a bed.\\nFrame 1: After Rotate left, Observe: x"
    >>> row = {"task": "last_action", "options": ["A. Move forward", "B. Rotate left"],
    ...        "prompt": [{"role": "user", "content": text}]}
    >>> said = {"id": "q", "parsed_answer": "B",
    ...         "completion": "<think> I choose Move forward, which is option A. </think><answer>B</answer>"}
    >>> counts = reading([said, {"id": "r", "parsed_answer": None, "completion": "no think"}], {"q": row, "r": row})
    >>> [counts[k] for k in ("questions", "letter_is_latest_action", "think_choices", "think_choice_is_letter")]
    [2, 1, 1, 0]
    """
    from embodied_r.core.parsing import option_texts
    from embodied_r.methods.embodied_r.prompts import latest_frame_action

    counts = dict.fromkeys(("questions", "letter_is_latest_action", "think_choices", "think_choice_is_latest_action",
                            "think_choice_is_letter", "think_choice_not_an_option"), 0)
    for prediction in predictions:
        row = rows.get(str(prediction["id"]))
        if row is None or row["task"] != "last_action":
            continue
        options = option_texts(row["options"])
        answered = options.get(str(prediction.get("parsed_answer")))
        latest = latest_frame_action(row["prompt"][-1]["content"])
        counts["questions"] += 1
        counts["letter_is_latest_action"] += answered is not None and latest == f"After {answered}"
        choice = THINK_CHOICE_RE.search(str(prediction.get("completion") or ""))
        if choice:
            counts["think_choices"] += 1
            counts["think_choice_is_latest_action"] += latest == f"After {choice['text']}"
            counts["think_choice_is_letter"] += choice["text"] == answered
            counts["think_choice_not_an_option"] += choice["text"] not in options.values()
    return counts


def warm_up(args: argparse.Namespace, train: Path, progress: Progress) -> Path:
    """The format warm-up, once, into ``OUT/warmup/model``; every arm starts from it."""
    from embodied_r.inference.models import resolve_model_path
    from embodied_r.training.data import load_prompt_rows
    from embodied_r.training.warmup import PRIMER, WarmupSettings, run_format_warmup

    if WARMUP not in progress.done:
        started = time.perf_counter()
        settings = WarmupSettings.from_config({**PRIMER, "steps": args.warmup_steps, "think": args.warmup_think})
        run_format_warmup(settings, load_prompt_rows(str(train)), resolve_model_path(args.model), args.out,
                          dtype=args.dtype)
        gc.collect()
        progress.record(WARMUP, started)
    return args.out / WARMUP / "model"


def supervised(args: argparse.Namespace, train: Path, start: Path, progress: Progress) -> Path:
    """Gold-answer fine-tuning: ``--steps`` steps of ``--prompts`` rows, from the warmed-up model."""
    from embodied_r.training.data import load_prompt_rows
    from embodied_r.training.warmup import WarmupSettings, run_format_warmup

    out = args.out / SFT
    if SFT not in progress.done:
        started = time.perf_counter()
        settings = WarmupSettings.from_config({"steps": args.steps, "batch_size": args.prompts, "answers": "gold",
                                               "think": args.warmup_think,
                                               "learning_rate": args.sft_learning_rate, "seed": 1,
                                               # one example per pass: no checkpointing needed (~25 % faster)
                                               "micro_batch_size": 1, "gradient_checkpointing": False})
        run_format_warmup(settings, load_prompt_rows(str(train)), str(start), out, dtype=args.dtype)
        gc.collect()
        progress.record(SFT, started)
    return out / WARMUP / "model"


def grpo_recipe(args: argparse.Namespace, train: Path, start: Path, out: Path) -> dict[str, Any]:
    """The demo's CPU recipe, started from the warmed-up model, with the measured run's settings
    (docs/learning.md); ``--set`` changes any key."""
    recipe = training_recipe(out, DemoSize(0, 0, 0, args.steps, 0, args.max_new_tokens), str(start))
    recipe.update(
        description=f"learning curve, arm {args.arm}",
        train_data=str(train), output_dir=str(out / "train"), format_warmup=None,
        # The warm-up has taught the structure, so the format term only guards it; the consistency term
        # changed nothing measurable in the ablation (docs/consistency.md) and costs a judge pass per step.
        rewards=["format", "accuracy"], reward_schedule=None, reward_weights=[0.2, 0.8],
        judge={"probe": None, "allow_weak": False},
        num_generations=args.generations, per_device_train_batch_size=args.prompts * args.generations,
        learning_rate=args.learning_rate, max_steps=args.steps, save_steps=args.eval_every,
        save_strategy="steps", max_completion_length=args.max_new_tokens, dtype=args.dtype,
    )
    return merge_overrides(recipe, parse_overrides(args.set))


def evaluate(args: argparse.Namespace, name: str, model: Path, test: Path, progress: Progress,
             baselines: str = "none") -> Path:
    out = args.out / "evals" / name
    progress.run(f"eval:{name}", ["eval", "--data", str(test), "--model", str(model), "--out", str(out),
                                  "--batch-size", "8", "--max-new-tokens", str(args.max_new_tokens),
                                  "--dtype", args.dtype,
                                  "--baselines", baselines, "--no-report"])
    return out


def grpo_arm(args: argparse.Namespace, train: Path, test: Path, start: Path, progress: Progress) -> None:
    out = args.out / f"grpo-{args.arm}"
    out.mkdir(parents=True, exist_ok=True)
    recipe_path = out / "recipe.yaml"
    recipe = grpo_recipe(args, train, start, out)
    if recipe_path.is_file() and yaml.safe_load(recipe_path.read_text()) != recipe:
        raise SystemExit(f"{out} was trained with another recipe ({recipe_path}); choose another --arm name")
    atomic_write_text(recipe_path, yaml.safe_dump(recipe, sort_keys=False))
    resume = ["--resume"] if any((out / "train").glob("checkpoint-*")) else []
    progress.run(f"train:{args.arm}", ["train", "--recipe", str(recipe_path), *resume])
    for step in range(args.eval_every, args.steps + 1, args.eval_every):
        checkpoint = out / "train" / (f"checkpoint-{step}" if step < args.steps else "final")
        evaluate(args, f"grpo-{args.arm}-step{step:04d}", checkpoint, test, progress)


# ---------------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------------


def scores_by_id(eval_dir: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for p in read_jsonl(eval_dir / "predictions.jsonl"):
        out.setdefault(str(p["id"]), p)
    return out


def part(predictions: dict[str, dict[str, Any]], holdout_task: str, held_out: bool) -> dict[str, dict[str, Any]]:
    return {i: p for i, p in predictions.items() if (p["task"] == holdout_task) == held_out}


def describe(name: str, step: int, predictions: dict[str, dict[str, Any]], warmup: dict[str, dict[str, Any]],
             holdout_task: str, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "step": step, "tasks": task_table(predictions.values())["tasks"],
                           "reading": reading(predictions.values(), rows)}
    for label, held_out in (("trained_tasks", False), ("holdout_task", True)):
        mine, base = part(predictions, holdout_task, held_out), part(warmup, holdout_task, held_out)
        overall = task_table(mine.values())["overall"] if mine else {"n": 0, "micro": None, "ci95": None}
        row[label] = {"n": overall["n"], "score": overall["micro"], "ci95": overall["ci95"],
                      "vs_warmup": paired_difference({i: float(p["score"]) for i, p in base.items()},
                                                     {i: float(p["score"]) for i, p in mine.items()}),
                      **answer_shape(mine.values())}
    return row


def answer_shape(predictions: Any) -> dict[str, Any]:
    """How many answers are unparsed (a think that ran past the budget scores 0 whatever it reasoned) and
    the letters of the parsed choice answers: a gain that is only fewer unparsed answers, or one letter
    for everything, is the format or a letter prior, not reading."""
    predictions = list(predictions)
    letters = Counter(str(p["parsed_answer"]) for p in predictions
                      if p.get("answer_type") == "choice" and p.get("parsed_answer") is not None)
    return {"unparsed": sum(p.get("parsed_answer") is None for p in predictions),
            "choice_letters": dict(letters.most_common())}


def summarise(args: argparse.Namespace) -> dict[str, Any]:
    evals = args.out / "evals"
    warmup = scores_by_id(evals / WARMUP)
    evaluated = {r["id"]: r for r in read_jsonl(args.out / "data" / "prompts" / "test.jsonl") if r["id"] in warmup}
    rows = [describe(WARMUP, 0, warmup, warmup, args.holdout_task, evaluated)]
    arms: dict[str, list[dict[str, Any]]] = {}
    for folder in sorted(evals.glob("grpo-*-step*")):
        if not (folder / "metrics.json").is_file():
            continue
        arm, _, step = folder.name[len("grpo-"):].rpartition("-step")
        arms.setdefault(arm, []).append(describe(f"grpo-{arm}", int(step), scores_by_id(folder), warmup,
                                                 args.holdout_task, evaluated))
    sft = []
    if (evals / SFT / "metrics.json").is_file():
        steps = read_json(args.out / SFT / WARMUP / "model" / "warmup.json")["settings"]["steps"]
        sft = [describe(SFT, steps, scores_by_id(evals / SFT), warmup, args.holdout_task, evaluated)]
    metrics = read_json(evals / WARMUP / "metrics.json")
    baselines = {}
    for name, table in (metrics.get("baselines") or {}).items():
        seen = [t for task, t in table["tasks"].items() if task != args.holdout_task]
        n = sum(t["n"] for t in seen)
        baselines[name] = {"trained_tasks": sum(t["score"] * t["n"] for t in seen) / n if n else None,
                           "holdout_task": (table["tasks"].get(args.holdout_task) or {}).get("score"),
                           "tasks": {task: t["score"] for task, t in table["tasks"].items()}}
    arm_settings = {arm: yaml.safe_load((args.out / f"grpo-{arm}" / "recipe.yaml").read_text()) for arm in arms}
    return {"held_out_questions": len(warmup), "holdout_task": args.holdout_task, "dtype": args.dtype,
            "warmup": rows[0],
            "grpo": {arm: sorted(curve, key=lambda r: r["step"]) for arm, curve in arms.items()},
            "grpo_settings": {arm: {k: s.get(k) for k in ("learning_rate", "num_generations",
                                                          "per_device_train_batch_size", "max_steps", "lora",
                                                          "rewards", "reward_weights", "max_completion_length",
                                                          "temperature", "seed", "dtype")}
                              for arm, s in arm_settings.items()},
            "sft": sft[0] if sft else None, "baselines": baselines,
            "last_action_in_text": last_action_in_text(list(evaluated.values())),
            "stages": read_json(args.out / "state.json")}


def print_summary(result: dict[str, Any]) -> None:
    print(f"\nheld-out questions: {result['held_out_questions']} from held-out scenes; held-out task type: "
          f"{result['holdout_task']}")
    stated = result["last_action_in_text"]
    if stated["questions"]:
        print(f"last_action: the latest frame's line names the answer in {stated['stated']} of "
              f"{stated['questions']} held-out questions (what reading alone can reach)")
    for label in ("trained_tasks", "holdout_task"):
        if not result["warmup"][label]["n"]:
            continue  # not evaluated (--eval-tasks)
        print(f"\n{label.replace('_', ' ')}:")
        print("  " + ", ".join(f"{name} baseline {100 * b[label]:.1f}" for name, b in result["baselines"].items()
                               if b[label] is not None) + " (each on the questions it answers: random has no numbers)")
        rows = [result["warmup"]] + [r for curve in result["grpo"].values() for r in curve]
        rows += [result["sft"]] if result["sft"] else []
        for row in rows:
            part_ = row[label]
            diff = part_["vs_warmup"]
            versus = "" if row["name"] == WARMUP or diff["difference"] is None else (
                f"   vs warm-up {100 * diff['difference']:+.1f} [{100 * diff['ci95'][0]:+.1f}, "
                f"{100 * diff['ci95'][1]:+.1f}] -> {diff['verdict']}")
            letters = part_.get("choice_letters") or {}
            top = next(iter(letters), None)  # stored most frequent first
            shape = f", unparsed {part_['unparsed']}" + (
                f", {top} on {letters[top]} of {sum(letters.values())} parsed choices" if top else "")
            print(f"  {row['name']:>22s} step {row['step']:3d}: {format_interval(part_['score'], part_['ci95'])} "
                  f"(n={part_['n']}{shape}){versus}")
            if label == "trained_tasks" or not result["warmup"]["trained_tasks"]["n"]:
                print_reading(row["reading"])


def print_reading(counts: dict[str, int]) -> None:
    if counts["questions"]:
        print(f"{'':30s}last_action: letter = the latest frame's action in {counts['letter_is_latest_action']} "
              f"of {counts['questions']}; the think chooses in {counts['think_choices']}: that action in "
              f"{counts['think_choice_is_latest_action']}, the letter's option in {counts['think_choice_is_letter']}, "
              f"no option in {counts['think_choice_not_an_option']}")


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted(result["warmup"]["tasks"])
    panels = [("trained_tasks", "task types trained on")]
    if result["warmup"]["holdout_task"]["n"]:  # not evaluated when --eval-tasks leaves it out
        panels.append(("holdout_task", f"held out: {result['holdout_task']}"))
    panels += [(task, task) for task in tasks if task != result["holdout_task"]]
    columns = 4
    rows = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(11, 2.6 * rows), squeeze=False)

    def point(row: dict[str, Any], key: str) -> tuple[float | None, list[float] | None, int]:
        if key in ("trained_tasks", "holdout_task"):
            return row[key]["score"], row[key]["ci95"], row[key]["n"]
        task = row["tasks"].get(key) or {}
        return task.get("score"), task.get("ci95"), task.get("n", 0)

    def draw(axis: Any, rows_: list[dict[str, Any]], key: str, **style: Any) -> None:
        points = [(r["step"], *point(r, key)) for r in rows_]
        points = [(s, v, ci) for s, v, ci, _ in points if v is not None]
        if not points:
            return
        steps, values, intervals = zip(*points)
        # A bootstrap interval of a mean with few distinct values can sit a rounding step off its point.
        low = [max(0.0, v - (ci[0] if ci else v)) for v, ci in zip(values, intervals)]
        high = [max(0.0, (ci[1] if ci else v) - v) for v, ci in zip(values, intervals)]
        axis.errorbar(steps, [100 * v for v in values], yerr=[[100 * x for x in low], [100 * x for x in high]],
                      capsize=3, **style)

    for axis, (key, title) in zip(axes.flat, panels):
        n = point(result["warmup"], key)[2]
        axis.set_title(f"{title} (n={n})", fontsize=8)
        for index, (arm, curve) in enumerate(result["grpo"].items()):
            draw(axis, [result["warmup"], *curve], key, marker="o", ms=3, label=f"GRPO {arm}", color=f"C{index}")
        draw(axis, [result["warmup"]], key, marker="s", ms=5, color="black", linestyle="none", label="warm-up")
        if result["sft"]:
            draw(axis, [result["sft"]], key, marker="D", ms=5, color="C3", linestyle="none", label="SFT (gold)")
        for name, style in (("random", ":"), ("prior", "--")):
            baseline = result["baselines"].get(name) or {}
            value = (baseline.get(key) if key in ("trained_tasks", "holdout_task")
                     else baseline.get("tasks", {}).get(key))
            if value is not None:
                axis.axhline(100 * value, color="grey", linestyle=style, linewidth=1, label=f"{name} baseline")
        axis.set_ylim(-5, 105)
        axis.tick_params(labelsize=7)
        axis.set_xlabel("GRPO step", fontsize=7)
    for axis in list(axes.flat)[len(panels):]:
        axis.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=7, frameon=False)
    figure.suptitle("held-out accuracy (%), 95 % intervals, questions from held-out scenes", fontsize=9)
    figure.tight_layout(rect=(0, 0.04, 1, 0.97))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--scenes", type=int, default=44)
    parser.add_argument("--test-share", type=float, default=0.4, help="share of scenes held out")
    parser.add_argument("--seconds", type=int, default=12)
    parser.add_argument("--per-task", type=int, default=1)
    parser.add_argument("--max-frames", type=int, default=6, help="key frames per video")
    parser.add_argument("--prompt-version", default="official-v1",
                        help="reasoner prompt template of every row (compact-v1: a short instruction, no preamble)")
    parser.add_argument("--holdout-task", default="route_planning", help="task type never trained on")
    parser.add_argument("--tasks", default="", help="train only on these task types (comma-separated)")
    parser.add_argument("--eval-tasks", default="", help="evaluate only these task types of the held-out scenes")
    parser.add_argument("--warmup-steps", type=int, default=8)
    parser.add_argument("--warmup-think", default="letter-first",
                        help="how the warm-up's (and SFT's) think reaches its answer: letter-first | option-first | "
                        "latest-frame (training/warmup.py)")
    parser.add_argument("--arm", default="default", help="name of this GRPO arm (its folder is OUT/grpo-ARM)")
    parser.add_argument("--steps", type=int, default=24, help="GRPO (and SFT) optimizer steps")
    parser.add_argument("--eval-every", type=int, default=12)
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt (G)")
    parser.add_argument("--learning-rate", type=float, default=5.0e-5)
    parser.add_argument("--sft-learning-rate", type=float, default=1.0e-4)
    parser.add_argument("--max-new-tokens", type=int, default=64, help="completion budget, training and eval")
    parser.add_argument("--set", action="append", default=[], help="GRPO recipe override key=value")
    parser.add_argument("--no-sft", action="store_true", help="skip the supervised arm")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                        help="precision of every training and evaluation stage: auto (bf16 passes where the CPU has "
                        "bf16, float32 elsewhere) | float32 | bfloat16; one per OUT")
    args = parser.parse_args()
    if args.steps % args.eval_every:
        parser.error("--steps must be a multiple of --eval-every")
    untrained = set(filter(None, args.eval_tasks.split(","))) - set(filter(None, args.tasks.split(",")))
    if args.tasks and untrained - {args.holdout_task}:
        # The summary splits scores into "trained on" and the held-out task type only.
        parser.error(f"--eval-tasks {sorted(untrained - {args.holdout_task})} are neither trained on (--tasks) "
                     f"nor the --holdout-task")
    args.out.mkdir(parents=True, exist_ok=True)
    progress = Progress(args.out)
    check_dtype(args.out, args.dtype, progress)
    print("data:", flush=True)
    train, test = build_data(args, progress)
    print(f"training rows: {len(read_jsonl(train))} (without {args.holdout_task}); held-out: {len(read_jsonl(test))}")
    start = warm_up(args, train, progress)
    evaluate(args, WARMUP, start, test, progress, baselines="random,prior,text-rule")
    grpo_arm(args, train, test, start, progress)
    if not args.no_sft:
        evaluate(args, SFT, supervised(args, train, start, progress), test, progress)
    result = summarise(args)
    print_summary(result)
    atomic_write_json(args.out / "learning_curve.json", result)
    plot(result, args.out / "learning_curve.png")
    print(f"\nwrote {args.out / 'learning_curve.json'} and {args.out / 'learning_curve.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
