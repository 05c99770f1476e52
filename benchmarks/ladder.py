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
   with it, two optional runs per seed in the same arm, at its rows and steps: ``--control``, the
   random-reward control (GRPO from the same SFT model with accuracy replaced by ``accuracy_shuffled``, the
   true rewards permuted within each group: a model can gain from any reward, so GRPO's gain counts only
   above it), and ``--grpo-alone`` (GRPO from the warm-up with the arm's recipe otherwise);
4. every model evaluated on ``--split`` (dev while choosing, test once per final arm) with
   ``embodied-r eval`` and the baselines random, letter prior and answer-text prior (both fit on train),
   **blind** (the same model with the video text removed), **text rule** (the best simple rule over
   the perception text; its exact-answer share is the answerable ceiling) and **solver** (the exact solver
   over the same text: the share of questions it applies to, and its ceiling there);
5. the table: per task type, the warm-up, each seed's GRPO score, GRPO - warm-up per seed with its exact
   paired test ("better in k of n seeds") and across seeds with a t-interval over seeds, GRPO - its blind
   self, SFT, and the baselines; fewer than ``MIN_QUESTIONS`` questions of a type -> "too few questions".
   Its header line names the data's detail level and span. An arm with the control or GRPO alone gets a
   second table: each one's score per seed and blind self, GRPO - control, GRPO alone - blind, - warm-up
   and - SFT; ``--record PATH`` also writes the tables as JSON for the docs (:func:`record`).
6. out of distribution (``--ood``, with ``--sft --grpo-from-sft``): once per OUT an OOD world
   (``synth world --ood``: larger rooms, object categories the default world never draws, 30 s walks) is
   made into ``OUT/data-ood`` at the ID data's detail level, span and prompt version (``--ood-scenes``,
   ``--ood-max-frames``: default the OOD world's suggestion, ``--ood-per-type``), its evaluated questions the
   task types the arm evaluates; each seed's SFT model and GRPO after SFT (with ``--ood-variants`` the
   variants asked for too) are evaluated there into ``OUT/evals/ood-<part>``. A third table per arm: each
   run on ID and OOD per seed, the drop (ID - OOD), GRPO - SFT on the OOD questions (exact paired test per
   seed) and SFT's drop - GRPO's drop across seeds: does GRPO after SFT lose less than SFT alone?

Test is evaluated once per final arm: the first test evaluation of an arm freezes its settings in
``OUT/test_log.json``; the same arm name with other settings is refused there, and the table lists every
arm that has touched test. The control and GRPO alone are part of their arm's settings: an arm run
without them can add them later (same recipe), never change them.

    python benchmarks/ladder.py --out runs/ladder --arm base --seeds 0 --split dev          # explore on dev
    python benchmarks/ladder.py --out runs/ladder --arm base --seeds 0,1,2,3,4 --split test --sft   # final
    python benchmarks/ladder.py --out runs/ladder --arm after --seeds 0,1,2 --sft --grpo-from-sft --control \
        --grpo-alone                                                                          # four arms
    python benchmarks/ladder.py --out runs/ladder --arm after --seeds 0,1,2 --sft --grpo-from-sft --split test \
        --ood                                                                                 # and on OOD
    python benchmarks/ladder.py --out runs/ladder --table --split test                       # print again
    python benchmarks/ladder.py --out runs/ladder --table --record docs/records/ladder.json  # for the docs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
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
from embodied_r.training.reward_signal import steps_with_signal  # noqa: E402
from embodied_r.training.warmup import THINK_STYLES  # noqa: E402

SPLIT_FILES = {"train": "train", "dev": "val", "test": "test"}  # ladder name -> `data split` file name
MIN_QUESTIONS = 20  # a task type with fewer questions in the evaluated part gets no verdict
EVAL_BASELINES = "random,prior,answer-prior,blind,text-rule,solver"
# The data settings an ``OUT/data/settings.json`` written before they existed was made with.
OLD_DATA_DEFAULTS = {"detail": "words", "span": None}
# Keys of an arm that may differ between its runs: the seed, and the paths that follow from it.
SEED_KEYS = ("seed", "output_dir", "description")
# The extra GRPO runs of an arm trained after SFT (--control, --grpo-alone): the name in folders
# (``seed{N}-NAME``, evaluation ``ARM-NAME-seed{N}``) -> the key of its scores in the summary.
VARIANTS = {"control": "control", "alone": "grpo_alone"}
# Evaluation name suffix -> summary key: the SFT model and each variant; the rest is the arm's GRPO.
EVAL_KINDS = {"sft": "sft", **VARIANTS}
# The recipe keys a variant's seeds may differ in besides SEED_KEYS (each run's starting model), and the
# keys it may differ in from its arm's GRPO run of the same seed (what the variant changes).
VARIANT_POOL_IGNORES = {"control": ("model",), "alone": ()}
VARIANT_CHANGES = {"control": ("rewards",), "alone": ("model",)}
# The out-of-distribution set's folder in OUT (``--ood``), and the prefix of its evaluations' part: ID parts
# start with the split's name (dev, test), so ``ood-<part>`` can never name an ID part.
OOD_DATA = "data-ood"
OOD_PREFIX = "ood-"


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


def data_level(out: Path, folder: str = "data") -> dict[str, Any] | None:
    """The detail level and span ``OUT/data`` (or ``OUT/<folder>``) was made at (old stamps: the old defaults);
    None without a stamp."""
    stamp = out / folder / "settings.json"
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
# Out-of-distribution data (--ood)
# ---------------------------------------------------------------------------------------------------


def ood_part(part: str) -> str:
    """The evaluation part of the OOD set beside the ID part ``part`` (``OUT/evals/ood-<part>``).

    >>> ood_part("test"), ood_part("dev+last_action")
    ('ood-test', 'ood-dev+last_action')
    """
    return OOD_PREFIX + part


def ood_rows_file(out: Path, part: str) -> Path:
    """The OOD questions evaluated beside the ID part ``part``: every task type (``eval.jsonl``), or those of
    its ``--eval-tasks`` (``eval+<tasks>.jsonl``); the OOD set has no split, so dev and test share one file.

    >>> ood_rows_file(Path("o"), "dev").name, ood_rows_file(Path("o"), "test+a+b").name
    ('eval.jsonl', 'eval+a+b.jsonl')
    """
    tasks = part.partition("+")[2]
    return out / OOD_DATA / ("eval" + (f"+{tasks}" if tasks else "") + ".jsonl")


def ood_key_frames(args: argparse.Namespace) -> int:
    """Key frames per OOD video: ``--ood-max-frames``, or what the OOD world's ``world.json`` suggests for its
    longer walks (the same constant writes it, so the number is known before the world is rendered and the
    settings stamp can hold it)."""
    if args.ood_max_frames is not None:
        return args.ood_max_frames
    from embodied_r.sim.world.dataset import SUGGESTED_MAX_KEYFRAMES

    return SUGGESTED_MAX_KEYFRAMES["ood"]


def ood_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What ``OUT/data-ood`` is made with: its own scenes, key frames and cap, the ID data's seed, prompt
    version, detail level and span (an OOD score read at another level would measure the level, not the world)."""
    return {"scenes": args.ood_scenes, "max_frames": ood_key_frames(args), "data_seed": args.data_seed,
            "prompt_version": args.prompt_version, "per_type": args.ood_per_type, "detail": args.detail,
            "span": args.span}


def ood_data_stages(args: argparse.Namespace, data: Path) -> list[tuple[str, list[str]]]:
    """The ID data's CLI stages for the OOD world, without the split: no OOD scene is ever trained on."""
    world, keyframes = data / "world", data / "keyframes"
    return [
        # No --seconds: the OOD preset's own 30 s walks through its larger rooms.
        ("world", ["synth", "world", "--ood", "--out", str(world), "--scenes", str(args.ood_scenes),
                   "--seed", str(args.data_seed), "--resolution", "320x240", "--fps", "10",
                   "--per-task", "1", "--workers", "2"]),
        ("keyframes", ["keyframes", str(world / "videos" / "*.mp4"), "--out", str(keyframes), "--workers", "2",
                       "--max-frames", str(ood_key_frames(args))]),
        ("perception", ["perceive", "--qa", str(world / "questions.jsonl"), "--keyframes", str(keyframes),
                        "--backend", "oracle", "--detail", args.detail, "--out", str(data / "perception.jsonl")]),
        ("prompts", ["build-prompts", "--qa", str(world / "questions.jsonl"),
                     "--perception", str(data / "perception.jsonl"), "--prompt-version", args.prompt_version,
                     *(["--span", args.span] if args.span else []), "--out", str(data / "prompts.jsonl")]),
    ]


