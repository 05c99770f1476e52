"""The end-to-end demo: synthetic world -> key frames -> oracle perception -> prompts -> supervised
fine-tuning on the gold answers -> eval -> GRPO training -> eval -> report, on a laptop CPU with no
downloads.

Every stage is one ``embodied-r`` subcommand, run in its own process with the arguments recorded in
``DIR/demo_plan.json``, so any stage can be rerun alone with the printed command, and the memory one stage
allocated (models, optimizer state) is given back before the next starts. Finished stages are recorded in
``DIR/demo_state.json`` (atomically) with their wall time and peak resident memory; rerunning the demo
skips them.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from embodied_r.core.io import atomic_write_json, atomic_write_text, exclusive_output, read_json
from embodied_r.training.warmup import warmup_model_dir

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
# What the demo trains on, and how: the best recipe found on the task ladder's dev split (benchmarks/ladder.py,
# docs/learning.md) that fits 15 minutes of a 2-core CPU. The last action is the task type whose answer the
# perception text states most often (its text rule is right on ~84 % of questions).
DEMO_TASKS = ("last_action",)
PROMPT_VERSION = "compact-v1"  # the official frame lines under a short instruction: ~150 tokens fewer a prompt
# The 135M default does not write the <think>/<answer> structure from the prompt, so every GRPO group would
# score the same and nothing would be learned. Training therefore starts with supervised fine-tuning on the
# gold answers (training/warmup.py, ``answers: gold``), one pass over the training prompts, 2 a step, then
# runs GRPO with the format and accuracy rewards; the SFT model is evaluated on its own, so the report
# separates the two. The SFT think is ``listed``: it quotes the line the answer depends on (the last frame's
# action), writes the options back with each letter after its words, and chooses in that form ("I choose
# Rotate left (B)"), so the letter is copied from the think instead of looked up in the prompt. On the
# ladder's dev split such an SFT (20 steps of 2 rows, from the base model) read the last action at 88.3 %
# (text rule 90.0 %). With the letter looked up in the prompt (``evidence``) the same-sized SFT chose the
# quoted words and answered "A" everywhere, also with each question at all four letters (dev) and after an
# 8-step random-answer primer (a demo run); the ladder's primer of 48 steps makes it read, but does not fit.
SFT_THINK = "listed"
SFT_BATCH = 2
SFT_MICRO_BATCH = 1
MIN_GRPO_STEPS = 20  # the demo is sized so that at least this many GRPO steps run on the slowest 2-core CPU
FULL_DEMO_SCENES = 160
FULL_DEMO_TEST_SHARE = 0.75  # 120 of the 160 scenes' questions held out for the verdict


@dataclass
class DemoSize:
    """How much work the demo does; chosen from the time budget (``--minutes``)."""

    scenes: int
    seconds: int
    per_task: int
    train_steps: int
    eval_limit: int  # held-out questions the SFT and the trained model answer (0 = every one)
    max_new_tokens: int
    sft_steps: int = 20  # supervised steps of SFT_BATCH gold-answer rows
    tasks: tuple[str, ...] | None = None  # task types kept by the split (None: every one)
    prompt_version: str = PROMPT_VERSION
    test_share: float = 0.5
    detail: str = "words"  # the oracle's detail level (docs/world.md)
    span: str | None = None  # build-prompts --span: keep questions whose objects some key frames show
    # auto: bf16 passes on a CPU with bf16, float32 elsewhere; float32 reproduces the slowest CPU's
    # arithmetic anywhere.
    dtype: str = "auto"

    @classmethod
    def for_minutes(cls, minutes: float) -> DemoSize:
        # Measured at float32 on a 2-core CPU (docs/performance.md): a GRPO step of 2 prompts x 4 completions
        # of the last action takes ~12-15 s, a supervised example ~5 s, rendering ~0.65 s a scene, and one
        # evaluation of the 120 held-out questions about 2 minutes (mostly encoding ~375-token prompts at
        # float32). ``train_steps`` is a cap: the train stage's time budget (``train_minutes``, measured as the
        # demo runs) stops GRPO where the other stages leave no more time (14 and 18 steps at 120 questions on an
        # AVX-512 machine, short of MIN_GRPO_STEPS; docs/performance.md, "The demo").
        if minutes < 3:
            raise ValueError("the demo needs at least 3 minutes")
        small = minutes < 10
        fixed_minutes = 2.0 if small else 6.0
        steps = int(max(2.0, (minutes - fixed_minutes) * 60 / 15))
        # 160 scenes, one last-action question each: 120 held out, so the exact paired test can tell a change
        # of a few questions from chance, and 40 for training (one SFT pass of 20 steps x 2 prompts).
        if small:
            return cls(scenes=12, seconds=12, per_task=1, train_steps=min(steps, 40), eval_limit=0,
                       max_new_tokens=64, sft_steps=3, tasks=DEMO_TASKS)
        return cls(scenes=FULL_DEMO_SCENES, seconds=12, per_task=1, train_steps=min(steps, 40), eval_limit=0,
                   max_new_tokens=64, sft_steps=20, tasks=DEMO_TASKS, test_share=FULL_DEMO_TEST_SHARE)


@dataclass
class WorldChoice:
    """What the demo asks about, where the user picks (``embodied-r demo --tasks/--detail/--span``); None
    keeps the demo's own choice. The sizes stay those of ``--minutes``: other task types have other prompt
    lengths, so the time budget, not the step cap, decides how many GRPO steps run."""

    tasks: tuple[str, ...] | None = None
    detail: str | None = None
    span: str | None = None

    def check(self) -> None:
        """Raise ValueError naming what the world offers when a task type, level or span is not one of them."""
        from embodied_r.sim.world.detail_levels import DETAIL_LEVELS, SPANS, WORLD_TASK_TYPES

        unknown = [task for task in self.tasks or () if task not in WORLD_TASK_TYPES]
        if unknown:
            raise ValueError(f"--tasks: the synthetic world asks no {', '.join(unknown)}; its task types are "
                             f"{', '.join(WORLD_TASK_TYPES)}")
        if self.tasks is not None and not self.tasks:
            raise ValueError("--tasks: name at least one task type")
        if self.detail is not None and self.detail not in DETAIL_LEVELS:
            raise ValueError(f"--detail: {self.detail!r} is not one of {', '.join(DETAIL_LEVELS)}")
        if self.span is not None and self.span not in SPANS:
            raise ValueError(f"--span: {self.span!r} is not one of {', '.join(SPANS)}")

    def flags(self) -> list[str]:
        """The command-line flags that ask for this choice (none for what is left to the demo)."""
        return [*(["--tasks", ",".join(self.tasks)] if self.tasks else []),
                *(["--detail", self.detail] if self.detail else []), *(["--span", self.span] if self.span else [])]


@dataclass
class Stage:
    name: str
    what: str
    argv: list[str]
    outputs: list[str] = field(default_factory=list)

    @property
    def command(self) -> str:
        return "embodied-r " + " ".join(_quote(a) for a in self.argv)


def _quote(arg: str) -> str:
    return f"'{arg}'" if any(c in arg for c in " *?<>|&;") else arg  # "<think>" is a shell redirection


def training_recipe(out: Path, size: DemoSize, model: str) -> dict[str, Any]:
    """A CPU recipe from ``model``: supervised fine-tuning on the gold answers (the recipe's
    ``format_warmup`` with ``answers: gold``), then GRPO with the format and accuracy rewards (0.2 : 0.8)."""
    return {
        "description": "embodied-r demo: GRPO on synthetic egocentric questions with oracle perception",
        "model": model,
        "dtype": size.dtype,
        "train_data": str(out / "prompts" / "train.jsonl"),
        "eval_data": None,
        "prompt_version": size.prompt_version,
        "format_warmup": {"steps": size.sft_steps, "batch_size": SFT_BATCH, "micro_batch_size": SFT_MICRO_BATCH,
                          "learning_rate": 1.0e-4, "gradient_checkpointing": False, "think": SFT_THINK,
                          "answers": "gold"},
        # SFT has taught the structure, so the format term only guards it. The paper's consistency
        # term needs a judge pass every step and changed neither score nor agreement measurably in its
        # ablation here (docs/consistency.md); recipes/embodied_r/ hold the paper's three-stage schedule.
        "rewards": ["format", "accuracy"],
        "reward_weights": [0.2, 0.8],
        "reward_schedule": None,
        "sample_completions": 4,
        # On any prompt file: prompts over 4,096 tokens lose their oldest frame descriptions, and one backward
        # pass holds at most 8,192 tokens (the demo's own rows fit in one pass, without activation
        # checkpointing: ~25 % less update time, well inside 8 GB).
        "max_prompt_tokens": 4096,
        "max_train_batch_tokens": 8192,
        "gradient_checkpointing": False,
        "output_dir": str(out / "train"),
        "max_steps": size.train_steps,
        "max_train_minutes": None,  # set from the time left when the train stage starts (train_minutes)
        "num_generations": 4,
        # 8 completions (2 prompts x 4) per step, updated in one pass: the shared-prefix update encodes each
        # group's prompt once; completions of a group that all earn one reward are skipped (same gradient).
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1,
        "max_completion_length": size.max_new_tokens,  # the evaluation's budget: what is trained is what is scored
        "learning_rate": 1.0e-5,
        "lr_scheduler_type": "constant",
        "beta": 0.0,
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 50,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": ["tensorboard"],
        "seed": 0,
    }


def plan(out: str | Path, size: DemoSize, model: str = DEFAULT_MODEL, workers: int = 2) -> list[Stage]:
    """The demo's stages with their exact CLI arguments."""
    out = Path(out)
    world, kf, prompts = out / "world", out / "keyframes", out / "prompts"
    eval_args = ["--batch-size", "32", "--max-new-tokens", str(size.max_new_tokens), "--dtype", size.dtype,
                 "--prior-from", str(prompts / "train.jsonl")]
    limit = ["--limit", str(size.eval_limit)] if size.eval_limit else []
    tasks = ["--tasks", ",".join(size.tasks)] if size.tasks else []
    span = ["--span", size.span] if size.span else []
    ratios = f"{1 - size.test_share:.2f},0.00,{size.test_share:.2f}"
    recipe = str(out / "train_recipe.yaml")
    quoted = "the last frame's action" if size.tasks == DEMO_TASKS else "the line the answer depends on"
    return [
        Stage("world", "render synthetic rooms to egocentric videos with VSI-style questions",
              ["synth", "world", "--out", str(world), "--scenes", str(size.scenes), "--seed", "0",
               "--resolution", "320x240", "--fps", "10", "--seconds", str(size.seconds),
               "--per-task", str(size.per_task), "--workers", str(workers)], [str(world)]),
        Stage("keyframes", "select key frames (ORB + RANSAC overlap, as Embodied-R)",
              # At most 6 key frames keeps prompts near 400 tokens, which the CPU budget needs. At most 4
              # saved 2 % of the demo's time and left the last action stated for 46.7 % of questions, not 85 %.
              ["keyframes", str(world / "videos" / "*.mp4"), "--out", str(kf), "--workers", str(workers),
               "--max-frames", "6"],
              [str(kf)]),
        Stage("perception", "describe every key frame from ground truth (oracle VLM)",
              ["perceive", "--qa", str(world / "questions.jsonl"), "--keyframes", str(kf), "--backend", "oracle",
               "--detail", size.detail, "--out", str(out / "perception.jsonl")], [str(out / "perception.jsonl")]),
        Stage("split", "split the questions by scene into train and test" + (
              f" (task types: {', '.join(size.tasks)})" if size.tasks else ""),
              ["data", "split", "--data", f"synthetic:{world}", "--all-tasks", *tasks, "--out", str(out / "split"),
               "--seed", "0", "--ratios", ratios], [str(out / "split")]),
        Stage("prompts-train", "build reasoner prompts (Embodied-R frame lines) for training",
              ["build-prompts", "--qa", str(out / "split" / "train.jsonl"), "--perception",
               str(out / "perception.jsonl"), "--prompt-version", size.prompt_version, *span,
               "--out", str(prompts / "train.jsonl")], [str(prompts / "train.jsonl")]),
        Stage("prompts-test", "build reasoner prompts for the held-out scenes",
              ["build-prompts", "--qa", str(out / "split" / "test.jsonl"), "--perception",
               str(out / "perception.jsonl"), "--prompt-version", size.prompt_version, *span,
               "--out", str(prompts / "test.jsonl")], [str(prompts / "test.jsonl")]),
        Stage("sft", f"supervised fine-tuning on the gold answers ({size.sft_steps} steps of {SFT_BATCH} "
              f"training prompts; the think quotes {quoted} and lists the options with their letters)",
              ["train", "--recipe", recipe, "--warmup-only"], [str(warmup_model_dir(out / "train"))]),
        Stage("eval-sft", "evaluate the SFT model (before GRPO) on held-out scenes, with the random, "
              "letter-prior, answer-prior and text-rule baselines",
              ["eval", "--data", str(prompts / "test.jsonl"), "--out", str(out / "eval_sft"),
               "--model", str(warmup_model_dir(out / "train")), *eval_args, *limit,
               "--baselines", "random,prior,answer-prior,text-rule,solver", "--no-report"],
              [str(out / "eval_sft")]),
        Stage("train", f"GRPO with the format and accuracy rewards (up to {size.train_steps} steps, as many as "
              "the time budget allows)", ["train", "--recipe", recipe], [str(out / "train")]),
        Stage("eval-after", "evaluate the trained reasoner on the same held-out questions, and the same model "
              "blind (the video text removed)",
              ["eval", "--data", str(prompts / "test.jsonl"), "--out", str(out / "eval_after"),
               "--model", str(out / "train" / "final"), *eval_args, *limit,
               "--baselines", "random,prior,answer-prior,blind,text-rule,solver", "--no-report"],
              [str(out / "eval_after")]),
        Stage("report", "write the SFT / GRPO report (HTML + PNG plots)",
              ["report", str(out / "eval_sft"), str(out / "eval_after"), str(out / "train"),
               "--out", str(out / "report")], [str(out / "report" / "report.html")]),
    ]


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def expand_globs(argv: list[str]) -> list[str]:
    expanded: list[str] = []
    for arg in argv:
        if "*" in arg:
            matches = sorted(str(p) for p in Path(arg).parent.glob(Path(arg).name))
            expanded.extend(matches or [arg])
        else:
            expanded.append(arg)
    return expanded


