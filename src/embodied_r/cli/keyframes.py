"""``embodied-r keyframes VIDEO... --out DIR``: select the key frames the VLM will look at."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "select key frames of videos (Embodied-R ORB overlap rule, or uniform)"
DESCRIPTION = ("Sample each video at --sample-fps and keep the frames whose overlap with the last key frame "
               "drops below --threshold (ORB + RANSAC homography, as Embodied-R), clamped to [--min-frames, "
               "--max-frames]. Writes DIR/<video stem>.keyframes.json; failures go to DIR/failures.jsonl; "
               "rerunning skips videos already done.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("videos", nargs="+", metavar="VIDEO", help="video files, or folders of videos")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--strategy", choices=["orb", "uniform"], default="orb",
                        help="orb: overlap rule (default); uniform: evenly spaced baseline")
    parser.add_argument("--sample-fps", type=float, default=1.0, help="sampling rate before selection (1)")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="keep a frame when its overlap with the last key frame is below this (0.5)")
    parser.add_argument("--min-frames", type=int, default=4, help="at least this many key frames (4)")
    parser.add_argument("--max-frames", type=int, default=32, help="at most this many key frames (32)")
    parser.add_argument("--save-images", action="store_true",
                        help="also write the key frames as JPEG into DIR/<stem>.keyframes/")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (1)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_r.cli.common import CLIError, console, print_table
    from embodied_r.core.io import exclusive_output
    from embodied_r.methods.embodied_r.keyframes.batch import KeyframeJob, expand_inputs, is_done, output_path

    _check_options(args, CLIError)
    missing = [v for v in args.videos if not Path(v).exists()]
    if missing:
        raise CLIError(f"not found: {', '.join(missing)} (check the paths)")
    videos = expand_inputs(args.videos)
    if not videos:
        raise CLIError(f"no video files found in {', '.join(args.videos)}")
    out_dir = Path(args.out)
    if out_dir.exists() and not out_dir.is_dir():
        raise CLIError(f"--out {out_dir} exists and is not a folder")
    _check_unique_outputs(videos, out_dir, output_path, CLIError)
    job = KeyframeJob(args.strategy, args.sample_fps, args.threshold, args.min_frames, args.max_frames,
                      args.save_images)
    out_dir.mkdir(parents=True, exist_ok=True)
    with exclusive_output(out_dir):  # one writer per folder, taken before deciding what is left to do
        todo = [v for v in videos if not is_done(out_dir, v, job)]
        out = console()
        if len(todo) < len(videos):
            out.print(f"skipping {len(videos) - len(todo)} video(s) already done in {out_dir}")
        results = _run_with_progress(todo, out_dir, job, args.workers)
    failed = [r for r in results if not r["ok"]]
    done = [r for r in results if r["ok"]]
    if done:
        rows = [[Path(r["video"]).name, r["frames"], r["seconds"], "; ".join(r["warnings"])[:80]]
                for r in sorted(done, key=lambda r: r["video"])]
        print_table("key frames", ["video", "frames", "seconds", "warnings"], rows)
    out.print(f"{len(done)} done, {len(videos) - len(todo)} skipped, {len(failed)} failed -> {out_dir}")
    for row in failed:
        out.print(f"[red]failed[/red] {row['video']}: {row['error']}")
    if failed:
        out.print(f"failures are listed in {out_dir / 'failures.jsonl'}; fix them and rerun to resume")
    return 1 if failed else 0


def _check_options(args: argparse.Namespace, error: type[Exception]) -> None:
    if not args.sample_fps > 0:
        raise error(f"--sample-fps must be > 0, got {args.sample_fps}")
    if not 0.0 <= args.threshold <= 1.0:
        raise error(f"--threshold is an overlap ratio in [0, 1], got {args.threshold}")
    if not 1 <= args.min_frames <= args.max_frames:
        raise error(f"need 1 <= --min-frames <= --max-frames, got {args.min_frames} and {args.max_frames}")
    if args.workers < 1:
        raise error(f"--workers must be at least 1, got {args.workers}")


def _check_unique_outputs(videos: list[Any], out_dir: Any, output_path: Any, error: type[Exception]) -> None:
    seen: dict[Any, Any] = {}
    for video in videos:
        target = output_path(out_dir, video)
        if target in seen:
            raise error(f"{seen[target]} and {video} would both write {target.name}; "
                        "run them into different --out folders")
        seen[target] = video


def _run_with_progress(todo: list[Any], out_dir: Any, job: Any, workers: int) -> list[dict[str, Any]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from embodied_r.methods.embodied_r.keyframes.batch import run_batch, uses_workers

    if not todo:
        return []
    # With worker processes the bar has no refresh thread of its own (the batch runner redraws it while
    # it waits), so that the workers can be forked (see video.batch.worker_context).
    parallel = uses_workers(workers, len(todo))
    with Progress(TextColumn("key frames"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, auto_refresh=not parallel) as progress:
        task = progress.add_task("videos", total=len(todo))
        progress.refresh()

        def advance(_row: dict[str, Any]) -> None:
            progress.advance(task)
            progress.refresh()

        return run_batch(todo, out_dir, job, workers, on_result=advance, on_tick=progress.refresh)