def build_ood_data(args: argparse.Namespace, progress: Progress) -> Path:
    """The OOD stages into ``OUT/data-ood`` (stamped like the ID data; stages ``ood-data:<name>``); returns
    the evaluated OOD questions (:func:`ood_eval_rows`)."""
    from embodied_r.evaluation.split import check_scene_disjoint

    data = args.out / OOD_DATA
    settings = ood_settings(args)
    stamp = data / "settings.json"
    if stamp.is_file():
        check_data_settings(data, read_json(stamp), settings)
    data.mkdir(parents=True, exist_ok=True)
    atomic_write_json(stamp, settings)
    for name, argv in ood_data_stages(args, data):
        progress.run(f"ood-data:{name}", expand_globs(argv))
    # OOD rooms are named apart from ID ones; checked on what was written all the same, as the split is.
    check_scene_disjoint({"train": read_jsonl(args.out / "data" / "split" / f"{SPLIT_FILES['train']}.jsonl"),
                          "ood": read_jsonl(data / "world" / "questions.jsonl")})
    return ood_eval_rows(args)


def ood_eval_rows(args: argparse.Namespace) -> Path:
    """The OOD questions this arm evaluates: the task types of ``--eval-tasks`` (default all), at most
    ``--ood-per-type`` of each. Every OOD scene is held out (none is trained on), so all of its rows are
    candidates: no split is needed."""
    path = ood_rows_file(args.out, args.part)
    if not path.is_file():
        rows = read_jsonl(args.out / OOD_DATA / "prompts.jsonl")
        if args.eval_tasks:
            wanted = set(args.eval_tasks.split(","))
            rows = [r for r in rows if r["task"] in wanted]
        if not rows:
            raise SystemExit(f"--ood: no OOD questions of the task types evaluated ({args.eval_tasks or 'all'})")
        write_jsonl(path, cap_per_type(rows, args.ood_per_type))
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


def warmup_parts(name: str) -> list[str]:
    """:func:`warmup_name`'s parts after the think style: steps, tasks, then the model when not the default
    ([] for a name that is not one)."""
    think = next((style for style in THINK_STYLES if name.startswith(style + "-")), None)
    return name[len(think) + 1:].split("-", 2) if think else []


def warmup_steps(name: str) -> int | None:
    """The warm-up's optimizer steps, read back from its name (None for a name that is not one).

    >>> warmup_steps("listed-48-last_action"), warmup_steps("base")
    (48, None)
    """
    parts = warmup_parts(name)
    return int(parts[0]) if parts and parts[0].isdigit() else None


def warmup_base_model(name: str) -> str:
    """The reasoner a warm-up (and so its arm) started from, read back from :func:`warmup_name`'s name
    (think style, steps, tasks, then a model other than the default, sanitised as there).

    >>> warmup_base_model("listed-48-last_action"), warmup_base_model("letter-first-8-a+b-gemma3_270m")
    ('smollm2-135m-instruct', 'gemma3-270m')
    >>> warmup_base_model("listed-8-a-runs_my_model")
    'runs_my_model'
    """
    from embodied_r.inference.models import BUILTIN_MODELS, DEFAULT_REASONER

    parts = warmup_parts(name)
    if len(parts) < 3:
        return DEFAULT_REASONER
    # A built-in model by its own name ("gemma3-270m", not the folder-safe "gemma3_270m").
    return next((model for model in BUILTIN_MODELS if re.sub(r"[^A-Za-z0-9.]+", "_", model) == parts[2]), parts[2])


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
    """What an arm is, apart from its seeds: the recipe (seed 0's, paths included), the warm-up, SFT's
    settings, and the variants asked for (``variants``: each one's recipe keys that differ from the arm's)."""
    recipe = grpo_recipe(args, train, start, args.out / "arms" / args.arm / "seedN", 0)
    if args.grpo_from_sft:
        recipe["model"] = str(args.out / "arms" / args.arm / "sft-seed{seed}" / "warmup" / "model")
    settings = {"recipe": {k: v for k, v in recipe.items() if k not in SEED_KEYS}, "warmup": warmup_name(args),
                "sft": {"steps": args.sft_steps, "batch_size": args.sft_batch, "learning_rate": args.sft_learning_rate,
                        **({"rotations": True} if args.sft_rotations else {})} if args.sft else None}
    if args.grpo_from_sft:
        settings["grpo_from"] = "sft"
    if args.variants:
        settings["variants"] = {name: variant_changes(name, recipe, start) for name in args.variants}
    return settings


def variant_changes(variant: str, recipe: dict[str, Any], start: Path) -> dict[str, Any]:
    """What a variant changes in the arm's GRPO recipe: the control its rewards (accuracy shuffled), GRPO
    alone its starting model (the warm-up ``start``); everything else, rows and steps included, is the arm's."""
    if variant == "control":
        return {"rewards": control_rewards(recipe)}
    return {"model": str(start)}


def control_rewards(recipe: dict[str, Any]) -> list[Any]:
    """The recipe's rewards with ``accuracy`` replaced by ``accuracy_shuffled`` (its options kept) at the
    same weights. A staged schedule weighs rewards by name, so the renamed reward would get another weight
    there: refused, as is a recipe without the accuracy reward (there is nothing to shuffle)."""
    from embodied_r.methods.rewards import reward_spec

    if recipe.get("reward_schedule") is not None:
        raise SystemExit("--control keeps the arm's reward weights, which a reward_schedule gives by name: "
                         "use constant reward_weights")
    specs = [reward_spec(entry) for entry in recipe["rewards"]]
    if "accuracy" not in [name for name, _ in specs]:
        raise SystemExit(f"--control shuffles the accuracy reward; the arm's rewards {recipe['rewards']} have none")
    return [entry if name != "accuracy" else {"accuracy_shuffled": options} if options else "accuracy_shuffled"
            for entry, (name, options) in zip(recipe["rewards"], specs)]


def freeze_arm(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """An arm's settings are fixed by its first run; another run under its name must match (its seeds
    pool only if they differ in nothing else). SFT and the variants may be added to an arm that ran
    without them (the recipe is the arm's either way); one that ran with other settings is refused."""
    path = args.out / "arms" / args.arm / "settings.json"
    settings = json.loads(json.dumps(settings))  # as the settings file stores them
    if path.is_file():
        before = read_json(path)
        if (before["recipe"] != settings["recipe"] or before["warmup"] != settings["warmup"]
                or before.get("grpo_from") != settings.get("grpo_from")):
            raise SystemExit(f"arm {args.arm!r} was run with other settings ({path}); choose another --arm name")
        if settings["sft"] is not None and before.get("sft") not in (None, settings["sft"]):
            raise SystemExit(f"arm {args.arm!r} ran SFT with {before['sft']}; choose another --arm name")
        variants = merged_variants(args.arm, before.get("variants") or {}, settings.get("variants") or {})
        settings = {**before, "sft": settings["sft"] or before.get("sft")}
        if variants:
            settings["variants"] = variants
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, settings)