def run_demo(out: str | Path, minutes: float = 15.0, model: str = DEFAULT_MODEL, workers: int = 2,
             force: bool = False, on_stage: Callable[[Stage, int, int, str], None] | None = None,
             size: DemoSize | None = None, dtype: str = "auto", world: WorldChoice | None = None) -> dict[str, Any]:
    """Run (or resume) every stage; returns the summary also written to ``DIR/demo_summary.json``.

    ``size`` overrides the sizes derived from ``minutes`` (tests use a tiny one); ``world`` the task types,
    detail level and span (default: the last action at ``words``). A second demo into the same folder at
    once is refused."""
    size = size or DemoSize.for_minutes(minutes)
    if world is not None:
        world.check()
        size = replace(size, tasks=world.tasks or size.tasks, detail=world.detail or size.detail,
                       span=world.span or size.span)
    if dtype != "auto":  # a copy: the caller's size is not changed
        size = replace(size, dtype=dtype)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with exclusive_output(out):
        return _run_demo_in(out, minutes, model, workers, force, on_stage, size)


def _run_demo_in(out: Path, minutes: float, model: str, workers: int, force: bool,
                 on_stage: Callable[[Stage, int, int, str], None] | None, size: DemoSize) -> dict[str, Any]:
    state_path, plan_path = out / "demo_state.json", out / "demo_plan.json"
    state: dict[str, Any] = {} if force or not state_path.exists() else read_json(state_path)
    if state and plan_path.exists():  # before anything is written: a refused run leaves the folder as it was
        check_same_size(read_json(plan_path).get("size") or {}, size, out)
    stages = plan(out, size, model, workers)
    atomic_write_text(out / "train_recipe.yaml", yaml.safe_dump(training_recipe(out, size, model), sort_keys=False))
    atomic_write_json(plan_path, {"minutes": minutes, "size": asdict(size),
                                  "stages": [{"name": s.name, "command": s.command} for s in stages]})
    started = time.perf_counter()
    for index, stage in enumerate(stages, start=1):
        if stage.name in state:
            if on_stage:
                on_stage(stage, index, len(stages), "skipped (done in an earlier run)")
            continue
        if stage.name == "train":
            budget = train_minutes(minutes, time.perf_counter() - started, state["eval-sft"]["seconds"])
            recipe = {**training_recipe(out, size, model), "max_train_minutes": budget}
            atomic_write_text(out / "train_recipe.yaml", yaml.safe_dump(recipe, sort_keys=False))
        if on_stage:
            on_stage(stage, index, len(stages), "running")
        stage_started = time.perf_counter()
        code, peak_kib = run_stage_process(expand_globs(stage.argv))
        seconds = round(time.perf_counter() - stage_started, 1)
        if code != 0:
            raise RuntimeError(f"stage {stage.name!r} failed (exit {code}); rerun it alone with:\n  {stage.command}")
        state[stage.name] = {"seconds": seconds, "peak_rss_gib": round(peak_kib / 2**20, 2),
                             "command": stage.command}
        atomic_write_json(state_path, state)
    summary = summarise(out, state)
    summary["peak_rss_gib"] = max((info.get("peak_rss_gib", 0.0) for info in state.values()), default=0.0)
    summary["wall_time_s"] = round(time.perf_counter() - started, 1)
    atomic_write_json(out / "demo_summary.json", summary)
    return summary


