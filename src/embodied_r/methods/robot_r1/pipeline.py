"""``synth robot`` end to end: demonstrations (resumable), then question and prompt files.

Output folder layout::

    episodes.jsonl            one row per attempted episode (status "ok" or "failed", its split),
                              appended as it ends
    episodes/<task>/epNNN.npz arrays of a kept episode (demos.Episode)
    images/<task>/epNNN_sSSSS.png   upright front-camera frames of the question steps
    questions.jsonl           training QARecords (waypoint, current_state, movement)
    prompts.jsonl             training text-path PromptRows; prompts_vl.jsonl image-path rows;
    prompts_open.jsonl        training open-ended waypoint rows (position answers, L1 reward)
    *_test_in.jsonl           the same files for held-out episodes of the training tasks
    *_test_out.jsonl          the same files for the held-out tasks (never trained on)
    bench_test_in.jsonl, bench_test_out.jsonl   open-ended judge sets, from held-out episodes only
    summary.json              counts per split, task and question type

Splits follow Robot-R1-Bench's seen/unseen tasks: a training task's first ``episodes`` episodes are
for training and the next ``test_episodes`` (other seeds, so other object placements) are the
in-distribution test; every episode of a ``held_out_tasks`` task is out-of-distribution. Every
question records its split in ``meta["split"]``. The bench sets come from test episodes only, so a
bench reference never repeats a training question's option.

Stage 1 (episodes) appends one row per finished episode, so a killed run resumes where it stopped.
Stage 2 rebuilds every question file from the kept episodes in one go (cheap), written atomically.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.core.io import JsonlAppender, atomic_write_json, read_jsonl, write_jsonl
from embodied_r.core.records import QARecord
from embodied_r.methods.robot_r1.demos import (
    Episode,
    episode_key,
    episode_seed,
    make_env,
    render_frames,
    restore_state,
    run_expert,
    scene_facts,
)
from embodied_r.methods.robot_r1.keypoints import QUESTION_INTERVAL, discover_keypoints, question_steps
from embodied_r.sim.robot.camera import FRONT, UprightRenderer
from embodied_r.sim.robot.tasks import get_task_spec

log = logging.getLogger(__name__)


@dataclass
class SynthConfig:
    """Settings of ``embodied-r synth robot`` (CLI flags map 1:1)."""

    tasks: Sequence[str]
    episodes: int
    out: Path
    seed: int = 0
    width: int = 224
    height: int = 224
    camera: str = FRONT
    max_steps: int = 300
    interval: int = QUESTION_INTERVAL
    near_distractors: int = 1
    bench_frames: int = 2
    keypoint_rule: str = "arm+phase"
    test_episodes: int = 0
    held_out_tasks: Sequence[str] = ()

    def __post_init__(self) -> None:
        overlap = sorted(set(self.tasks) & set(self.held_out_tasks))
        if overlap:
            raise ValueError(f"held-out tasks {overlap} are also training tasks; a held-out task must never "
                             f"be trained on, so remove it from one of the two lists")
        if self.episodes < 0 or self.test_episodes < 0:
            raise ValueError("episodes and test_episodes must not be negative")
        if self.held_out_tasks and self.test_episodes < 1:
            raise ValueError("held-out tasks need test_episodes >= 1 (the episodes recorded per held-out task)")

    def episode_plan(self) -> list[tuple[str, int, str]]:
        """Every ``(task, episode index, split)`` this configuration asks for, in run order."""
        plan = [(task, i, "train") for task in self.tasks for i in range(self.episodes)]
        plan += [(task, self.episodes + i, "test_in") for task in self.tasks for i in range(self.test_episodes)]
        plan += [(task, i, "test_out") for task in self.held_out_tasks for i in range(self.test_episodes)]
        return plan


KEYPOINT_RULES = ("arm", "arm+phase")
SPLITS = ("train", "test_in", "test_out")


def split_file(name: str, split: str) -> str:
    """``prompts.jsonl`` for training, ``prompts_test_in.jsonl`` / ``prompts_test_out.jsonl`` for the tests.

    >>> split_file("prompts_vl", "train"), split_file("bench", "test_out")
    ('prompts_vl.jsonl', 'bench_test_out.jsonl')
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return f"{name}.jsonl" if split == "train" else f"{name}_{split}.jsonl"


