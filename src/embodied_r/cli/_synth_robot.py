"""Arguments for ``embodied-r synth robot``: Meta-World expert demonstrations -> Robot-R1 questions."""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

# A table of task names and descriptions; importing it starts neither MuJoCo nor Meta-World.
from embodied_r.sim.robot.tasks import DEFAULT_HELD_OUT_TASKS, DEFAULT_TASKS


def register(kinds: Any) -> None:
    robot = kinds.add_parser(
        "robot", help="Meta-World expert demonstrations -> Robot-R1 keypoint questions",
        description="Run Meta-World scripted experts, find keypoints, render upright front-camera frames "
                    "and write Robot-R1 questions (questions.jsonl), text/image prompt rows and "
                    "open-ended judge sets, split into training episodes, held-out episodes of the training "
                    "tasks (*_test_in.jsonl) and held-out tasks (*_test_out.jsonl). Reruns resume finished "
                    "episodes.")
    robot.add_argument("--out", required=True, help="output folder")
    robot.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), metavar="TASK",
                       help="Meta-World v3 task names (default: the five stand-ins for the paper's RLBench tasks)")
    robot.add_argument("--episodes", type=int, default=5,
                       help="training episodes attempted per training task (default 5)")
    robot.add_argument("--test-episodes", type=int, default=2,
                       help="held-out episodes per task (other seeds, so other object placements): the "
                            "in-distribution test of each training task, and the episodes of each held-out "
                            "task (default 2; 0 writes training files only)")
    robot.add_argument("--held-out-tasks", nargs="*", default=list(DEFAULT_HELD_OUT_TASKS), metavar="TASK",
                       help="tasks never trained on: the out-of-distribution test (default: "
                            f"{' '.join(DEFAULT_HELD_OUT_TASKS)}; give the flag alone for none)")
    robot.add_argument("--seed", type=int, default=0, help="base seed for object placement and options")
    robot.add_argument("--resolution", default="224x224", help="image size WxH (paper: 224x224)")
    robot.add_argument("--camera", default="front",
                       help="'front' (free camera facing the robot) or a Meta-World camera such as corner2")
    robot.add_argument("--max-steps", type=int, default=300,
                       help="an expert that has not succeeded by then is discarded and counted")
    robot.add_argument("--interval", type=int, default=10, help="ask questions every N steps (paper: 10)")
    robot.add_argument("--keypoint-rule", choices=("arm", "arm+phase"), default="arm+phase",
                       help="ARM's rule alone, or with the expert's sub-goal changes (default)")
    robot.add_argument("--near-distractors", type=int, choices=(0, 1, 2, 3), default=1,
                       help="how many of the 3 position distractors lie 2-6 cm from the answer (rest random)")
    robot.add_argument("--bench-frames", type=int, default=2,
                       help="frames per episode used for the open-ended bench set")
    robot.set_defaults(_synth_run=run_robot)


def _resolution(text: str) -> tuple[int, int]:
    from embodied_r.cli.common import CLIError

    match = re.fullmatch(r"(\d+)x(\d+)", text.strip())
    if not match or min(int(match.group(1)), int(match.group(2))) < 16:
        raise CLIError(f"--resolution {text!r}: expected WxH with both at least 16, e.g. 224x224")
    return int(match.group(1)), int(match.group(2))


def run_robot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.methods.robot_r1.pipeline import SynthConfig, build_datasets, generate_episodes
    from embodied_r.sim.robot.camera import CameraError
    from embodied_r.sim.robot.tasks import UnknownTaskError

    width, height = _resolution(args.resolution)
    if args.episodes < 1 or args.max_steps < 1 or args.interval < 1 or args.test_episodes < 0:
        raise CLIError("--episodes, --max-steps and --interval must be positive integers, --test-episodes "
                       "not negative")
    try:
        cfg = SynthConfig(tasks=args.tasks, episodes=args.episodes, out=Path(args.out), seed=args.seed,
                          width=width, height=height, camera=args.camera, max_steps=args.max_steps,
                          interval=args.interval, near_distractors=args.near_distractors,
                          bench_frames=args.bench_frames, keypoint_rule=args.keypoint_rule,
                          test_episodes=args.test_episodes, held_out_tasks=args.held_out_tasks or ())
    except ValueError as exc:
        raise CLIError(f"--held-out-tasks / --test-episodes: {exc}") from exc
    out = console()
    started = time.perf_counter()
    count = {"n": 0}

    def progress(row: dict[str, Any]) -> None:
        count["n"] += 1
        status = "ok" if row["status"] == "ok" else f"DISCARDED ({row.get('reason')})"
        out.print(f"[{count['n']}] {row['key']}: {row['n_steps']} steps, {status}, {row['seconds']:.1f} s")

    try:
        generate_episodes(cfg, on_episode=progress)
    except (UnknownTaskError, CameraError) as exc:
        raise CLIError(str(exc)) from exc
    elapsed = time.perf_counter() - started
    summary = build_datasets(cfg)
    rows = [[task, "held out" if task in cfg.held_out_tasks else "training",
             summary["kept_by_task"].get(task, 0), summary["discarded_by_task"].get(task, 0)]
            for task in [*cfg.tasks, *cfg.held_out_tasks]]
    print_table("Robot-R1 demonstrations", ["task", "role", "kept", "discarded"], rows)
    splits = summary["splits"]
    types = sorted({t for s in splits.values() for t in s["questions_by_type"]})
    print_table("Questions per split (files: prompts.jsonl, prompts_test_in.jsonl, prompts_test_out.jsonl)",
                ["split", *types, "bench items"],
                [[split, *[s["questions_by_type"].get(t, 0) for t in types], s["bench_items"]]
                 for split, s in splits.items()])
    if count["n"]:
        out.print(f"{count['n']} new episodes in {elapsed:.1f} s ({60 * count['n'] / elapsed:.1f} episodes/min); "
                  f"files in {cfg.out}")
    if summary["episodes_kept"] == 0:
        raise CLIError(f"no expert episode succeeded (all {summary['episodes_attempted']} discarded); "
                       f"raise --max-steps or check the task names")
    return 0