def check_same_size(before: dict[str, Any], size: DemoSize, out: Path) -> None:
    """Refuse to resume a demo at another size, precision (``--dtype``) or world (task types, detail level,
    span): its finished stages would be reused for data or models they were not made with. A field an older
    plan lacks is not compared."""
    now = json.loads(json.dumps(asdict(size)))  # as the plan file reads back (a tuple comes back a list)
    differ = [f"{key} {before[key]!r} -> {value!r}" for key, value in now.items()
              if key in before and before[key] != value]
    if differ:
        raise ValueError(f"{out} holds a demo run with other settings ({'; '.join(differ)}); rerun with --force "
                         "to start it again, or give another --out")


# The evaluation after GRPO, against the SFT model's (same questions, same budget): the trained model
# answers them again, and the blind pass is the same count of much shorter prompts; 1.6 times the SFT
# model's evaluation covers both, and the report stage's few seconds.
AFTER_TRAINING_EVAL_SHARE = 1.6
# The train stage's time outside its GRPO loop (process start, model load, saving the final model) and the
# step that runs past the budget: measured 15 s over a 6.5-minute budget, 12 s a step, on the slow CPU.
TRAIN_STAGE_OVERHEAD_S = 30.0
MIN_TRAIN_MINUTES = 0.5  # one GRPO step (TimeBudget stops after a step)