def merged_variants(arm: str, before: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
    """The variants an arm has after this run: those it ran and those asked for; a variant asked for with
    other changes than it ran with is refused (its seeds would not pool)."""
    for name, changes in asked.items():
        if name in before and before[name] != changes:
            raise SystemExit(f"arm {arm!r} ran its {name} with {before[name]}, not {changes}; "
                             "choose another --arm name")
    return {**before, **asked}


def run_folder_name(seed: int, variant: str | None = None) -> str:
    """A GRPO run's folder in ``OUT/arms/ARM``: ``seed{N}``, a variant's ``seed{N}-NAME`` beside it."""
    return f"seed{seed}" + (f"-{variant}" if variant else "")


def eval_name(arm: str, seed: int, kind: str | None = None) -> str:
    """An evaluation's folder name: ``ARM-seed{N}`` for the arm's GRPO, ``ARM-KIND-seed{N}`` for its SFT
    model and variants (:func:`eval_kind` reads it back).

    >>> eval_name("base", 2), eval_name("base", 2, "control")
    ('base-seed2', 'base-control-seed2')
    """
    return f"{arm}-{kind}-seed{seed}" if kind else f"{arm}-seed{seed}"


def eval_kind(name: str) -> tuple[str, str, int]:
    """``(arm, summary key, seed)`` of an evaluation folder :func:`eval_name` named.

    >>> eval_kind("base-seed2"), eval_kind("base-alone-seed2")
    (('base', 'grpo', 2), ('base', 'grpo_alone', 2))
    """
    arm, _, seed = name.rpartition("-seed")
    for suffix, key in EVAL_KINDS.items():
        if arm.endswith(f"-{suffix}"):
            return arm.removesuffix(f"-{suffix}"), key, int(seed)
    return arm, "grpo", int(seed)


def train_seed(args: argparse.Namespace, train: Path, start: Path, seed: int, progress: Progress,
               variant: str | None = None) -> Path:
    """One seed's GRPO from ``start`` (a variant's in its own folder, under its own stage name)."""
    out = args.out / "arms" / args.arm / run_folder_name(seed, variant)
    out.mkdir(parents=True, exist_ok=True)
    recipe = grpo_recipe(args, train, start, out, seed)
    if variant == "control":
        recipe.update(rewards=control_rewards(recipe), description=f"{recipe['description']}, random-reward control")
    elif variant == "alone":
        recipe["description"] += ", GRPO alone (from the warm-up)"
    recipe_path = out / "recipe.yaml"
    atomic_write_text(recipe_path, yaml.safe_dump(recipe, sort_keys=False))
    progress.run(f"train:{args.arm}:{out.name}", ["train", "--recipe", str(recipe_path)])
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
             progress: Progress, baselines: str = EVAL_BASELINES, part: str | None = None, stage: str = "") -> None:
    """``embodied-r eval`` of ``model`` on ``data`` into ``OUT/evals/<part>/<name>`` (default: the run's part),
    as stage ``eval:<part>:<name><stage>``."""
    part = part or args.part
    out = args.out / "evals" / part / name
    progress.run(f"eval:{part}:{name}{stage}",
                 ["eval", "--data", str(data), "--model", str(model), "--out", str(out), "--batch-size", "32",
                  "--max-new-tokens", str(args.max_new_tokens), "--dtype", args.dtype,
                  "--baselines", baselines, "--prior-from", str(train), "--no-report"])


def log_test(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """Test is for final arms: record each arm's first test evaluation; refuse changed settings. A variant
    (the control, GRPO alone) added later is part of the same arm: the log notes when it first touched test
    (what it changes was checked by :func:`freeze_arm`)."""
    path = args.out / "test_log.json"
    log = read_json(path) if path.is_file() else {}
    entry = log.get(args.arm)
    frozen = json.loads(json.dumps({"recipe": settings["recipe"], "warmup": settings["warmup"]}))
    if entry is not None and entry["settings"] != frozen:
        raise SystemExit(f"arm {args.arm!r} was evaluated on test with other settings ({path}): test is "
                         "evaluated once per final arm; choose on dev")
    now = time.strftime("%Y-%m-%d %H:%M")
    updated = entry or {"settings": frozen, "first_evaluated": now}
    new = [name for name in settings.get("variants") or {} if name not in updated.get("variants", {})]
    if new:
        updated = {**updated, "variants": {**updated.get("variants", {}), **dict.fromkeys(new, now)}}
    if updated != entry:
        log[args.arm] = updated
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
    scored = [d for d in tests.values() if d["difference"] is not None]
    pooled = across_seeds([d["difference"] for d in scored], [d["verdict"] for d in scored])
    pooled["better_by_test_in"] = sum(d["verdict"] == "better" for d in tests.values())
    pooled["worse_by_test_in"] = sum(d["verdict"] == "worse" for d in tests.values())
    return {"per_seed": tests, "across_seeds": pooled}


def summarise(out: Path, split: str) -> dict[str, Any]:
    """The ladder table of every arm evaluated on ``split``, from the evaluation folders alone."""
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
            "scores": by_task(predictions(folder)), "blind": by_task(predictions(folder, "blind.jsonl")),
            "model": evaluated_model(folder)}
    for task in tasks:
        n = len(rule.get(task, {})) if task != "all" else len(rows)
        result["tasks"][task] = {
            "n": n, "too_few": n < MIN_QUESTIONS,
            "random": _baseline(baselines, "random", task), "prior": _baseline(baselines, "prior", task),
            "answer_prior": _baseline(baselines, "answer-prior", task),
            "text_rule": mean(rule.get(task, {})), "ceiling": mean(exact_rule.get(task, {})),
            "solver": solver.get(task),
        }
    for arm, entry in arm_evaluations(evals).items():
        settings = read_json(out / "arms" / arm / "settings.json")
        # A seed counts once each of the arm's runs is evaluated (the variants train after GRPO's
        # evaluation): otherwise GRPO − SFT and GRPO − control would pool different seeds mid-run.
        finished = set(entry["grpo"])
        for variant in settings.get("variants") or {}:
            finished &= set(entry.get(VARIANTS[variant], {}))
        keep_seeds(entry, finished)
        check_arm_recipes(out / "arms" / arm, settings, entry)
        warm = result["warmups"].get(settings["warmup"])
        result["arms"][arm] = {"settings": settings, "seeds": sorted(entry["grpo"]), "models": entry["models"],
                               "tasks": {task: task_row(entry, warm, task) for task in tasks},
                               "compute": arm_compute(out, arm, settings, sorted(entry["grpo"]), split)}
    test_log = out / "test_log.json"
    result["arms_evaluated_on_test"] = sorted(read_json(test_log)) if test_log.is_file() else []
    ood = summarise_ood(out, split, result)
    if ood is not None:  # no OOD evaluation: the summary is what it was before --ood
        result["ood"] = ood
    return result


def arm_compute(out: Path, arm: str, settings: dict[str, Any], seeds: list[int], part: str) -> dict[str, Any]:
    """What an arm's models cost: the warm-up's, SFT's and GRPO's steps and rows (GRPO's variants train at
    GRPO's), and the wall seconds of its stages in ``OUT/state.json``: the warm-up's, and for SFT, GRPO, each
    variant and GRPO's evaluation on ``part`` the median over ``seeds`` (None where none is recorded). Wall
    time includes whatever else the machine ran then. Also, per GRPO run and seed, the steps in which some
    group's rewards varied (:func:`signal_by_run`)."""
    recipe = settings["recipe"]
    done = read_json(out / "state.json") if (out / "state.json").is_file() else {}

    def median_seconds(stages: list[str]) -> float | None:
        seconds = [done[stage]["seconds"] for stage in stages if stage in done]
        return round(statistics.median(seconds), 1) if seconds else None

    stage_seconds = {
        "warmup": (done.get(f"warmup:{settings['warmup']}") or {}).get("seconds"),
        "sft": median_seconds([f"sft:{arm}:seed{seed}" for seed in seeds]) if settings.get("sft") else None,
        "grpo": median_seconds([f"train:{arm}:seed{seed}" for seed in seeds]),
        **{variant: median_seconds([f"train:{arm}:seed{seed}-{variant}" for seed in seeds])
           for variant in sorted(settings.get("variants") or {})},
        "grpo_evaluation": median_seconds([f"eval:{part}:{eval_name(arm, seed)}" for seed in seeds]),
    }
    generations, rows = recipe.get("num_generations"), recipe.get("per_device_train_batch_size")
    prompts = rows * recipe.get("gradient_accumulation_steps", 1) // generations if rows and generations else None
    return {"warmup_steps": warmup_steps(settings["warmup"]), "sft": settings.get("sft"),
            "grpo": {"steps": recipe.get("max_steps"), "prompts": prompts, "generations": generations,
                     "max_completion_length": recipe.get("max_completion_length"),
                     "learning_rate": recipe.get("learning_rate")},
            "stage_seconds": stage_seconds,
            "grpo_steps_with_signal": signal_by_run(out / "arms" / arm, seeds, sorted(settings.get("variants") or {}))}


