r"""What does GRPO teach the shipped reasoner, per task type? The task ladder, under a protocol that cannot
fool us: scenes split into train / dev / test, seeds as the unit, exact paired tests, and the baselines
that would expose a shortcut.

One command per arm, resumable stage by stage (``OUT/state.json``); arms share the data, and arms with
the same warm-up share it:

1. data (once per OUT): synthetic rooms -> key frames -> oracle perception -> split *by scene* into
   train / dev / test (a scene in two parts is refused) -> reasoner prompts; the evaluated questions of
   dev and test are capped per task type (``--dev-per-type``, ``--per-type``; chosen by a hash of the
   id), so one evaluation stays cheap; ``--detail`` sets the oracle's detail level (docs/world.md) and
   ``--span`` keeps only the questions whose objects spread over 1, 2 or any number of key frames;
2. the format warm-up (random answers; ``--warmup-think`` says what its think quotes), once per setting;
   ``--warmup-steps 0``: none, the base model stands in for it;
3. per seed: GRPO from the warm-up (``embodied-r train``) and, with ``--sft``, supervised fine-tuning on
   the gold answers with the same seed (GRPO's rows and steps unless ``--sft-batch`` / ``--sft-steps``
   say otherwise; ``--sft-rotations``: each question at every letter); with ``--grpo-from-sft`` GRPO
   starts from that seed's SFT model instead (what GRPO adds after SFT; "GRPO - SFT" compares the two);
4. every model evaluated on ``--split`` (dev while choosing, test once per final arm) with
   ``embodied-r eval`` and the baselines random, letter prior and answer-text prior (both fit on train),
   **blind** (the same model with the video text removed), **text rule** (the best simple rule over
   the perception text; its exact-answer share is the answerable ceiling) and **solver** (the exact solver
   over the same text: the share of questions it applies to, and its ceiling there);
5. the table: per task type, the warm-up, each seed's GRPO score, GRPO - warm-up per seed with its exact
   paired test ("better in k of n seeds") and across seeds with a t-interval over seeds, GRPO - its blind
   self, SFT, and the baselines; fewer than ``MIN_QUESTIONS`` questions of a type -> "too few questions".
   Its header line names the data's detail level and span.

Test is evaluated once per final arm: the first test evaluation of an arm freezes its settings in
``OUT/test_log.json``; the same arm name with other settings is refused there, and the table lists every
arm that has touched test.

    python benchmarks/ladder.py --out runs/ladder --arm base --seeds 0 --split dev          # explore on dev
    python benchmarks/ladder.py --out runs/ladder --arm base --seeds 0,1,2,3,4 --split test --sft   # final
    python benchmarks/ladder.py --out runs/ladder --table --split test                       # print again
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # learning_curve.py's stage runner

from learning_curve import Progress, check_dtype  # noqa: E402

from embodied_r.core.io import atomic_write_json, atomic_write_text, read_json, read_jsonl, write_jsonl  # noqa: E402
from embodied_r.demo import expand_globs, training_recipe  # noqa: E402
from embodied_r.evaluation.baselines import PRIORS, prior_baseline, random_baseline  # noqa: E402
from embodied_r.sim.world.detail_levels import DETAIL_LEVELS, SPANS  # noqa: E402  (plain names, no world code)
from embodied_r.training.recipe import merge_overrides, parse_overrides  # noqa: E402
from embodied_r.training.warmup import THINK_STYLES  # noqa: E402

SPLIT_FILES = {"train": "train", "dev": "val", "test": "test"}  # ladder name -> `data split` file name
MIN_QUESTIONS = 20  # a task type with fewer questions in the evaluated part gets no verdict
EVAL_BASELINES = "random,prior,answer-prior,blind,text-rule,solver"
# The data settings an ``OUT/data/settings.json`` written before they existed was made with.
OLD_DATA_DEFAULTS = {"detail": "words", "span": None}
# Keys of an arm that may differ between its runs: the seed, and the paths that follow from it.
SEED_KEYS = ("seed", "output_dir", "description")


# ---------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------


def data_stages(args: argparse.Namespace, data: Path) -> list[tuple[str, list[str]]]:
    world, keyframes = data / "world", data / "keyframes"
    ratios = ",".join(f"{r:.2f}" for r in args.ratios)
    stages = [
        ("world", ["synth", "world", "--out", str(world), "--scenes", str(args.scenes), "--seed", str(args.data_seed),
                   "--resolution", "320x240", "--fps", "10", "--seconds", str(args.seconds),
                   "--per-task", "1", "--workers", "2"]),
        ("keyframes", ["keyframes", str(world / "videos" / "*.mp4"), "--out", str(keyframes), "--workers", "2",
                       "--max-frames", str(args.max_frames)]),
        ("perception", ["perceive", "--qa", str(world / "questions.jsonl"), "--keyframes", str(keyframes),
                        "--backend", "oracle", "--detail", args.detail, "--out", str(data / "perception.jsonl")]),
        ("split", ["data", "split", "--data", f"synthetic:{world}", "--all-tasks", "--out", str(data / "split"),
                   "--seed", str(args.data_seed), "--ratios", ratios]),
    ]
    for part, name in SPLIT_FILES.items():
        stages.append((f"prompts-{part}", ["build-prompts", "--qa", str(data / "split" / f"{name}.jsonl"),
                                           "--perception", str(data / "perception.jsonl"),
                                           "--prompt-version", args.prompt_version,
                                           *(["--span", args.span] if args.span else []),
                                           "--out", str(data / "prompts" / f"{part}.jsonl")]))
    return stages


def build_data(args: argparse.Namespace, progress: Progress) -> dict[str, Path]:
    """The data stages into ``OUT/data``; returns the training rows and the capped dev and test rows."""
    from embodied_r.evaluation.split import check_scene_disjoint

    data = args.out / "data"
    settings = {k: getattr(args, k) for k in ("scenes", "seconds", "max_frames", "ratios", "data_seed",
                                              "prompt_version", "per_type", "dev_per_type", "detail", "span")}
    stamp = data / "settings.json"
    if stamp.is_file():
        check_data_settings(data, read_json(stamp), settings)
    data.mkdir(parents=True, exist_ok=True)
    atomic_write_json(stamp, settings)
    for name, argv in data_stages(args, data):
        progress.run(f"data:{name}", expand_globs(argv))
    parts = {part: read_jsonl(data / "split" / f"{name}.jsonl") for part, name in SPLIT_FILES.items()}
    check_scene_disjoint(parts)  # the protocol's first rule, checked on what was written, every run
    files = {"train": data / "prompts" / "train.jsonl"}
    for part, cap in (("dev", args.dev_per_type), ("test", args.per_type)):
        files[part] = data / f"{part}-eval.jsonl"
        if not files[part].is_file():
            write_jsonl(files[part], cap_per_type(read_jsonl(data / "prompts" / f"{part}.jsonl"), cap))
    return files


def check_data_settings(data: Path, made: dict[str, Any], asked: dict[str, Any]) -> None:
    """Refuse a run whose data settings differ in any key from those ``data`` was made with (its stamp
    ``made``; a stamp from before ``--detail``/``--span`` was made at words, every span). The message names
    the data's detail and span, the other settings that differ, and what this run asks for.

    >>> check_data_settings(Path("d"), {"scenes": 3}, {"scenes": 3, "detail": "words", "span": None})
    >>> check_data_settings(Path("d"), {"scenes": 3, "detail": "map", "span": "any"},
    ...                     {"scenes": 3, "detail": "words", "span": "any"})
    Traceback (most recent call last):
    SystemExit: d was made at detail 'map', span 'any'; this run asks for detail 'words': choose another ...
    """
    made = {**OLD_DATA_DEFAULTS, **made}
    asked = json.loads(json.dumps(asked))  # tuples and lists compare as the stamp stores them
    differ = [k for k in dict.fromkeys([*made, *asked]) if made.get(k) != asked.get(k)]
    if not differ:
        return

    def said(values: dict[str, Any], keys: list[str]) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {'none' if values.get(k) is None else repr(values[k])}" for k in keys)

    others = [k for k in differ if k not in OLD_DATA_DEFAULTS]
    raise SystemExit(f"{data} was made at {said(made, list(OLD_DATA_DEFAULTS))}"
                     + (f" (and {said(made, others)})" if others else "")
                     + f"; this run asks for {said(asked, differ)}: choose another --out or the data's settings")


def data_level(out: Path) -> dict[str, Any] | None:
    """The detail level and span ``OUT/data`` was made at (old stamps: the old defaults); None without a stamp."""
    stamp = out / "data" / "settings.json"
    if not stamp.is_file():
        return None
    made = {**OLD_DATA_DEFAULTS, **read_json(stamp)}
    return {k: made[k] for k in OLD_DATA_DEFAULTS}


def cap_per_type(rows: list[dict[str, Any]], per_type: int) -> list[dict[str, Any]]:
    """At most ``per_type`` rows of each task type, chosen by a hash of the id (stable, order-free).

    >>> rows = [{"id": str(i), "task": "a" if i % 3 else "b"} for i in range(9)]
    >>> sorted(r["task"] for r in cap_per_type(rows, 2))
    ['a', 'a', 'b', 'b']
    """
    def key(row: dict[str, Any]) -> str:
        return hashlib.sha256(str(row["id"]).encode()).hexdigest()

    kept: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=key):
        chosen = kept.setdefault(row["task"], [])
        if len(chosen) < per_type:
            chosen.append(row)
    return sorted((r for rs in kept.values() for r in rs), key=lambda r: str(r["id"]))


def eval_rows(args: argparse.Namespace, files: dict[str, Path]) -> Path:
    """The questions this run evaluates: the capped part, or with ``--eval-tasks`` every question of the
    split of those task types, in ``OUT/data/<part>-eval.jsonl``; ``args.part`` names the set."""
    if not args.eval_tasks:
        return files[args.split]
    path = args.out / "data" / f"{args.part}-eval.jsonl"
    if not path.is_file():
        wanted = set(args.eval_tasks.split(","))
        rows = [r for r in read_jsonl(args.out / "data" / "prompts" / f"{args.split}.jsonl") if r["task"] in wanted]
        if not rows:
            raise SystemExit(f"--eval-tasks {args.eval_tasks}: no {args.split} questions of these task types")
        write_jsonl(path, rows)
    return path


def train_rows(args: argparse.Namespace, train: Path) -> Path:
    """The training rows of this arm (``--tasks`` keeps some task types), in ``OUT/train-<tasks>.jsonl``."""
    if not args.tasks:
        return train
    wanted = set(args.tasks.split(","))
    rows = [r for r in read_jsonl(train) if r["task"] in wanted]
    if not rows:
        raise SystemExit(f"--tasks {args.tasks}: no training rows of these task types")
    path = args.out / f"train-{'+'.join(sorted(wanted))}.jsonl"
    write_jsonl(path, rows)
    return path


# ---------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------


def warmup_name(args: argparse.Namespace) -> str:
    """The warm-up's folder and evaluation name. A model other than the default is part of it, so that a
    second model's arm never starts from, or is compared with, the first model's warm-up (the default
    model's names stay those of the runs already on disk)."""
    from embodied_r.inference.models import DEFAULT_REASONER

    tasks = "+".join(sorted(args.tasks.split(","))) if args.tasks else "all"
    model = "" if args.model == DEFAULT_REASONER else "-" + re.sub(r"[^A-Za-z0-9.]+", "_", str(args.model))
    return f"{args.warmup_think}-{args.warmup_steps}-{tasks}{model}"


def warm_up(args: argparse.Namespace, train: Path, progress: Progress) -> Path:
    """The format warm-up, once per setting, into ``OUT/warmups/<name>/warmup/model``; with
    ``--warmup-steps 0`` there is none and the base model stands in for it (SFT starts from it)."""
    from embodied_r.inference.models import resolve_model_path
    from embodied_r.training.data import load_prompt_rows
    from embodied_r.training.warmup import PRIMER, WarmupSettings, run_format_warmup

    if args.warmup_steps == 0:
        return Path(resolve_model_path(args.model))
    name = warmup_name(args)
    out = args.out / "warmups" / name
    stage = f"warmup:{name}"
    if stage not in progress.done:
        started = time.perf_counter()
        settings = WarmupSettings.from_config({**PRIMER, "steps": args.warmup_steps, "think": args.warmup_think})
        run_format_warmup(settings, load_prompt_rows(str(train)), resolve_model_path(args.model), out,
                          dtype=args.dtype)
        progress.record(stage, started)
    return out / "warmup" / "model"


def _size(args: argparse.Namespace) -> Any:
    from embodied_r.demo import DemoSize

    return DemoSize(0, 0, 0, args.steps, 0, args.max_new_tokens)


def grpo_recipe(args: argparse.Namespace, train: Path, start: Path, out: Path, seed: int) -> dict[str, Any]:
    """The demo's CPU recipe from the warmed-up model, format + accuracy (0.2 : 0.8), ``--set`` applied."""
    recipe = training_recipe(out, _size(args), str(start))
    recipe.update(
        description=f"ladder arm {args.arm}, seed {seed}", train_data=str(train), output_dir=str(out),
        format_warmup=None, rewards=["format", "accuracy"], reward_schedule=None, reward_weights=[0.2, 0.8],
        judge={"probe": None, "allow_weak": False}, num_generations=args.generations,
        per_device_train_batch_size=args.prompts * args.generations, learning_rate=args.learning_rate,
        max_steps=args.steps, save_strategy="no", max_completion_length=args.max_new_tokens, dtype=args.dtype,
        seed=seed, report_to=["none"],
    )
    return merge_overrides(recipe, parse_overrides(args.set))


def arm_settings(args: argparse.Namespace, train: Path, start: Path) -> dict[str, Any]:
    """What an arm is, apart from its seeds: the recipe (seed 0's, paths included) and the warm-up."""
    recipe = grpo_recipe(args, train, start, args.out / "arms" / args.arm / "seedN", 0)
    if args.grpo_from_sft:
        recipe["model"] = str(args.out / "arms" / args.arm / "sft-seed{seed}" / "warmup" / "model")
    settings = {"recipe": {k: v for k, v in recipe.items() if k not in SEED_KEYS}, "warmup": warmup_name(args),
                "sft": {"steps": args.sft_steps, "batch_size": args.sft_batch, "learning_rate": args.sft_learning_rate,
                        **({"rotations": True} if args.sft_rotations else {})} if args.sft else None}
    return {**settings, "grpo_from": "sft"} if args.grpo_from_sft else settings


def freeze_arm(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """An arm's settings are fixed by its first run; another run under its name must match (its seeds
    pool only if they differ in nothing else)."""
    path = args.out / "arms" / args.arm / "settings.json"
    if path.is_file():
        before = read_json(path)
        if (before["recipe"] != json.loads(json.dumps(settings["recipe"])) or before["warmup"] != settings["warmup"]
                or before.get("grpo_from") != settings.get("grpo_from")):
            raise SystemExit(f"arm {args.arm!r} was run with other settings ({path}); choose another --arm name")
        if settings["sft"] is not None and before.get("sft") not in (None, settings["sft"]):
            raise SystemExit(f"arm {args.arm!r} ran SFT with {before['sft']}; choose another --arm name")
        settings = {**before, "sft": settings["sft"] or before.get("sft")}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, settings)


def train_seed(args: argparse.Namespace, train: Path, start: Path, seed: int, progress: Progress) -> Path:
    out = args.out / "arms" / args.arm / f"seed{seed}"
    out.mkdir(parents=True, exist_ok=True)
    recipe_path = out / "recipe.yaml"
    atomic_write_text(recipe_path, yaml.safe_dump(grpo_recipe(args, train, start, out, seed), sort_keys=False))
    progress.run(f"train:{args.arm}:seed{seed}", ["train", "--recipe", str(recipe_path)])
    return out / "final"


def supervised_seed(args: argparse.Namespace, train: Path, start: Path, seed: int, progress: Progress) -> Path:
    """Gold-answer fine-tuning from the warm-up: ``--sft-batch`` rows a step (default: GRPO's prompts),
    ``--sft-steps`` steps (default: GRPO's); with ``--sft-rotations`` each question in all its option
    rotations, consecutively."""
    from embodied_r.training.data import load_prompt_rows
    from embodied_r.training.warmup import WarmupSettings, run_format_warmup

    out = args.out / "arms" / args.arm / f"sft-seed{seed}"
    stage = f"sft:{args.arm}:seed{seed}"
    if stage not in progress.done:
        started = time.perf_counter()
        settings = WarmupSettings.from_config({"steps": args.sft_steps, "batch_size": args.sft_batch, "answers": "gold",
                                               "rotations": args.sft_rotations,
                                               "think": args.warmup_think, "learning_rate": args.sft_learning_rate,
                                               "seed": seed, "micro_batch_size": 1, "gradient_checkpointing": False})
        run_format_warmup(settings, load_prompt_rows(str(train)), str(start), out, dtype=args.dtype)
        progress.record(stage, started)
    return out / "warmup" / "model"


def evaluate(args: argparse.Namespace, name: str, model: Path, data: Path, train: Path,
             progress: Progress, baselines: str = EVAL_BASELINES) -> None:
    out = args.out / "evals" / args.part / name
    progress.run(f"eval:{args.part}:{name}",
                 ["eval", "--data", str(data), "--model", str(model), "--out", str(out), "--batch-size", "8",
                  "--max-new-tokens", str(args.max_new_tokens), "--dtype", args.dtype,
                  "--baselines", baselines, "--prior-from", str(train), "--no-report"])


def log_test(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """Test is for final arms: record each arm's first test evaluation; refuse changed settings."""
    path = args.out / "test_log.json"
    log = read_json(path) if path.is_file() else {}
    entry = log.get(args.arm)
    frozen = json.loads(json.dumps({"recipe": settings["recipe"], "warmup": settings["warmup"]}))
    if entry is not None and entry["settings"] != frozen:
        raise SystemExit(f"arm {args.arm!r} was evaluated on test with other settings ({path}): test is "
                         "evaluated once per final arm; choose on dev")
    if entry is None:
        log[args.arm] = {"settings": frozen, "first_evaluated": time.strftime("%Y-%m-%d %H:%M")}
        atomic_write_json(path, log)


# ---------------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------------


def predictions(folder: Path, file: str = "predictions.jsonl") -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    path = folder / file if file == "predictions.jsonl" else folder / "baselines" / file
    for p in read_jsonl(path) if path.is_file() else []:
        out.setdefault(str(p["id"]), p)
    return out


def by_task(preds: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for i, p in preds.items():
        out.setdefault(str(p["task"]), {})[i] = float(p["score"])
        out.setdefault("all", {})[i] = float(p["score"])
    return out


def mean(scores: dict[str, float]) -> float | None:
    return sum(scores.values()) / len(scores) if scores else None


def compare_seeds(seeds: dict[int, dict[str, float]], shared: dict[str, float] | None = None,
                  per_seed: dict[int, dict[str, float]] | None = None) -> dict[str, Any]:
    """Per seed: the exact paired test of a seed's model against the ``shared`` reference (the warm-up)
    or against its own one (``per_seed``: the same seed's blind or SFT model); across seeds: each seed's
    mean difference is one sample (``across_seeds``)."""
    from embodied_r.core.intervals import across_seeds, paired_difference

    tests = {seed: paired_difference(per_seed.get(seed, {}) if per_seed is not None else shared or {}, scores)
             for seed, scores in sorted(seeds.items())}
    pooled = across_seeds([d["difference"] for d in tests.values() if d["difference"] is not None])
    pooled["better_by_test_in"] = sum(d["verdict"] == "better" for d in tests.values())
    pooled["worse_by_test_in"] = sum(d["verdict"] == "worse" for d in tests.values())
    return {"per_seed": tests, "across_seeds": pooled}


def summarise(out: Path, split: str) -> dict[str, Any]:
    """The ladder table of every arm evaluated on ``split``, from the evaluation folders alone."""
    from embodied_r.core.intervals import check_poolable
    from embodied_r.evaluation.text_rule_baseline import text_rule_predictions

    evals = out / "evals" / split
    rows = {str(r["id"]): r for r in read_jsonl(out / "data" / f"{split}-eval.jsonl")}
    prompt_rows = _prompt_rows(rows.values())
    rule_predictions = {str(p["id"]): p for p in text_rule_predictions(prompt_rows)}
    # The model-free baselines from the rows themselves (both priors fit on train), so an evaluation made
    # before a baseline existed still gets its column.
    train_rows = _prompt_rows(read_jsonl(out / "data" / "prompts" / "train.jsonl"))
    baselines = {"random": random_baseline(prompt_rows),
                 **{name: prior_baseline(prompt_rows, train_rows, name=name) for name in PRIORS}}
    rule = by_task(rule_predictions)
    exact_rule = by_task({i: {**p, "score": float(p["exact"])} for i, p in rule_predictions.items()})
    solver = solver_reach(evals)
    result: dict[str, Any] = {"split": split, "questions": len(rows), "data": data_level(out), "tasks": {},
                              "arms": {}, "warmups": {}}
    tasks = sorted({str(r["task"]) for r in rows.values()}) + ["all"]
    for folder in sorted(evals.glob("warmup-*")):
        result["warmups"][folder.name[len("warmup-"):]] = {
            "scores": by_task(predictions(folder)), "blind": by_task(predictions(folder, "blind.jsonl"))}
    for task in tasks:
        n = len(rule.get(task, {})) if task != "all" else len(rows)
        result["tasks"][task] = {
            "n": n, "too_few": n < MIN_QUESTIONS,
            "random": _baseline(baselines, "random", task), "prior": _baseline(baselines, "prior", task),
            "answer_prior": _baseline(baselines, "answer-prior", task),
            "text_rule": mean(rule.get(task, {})), "ceiling": mean(exact_rule.get(task, {})),
            "solver": solver.get(task),
        }
    arms: dict[str, dict[str, Any]] = {}
    for folder in sorted(evals.iterdir()) if evals.is_dir() else []:
        if folder.name.startswith("warmup-") or not (folder / "metrics.json").is_file():
            continue
        arm, _, seed = folder.name.rpartition("-seed")
        kind = "sft" if arm.endswith("-sft") else "grpo"
        arm = arm.removesuffix("-sft")
        entry = arms.setdefault(arm, {"grpo": {}, "grpo_blind": {}, "sft": {}})
        entry[kind][int(seed)] = by_task(predictions(folder))
        if kind == "grpo":
            entry["grpo_blind"][int(seed)] = by_task(predictions(folder, "blind.jsonl"))
    for arm, entry in arms.items():
        settings = read_json(out / "arms" / arm / "settings.json")
        recipes = {f"seed{s}": yaml.safe_load((out / "arms" / arm / f"seed{s}" / "recipe.yaml").read_text())
                   for s in entry["grpo"]}
        # Seeds of one arm differ in nothing else (GRPO after SFT starts from each seed's own SFT model).
        check_poolable(recipes, ignore=SEED_KEYS + (("model",) if settings.get("grpo_from") == "sft" else ()))
        warm = result["warmups"].get(settings["warmup"])
        table = {}
        for task in tasks:
            grpo = {s: scores.get(task, {}) for s, scores in entry["grpo"].items()}
            blind = {s: scores.get(task, {}) for s, scores in entry["grpo_blind"].items()}
            sft = {s: scores.get(task, {}) for s, scores in entry["sft"].items()}
            row: dict[str, Any] = {"grpo": {s: mean(v) for s, v in grpo.items()},
                                   "grpo_blind": {s: mean(v) for s, v in blind.items()},
                                   "sft": {s: mean(v) for s, v in sft.items()}}
            if warm is not None:
                row["warmup"] = mean(warm["scores"].get(task, {}))
                row["warmup_blind"] = mean(warm["blind"].get(task, {}))
                row["grpo_vs_warmup"] = compare_seeds(grpo, shared=warm["scores"].get(task, {}))
                if sft:
                    row["sft_vs_warmup"] = compare_seeds(sft, shared=warm["scores"].get(task, {}))
            if blind and all(blind.values()):
                row["grpo_vs_blind"] = compare_seeds(grpo, per_seed=blind)
            if sft:
                row["grpo_vs_sft"] = compare_seeds({s: v for s, v in grpo.items() if s in sft}, per_seed=sft)
            table[task] = row
        result["arms"][arm] = {"settings": settings, "seeds": sorted(entry["grpo"]), "tasks": table}
    test_log = out / "test_log.json"
    result["arms_evaluated_on_test"] = sorted(read_json(test_log)) if test_log.is_file() else []
    return result


def solver_reach(evals: Path) -> dict[str, dict[str, float | None]]:
    """Per task type (and ``all``): the solver baseline's ``applicable`` share and ``ceiling``, from the
    first evaluation in ``evals`` whose ``metrics.json`` has it (it reads only the rows, so every evaluation
    of one part has the same); {} when none has (evaluations from before the solver baseline)."""
    for path in sorted(evals.glob("*/metrics.json")) if evals.is_dir() else []:
        table = (read_json(path).get("baselines") or {}).get("solver") or {}
        if table.get("status") == "ok":
            reach = {str(task): t for task, t in (table.get("tasks") or {}).items()}
            reach["all"] = table.get("overall") or {}
            return {task: {"applicable": t.get("applicable"), "ceiling": t.get("ceiling")} for task, t in reach.items()}
    return {}


def _prompt_rows(rows: Any) -> list[Any]:
    from embodied_r.core.records import PromptRow

    return [PromptRow.from_dict(r) for r in rows]


def _baseline(baselines: dict[str, Any], name: str, task: str) -> float | None:
    table = baselines.get(name) or {}
    if task == "all":
        return (table.get("overall") or {}).get("micro")
    return ((table.get("tasks") or {}).get(task) or {}).get("score")


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def verdict_cell(comparison: dict[str, Any] | None, too_few: bool) -> str:
    """``+12.3 [+4.0, +20.6], 4/5 seeds better`` (mean across seeds, t-interval, per-seed exact tests)."""
    if comparison is None:
        return "–"
    pooled = comparison["across_seeds"]
    if pooled["mean"] is None:
        return "–"
    text = f"{100 * pooled['mean']:+.1f}"
    if pooled["ci95"]:
        text += f" [{100 * pooled['ci95'][0]:+.1f}, {100 * pooled['ci95'][1]:+.1f}]"
    text += f", better in {pooled['better_by_test_in']}/{pooled['n_seeds']}"
    if pooled["worse_by_test_in"]:
        text += f", worse in {pooled['worse_by_test_in']}"
    if too_few:
        return text + " (too few questions)"
    return text + (f" -> {pooled['verdict']}" if pooled["n_seeds"] > 1 else "")


def solver_cell(reach: dict[str, Any] | None) -> str:
    """``applicable share (ceiling)``; "–" for an evaluation made before the solver baseline."""
    return "–" if reach is None else f"{pct(reach['applicable'])} ({pct(reach['ceiling'])})"


def data_words(data: dict[str, Any] | None) -> str:
    """``detail 'map', span 'any'`` (the data's settings stamp); a folder without one says so."""
    if data is None:
        return "data settings unknown"
    return f"detail {data['detail']!r}, span " + ("none" if data["span"] is None else repr(data["span"]))


def markdown(result: dict[str, Any]) -> str:
    lines = []
    for arm, info in result["arms"].items():
        seeds = info["seeds"]
        lines += [f"### arm {arm} ({result['split']}, seeds {','.join(map(str, seeds))}, warm-up "
                  f"{info['settings']['warmup']}, {data_words(result.get('data'))})", "",
                  "| task type | n | random | letter prior | answer prior | text rule (ceiling) | "
                  "solver applicable (ceiling) | warm-up | GRPO per seed | GRPO − warm-up | GRPO blind | "
                  "GRPO − blind | SFT | GRPO − SFT |", "|" + "---|" * 14]
        for task, base in result["tasks"].items():
            row = info["tasks"][task]
            per_seed = " / ".join(pct(row["grpo"].get(s)) for s in seeds)
            sft = " / ".join(pct(v) for _, v in sorted(row["sft"].items())) or "–"
            blind = " / ".join(pct(row["grpo_blind"].get(s)) for s in seeds)
            lines.append(
                f"| {task} | {base['n']} | {pct(base['random'])} | {pct(base['prior'])} | "
                f"{pct(base['answer_prior'])} | "
                f"{pct(base['text_rule'])} ({pct(base['ceiling'])}) | {solver_cell(base.get('solver'))} | "
                f"{pct(row.get('warmup'))} | {per_seed} | "
                f"{verdict_cell(row.get('grpo_vs_warmup'), base['too_few'])} | {blind} | "
                f"{verdict_cell(row.get('grpo_vs_blind'), base['too_few'])} | {sft} | "
                f"{verdict_cell(row.get('grpo_vs_sft'), base['too_few'])} |")
        lines.append("")
    if result["arms_evaluated_on_test"]:
        lines.append("arms evaluated on test so far: " + ", ".join(result["arms_evaluated_on_test"]))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", choices=("dev", "test"), default="dev",
                        help="where the models are evaluated: dev while choosing, test once per final arm")
    parser.add_argument("--table", action="store_true", help="only print and write the table of --split")
    parser.add_argument("--eval-tasks", default="",
                        help="evaluate every question of the split of these task types instead of the capped set of "
                        "all types (a cheaper, larger sample on the task types trained)")
    data = parser.add_argument_group("data (fixed per OUT)")
    data.add_argument("--scenes", type=int, default=300)
    data.add_argument("--seconds", type=int, default=12)
    data.add_argument("--max-frames", type=int, default=6, help="key frames per video")
    data.add_argument("--ratios", type=lambda s: [float(x) for x in s.split(",")], default=[0.5, 0.2, 0.3],
                      help="train,dev,test shares of the scenes (default 0.5,0.2,0.3)")
    data.add_argument("--data-seed", type=int, default=0)
    data.add_argument("--prompt-version", default="compact-v1")
    data.add_argument("--detail", default="words", choices=DETAIL_LEVELS,
                      help="the oracle perception's detail level (docs/world.md; default words)")
    data.add_argument("--span", default=None, choices=SPANS,
                      help="keep only questions whose objects are shown in 1 key frame, in 2 at the fewest, or in "
                      "any number (build-prompts --span; default: every question)")
    data.add_argument("--per-type", type=int, default=30, help="evaluated test questions per task type")
    data.add_argument("--dev-per-type", type=int, default=25,
                      help="evaluated dev questions per task type (dev is evaluated for every arm explored)")
    arm = parser.add_argument_group("arm")
    arm.add_argument("--arm", default="base", help="name of the arm (OUT/arms/ARM)")
    arm.add_argument("--seeds", default="0", help="GRPO (and SFT) seeds, comma-separated")
    arm.add_argument("--model", default="smollm2-135m-instruct")
    arm.add_argument("--tasks", default="", help="train only on these task types (comma-separated; default all)")
    arm.add_argument("--warmup-think", default="evidence", choices=THINK_STYLES,
                     help="what the warm-up's (and SFT's) think quotes and how it reaches the answer")
    arm.add_argument("--warmup-steps", type=int, default=48)
    arm.add_argument("--steps", type=int, default=40, help="GRPO (and SFT) optimizer steps")
    arm.add_argument("--prompts", type=int, default=2, help="prompts per step")
    arm.add_argument("--generations", type=int, default=8, help="completions per prompt (G)")
    arm.add_argument("--learning-rate", type=float, default=1.0e-5)
    arm.add_argument("--sft", action="store_true", help="also fine-tune on the gold answers, per seed")
    arm.add_argument("--sft-learning-rate", type=float, default=1.0e-4)
    arm.add_argument("--sft-steps", type=int, default=None,
                     help="SFT optimizer steps (default: --steps; a mix of task types needs more rows than one)")
    arm.add_argument("--sft-batch", type=int, default=None, help="SFT rows per step (default: --prompts)")
    arm.add_argument("--sft-rotations", action="store_true",
                     help="SFT trains each choice question in all its option rotations, consecutively (with "
                     "--sft-batch 4, one question at every letter a step)")
    arm.add_argument("--grpo-from-sft", action="store_true",
                     help="start each GRPO seed from that seed's SFT model (needs --sft): what GRPO adds after SFT")
    arm.add_argument("--max-new-tokens", type=int, default=64, help="completion budget, training and eval")
    arm.add_argument("--set", action="append", default=[], help="GRPO recipe override key=value")
    arm.add_argument("--dtype", default="float32", choices=("auto", "float32", "bfloat16"),
                     help="precision of every model stage; one per OUT (default float32: the same arithmetic "
                     "on every CPU)")
    args = parser.parse_args(argv)
    if len(args.ratios) != 3 or abs(sum(args.ratios) - 1) > 1e-6 or min(args.ratios) <= 0:
        parser.error("--ratios needs three positive shares summing to 1 (train, dev, test)")
    if args.grpo_from_sft and not args.sft:
        parser.error("--grpo-from-sft starts GRPO from the SFT models: add --sft")
    args.sft_steps = args.steps if args.sft_steps is None else args.sft_steps
    args.sft_batch = args.prompts if args.sft_batch is None else args.sft_batch
    args.part = args.split + ("+" + "+".join(sorted(args.eval_tasks.split(","))) if args.eval_tasks else "")
    try:
        args.seed_list = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds {args.seeds!r}: expected comma-separated integers")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table:
        return report(args)
    args.out.mkdir(parents=True, exist_ok=True)
    progress = Progress(args.out)
    check_dtype(args.out, args.dtype, progress)
    print("data:", flush=True)
    files = build_data(args, progress)
    train = train_rows(args, files["train"])
    start = warm_up(args, train, progress)
    settings = arm_settings(args, train, start)
    freeze_arm(args, settings)
    if args.split == "test":
        log_test(args, settings)
    evaluated = eval_rows(args, files)
    evaluate(args, f"warmup-{warmup_name(args)}", start, evaluated, files["train"], progress)
    for seed in args.seed_list:
        sft = None
        if args.sft:
            sft = supervised_seed(args, train, start, seed, progress)
            # The table compares GRPO, not SFT, with its blind self: SFT's evaluation skips that pass.
            evaluate(args, f"{args.arm}-sft-seed{seed}", sft, evaluated, files["train"], progress,
                     baselines=EVAL_BASELINES.replace(",blind", ""))
        grpo_start = sft if args.grpo_from_sft else start  # parse_args: --grpo-from-sft needs --sft
        evaluate(args, f"{args.arm}-seed{seed}", train_seed(args, train, grpo_start, seed, progress),
                 evaluated, files["train"], progress)
    return report(args)


def report(args: argparse.Namespace) -> int:
    result = summarise(args.out, args.part)
    text = markdown(result)
    print(text)
    atomic_write_json(args.out / f"ladder-{args.part}.json", result)
    atomic_write_text(args.out / f"ladder-{args.part}.md", text + "\n")
    print(f"\nwrote {args.out / f'ladder-{args.part}.json'} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