def train_minutes(minutes: float, elapsed_s: float, eval_sft_s: float) -> float:
    """The train stage's wall-clock budget (``max_train_minutes``) so that the demo ends within ``minutes``:
    what is left after the stages so far, less the evaluation after it (estimated from the SFT model's) and
    the train stage's own overhead.

    >>> train_minutes(15, 300, 60)  # 15 min - 5 min so far - 1.6 x 1 min - 0.5 min
    7.9
    """
    reserve_s = AFTER_TRAINING_EVAL_SHARE * eval_sft_s + TRAIN_STAGE_OVERHEAD_S
    return round(max(MIN_TRAIN_MINUTES, minutes - (elapsed_s + reserve_s) / 60), 2)


def run_stage_process(argv: list[str]) -> tuple[int, int]:
    """Run ``embodied-r ARGV`` in a child process; returns (exit code, its peak resident memory in KiB)."""
    process = subprocess.Popen([sys.executable, "-m", "embodied_r.cli.main", *argv])
    try:
        _, status, usage = os.wait4(process.pid, 0)  # per-child rusage: this stage's own peak, not the max so far
    except BaseException:
        process.kill()
        process.wait()
        raise
    process.returncode = os.waitstatus_to_exitcode(status)
    peak = int(usage.ru_maxrss)
    return process.returncode, peak // 1024 if sys.platform == "darwin" else peak  # macOS: bytes, Linux: KiB


def summarise(out: Path, state: dict[str, Any]) -> dict[str, Any]:
    """Before/after numbers from the stages' own output files (nothing is recomputed here)."""
    summary: dict[str, Any] = {"stages": state}
    for name in ("eval_sft", "eval_after"):
        path = out / name / "metrics.json"
        if path.exists():
            summary[name] = read_json(path)
    train_summary = out / "train" / "summary.json"
    if train_summary.exists():
        summary["train"] = read_json(train_summary)
    return summary