def signal_by_run(arm_folder: Path, seeds: list[int], variants: list[str]) -> dict[str, dict[str, int | None]]:
    """Per GRPO run ("grpo" and each variant) and seed: in how many of its steps some group's rewards varied
    (the other steps taught nothing); None where the run has no metrics or no summary yet."""
    out: dict[str, dict[str, int | None]] = {}
    for run, variant in [("grpo", None), *((v, v) for v in variants)]:
        out[run] = {}
        for seed in seeds:
            folder = arm_folder / run_folder_name(seed, variant)
            summary = read_json(folder / "summary.json") if (folder / "summary.json").is_file() else {}
            out[run][str(seed)] = steps_with_signal(folder / "metrics.jsonl", summary.get("global_step"))
    return out


def evaluated_model(folder: Path) -> str | None:
    """The model an evaluation scored (its ``metrics.json``), for the record; None where it says none. A
    built-in model resolved to this machine's cache is named as built in (a record is checked in, and a
    path of one machine says nothing on another)."""
    if not (folder / "metrics.json").is_file():
        return None
    model = read_json(folder / "metrics.json").get("model")
    return portable_model_name(model) if model else None


def portable_model_name(model: str) -> str:
    """``smollm2-135m-instruct`` for its cached folder; any other absolute path by its last three parts.

    >>> portable_model_name("/home/u/.cache/embodied-r/models/smollm2-135m-instruct")
    'smollm2-135m-instruct'
    >>> portable_model_name("runs/ladder/arms/a/seed0/final")
    'runs/ladder/arms/a/seed0/final'
    """
    from embodied_r.inference.models import BUILTIN_MODELS

    path = Path(model)
    if path.name in BUILTIN_MODELS:
        return path.name
    return str(Path(*path.parts[-3:])) if path.is_absolute() else model


def arm_evaluations(evals: Path) -> dict[str, dict[str, Any]]:
    """Per arm, the scores by task of each evaluated run: ``grpo``, ``sft``, each variant's key
    (``VARIANTS``) and ``<key>_blind`` where its blind pass answered every question the run did (SFT's
    came as a stage of its own, so an evaluation may lack it); ``models``: the model each evaluation scored.
    Only the seeds whose GRPO run is evaluated count: a seed still under way (its SFT evaluated, its GRPO
    not yet) would otherwise show in one column and not the next (:func:`summarise` also waits for the
    arm's variants)."""
    arms: dict[str, dict[str, Any]] = {}
    for folder in sorted(evals.iterdir()) if evals.is_dir() else []:
        if folder.name.startswith("warmup-") or not (folder / "metrics.json").is_file():
            continue
        arm, kind, seed = eval_kind(folder.name)
        entry = arms.setdefault(arm, {"grpo": {}, "grpo_blind": {}, "sft": {}, "models": {}})
        answered = predictions(folder)
        entry.setdefault(kind, {})[seed] = by_task(answered)
        blind = predictions(folder, "blind.jsonl")
        if blind and set(answered) <= set(blind):
            entry.setdefault(f"{kind}_blind", {})[seed] = by_task(blind)
        entry["models"].setdefault(kind, {})[seed] = evaluated_model(folder)
    for entry in arms.values():
        keep_seeds(entry, set(entry["grpo"]))
    return arms


def keep_seeds(entry: dict[str, Any], seeds: set[int]) -> None:
    """Drop from an arm's evaluations (:func:`arm_evaluations`) every seed not in ``seeds``."""
    for key, runs in entry.items():
        if key != "models":
            entry[key] = {seed: value for seed, value in runs.items() if seed in seeds}
    entry["models"] = {kind: {seed: model for seed, model in models.items() if seed in seeds}
                       for kind, models in entry["models"].items()}


def check_arm_recipes(folder: Path, settings: dict[str, Any], entry: dict[str, Any]) -> None:
    """Seeds pool only if their recipes differ in nothing but the seed (GRPO after SFT, and the control,
    start from each seed's own SFT model); a variant's run differs from the arm's GRPO of its seed only in
    what the variant changes (the same rows, steps and everything else)."""
    from embodied_r.core.intervals import check_poolable

    def recipes(variant: str | None, seeds: Any) -> dict[int, dict[str, Any]]:
        return {s: yaml.safe_load((folder / run_folder_name(s, variant) / "recipe.yaml").read_text()) for s in seeds}

    def named(runs: dict[int, dict[str, Any]], variant: str | None = None) -> dict[str, dict[str, Any]]:
        return {run_folder_name(s, variant): recipe for s, recipe in runs.items()}  # check_poolable names them

    main = recipes(None, entry["grpo"])
    check_poolable(named(main), ignore=SEED_KEYS + (("model",) if settings.get("grpo_from") == "sft" else ()))
    for name, key in VARIANTS.items():
        runs = recipes(name, entry.get(key, {}))
        check_poolable(named(runs, name), ignore=SEED_KEYS + VARIANT_POOL_IGNORES[name])
        for seed in sorted(set(runs) & set(main)):
            check_poolable({**named({seed: main[seed]}), **named({seed: runs[seed]}, name)},
                           ignore=SEED_KEYS + VARIANT_CHANGES[name])


def task_row(entry: dict[str, Any], warm: dict[str, Any] | None, task: str) -> dict[str, Any]:
    """One task type's line of an arm: each run's mean score per seed (``grpo``, ``grpo_blind``, ``sft``,
    and the variants present), the warm-up's, and the comparisons (:func:`comparisons`)."""
    scores = {kind: {s: by_seed.get(task, {}) for s, by_seed in runs.items()}
              for kind, runs in entry.items() if kind != "models"}
    row: dict[str, Any] = {kind: {s: mean(v) for s, v in per_seed.items()} for kind, per_seed in scores.items()}
    warm_scores = None
    if warm is not None:
        warm_scores = warm["scores"].get(task, {})
        row["warmup"] = mean(warm_scores)
        row["warmup_blind"] = mean(warm["blind"].get(task, {}))
    return {**row, **comparisons(scores, warm_scores)}