def episode_keypoints(episode: Episode, rule: str) -> list[int]:
    """Keypoints by ARM's rule alone (``arm``) or with expert phase changes added (``arm+phase``)."""
    if rule not in KEYPOINT_RULES:
        raise ValueError(f"keypoint rule must be one of {KEYPOINT_RULES}, got {rule!r}")
    targets = episode.expert_target if rule == "arm+phase" else None
    return discover_keypoints(episode.gripper_closed, episode.joint_vel, expert_targets=targets)


def _save_png(path: Path, image: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    Image.fromarray(image).save(tmp, format="PNG")
    os.replace(tmp, path)


def generate_episodes(cfg: SynthConfig, on_episode: Callable[[dict[str, Any]], None] | None = None,
                      ) -> list[dict[str, Any]]:
    """Stage 1: run the experts and render question frames; returns all rows of episodes.jsonl."""
    out = Path(cfg.out)
    for task in [*cfg.tasks, *cfg.held_out_tasks]:
        get_task_spec(task)  # fail fast on a bad name, before any work
    if cfg.keypoint_rule not in KEYPOINT_RULES:
        raise ValueError(f"keypoint rule must be one of {KEYPOINT_RULES}, got {cfg.keypoint_rule!r}")
    appender = JsonlAppender(out / "episodes.jsonl")
    done = appender.done_keys("key")
    by_task: dict[str, list[tuple[int, str]]] = {}
    for task, index, split in cfg.episode_plan():
        if episode_key(task, index) not in done:
            by_task.setdefault(task, []).append((index, split))
    for task, todo in by_task.items():
        env, policy, _ = make_env(task)
        renderer = UprightRenderer(env.model, cfg.camera, cfg.width, cfg.height)
        try:
            for index, split in todo:
                row = {**_one_episode(cfg, env, policy, renderer, task, index), "split": split}
                appender.append(row)
                if on_episode is not None:
                    on_episode(row)
        finally:
            renderer.close()
            env.close()
    return appender.existing()


def _one_episode(cfg: SynthConfig, env: Any, policy: Any, renderer: UprightRenderer, task: str,
                 index: int) -> dict[str, Any]:
    started = time.perf_counter()
    seed = episode_seed(cfg.seed, task, index)
    episode, _ = run_expert(env, policy, task, index, seed, max_steps=cfg.max_steps)
    row: dict[str, Any] = {"key": episode.key, "task": task, "episode": index, "seed": seed,
                           "n_steps": episode.n_steps}
    if not episode.success:
        log.warning("%s: expert did not succeed within %d steps; episode discarded", episode.key,
                    cfg.max_steps)
        return {**row, "status": "failed", "reason": f"expert did not succeed in {cfg.max_steps} steps",
                "seconds": round(time.perf_counter() - started, 3)}
    keypoints = episode_keypoints(episode, cfg.keypoint_rule)
    steps = question_steps(keypoints, episode.n_steps + 1, cfg.interval)
    frames, pose = render_frames(env, renderer, episode, [0, *steps])
    images = {}
    for step in steps:
        rel = f"images/{task}/ep{index:03d}_s{step:04d}.png"
        _save_png(Path(cfg.out) / rel, frames[step])
        images[str(step)] = rel
    restore_state(env, episode, 0)  # gripper size is measured with the fingers open at step 0
    facts = scene_facts(env, pose) if pose is not None else {}
    facts["camera"] = cfg.camera
    episode_file = f"episodes/{task}/ep{index:03d}.npz"
    episode.save(Path(cfg.out) / episode_file)
    return {**row, "status": "ok", "file": episode_file, "keypoint_rule": cfg.keypoint_rule,
            "keypoints": keypoints, "question_steps": steps,
            "images": images, "scene": facts, "seconds": round(time.perf_counter() - started, 3)}


def build_datasets(cfg: SynthConfig) -> dict[str, Any]:
    """Stage 2: questions, prompt files and the open-ended bench sets of every split, from the kept
    episodes that ``cfg`` asks for (the split of an episode is recomputed from ``cfg``, so changing
    ``--test-episodes`` or ``--held-out-tasks`` and rerunning relabels without re-simulating)."""
    from embodied_r.methods.robot_r1.bench import bench_items
    from embodied_r.methods.robot_r1.questions import episode_questions

    out = Path(cfg.out)
    rows = read_jsonl(out / "episodes.jsonl")
    plan = {episode_key(task, index): split for task, index, split in cfg.episode_plan()}
    planned = [r for r in rows if r["key"] in plan]
    kept = [r for r in planned if r.get("status") == "ok"]
    questions: dict[str, list[QARecord]] = {split: [] for split in SPLITS}
    bench: dict[str, list[QARecord]] = {split: [] for split in SPLITS}
    for row in kept:
        split = plan[row["key"]]
        episode = Episode.load(out / row["file"])
        keypoints = episode_keypoints(episode, row["keypoint_rule"])
        if keypoints != row["keypoints"]:
            raise ValueError(f"{out / row['file']}: keypoints {keypoints} differ from episodes.jsonl "
                             f"{row['keypoints']}; the episode file was changed, regenerate it")
        spec = get_task_spec(row["task"])
        images = {int(k): v for k, v in row["images"].items()}
        rng = np.random.default_rng([cfg.seed, row["seed"]])
        new = episode_questions(episode, keypoints, row["question_steps"], images, row["scene"],
                                spec, row["file"], rng, n_near=cfg.near_distractors)
        if split != "train":
            # Open-ended bench items only from held-out episodes: a training question's correct option
            # must never reappear as a bench reference.
            new_bench = bench_items(episode, keypoints, row["question_steps"][:cfg.bench_frames], images,
                                    row["scene"], spec, rng)
            bench[split] += [_with_split(b, split) for b in new_bench]
        questions[split] += [_with_split(q, split) for q in new]
    counts = {split: _write_split(out, split, questions[split], bench[split]) for split in SPLITS}
    summary = {
        "episodes_attempted": len(planned),
        "episodes_kept": len(kept),
        "episodes_discarded": len(planned) - len(kept),
        "episodes_not_in_this_run": len(rows) - len(planned),
        "discarded_by_task": dict(Counter(r["task"] for r in planned if r.get("status") != "ok")),
        "kept_by_task": dict(Counter(r["task"] for r in kept)),
        "kept_by_split": dict(Counter(plan[r["key"]] for r in kept)),
        "training_tasks": list(cfg.tasks),
        "held_out_tasks": list(cfg.held_out_tasks),
        "splits": counts,
        "questions_by_type": dict(Counter(q.task for q in questions["train"])),
        "open_ended_rows": counts["train"]["open_ended_rows"],
    }
    atomic_write_json(out / "summary.json", summary)
    return summary


def _with_split(record: Any, split: str) -> Any:
    """A QARecord or PromptRow with its split recorded in ``meta``."""
    record.meta["split"] = split
    return record


def _write_split(out: Path, split: str, questions: list[QARecord], bench: list[QARecord]) -> dict[str, Any]:
    """Write one split's files (atomically each); a split with no question writes none and removes
    stale files of an earlier run, so no file describes episodes this run does not ask for."""
    from embodied_r.methods.robot_r1.prompts import open_prompt_row, text_prompt_row, vl_prompt_row

    open_rows = [r for r in (open_prompt_row(q) for q in questions) if r is not None]
    files: dict[str, list[dict[str, Any]]] = {
        "questions": [q.to_dict() for q in questions],
        "prompts": [_with_split(text_prompt_row(q), split).to_dict() for q in questions],
        "prompts_vl": [_with_split(vl_prompt_row(q), split).to_dict() for q in questions],
        "prompts_open": [_with_split(r, split).to_dict() for r in open_rows],
    }
    if split != "train":
        files["bench"] = [b.to_dict() for b in bench]
    for name, records in files.items():
        path = out / split_file(name, split)
        if records or split == "train":
            write_jsonl(path, records)
        elif path.exists():
            path.unlink()
    return {"questions": len(questions), "questions_by_type": dict(Counter(q.task for q in questions)),
            "open_ended_rows": len(open_rows), "bench_items": len(bench),
            "bench_by_category": dict(Counter(b.task for b in bench))}
