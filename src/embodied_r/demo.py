"""The end-to-end demo: synthetic world -> key frames -> oracle perception -> prompts -> eval ->
GRPO training -> eval -> report, on a laptop CPU with no downloads.

Every stage is one ``embodied-r`` subcommand run in-process with the arguments recorded in
``DIR/demo_plan.json``, so any stage can be rerun alone with the printed command. Finished stages are
recorded in ``DIR/demo_state.json`` (atomically); rerunning the demo skips them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from embodied_r.io import atomic_write_json, atomic_write_text, read_json

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
# The 135M default never writes the official <think>/<answer> structure unprompted, so the all-or-nothing
# format reward gives GRPO no signal; the demo uses the warm start of recipes/embodied_r/
# cpu_smollm2_warmstart.yaml (prefilled "<think>", shaped format_soft reward) and evaluates before and
# after training with the same prefix so the two evaluations and the training prompts match (measured in
# docs/performance.md: on its own it still leaves most groups without reward variance).
COMPLETION_PREFIX = "<think>"


@dataclass
class DemoSize:
    """How much work the demo does; chosen from the time budget (``--minutes``)."""

    scenes: int
    seconds: int
    per_task: int
    train_steps: int
    eval_limit: int
    max_new_tokens: int

    @classmethod
    def for_minutes(cls, minutes: float) -> DemoSize:
        # Measured on the 2-core CPU this project is developed on (no AVX-512, so fp32), with other jobs
        # running: with prompts of ~500-800 tokens one GRPO step of 2 prompts x 4 completions (<= 96
        # tokens) took 240 s (95 s generation, 146 s update), one evaluation stage of 16 questions
        # (reasoner, no-thinking baseline, consistency judge) 368 s, the data stages 19 s. An idle
        # machine is faster; the budget below assumes ~120 s per step and gives training what is left.
        if minutes < 3:
            raise ValueError("the demo needs at least 3 minutes")
        small = minutes < 10
        fixed_minutes = 3.0 if small else 6.0
        steps = int(max(2.0, (minutes - fixed_minutes) * 60 / 120))
        return cls(scenes=6 if small else 12, seconds=10 if small else 12, per_task=1,
                   train_steps=min(steps, 60), eval_limit=8 if small else 12, max_new_tokens=96)


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
    """A CPU recipe whose three reward stages (7:3:0 -> 3:7:0 -> 1:7:2, Embodied-R) fit the step budget,
    warm-started as ``cpu_smollm2_warmstart.yaml`` (``format_soft`` in the format slot; the official
    ``format`` reward is logged at weight 0)."""
    third = max(1, size.train_steps // 3)
    return {
        "description": "embodied-r demo: GRPO on synthetic egocentric questions with oracle perception",
        "model": model,
        "dtype": "auto",
        "train_data": str(out / "prompts" / "train.jsonl"),
        "eval_data": None,
        "completion_prefix": COMPLETION_PREFIX,
        "rewards": ["format_soft", "format", "accuracy", "consistency"],
        "reference_model": "policy",
        "reward_schedule": {"unit": "step", "stages": [
            {"start": 1, "weights": {"format_soft": 0.7, "format": 0.0, "accuracy": 0.3, "consistency": 0.0}},
            {"start": 1 + third, "weights": {"format_soft": 0.3, "format": 0.0, "accuracy": 0.7, "consistency": 0.0}},
            {"start": 1 + 2 * third,
             "weights": {"format_soft": 0.1, "format": 0.0, "accuracy": 0.7, "consistency": 0.2}},
        ]},
        "sample_completions": 4,
        "output_dir": str(out / "train"),
        "max_steps": size.train_steps,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "max_completion_length": 96,
        "learning_rate": 1.0e-5,
        "lr_scheduler_type": "constant",
        "beta": 0.0,
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 50,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": max(5, size.train_steps // 3),
        "report_to": ["tensorboard"],
        "seed": 0,
    }


def plan(out: str | Path, size: DemoSize, model: str = DEFAULT_MODEL, workers: int = 2) -> list[Stage]:
    """The demo's stages with their exact CLI arguments."""
    out = Path(out)
    world, kf, prompts = out / "world", out / "keyframes", out / "prompts"
    eval_args = ["--model", model, "--limit", str(size.eval_limit), "--batch-size", "8",
                 "--max-new-tokens", str(size.max_new_tokens), "--completion-prefix", COMPLETION_PREFIX]
    return [
        Stage("world", "render synthetic rooms to egocentric videos with VSI-style questions",
              ["synth", "world", "--out", str(world), "--scenes", str(size.scenes), "--seed", "0",
               "--resolution", "320x240", "--fps", "10", "--seconds", str(size.seconds),
               "--per-task", str(size.per_task), "--workers", str(workers)], [str(world)]),
        Stage("keyframes", "select key frames (ORB + RANSAC overlap, as Embodied-R)",
              # At most 8 key frames keeps prompts near 500-800 tokens, which the CPU budget needs.
              ["keyframes", str(world / "videos" / "*.mp4"), "--out", str(kf), "--workers", str(workers),
               "--max-frames", "8"],
              [str(kf)]),
        Stage("perception", "describe every key frame from ground truth (oracle VLM)",
              ["perceive", "--qa", str(world / "questions.jsonl"), "--keyframes", str(kf), "--backend", "oracle",
               "--out", str(out / "perception.jsonl")], [str(out / "perception.jsonl")]),
        Stage("split", "split the questions by scene into train and test",
              ["data", "split", "--data", f"synthetic:{world}", "--all-tasks", "--out", str(out / "split"),
               "--seed", "0", "--ratios", "0.7,0.0,0.3"], [str(out / "split")]),
        Stage("prompts-train", "build reasoner prompts (official Embodied-R format) for training",
              ["build-prompts", "--qa", str(out / "split" / "train.jsonl"), "--perception",
               str(out / "perception.jsonl"), "--out", str(prompts / "train.jsonl")], [str(prompts / "train.jsonl")]),
        Stage("prompts-test", "build reasoner prompts for the held-out scenes",
              ["build-prompts", "--qa", str(out / "split" / "test.jsonl"), "--perception",
               str(out / "perception.jsonl"), "--out", str(prompts / "test.jsonl")], [str(prompts / "test.jsonl")]),
        Stage("eval-before", "evaluate the untrained reasoner on held-out scenes, with baselines and consistency",
              ["eval", "--data", str(prompts / "test.jsonl"), "--out", str(out / "eval_before"), *eval_args,
               "--baselines", "random,prior,direct", "--judge", "policy", "--no-report"],
              [str(out / "eval_before")]),
        Stage("train", f"GRPO with format/accuracy/consistency rewards in three stages ({size.train_steps} steps)",
              ["train", "--recipe", str(out / "train_recipe.yaml")], [str(out / "train")]),
        Stage("eval-after", "evaluate the trained reasoner on the same held-out questions",
              ["eval", "--data", str(prompts / "test.jsonl"), "--out", str(out / "eval_after"),
               *_replace(eval_args, "--model", str(out / "train" / "final")),
               "--baselines", "random,prior,direct", "--judge", "policy", "--no-report"],
              [str(out / "eval_after")]),
        Stage("report", "write the before/after report (HTML + PNG plots)",
              ["report", str(out / "eval_before"), str(out / "eval_after"), str(out / "train"),
               "--out", str(out / "report")], [str(out / "report" / "report.html")]),
    ]


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def _expand_globs(argv: list[str]) -> list[str]:
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
             size: DemoSize | None = None) -> dict[str, Any]:
    """Run (or resume) every stage; returns the summary also written to ``DIR/demo_summary.json``.

    ``size`` overrides the sizes derived from ``minutes`` (tests use a tiny one)."""
    from embodied_r.cli.main import main

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    size = size or DemoSize.for_minutes(minutes)
    stages = plan(out, size, model, workers)
    atomic_write_text(out / "train_recipe.yaml", yaml.safe_dump(training_recipe(out, size, model), sort_keys=False))
    atomic_write_json(out / "demo_plan.json", {"minutes": minutes, "size": size.__dict__,
                                               "stages": [{"name": s.name, "command": s.command} for s in stages]})
    state_path = out / "demo_state.json"
    state: dict[str, Any] = {} if force or not state_path.exists() else read_json(state_path)
    started = time.perf_counter()
    for index, stage in enumerate(stages, start=1):
        if stage.name in state:
            if on_stage:
                on_stage(stage, index, len(stages), "skipped (done in an earlier run)")
            continue
        if on_stage:
            on_stage(stage, index, len(stages), "running")
        stage_started = time.perf_counter()
        code = main(_expand_globs(stage.argv))
        seconds = round(time.perf_counter() - stage_started, 1)
        if code != 0:
            raise RuntimeError(f"stage {stage.name!r} failed (exit {code}); rerun it alone with:\n  {stage.command}")
        state[stage.name] = {"seconds": seconds, "command": stage.command}
        atomic_write_json(state_path, state)
    summary = summarise(out, state)
    summary["wall_time_s"] = round(time.perf_counter() - started, 1)
    atomic_write_json(out / "demo_summary.json", summary)
    return summary


def summarise(out: Path, state: dict[str, Any]) -> dict[str, Any]:
    """Before/after numbers from the stages' own output files (nothing is recomputed here)."""
    summary: dict[str, Any] = {"stages": state}
    for name in ("eval_before", "eval_after"):
        path = out / name / "metrics.json"
        if path.exists():
            summary[name] = read_json(path)
    train_summary = out / "train" / "summary.json"
    if train_summary.exists():
        summary["train"] = read_json(train_summary)
    return summary