def comparisons(scores: dict[str, dict[int, dict[str, float]]],
                warm: dict[str, float] | None) -> dict[str, dict[str, Any]]:
    """The paired comparisons of one task type, each ``A_vs_B`` (A − B): GRPO against the warm-up, its blind
    self, SFT and the control; SFT against the warm-up and its blind self; GRPO alone against the warm-up, its
    blind self, SFT and the control. A comparison needs both sides on every seed (a blind pass, a warm-up
    evaluation, the variant run)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in ("grpo", "sft", "grpo_alone"):
        if scores.get(kind) and warm is not None:
            out[f"{kind}_vs_warmup"] = compare_seeds(scores[kind], shared=warm)
    for kind in ("grpo", "grpo_alone", "sft"):
        blind = scores.get(f"{kind}_blind")
        if scores.get(kind) and blind and set(scores[kind]) <= set(blind) and all(blind.values()):
            out[f"{kind}_vs_blind"] = compare_seeds(scores[kind], per_seed=blind)
    for kind, other in (("grpo", "sft"), ("grpo", "control"), ("grpo_alone", "sft"), ("grpo_alone", "control")):
        if scores.get(kind) and scores.get(other):
            reference = scores[other]
            out[f"{kind}_vs_{other}"] = compare_seeds({s: v for s, v in scores[kind].items() if s in reference},
                                                      per_seed=reference)
    return out


# The runs of an arm an OOD table sets beside their ID scores (the warm-up is not evaluated there), in order.
OOD_RUNS = ("sft", "grpo", "control", "grpo_alone")


def summarise_ood(out: Path, part: str, result: dict[str, Any]) -> dict[str, Any] | None:
    """The OOD evaluations beside the ID part ``part`` (``OUT/evals/ood-<part>``), each arm's runs next to
    their ID scores in ``result``; None where there are none. Per task type: n, random and the solver's reach
    on the OOD questions."""
    evals = out / "evals" / ood_part(part)
    arms = arm_evaluations(evals)
    if not arms:
        return None
    rows = read_jsonl(ood_rows_file(out, part))
    prompt_rows = _prompt_rows(rows)
    random = {"random": random_baseline(prompt_rows)}
    solver = solver_reach(evals)
    counts = by_task({str(r["id"]): {"task": r["task"], "score": 0.0} for r in rows})
    tasks = sorted(t for t in counts if t != "all") + ["all"]
    summary: dict[str, Any] = {"part": ood_part(part), "questions": len(rows), "data": data_level(out, OOD_DATA),
                               "tasks": {}, "arms": {}}
    for task in tasks:
        n = len(counts.get(task, {}))
        summary["tasks"][task] = {"n": n, "too_few": n < MIN_QUESTIONS, "random": _baseline(random, "random", task),
                                  "solver": solver.get(task)}
    for arm, entry in arms.items():
        check_arm_recipes(out / "arms" / arm, read_json(out / "arms" / arm / "settings.json"), entry)
        id_tasks = (result["arms"].get(arm) or {}).get("tasks", {})
        summary["arms"][arm] = {"seeds": sorted(entry["grpo"] or entry["sft"]), "models": entry["models"],
                                "tasks": {task: ood_task_row(entry, id_tasks.get(task) or {}, task) for task in tasks}}
    return summary


def ood_task_row(entry: dict[str, Any], id_row: dict[str, Any], task: str) -> dict[str, Any]:
    """One task type's OOD line of an arm: each run's OOD score per seed (and its blind self), ``id``: the
    same runs' ID scores, ``drop``: ID − OOD per seed, the paired comparisons on the OOD questions
    (:func:`comparisons`; no warm-up there) and ``sft_drop_minus_grpo_drop`` (:func:`drop_gap`)."""
    scores = {kind: {s: by_seed.get(task, {}) for s, by_seed in runs.items()}
              for kind, runs in entry.items() if kind != "models"}
    row: dict[str, Any] = {kind: {s: mean(v) for s, v in per_seed.items()} for kind, per_seed in scores.items()}
    present = [kind for kind in OOD_RUNS if row.get(kind)]
    row["id"] = {kind: dict(id_row.get(kind, {})) for kind in present}
    row["drop"] = {kind: drops(row["id"][kind], row[kind]) for kind in present}
    row.update(comparisons(scores, None))
    gap = drop_gap(row["drop"])
    if gap is not None:
        row["sft_drop_minus_grpo_drop"] = gap
    return row


def drops(id_scores: dict[int, float | None], ood_scores: dict[int, float | None]) -> dict[int, float]:
    """ID − OOD per seed, for the seeds scored on both; rounded as paired differences are (4 places), so two
    equal drops compare equal, not by float noise (0.25 − 0.15 is not 0.75 − 0.65).

    >>> drops({0: 0.75, 1: 0.5, 2: None}, {0: 0.65, 1: 0.5, 2: 0.25, 3: 0.0})
    {0: 0.1, 1: 0.0}
    """
    return {s: round(id_scores[s] - v, 4) for s, v in sorted(ood_scores.items())
            if v is not None and id_scores.get(s) is not None}


def drop_gap(drop: dict[str, dict[int, float]]) -> dict[str, Any] | None:
    """SFT's drop − GRPO after SFT's drop, per seed and across seeds (mean, t-interval, verdict): positive,
    GRPO after SFT loses less out of distribution. None without a seed that has both drops."""
    from embodied_r.core.intervals import across_seeds

    sft, grpo = drop.get("sft", {}), drop.get("grpo", {})
    per_seed = {s: round(sft[s] - grpo[s], 4) for s in sorted(set(sft) & set(grpo))}  # as drops are rounded
    if not per_seed:
        return None
    return {"per_seed": per_seed, "across_seeds": across_seeds(list(per_seed.values()))}


def solver_reach(evals: Path) -> dict[str, dict[str, float | None]]:
    """Per task type (and ``all``): the solver baseline's ``applicable`` share and ``ceiling``, from the
    first evaluation in ``evals`` whose ``metrics.json`` has it (it reads only the rows, so every evaluation
    of one part has the same); {} when none has (evaluations from before the solver baseline)."""
    for path in sorted(evals.glob("*/metrics.json")) if evals.is_dir() else []:
        table = (read_json(path).get("baselines") or {}).get("solver") or {}
        if table.get("status") == "ok":
            reach = {str(task): t for task, t in (table.get("tasks") or {}).items()}
            reach["all"] = table.get("overall") or {}
            return {task: {"applicable": t.get("applicable"), "ceiling": t.get("ceiling"), "copy": t.get("copy")}
                    for task, t in reach.items()}
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
    """Per arm its table (:func:`arm_table`), with a control or GRPO alone their table (:func:`variant_table`),
    and with OOD evaluations the OOD table (:func:`ood_table`)."""
    lines = []
    ood = result.get("ood") or {"arms": {}}
    goals = goal_record(result)["arms"]
    for arm, info in result["arms"].items():
        lines += arm_table(arm, info, result) + [""]
        variants = variant_table(arm, info, result)
        lines += variants + [""] if variants else []
        lines += [goal_line(goals[arm]), ""]
        if arm in ood["arms"]:
            lines += ood_table(arm, ood["arms"][arm], ood, result) + [""]
    if result["arms_evaluated_on_test"]:
        lines.append("arms evaluated on test so far: " + ", ".join(result["arms_evaluated_on_test"]))
    return "\n".join(lines)


def goal_line(goal: dict[str, Any]) -> str:
    """One line: whether the arm met the learning goal (:func:`goal_record`), and on which types."""
    said = "met" if goal["met"] else "not met"
    return (f"goal (GRPO after SFT or alone better than SFT, its blind self and the random-reward control across "
            f"seeds, on at least {GOAL_TYPES} non-copy task types): {said}; types where it holds: "
            f"{', '.join(goal['types_met']) or 'none'}")


def arm_table(arm: str, info: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """The arm's GRPO against the warm-up, its blind self and SFT, beside the baselines."""
    seeds = info["seeds"]
    lines = [f"### arm {arm} ({result['split']}, seeds {','.join(map(str, seeds))}, warm-up "
             f"{info['settings']['warmup']}, {data_words(result.get('data'))})", "",
             "| task type | n | random | letter prior | answer prior | text rule (ceiling) | "
             "solver applicable (ceiling) | warm-up | GRPO per seed | GRPO − warm-up | GRPO blind | "
             "GRPO − blind | SFT | GRPO − SFT |", "|" + "---|" * 14]
    for task, base in result["tasks"].items():
        row = info["tasks"][task]
        per_seed = " / ".join(pct(row["grpo"].get(s)) for s in seeds)
        blind = " / ".join(pct(row["grpo_blind"].get(s)) for s in seeds)
        lines.append(
            f"| {task} | {base['n']} | {pct(base['random'])} | {pct(base['prior'])} | "
            f"{pct(base['answer_prior'])} | "
            f"{pct(base['text_rule'])} ({pct(base['ceiling'])}) | {solver_cell(base.get('solver'))} | "
            f"{pct(row.get('warmup'))} | {per_seed} | "
            f"{verdict_cell(row.get('grpo_vs_warmup'), base['too_few'])} | {blind} | "
            f"{verdict_cell(row.get('grpo_vs_blind'), base['too_few'])} | {seeds_cell(row['sft'])} | "
            f"{verdict_cell(row.get('grpo_vs_sft'), base['too_few'])} |")
    return lines


