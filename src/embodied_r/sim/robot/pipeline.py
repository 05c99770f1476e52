"""``synth robot`` end to end: demonstrations (resumable), then question and prompt files.

Output folder layout::

    episodes.jsonl            one row per attempted episode (status "ok" or "failed"), appended as it ends
    episodes/<task>/epNNN.npz arrays of a kept episode (demos.Episode)
    images/<task>/epNNN_sSSSS.png   upright front-camera frames of the question steps
    questions.jsonl           QARecords (waypoint, current_state, movement)
    prompts.jsonl             text-path PromptRows; prompts_vl.jsonl image-path rows;
    prompts_open.jsonl        open-ended waypoint rows (L1 reward); bench.jsonl open-ended judge set
    summary.json              counts per task and question type

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

from embodied_r.io import JsonlAppender, atomic_write_json, read_jsonl, write_jsonl
from embodied_r.sim.robot.camera import FRONT, UprightRenderer
from embodied_r.sim.robot.demos import (
    Episode, episode_key, episode_seed, make_env, render_frames, restore_state, run_expert, scene_facts,
)
from embodied_r.sim.robot.keypoints import QUESTION_INTERVAL, discover_keypoints, question_steps
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


KEYPOINT_RULES = ("arm", "arm+phase")


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
    specs = [get_task_spec(task) for task in cfg.tasks]  # fail fast on a bad name, before any work
    if cfg.keypoint_rule not in KEYPOINT_RULES:
        raise ValueError(f"keypoint rule must be one of {KEYPOINT_RULES}, got {cfg.keypoint_rule!r}")
    appender = JsonlAppender(out / "episodes.jsonl")
    done = appender.done_keys("key")
    for spec in specs:
        todo = [i for i in range(cfg.episodes) if episode_key(spec.name, i) not in done]
        if not todo:
            continue
        env, policy, _ = make_env(spec.name)
        renderer = UprightRenderer(env.model, cfg.camera, cfg.width, cfg.height)
        try:
            for index in todo:
                row = _one_episode(cfg, env, policy, renderer, spec.name, index)
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


def build_datasets(out: str | os.PathLike[str], seed: int = 0, near_distractors: int = 1,
                   bench_frames: int = 2) -> dict[str, Any]:
    """Stage 2: questions, prompt files and the open-ended bench set from the kept episodes."""
    from embodied_r.sim.robot.bench import bench_items
    from embodied_r.sim.robot.questions import episode_questions
    from embodied_r.sim.robot.scene_text import open_prompt_row, text_prompt_row, vl_prompt_row

    out = Path(out)
    rows = read_jsonl(out / "episodes.jsonl")
    kept = [r for r in rows if r.get("status") == "ok"]
    questions, bench = [], []
    for row in kept:
        episode = Episode.load(out / row["file"])
        keypoints = episode_keypoints(episode, row["keypoint_rule"])
        if keypoints != row["keypoints"]:
            raise ValueError(f"{out / row['file']}: keypoints {keypoints} differ from episodes.jsonl "
                             f"{row['keypoints']}; the episode file was changed, regenerate it")
        spec = get_task_spec(row["task"])
        images = {int(k): v for k, v in row["images"].items()}
        rng = np.random.default_rng([seed, row["seed"]])
        questions += episode_questions(episode, keypoints, row["question_steps"], images, row["scene"],
                                       spec, row["file"], rng, n_near=near_distractors)
        bench += bench_items(episode, keypoints, row["question_steps"][:bench_frames], images,
                             row["scene"], spec, rng)
    write_jsonl(out / "questions.jsonl", (q.to_dict() for q in questions))
    write_jsonl(out / "prompts.jsonl", (text_prompt_row(q).to_dict() for q in questions))
    write_jsonl(out / "prompts_vl.jsonl", (vl_prompt_row(q).to_dict() for q in questions))
    open_rows = [r for r in (open_prompt_row(q) for q in questions) if r is not None]
    write_jsonl(out / "prompts_open.jsonl", (r.to_dict() for r in open_rows))
    write_jsonl(out / "bench.jsonl", (b.to_dict() for b in bench))
    summary = {
        "episodes_attempted": len(rows),
        "episodes_kept": len(kept),
        "episodes_discarded": len(rows) - len(kept),
        "discarded_by_task": dict(Counter(r["task"] for r in rows if r.get("status") != "ok")),
        "kept_by_task": dict(Counter(r["task"] for r in kept)),
        "questions_by_type": dict(Counter(q.task for q in questions)),
        "bench_by_category": dict(Counter(b.task for b in bench)),
        "open_ended_rows": len(open_rows),
    }
    atomic_write_json(out / "summary.json", summary)
    return summary
