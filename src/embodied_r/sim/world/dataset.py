"""Generate a synthetic world dataset: scenes, rendered videos, camera poses and questions.

Layout of ``out``::

    videos/<scene>.mp4        egocentric video (H.264)
    poses/<scene>.json        per frame: t, position, yaw, pitch, motion, visible pixels per object;
                              plus the scene's meta_info entry (so the folder is self-describing)
    scenes.json               {scene: meta_info entry} (VSI-Bench schema)
    questions.jsonl           QARecord rows; ``video`` is relative to ``out``
    skipped.json              {scene: reason} for scenes that could not be built
    world.json                manifest: preset ("id" | "ood"), categories used, OOD categories used,
                              suggested key-frame budget, seed, seconds

With ``ood=True`` the world is the out-of-distribution preset (``layout.OOD_LAYOUT``: larger rooms, mostly
OOD categories) with longer walks (``OOD_SECONDS``) and scenes named ``ood_{seed}_{i:04d}``, which never
collide with ID names ``scene_{seed}_{i:04d}``; its layout and path draws use their own random streams.
An ID world is exactly what it was before the preset existed (world.json is the only new file).

Every random draw is seeded by (seed, scene index, purpose), so a scene is identical whichever worker
renders it and whether the run was resumed. Rendering is the slow part and resumes per scene (a scene
is done when its poses file exists; videos are written under a temporary name and renamed); scenes.json
and questions.jsonl are rebuilt from the poses files at the end, which takes seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.core.io import DataFileError, atomic_write_json, read_json, write_jsonl
from embodied_r.core.records import QARecord
from embodied_r.sim.world.categories import OOD_CATEGORIES
from embodied_r.sim.world.layout import OOD_LAYOUT, LayoutConfig, sample_scene
from embodied_r.sim.world.options import LetterBalancer
from embodied_r.sim.world.questions import StaticQuestionMaker, scene_facts
from embodied_r.sim.world.scenes import Scene, SceneError, scene_from_meta
from embodied_r.sim.world.video_questions import seen_instances, video_questions

log = logging.getLogger(__name__)
SOURCE = "synthetic_world"
ID_SECONDS = 20.0
OOD_SECONDS = 30.0  # longer walks through the larger OOD rooms: more key frames per video
# Key-frame budget to pass to ``embodied-r keyframes --max-frames``: the longer OOD walks need more frames
# to cover the room.
SUGGESTED_MAX_KEYFRAMES = {"id": 6, "ood": 10}
OOD_STREAM = 1  # appended to OOD worlds' seed keys, so their draws are independent of the ID world's


@dataclass
class WorldConfig:
    """What to generate. ``max_seconds`` and ``layout`` left as None take the preset's defaults
    (ID: 20 s and ``LayoutConfig()``; ``ood``: ``OOD_SECONDS`` and ``OOD_LAYOUT``)."""

    out: Path
    scenes: int = 10
    seed: int = 0
    width: int = 320
    height: int = 240
    fps: float = 10.0
    max_seconds: float | None = None
    from_meta: Path | None = None
    workers: int = 1
    per_task: int = 3
    layout: LayoutConfig | None = None
    ood: bool = False

    def __post_init__(self) -> None:
        if self.max_seconds is None:
            self.max_seconds = OOD_SECONDS if self.ood else ID_SECONDS
        if self.layout is None:
            self.layout = OOD_LAYOUT if self.ood else LayoutConfig()

    @property
    def preset(self) -> str:
        return "ood" if self.ood else "id"

    def seed_key(self, index: int, purpose: int, attempt: int) -> list[int]:
        """The seed of one random draw: (seed, scene index, purpose, attempt), plus a stream tag for OOD."""
        key = [self.seed, index, purpose, attempt]
        return [*key, OOD_STREAM] if self.ood else key

    def validate(self) -> None:
        if self.ood and self.from_meta is not None:
            raise ValueError("--ood builds its own procedural rooms (larger, with OOD categories) and cannot "
                             "be combined with --from-meta; drop one of the two")
        if self.scenes < 1:
            raise ValueError(f"--scenes must be >= 1, got {self.scenes}")
        if not (1.0 <= self.fps <= 60.0):
            raise ValueError(f"--fps must be in [1, 60], got {self.fps}")
        if self.width < 32 or self.height < 32 or self.width % 2 or self.height % 2:
            raise ValueError(f"--resolution {self.width}x{self.height}: sides must be even and >= 32")
        if self.max_seconds < 5.0:
            raise ValueError(f"--seconds must be >= 5 (a walk needs a look-around and a final action), "
                             f"got {self.max_seconds}")
        self.layout.validate()


def load_meta_file(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data, dict) or not data:
        raise DataFileError(f"{path}: expected a VSI-Bench meta_info object {{scene_name: entry}}")
    return data


def scene_names(config: WorldConfig) -> list[str]:
    if config.from_meta is not None:
        return sorted(load_meta_file(config.from_meta))[: config.scenes]
    prefix = "ood" if config.ood else "scene"
    return [f"{prefix}_{config.seed}_{i:04d}" for i in range(config.scenes)]


LAYOUT_ATTEMPTS = 5


def build_scene(config: WorldConfig, index: int, name: str, meta: dict[str, Any] | None,
                attempt: int = 0) -> Scene:
    if meta is not None:
        return scene_from_meta(name, meta[name])
    return sample_scene(name, np.random.default_rng(config.seed_key(index, 0, attempt)), config.layout)


def build_and_plan(config: WorldConfig, index: int, name: str, meta: dict[str, Any] | None) -> tuple[Scene, Any]:
    """A scene and a camera path through it. A procedural room too cluttered to walk through is
    re-drawn (seeded by the attempt number, so still deterministic); a meta_info room cannot be."""
    from embodied_r.sim.world.camera_path import plan_camera_path

    error: SceneError | None = None
    for attempt in range(1 if meta is not None else LAYOUT_ATTEMPTS):
        try:
            scene = build_scene(config, index, name, meta, attempt)
            path = plan_camera_path(scene, np.random.default_rng(config.seed_key(index, 1, attempt)),
                                    config.max_seconds)
            return scene, path
        except SceneError as exc:
            error = exc
    assert error is not None
    raise error


# ---------------------------------------------------------------------------------------------------
# One scene (runs in a worker process)
# ---------------------------------------------------------------------------------------------------


def render_one(config: WorldConfig, index: int, name: str) -> tuple[str, str, str]:
    """Build, plan and render one scene. Returns (name, "done" | "cached" | "skipped", reason)."""
    from embodied_r.sim.world.render import VideoWriter, WorldRenderer

    out = Path(config.out)
    poses_path, video_path = out / "poses" / f"{name}.json", out / "videos" / f"{name}.mp4"
    if poses_path.is_file() and video_path.is_file():
        return name, "cached", ""
    meta = load_meta_file(config.from_meta) if config.from_meta is not None else None
    try:
        scene, path = build_and_plan(config, index, name, meta)
    except SceneError as exc:
        return name, "skipped", str(exc)
    frames = path.poses(config.fps)
    writer = VideoWriter(video_path, config.width, config.height, config.fps)
    try:
        with WorldRenderer(scene, config.width, config.height) as renderer:
            for pose in frames:
                rgb, visible = renderer.render(pose)
                pose["visible"] = visible
                writer.write(rgb)
    finally:
        writer.close()
    atomic_write_json(poses_path, {
        "scene": name, "fps": config.fps, "width": config.width, "height": config.height, "fovy": 60.0,
        "final_action": path.final_action, "meta": scene.to_meta_info(), "frames": frames,
    }, indent=None)
    return name, "done", ""


# ---------------------------------------------------------------------------------------------------
# Whole dataset
# ---------------------------------------------------------------------------------------------------


def generate_world(config: WorldConfig, progress: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """Render all scenes (in ``config.workers`` processes), then write scenes.json and questions.jsonl.
    ``progress(name, status)`` is called once per finished scene."""
    config.validate()
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    names = scene_names(config)
    start = time.perf_counter()
    results: dict[str, tuple[str, str]] = {}
    if config.workers <= 1:
        for i, name in enumerate(names):
            _, status, reason = render_one(config, i, name)
            results[name] = (status, reason)
            if progress:
                progress(name, status)
    else:
        # spawn: each worker opens its own GL context; forking a process that holds one is unsafe
        with ProcessPoolExecutor(config.workers, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(render_one, config, i, name): name for i, name in enumerate(names)}
            for future in as_completed(futures):
                try:
                    name, status, reason = future.result()
                except Exception as exc:
                    # A bug, not a bad scene: stop now instead of rendering every queued scene first.
                    # Finished scenes are on disk; a rerun resumes after the fix.
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise RuntimeError(f"scene {futures[future]!r} failed: {exc!r}") from exc
                results[name] = (status, reason)
                if progress:
                    progress(name, status)
    render_s = time.perf_counter() - start
    skipped = {n: r for n, (s, r) in results.items() if s == "skipped"}
    atomic_write_json(out / "skipped.json", skipped)
    scenes, questions = write_annotations(out, [n for n in names if n not in skipped], config.seed, config.per_task)
    manifest = write_manifest(out, config, scenes)
    return {"scenes": len(scenes), "skipped": skipped, "questions": len(questions), "render_seconds": render_s,
            "manifest": manifest,
            "total_seconds": time.perf_counter() - start,
            "frames": sum(len(read_json(out / "poses" / f"{n}.json")["frames"]) for n in scenes)}


def write_annotations(out: Path, names: list[str], seed: int,
                      per_task: int = 3) -> tuple[dict[str, Any], list[QARecord]]:
    """scenes.json and questions.jsonl from the poses files of ``names`` (in this order)."""
    balancer = LetterBalancer(np.random.default_rng([seed, 2]))
    scenes: dict[str, Any] = {}
    questions: list[QARecord] = []
    for index, name in enumerate(names):
        poses = read_json(out / "poses" / f"{name}.json")
        scenes[name] = poses["meta"]
        questions.extend(questions_for_scene(name, poses, np.random.default_rng([seed, index, 3]), balancer,
                                             per_task))
    atomic_write_json(out / "scenes.json", scenes)
    write_jsonl(out / "questions.jsonl", [q.to_dict() for q in questions])
    return scenes, questions


def write_manifest(out: Path, config: WorldConfig, scenes: dict[str, Any]) -> dict[str, Any]:
    """world.json: which preset made this folder, the categories its scenes hold, and the key-frame budget
    that suits its videos. Written for ID worlds too; no other file depends on it."""
    used = sorted({c for entry in scenes.values() for c in entry.get("object_counts", {})})
    manifest = {
        "preset": config.preset,
        "scenes": len(scenes),
        "categories": used,
        "ood_categories": [c for c in used if c in OOD_CATEGORIES],
        "suggested_max_keyframes": SUGGESTED_MAX_KEYFRAMES[config.preset],
        "seed": config.seed,
        "seconds": config.max_seconds,
    }
    atomic_write_json(out / "world.json", manifest)
    return manifest


def questions_for_scene(name: str, poses: dict[str, Any], rng: np.random.Generator, balancer: LetterBalancer,
                        per_task: int = 3) -> list[QARecord]:
    facts = scene_facts(name, poses["meta"], seen=seen_instances(poses))
    maker = StaticQuestionMaker(facts, rng, balancer, video=f"videos/{name}.mp4", source=SOURCE, per_task=per_task)
    return maker.all() + video_questions(maker, poses)


def meta_questions(meta: dict[str, Any], seed: int = 0, per_task: int = 3,
                   source: str = "vsibench_meta") -> tuple[list[QARecord], dict[str, str]]:
    """Questions from a meta_info mapping alone (no video tasks). Returns (questions, {scene: skip reason})."""
    balancer = LetterBalancer(np.random.default_rng([seed, 2]))
    questions: list[QARecord] = []
    skipped: dict[str, str] = {}
    for index, name in enumerate(sorted(meta)):
        entry = meta[name]
        try:
            facts = scene_facts(name, entry)
        except SceneError as exc:
            skipped[name] = str(exc)
            continue
        dataset = entry.get("dataset") if isinstance(entry, dict) else None
        video = f"{dataset}/{name}.mp4" if dataset else f"{name}.mp4"
        maker = StaticQuestionMaker(facts, np.random.default_rng([seed, index, 3]), balancer, video, source, per_task)
        questions.extend(maker.all())
    return questions, skipped


def summarize(questions: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Task -> {"total": n, letter or "number": n}: the answer distribution a closing note reports."""
    table: dict[str, dict[str, int]] = {}
    for q in questions:
        row = table.setdefault(q["task"], {"total": 0})
        row["total"] += 1
        key = str(q["answer"]) if q["answer_type"] == "choice" else "number"
        row[key] = row.get(key, 0) + 1
    return dict(sorted(table.items()))