# The variant table's columns after the task type, n, warm-up, SFT and GRPO: per variant, (header, the
# row's key, whether the key holds scores per seed or a comparison).
VARIANT_COLUMNS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "control": (("control per seed", "control", "seeds"), ("control blind", "control_blind", "seeds"),
                ("GRPO − control", "grpo_vs_control", "verdict")),
    "grpo_alone": (("GRPO alone per seed", "grpo_alone", "seeds"), ("GRPO alone blind", "grpo_alone_blind", "seeds"),
                   ("alone − blind", "grpo_alone_vs_blind", "verdict"),
                   ("alone − warm-up", "grpo_alone_vs_warmup", "verdict"),
                   ("alone − SFT", "grpo_alone_vs_sft", "verdict"),
                   ("alone − control", "grpo_alone_vs_control", "verdict")),
}


def variant_table(arm: str, info: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """The four-arm verdict, where the arm has a control or GRPO alone (none: no table): SFT, GRPO after
    SFT and each variant per seed, GRPO − control (GRPO's gain beyond what any reward gives), GRPO alone
    against its blind self, the warm-up and SFT. A second table keeps the first one readable."""
    present = [key for key in VARIANT_COLUMNS if info["models"].get(key)]
    if not present:
        return []
    names = {"control": "control", "grpo_alone": "GRPO alone"}
    seeds = "; ".join(f"{names[key]} seeds {','.join(map(str, sorted(info['models'][key])))}" for key in present)
    columns = [column for key in present for column in VARIANT_COLUMNS[key]]
    lines = [f"### arm {arm}: {' and '.join(names[key] for key in present)} ({result['split']}, {seeds}, "
             f"{data_words(result.get('data'))})", "",
             "| task type | n | warm-up | SFT | GRPO per seed | " + " | ".join(c[0] for c in columns) + " |",
             "|" + "---|" * (5 + len(columns))]
    for task, base in result["tasks"].items():
        row = info["tasks"][task]
        cells = [seeds_cell(row.get(key, {})) if kind == "seeds" else verdict_cell(row.get(key), base["too_few"])
                 for _, key, kind in columns]
        lines.append(f"| {task} | {base['n']} | {pct(row.get('warmup'))} | {seeds_cell(row['sft'])} | "
                     f"{seeds_cell(row['grpo'])} | " + " | ".join(cells) + " |")
    return lines


# The OOD table's names of the runs (OOD_RUNS) in headers.
RUN_NAMES = {"sft": "SFT", "grpo": "GRPO", "control": "control", "grpo_alone": "GRPO alone"}


def ood_table(arm: str, info: dict[str, Any], ood: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """Does GRPO after SFT lose less out of distribution than SFT alone? Per task type: each run on ID and OOD
    per seed and its drop (ID − OOD), GRPO − SFT on the same OOD questions (exact paired test per seed), and
    SFT's drop − GRPO's drop across seeds (positive: GRPO after SFT loses less). Too few OOD questions of a
    type: no verdict; too few ID or OOD questions: no verdict on the drops (:func:`drop_too_few`)."""
    present = [kind for kind in OOD_RUNS if info["models"].get(kind)]
    header = ["task type", "n ID", "n OOD"]
    for kind in present:
        header += [f"{RUN_NAMES[kind]} ID", f"{RUN_NAMES[kind]} OOD", f"{RUN_NAMES[kind]} drop"]
    header += ["GRPO − SFT on OOD", "SFT drop − GRPO drop"]
    lines = [f"### arm {arm}: out of distribution (ID {result['split']}, OOD {ood['part']}, seeds "
             f"{','.join(map(str, info['seeds']))}, {data_words(ood.get('data'))})", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task, base in ood["tasks"].items():
        row = info["tasks"][task]
        id_n = (result["tasks"].get(task) or {}).get("n")
        cells = [task, "–" if id_n is None else str(id_n), str(base["n"])]
        for kind in present:
            cells += [seeds_cell(row["id"][kind]), seeds_cell(row[kind]), seeds_cell(row["drop"][kind])]
        cells += [verdict_cell(row.get("grpo_vs_sft"), base["too_few"]),
                  gap_cell(row.get("sft_drop_minus_grpo_drop"), drop_too_few(task, ood, result))]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def drop_too_few(task: str, ood: dict[str, Any], result: dict[str, Any]) -> bool:
    """A drop is read on both sets: too few questions of the type on either (or none on ID) -> no verdict."""
    id_n = (result["tasks"].get(task) or {}).get("n")
    return ood["tasks"][task]["too_few"] or id_n is None or id_n < MIN_QUESTIONS


def gap_cell(gap: dict[str, Any] | None, too_few: bool) -> str:
    """``+5.0 [-1.2, +11.2], GRPO lost less in 2/3 -> better`` (mean across seeds, t-interval, seed count)."""
    if gap is None:
        return "–"
    pooled = gap["across_seeds"]
    text = f"{100 * pooled['mean']:+.1f}"
    if pooled["ci95"]:
        text += f" [{100 * pooled['ci95'][0]:+.1f}, {100 * pooled['ci95'][1]:+.1f}]"
    text += f", GRPO lost less in {pooled['better_in']}/{pooled['n_seeds']}"
    if too_few:
        return text + " (too few questions)"
    return text + (f" -> {pooled['verdict']}" if pooled["n_seeds"] > 1 else "")


def seeds_cell(scores: dict[int, float | None]) -> str:
    """``45.0 / 50.0``: a run's score per seed, in seed order; "–" without any."""
    return " / ".join(pct(v) for _, v in sorted(scores.items())) or "–"


# ---------------------------------------------------------------------------------------------------
# The record for the docs
# ---------------------------------------------------------------------------------------------------

# The variants of an arm in the record, in order: the summary's key of each run (the warm-up has no seed).
RECORD_RUNS = ("warmup", "sft", "grpo", "grpo_alone", "control")


def record(result: dict[str, Any]) -> dict[str, Any]:
    """The summary's tables as JSON rows for the docs (``--record``), every number :func:`summarise`'s, only
    reshaped: ``runs``, one per task type x arm x variant (``RECORD_RUNS``) x seed with its split, detail level,
    span, model, n, accuracy and blind accuracy; ``baselines`` per task type; ``comparisons``, one per task
    type x arm x comparison with its mean difference, interval, better/worse-by-test counts over the seeds,
    verdict, and each seed's difference, interval and exact test's p."""
    data = result.get("data") or {}
    where = {"split": result["split"], "detail": data.get("detail"), "span": data.get("span")}
    runs: list[dict[str, Any]] = []
    compared: list[dict[str, Any]] = []
    for arm, info in result["arms"].items():
        for task, row in info["tasks"].items():
            runs += run_records(arm, info, task, row, result, where)
            compared += comparison_records(arm, task, row, result["tasks"][task]["too_few"])
    written = {**where, "questions": result["questions"],
               "arms": {arm: {"warmup": info["settings"]["warmup"],
                              "base_model": warmup_base_model(info["settings"]["warmup"]),
                              "grpo_from": info["settings"].get("grpo_from"),
                              "seeds": info["seeds"], "variants": sorted(info["settings"].get("variants") or {}),
                              "compute": info.get("compute")}
                        for arm, info in result["arms"].items()},
               "baselines": {task: baseline_record(base) for task, base in result["tasks"].items()},
               "runs": runs, "comparisons": compared, "arms_evaluated_on_test": result["arms_evaluated_on_test"]}
    written["goal"] = goal_record(result)
    if result.get("ood"):  # without OOD evaluations the record is what it was before --ood
        written.update(ood_record(result["ood"], result))
    return written


# The learning goal: a GRPO run (after SFT, or alone) counts on a task type when it beats each of these by the
# across-seed interval (the pooled verdict "better"), on a type whose text determines but does not state the
# answer (the solver's ``copy`` flag), on at least GOAL_TYPES types.
GOAL_REFERENCES = ("sft", "blind", "control")
GOAL_RUNS = ("grpo", "grpo_alone")
GOAL_TYPES = 3


def goal_record(result: dict[str, Any]) -> dict[str, Any]:
    """Per arm and task type, each GRPO run's verdicts against SFT, its blind self and the random-reward
    control (None where a side was not run), whether all three are "better", and whether the type is a copy
    type; then the non-copy types where a GRPO run met it, and whether they number ``GOAL_TYPES`` or more."""
    arms: dict[str, Any] = {}
    for arm, info in result["arms"].items():
        per_task: dict[str, Any] = {}
        for task, row in info["tasks"].items():
            if task == "all":
                continue
            copy = bool((result["tasks"][task].get("solver") or {}).get("copy"))
            runs = {}
            for run in GOAL_RUNS:
                verdicts = {f"vs_{other}": (row.get(f"{run}_vs_{other}") or {}).get("across_seeds", {}).get("verdict")
                            for other in GOAL_REFERENCES}
                runs[run] = {**verdicts, "met": all(v == "better" for v in verdicts.values())}
            per_task[task] = {"copy": copy, "too_few": result["tasks"][task]["too_few"], **runs}
        met = sorted(task for task, goal in per_task.items()
                     if not goal["copy"] and not goal["too_few"] and any(goal[run]["met"] for run in GOAL_RUNS))
        arms[arm] = {"tasks": per_task, "types_met": met, "met": len(met) >= GOAL_TYPES}
    return {"rule": f"GRPO (after SFT or alone) better than {', '.join(GOAL_REFERENCES)} by the across-seed "
                    f"interval on at least {GOAL_TYPES} non-copy task types", "arms": arms}


def ood_record(ood: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The OOD table as JSON rows: ``ood_questions``, ``ood_baselines`` (n, random, solver per task type),
    ``ood_runs`` (one per task type x arm x run x seed, split "ood", with its ID accuracy and drop) and
    ``ood_comparisons`` (the paired ones on the OOD questions, as :func:`comparison_records` writes them,
    and ``sft_drop_minus_grpo_drop`` with each seed's value)."""
    data = ood.get("data") or {}
    where = {"split": "ood", "part": ood["part"], "id_split": result["split"], "detail": data.get("detail"),
             "span": data.get("span")}
    runs: list[dict[str, Any]] = []
    compared: list[dict[str, Any]] = []
    for arm, info in ood["arms"].items():
        for task, row in info["tasks"].items():
            base = ood["tasks"][task]
            runs += ood_run_records(arm, info, task, row, base["n"], where)
            compared += comparison_records(arm, task, row, base["too_few"])
            if "sft_drop_minus_grpo_drop" in row:
                compared.append(gap_record(arm, task, row["sft_drop_minus_grpo_drop"],
                                           drop_too_few(task, ood, result)))
    solver = {task: base.get("solver") or {} for task, base in ood["tasks"].items()}
    return {"ood_questions": ood["questions"],
            "ood_baselines": {task: {"n": base["n"], "too_few": base["too_few"], "random": base["random"],
                                     "solver_applicable": solver[task].get("applicable"),
                                     "solver_ceiling": solver[task].get("ceiling")}
                              for task, base in ood["tasks"].items()},
            "ood_runs": runs, "ood_comparisons": compared,
            # The OOD goal per arm and task type: SFT's drop from ID minus GRPO after SFT's, pooled over seeds
            # ("better": GRPO after SFT lost less).
            "ood_goal": {arm: {task: row["sft_drop_minus_grpo_drop"]["across_seeds"]["verdict"]
                               for task, row in info["tasks"].items()
                               if "sft_drop_minus_grpo_drop" in row and task != "all"
                               and not drop_too_few(task, ood, result)}
                         for arm, info in ood["arms"].items()}}


def ood_run_records(arm: str, info: dict[str, Any], task: str, row: dict[str, Any], n: int,
                    where: dict[str, Any]) -> list[dict[str, Any]]:
    """One task type's OOD runs of an arm, each seed with its OOD and ID accuracy, blind accuracy and drop."""
    out = []
    for kind in OOD_RUNS:
        for seed, accuracy in sorted(row.get(kind, {}).items()):
            out.append({"arm": arm, "task": task, "variant": kind, "seed": seed, **where,
                        "model": info["models"].get(kind, {}).get(seed), "n": n, "accuracy": accuracy,
                        "blind_accuracy": row.get(f"{kind}_blind", {}).get(seed),
                        "id_accuracy": row["id"].get(kind, {}).get(seed), "drop": row["drop"].get(kind, {}).get(seed)})
    return out


def gap_record(arm: str, task: str, gap: dict[str, Any], too_few: bool) -> dict[str, Any]:
    """SFT's drop − GRPO after SFT's drop, under :func:`comparison_records`' keys where they mean the same
    (``better_in``: seeds where GRPO after SFT lost less; no per-seed test: a drop is not a paired score)."""
    pooled = gap["across_seeds"]
    return {"arm": arm, "task": task, "comparison": "sft_drop_minus_grpo_drop", "too_few": too_few,
            "mean_difference": pooled["mean"], "ci95": pooled["ci95"], "n_seeds": pooled["n_seeds"],
            "better_in": pooled["better_in"], "worse_in": pooled["worse_in"], "verdict": pooled["verdict"],
            "per_seed": [{"seed": seed, "difference": value} for seed, value in gap["per_seed"].items()]}


def run_records(arm: str, info: dict[str, Any], task: str, row: dict[str, Any], result: dict[str, Any],
                where: dict[str, Any]) -> list[dict[str, Any]]:
    """One task type's runs of an arm: the warm-up (seed None), then each run's seeds."""
    n = result["tasks"][task]["n"]
    warm = result["warmups"].get(info["settings"]["warmup"])
    out = []
    if "warmup" in row:
        out.append({"arm": arm, "task": task, "variant": "warmup", "seed": None, **where,
                    "model": warm and warm.get("model"), "n": n, "accuracy": row["warmup"],
                    "blind_accuracy": row["warmup_blind"]})
    for kind in RECORD_RUNS[1:]:
        for seed, accuracy in sorted(row.get(kind, {}).items()):
            out.append({"arm": arm, "task": task, "variant": kind, "seed": seed, **where,
                        "model": info["models"].get(kind, {}).get(seed), "n": n, "accuracy": accuracy,
                        "blind_accuracy": row.get(f"{kind}_blind", {}).get(seed)})
    return out


def comparison_records(arm: str, task: str, row: dict[str, Any], too_few: bool) -> list[dict[str, Any]]:
    """One task type's comparisons of an arm (the row's ``A_vs_B`` entries), across seeds and per seed."""
    out = []
    for key, comparison in row.items():
        if "_vs_" not in key:
            continue
        pooled = comparison["across_seeds"]
        out.append({"arm": arm, "task": task, "comparison": key, "too_few": too_few,
                    "mean_difference": pooled["mean"], "ci95": pooled["ci95"], "n_seeds": pooled["n_seeds"],
                    "better_by_test_in": pooled["better_by_test_in"], "worse_by_test_in": pooled["worse_by_test_in"],
                    "verdict": pooled["verdict"],
                    "per_seed": [{"seed": seed, "n": test["n"], "difference": test["difference"], "ci95": test["ci95"],
                                  "p_value": test["p_value"], "verdict": test["verdict"]}
                                 for seed, test in comparison["per_seed"].items()]})
    return out


def baseline_record(base: dict[str, Any]) -> dict[str, Any]:
    """A task type's baselines under the table's names (solver: None for evaluations made before it)."""
    solver = base.get("solver") or {}
    return {"n": base["n"], "too_few": base["too_few"], "random": base["random"], "letter_prior": base["prior"],
            "answer_prior": base["answer_prior"], "text_rule": base["text_rule"],
            "text_rule_ceiling": base["ceiling"], "solver_applicable": solver.get("applicable"),
            "solver_ceiling": solver.get("ceiling"), "solver_copy": solver.get("copy")}


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", choices=("dev", "test"), default="dev",
                        help="where the models are evaluated: dev while choosing, test once per final arm")
    parser.add_argument("--table", action="store_true", help="only print and write the table of --split")
    parser.add_argument("--record", type=Path, default=None,
                        help="also write the tables as JSON rows to this path (runs, baselines, comparisons; for docs)")
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
    data.add_argument("--detail", default=None, choices=DETAIL_LEVELS,
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
    arm.add_argument("--control", action="store_true",
                     help="per seed, the random-reward control: GRPO from the same SFT model with the accuracy reward "
                     "shuffled within each group (accuracy_shuffled; needs --sft --grpo-from-sft)")
    arm.add_argument("--grpo-alone", action="store_true",
                     help="per seed, GRPO from the warm-up with the arm's recipe otherwise "
                     "(needs --sft --grpo-from-sft)")
    arm.add_argument("--max-new-tokens", type=int, default=64, help="completion budget, training and eval")
    ood = parser.add_argument_group("out of distribution (--ood; the OOD data is fixed per OUT)")
    ood.add_argument("--ood", action="store_true",
                     help="also evaluate each seed's SFT model and GRPO after SFT (--ood-variants: the variants "
                     "too) on an OOD world (synth world --ood) at the data's detail level and span (needs --sft "
                     "--grpo-from-sft)")
    ood.add_argument("--ood-scenes", type=int, default=60, help="OOD rooms (default 60)")
    ood.add_argument("--ood-max-frames", type=int, default=None,
                     help="key frames per OOD video (default: the OOD world's suggestion, 10)")
    ood.add_argument("--ood-per-type", type=int, default=30, help="evaluated OOD questions per task type")
    ood.add_argument("--ood-variants", action="store_true",
                     help="also evaluate the control and GRPO alone there (off by default: the OOD question is "
                     "SFT against GRPO after SFT, and each variant's OOD pass with its blind self costs about as "
                     "much as training it)")
    arm.add_argument("--set", action="append", default=[], help="GRPO recipe override key=value")
    arm.add_argument("--dtype", default="float32", choices=("auto", "float32", "bfloat16"),
                     help="precision of every model stage; one per OUT (default float32: the same arithmetic "
                     "on every CPU)")
    args = parser.parse_args(argv)
    if len(args.ratios) != 3 or abs(sum(args.ratios) - 1) > 1e-6 or min(args.ratios) <= 0:
        parser.error("--ratios needs three positive shares summing to 1 (train, dev, test)")
    if args.grpo_from_sft and not args.sft:
        parser.error("--grpo-from-sft starts GRPO from the SFT models: add --sft")
    args.variants = [name for name, asked in (("control", args.control), ("alone", args.grpo_alone)) if asked]
    if args.variants and not args.grpo_from_sft:
        parser.error("--control and --grpo-alone are runs beside GRPO after SFT: add --sft --grpo-from-sft")
    if args.ood and not args.grpo_from_sft:
        parser.error("--ood asks whether GRPO after SFT loses less out of distribution than SFT alone: "
                     "add --sft --grpo-from-sft")
    if args.ood_variants and not (args.ood and args.variants):
        parser.error("--ood-variants evaluates the control and GRPO alone out of distribution: add --ood and "
                     "--control or --grpo-alone")
    if args.arm.endswith(tuple(f"-{suffix}" for suffix in EVAL_KINDS)):
        parser.error(f"--arm {args.arm!r}: a name ending in -{', -'.join(EVAL_KINDS)} would read as another arm's "
                     "SFT model or variant in the evaluations")
    # What was asked of the data, so that --table can refuse settings its OUT's data was not made with.
    args.data_asked = {key: getattr(args, key) for key in OLD_DATA_DEFAULTS if getattr(args, key) is not None}
    args.detail = args.detail or "words"
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
    # Made before any model trains, so a refused OOD stamp costs no training.
    ood = build_ood_data(args, progress) if args.ood else None
    train = train_rows(args, files["train"])
    start = warm_up(args, train, progress)
    settings = arm_settings(args, train, start)
    freeze_arm(args, settings)
    if args.split == "test":
        log_test(args, settings)
    evaluated = eval_rows(args, files)
    evaluate(args, f"warmup-{warmup_name(args)}", start, evaluated, files["train"], progress)
    for seed in args.seed_list:
        run_seed(args, train, start, seed, evaluated, files["train"], progress, ood)
    return report(args)


def run_seed(args: argparse.Namespace, train: Path, start: Path, seed: int, evaluated: Path, prior_from: Path,
             progress: Progress, ood: Path | None = None) -> None:
    """One seed of the arm, each model trained and evaluated: SFT, GRPO, and the variants asked for (the
    control from the same SFT model as GRPO, GRPO alone from the warm-up ``start``); with ``ood`` (the OOD
    questions, ``--ood``) each is evaluated there too."""
    sft = None
    if args.sft:
        sft = supervised_seed(args, train, start, seed, progress)
        name = eval_name(args.arm, seed, "sft")
        evaluate(args, name, sft, evaluated, prior_from, progress, baselines=EVAL_BASELINES.replace(",blind", ""))
        # SFT's blind pass is a stage of its own, added after the test ladder's first seeds had been evaluated
        # without it: a rerun adds it to those seeds' evaluations (their answers are kept, so only the blind
        # pass runs) and to every later seed's alike.
        evaluate(args, name, sft, evaluated, prior_from, progress, stage="+blind")
        evaluate_ood(args, name, sft, ood, prior_from, progress)
    grpo_start = sft if args.grpo_from_sft else start  # parse_args: --grpo-from-sft needs --sft
    grpo = train_seed(args, train, grpo_start, seed, progress)
    evaluate(args, eval_name(args.arm, seed), grpo, evaluated, prior_from, progress)
    evaluate_ood(args, eval_name(args.arm, seed), grpo, ood, prior_from, progress)
    for variant in args.variants:  # parse_args: only with --grpo-from-sft
        variant_start = start if variant == "alone" else grpo_start
        model = train_seed(args, train, variant_start, seed, progress, variant)
        evaluate(args, eval_name(args.arm, seed, variant), model, evaluated, prior_from, progress)
        if args.ood_variants:
            evaluate_ood(args, eval_name(args.arm, seed, variant), model, ood, prior_from, progress)


def evaluate_ood(args: argparse.Namespace, name: str, model: Path, ood: Path | None, prior_from: Path,
                 progress: Progress) -> None:
    """A model on the OOD questions (none without ``--ood``), under the ID evaluation's name in ``ood-<part>``.
    Every baseline, the blind pass included for SFT too: its OOD score may come from the question alone, and
    the OOD table sets SFT beside GRPO there."""
    if ood is not None:
        evaluate(args, name, model, ood, prior_from, progress, part=ood_part(args.part))


def report(args: argparse.Namespace) -> int:
    """Print the tables of ``--split`` and write them (JSON and markdown) into OUT, and to ``--record``. A
    ``--detail`` or ``--span`` given that OUT's data was not made at is refused (the tables are of its data)."""
    made = data_level(args.out)
    if made is not None:
        check_data_settings(args.out / "data", made, {**made, **args.data_asked})
    result = summarise(args.out, args.part)
    text = markdown(result)
    print(text)
    atomic_write_json(args.out / f"ladder-{args.part}.json", result)
    atomic_write_text(args.out / f"ladder-{args.part}.md", text + "\n")
    print(f"\nwrote {args.out / f'ladder-{args.part}.json'} and .md")
    if args.record is not None:
        atomic_write_json(args.record, record(result))
        print(f"wrote {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
