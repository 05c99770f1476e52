"""Arguments for ``embodied-r synth world`` and ``embodied-r synth questions`` (issue: synthetic worlds)."""

from __future__ import annotations

import argparse
from typing import Any


def _resolution(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"resolution must look like 320x240, got {text!r}") from None
    return width, height


def register(kinds: Any) -> None:
    world = kinds.add_parser(
        "world", help="render procedural rooms to egocentric videos with VSI-style questions",
        description="Render egocentric videos of procedural (or VSI-Bench meta_info) rooms and write "
                    "videos/, poses/, scenes.json and questions.jsonl. Reruns resume finished scenes.")
    world.add_argument("--out", required=True, help="output folder")
    world.add_argument("--scenes", type=int, default=10, help="number of scenes (with --from-meta: at most this many)")
    world.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same dataset")
    world.add_argument("--resolution", type=_resolution, default=(320, 240), help="WIDTHxHEIGHT (default 320x240)")
    world.add_argument("--fps", type=float, default=10.0, help="video frame rate (default 10)")
    world.add_argument("--seconds", type=float, default=None,
                       help="longest video, in seconds (default 20; 30 with --ood)")
    world.add_argument("--from-meta", default=None, help="build rooms from a VSI-Bench meta_info JSON instead")
    world.add_argument("--workers", type=int, default=1, help="parallel rendering processes (default 1)")
    world.add_argument("--per-task", type=int, default=3, help="most questions per task per scene (default 3)")
    world.add_argument("--ood", action="store_true",
                       help="out-of-distribution world: larger rooms (30-70 m^2), object categories the default "
                            "world never uses (desk, piano, suitcase...), longer walks; scenes are named "
                            "ood_SEED_NNNN. Not with --from-meta")
    world.set_defaults(_synth_run=run_world)
    questions = kinds.add_parser("questions", help="questions from a VSI-Bench meta_info file alone (no rendering)")
    questions.add_argument("--meta", required=True, help="meta_info JSON file")
    questions.add_argument("--out", required=True, help="output questions.jsonl")
    questions.add_argument("--seed", type=int, default=0, help="random seed")
    questions.add_argument("--per-task", type=int, default=3, help="most questions per task per scene (default 3)")
    questions.set_defaults(_synth_run=run_questions)


def _answer_table(rows: list[dict[str, Any]]) -> None:
    from embodied_r.cli.common import print_table
    from embodied_r.sim.world.dataset import summarize

    table = summarize(rows)
    letters = sorted({k for row in table.values() for k in row if len(k) == 1})
    print_table("questions per task and answer", ["task", "total", *letters, "number"],
                [[task, row["total"], *[row.get(k, 0) for k in letters], row.get("number", 0)]
                 for task, row in table.items()])


def run_world(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console
    from embodied_r.core.io import DataFileError, read_jsonl
    from embodied_r.sim.world.dataset import WorldConfig, generate_world
    from embodied_r.sim.world.render import RenderError
    from embodied_r.sim.world.scenes import SceneError

    width, height = args.resolution
    config = WorldConfig(out=Path(args.out), scenes=args.scenes, seed=args.seed, width=width, height=height,
                         fps=args.fps, max_seconds=args.seconds,
                         from_meta=Path(args.from_meta) if args.from_meta else None,
                         workers=max(1, args.workers), per_task=args.per_task, ood=args.ood)
    try:
        config.validate()
    except (ValueError, SceneError) as exc:
        raise CLIError(str(exc)) from exc
    out = console()
    done = [0]

    def progress(name: str, status: str) -> None:
        done[0] += 1
        out.print(f"[{done[0]}/{args.scenes}] {name}: {status}")

    try:
        summary = generate_world(config, progress)
    except (DataFileError, RenderError) as exc:
        raise CLIError(str(exc)) from exc
    for name, reason in summary["skipped"].items():
        out.print(f"skipped {name}: {reason}")
    out.print(f"{summary['scenes']} scenes, {summary['frames']} frames, {summary['questions']} questions in "
              f"{summary['total_seconds']:.1f} s -> {config.out}")
    _answer_table(read_jsonl(config.out / "questions.jsonl"))
    frames = summary["manifest"]["suggested_max_keyframes"]
    out.print(f"{config.preset} world (see {config.out / 'world.json'}); suggested key frames: "
              f"embodied-r keyframes {config.out / 'videos'} --out KEYFRAMES_DIR --max-frames {frames}")
    return 0


def run_questions(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console
    from embodied_r.core.io import DataFileError, write_jsonl
    from embodied_r.sim.world.dataset import load_meta_file, meta_questions

    try:
        meta = load_meta_file(Path(args.meta))
    except DataFileError as exc:
        raise CLIError(str(exc)) from exc
    questions, skipped = meta_questions(meta, seed=args.seed, per_task=args.per_task)
    rows = [q.to_dict() for q in questions]
    write_jsonl(args.out, rows)
    out = console()
    for name, reason in skipped.items():
        out.print(f"skipped {name}: {reason}")
    out.print(f"{len(rows)} questions from {len(meta) - len(skipped)} scenes -> {args.out}")
    _answer_table(rows)
    return 0
