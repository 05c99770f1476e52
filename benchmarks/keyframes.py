"""Key-frame extraction: our extractor vs a straightforward re-implementation of the official pipeline.

Usage (from the repository root)::

    .venv/bin/python benchmarks/keyframes.py                 # generated 3-minute videos + a folder
    .venv/bin/python benchmarks/keyframes.py --videos a.mp4  # also any videos you give

For every video it times, in one process and interleaved (best of ``--repeat``):
  * ``official``: ``benchmarks/official_keyframes.py`` (OpenCV reads and converts every frame, 1-fps
    temporary mp4 round trip, ORB on both frames of every pair, rasterised overlap);
  * ``ours``: ``embodied_r.methods.embodied_r.keyframes.selection.extract_keyframes`` at default
    settings, and again with FFmpeg's frame threading instead of the default single decoding thread;
  * ``decode``: ``embodied_r.methods.embodied_r.keyframes.decode.sample_frames`` alone (the sampled frames as gray, what
    selection consumes), with one FFmpeg thread and with one per core; the faster of the two is the
    floor that selection is measured against;
and prints wall time, source frames per second, the speed-up over the official pipeline, the cost of
selection relative to decoding, and the agreement (Jaccard of key-frame timestamps). Then it runs a
folder of videos: the official pipeline one video after another vs the ``embodied-r keyframes --workers
2`` command in a fresh process.
Generated videos are cached in ``--cache`` (default: a folder in the system temp dir). ``--record PATH``
also writes every printed table's numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # official_keyframes beside this file
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic test videos

from bench_record import add_record_argument, write_record  # noqa: E402
from official_keyframes import official_keyframes  # noqa: E402
from synthetic_video import Shot, render_shots, textured_world, write_video  # noqa: E402

from embodied_r.cli.common import print_table  # noqa: E402
from embodied_r.methods.embodied_r.keyframes import _pyav_backend  # noqa: E402
from embodied_r.methods.embodied_r.keyframes.batch import output_path  # noqa: E402
from embodied_r.methods.embodied_r.keyframes.decode import probe, sample_frames  # noqa: E402
from embodied_r.methods.embodied_r.keyframes.selection import extract_keyframes  # noqa: E402

# ---------------------------------------------------------------------------------------------------
# Test videos
# ---------------------------------------------------------------------------------------------------


def walkthrough_shots(seconds: float, width: int, height: int, seed: int) -> list[Shot]:
    """Pans at different speeds, a static stretch and hard cuts between three 'rooms'."""
    parts = [(0.35, 0.08), (0.10, 0.0), (0.25, 0.15), (0.30, 0.05)]  # (share of time, speed)
    shots = []
    for number, (share, speed) in enumerate(parts):
        length = seconds * share
        world_width = int(width * (1.3 + speed * length)) + 2
        world = textured_world(int(height * 1.6), world_width, seed * 10 + number)
        shots.append(Shot(world, length, speed))
    return shots


def make_video(cache: Path, seconds: float, codec: str, width: int, height: int, fps: float,
               seed: int = 0) -> Path:
    path = cache / f"walk_{int(seconds)}s_{width}x{height}_{int(fps)}fps_{codec}_seed{seed}.mp4"
    if not path.exists():
        print(f"generating {path.name} ...", flush=True)
        frames = render_shots(walkthrough_shots(seconds, width, height, seed), width, height, fps)
        partial = path.with_name(path.stem + ".partial.mp4")
        write_video(partial, frames, fps, codec)  # type: ignore[arg-type]
        partial.replace(path)
    return path


# ---------------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------------


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (batch workers), all threads."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed_cpu(function: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds, result). On a shared machine the CPU time is the steadier measure
    of work done; the wall time is what a user waits."""
    cpu_start = cpu_seconds()
    wall, result = timed(function)
    return wall, cpu_seconds() - cpu_start, result


def jaccard(a: list[float], b: list[float]) -> float:
    left, right = {round(t, 3) for t in a}, {round(t, 3) for t in b}
    return len(left & right) / len(left | right) if left | right else 1.0


def bench_video(path: Path, repeat: int) -> dict[str, Any]:
    """Best-of-``repeat`` wall times of each method, interleaved so load hits all alike."""
    best: dict[str, float] = {}
    best_cpu: dict[str, float] = {}
    outputs: dict[str, Any] = {}
    methods: dict[str, Callable[[], Any]] = {
        "official": lambda: official_keyframes(path),
        "ours": lambda: extract_keyframes(path).timestamps,
        # Our default decodes on one thread; this row shows what FFmpeg's frame threading would do.
        "ours, FFmpeg threads": lambda: with_decoder_threads(0, lambda: extract_keyframes(path).timestamps),
        "decode": lambda: decode_only(path),
        "decode, FFmpeg threads": lambda: with_decoder_threads(0, lambda: decode_only(path)),
    }
    for _ in range(repeat):
        for name, method in methods.items():
            seconds, cpu, outputs[name] = timed_cpu(method)
            best[name] = min(best.get(name, float("inf")), seconds)
            best_cpu[name] = min(best_cpu.get(name, float("inf")), cpu)
    # The floor selection is measured against: the faster of the two ways of decoding alone.
    fastest = min(("decode", "decode, FFmpeg threads"), key=lambda name: best[name])
    best["decode"], best_cpu["decode"] = best[fastest], best_cpu[fastest]
    info = probe(path)
    label = f"{path.stem[:24]} ({info.codec}, {info.duration:.0f} s)"
    return {"path": path, "label": label, "codec": info.codec, "duration_s": info.duration,
            "frames": info.frame_count, "best": best, "cpu": best_cpu,
            "official": outputs["official"], "ours": outputs["ours"],
            "ours, FFmpeg threads": outputs["ours, FFmpeg threads"],
            "sampled": len(outputs["decode"]), "decode_label": fastest}


def decode_only(path: Path) -> list[float]:
    """Decode the 1-fps sampled frames to gray (what selection consumes) and nothing else."""
    return [t for t, _ in sample_frames(path, 1.0, color="gray")]


def with_decoder_threads(threads: int, function: Callable[[], Any]) -> Any:
    """``function()`` with ``threads`` FFmpeg decoding threads (0: one per core) instead of the default."""
    default = _pyav_backend.DECODER_THREADS
    _pyav_backend.DECODER_THREADS = threads
    try:
        return function()
    finally:
        _pyav_backend.DECODER_THREADS = default


# The per-video table's numeric columns, as the record names them (after the method's name).
VIDEO_COLUMNS = ("wall_s", "frames_per_s", "key_frames", "x_official", "over_decode", "cpu_s", "cpu_x_official",
                 "cpu_over_decode")


def report_videos(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Print the per-video table; return its numbers per video for the record."""
    rows, recorded = [], []
    for r in results:
        methods = []
        best = r["best"]
        for name in ("official", "ours", "ours, FFmpeg threads", "decode"):
            keys = r["sampled"] if name == "decode" else len(r[name])
            cpu = r["cpu"]
            shown = r["decode_label"] if name == "decode" else name
            rows.append([f"{r['label']} {shown}", best[name], r["frames"] / best[name], keys,
                         best["official"] / best[name], best[name] / best["decode"], cpu[name],
                         cpu["official"] / cpu[name], cpu[name] / cpu["decode"]])
            methods.append({"method": shown, **dict(zip(VIDEO_COLUMNS, rows[-1][1:]))})
        agreement = round(jaccard(r["official"], r["ours"]), 3)
        rows.append(["  agreement: Jaccard(official, ours)", None, None, agreement, None, None, None, None, None])
        recorded.append({"video": r["label"], "codec": r["codec"], "duration_s": r["duration_s"],
                         "frames": r["frames"], "methods": methods, "agreement": agreement})
    print_table("per video, best of repeats (x official: speed-up; / decode: over decoding alone)",
                ["video, method", "wall s", "frames/s", "key frames", "x official", "/ decode",
                 "CPU s", "CPU x official", "CPU / decode"], rows)
    return recorded


def run_cli(videos: list[Path], out: str, workers: int) -> None:
    """``embodied-r keyframes VIDEOS --out OUT --workers N`` in a fresh process, as a user runs it."""
    command = [sys.executable, "-m", "embodied_r.cli.main", "keyframes", *map(str, videos),
               "--out", out, "--workers", str(workers)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"embodied-r keyframes failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    missing = [v for v in videos if not output_path(Path(out), v).is_file()]
    if missing:
        raise SystemExit(f"embodied-r keyframes wrote no result for {missing}")


def bench_folder(videos: list[Path], workers: int, repeat: int) -> dict[str, Any]:
    """Whole folder, best of ``repeat``: the official pipeline one video after another (in this
    process, no start-up) vs the ``embodied-r keyframes --workers N`` command in a fresh process,
    including interpreter start-up, imports and its worker processes. Prints the table and returns its
    numbers for the record."""
    official_s = ours_s = official_cpu = ours_cpu = float("inf")
    for _ in range(repeat):
        wall, cpu, _ = timed_cpu(lambda: [official_keyframes(v) for v in videos])
        official_s, official_cpu = min(official_s, wall), min(official_cpu, cpu)
        with tempfile.TemporaryDirectory() as out:
            wall, cpu, _ = timed_cpu(lambda: run_cli(videos, out, workers))
        ours_s, ours_cpu = min(ours_s, wall), min(ours_cpu, cpu)
    frames = sum(probe(v).frame_count for v in videos)
    rows = [["official, one after another", official_s, frames / official_s, 1.0, official_cpu, 1.0],
            [f"embodied-r keyframes --workers {workers}", ours_s, frames / ours_s,
             official_s / ours_s, ours_cpu, official_cpu / ours_cpu]]
    print_table(f"folder of {len(videos)} videos (best of {repeat}; CPU includes the worker processes)",
                ["method", "wall s", "frames/s", "x official", "CPU s", "CPU x official"], rows)
    columns = ("wall_s", "frames_per_s", "x_official", "cpu_s", "cpu_x_official")
    return {"videos": len(videos), "frames": frames,
            "methods": [{"method": row[0], **dict(zip(columns, row[1:]))} for row in rows]}


def breakdown(path: Path) -> dict[str, Any]:
    """CPU seconds of each stage of our extractor, run one after another (no threads), to show what
    bounds it: decoding the sampled frames, ORB on them, matching + homography + overlap; and the
    lower bound those give for the overlapped pipeline on this machine's cores. Prints the table and
    returns its numbers for the record."""
    from embodied_r.methods.embodied_r.keyframes.selection import OverlapTracker

    def cpu(function: Callable[[], Any]) -> tuple[float, Any]:
        started = time.process_time()
        result = function()
        return time.process_time() - started, result

    decode_s, frames = cpu(lambda: list(sample_frames(path, 1.0, color="gray")))
    tracker = OverlapTracker()
    orb_s, views = cpu(lambda: [tracker.view(gray) for _, gray in frames])
    height, width = frames[0][1].shape[:2]
    match_s, _ = cpu(lambda: [tracker.overlap(a, b, width, height) for a, b in zip(views, views[1:])])
    total = decode_s + orb_s + match_s
    rows = [[name, seconds, 1000 * seconds / len(frames), seconds / total]
            for name, seconds in [("decode sampled frames (gray)", decode_s),
                                  ("ORB detect + describe", orb_s), ("match + RANSAC + overlap", match_s)]]
    # Decoding and matching each run on one thread (in order); ORB features are computed in parallel.
    # With the stages overlapped, no schedule beats the longest serial stage or the total over the cores.
    cores = os.cpu_count() or 1
    bound = max(decode_s, match_s, total / cores)
    rows.append([f"lower bound of the wall time on {cores} cores", bound, 1000 * bound / len(frames), None])
    print_table(f"where our time goes: {path.name} ({len(frames)} sampled frames, CPU seconds)",
                ["stage", "CPU s", "ms / sampled frame", "share"], rows)
    return {"video": path.name, "sampled_frames": len(frames), "cores": cores,
            "stages": [{"stage": row[0], "cpu_s": row[1], "ms_per_frame": row[2], "share": row[3]} for row in rows]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--videos", nargs="*", default=[], help="extra videos to measure")
    parser.add_argument("--seconds", type=float, default=180, help="length of the generated videos (180)")
    parser.add_argument("--codecs", nargs="+", default=["mp4v", "h264"], choices=["mp4v", "h264"])
    parser.add_argument("--size", default="640x360", help="generated video size (640x360)")
    parser.add_argument("--fps", type=float, default=30)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--folder", type=int, default=8, help="videos in the folder run (8; 0 to skip)")
    parser.add_argument("--folder-seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "embodied_r_bench_videos")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.split("x"))
    args.cache.mkdir(parents=True, exist_ok=True)
    videos = [make_video(args.cache, args.seconds, c, width, height, args.fps) for c in args.codecs]
    videos += [Path(v) for v in args.videos]
    results: dict[str, Any] = {"videos": report_videos([bench_video(v, args.repeat) for v in videos])}
    results["breakdown"] = [breakdown(video) for video in videos]
    if args.folder:
        codecs = [args.codecs[i % len(args.codecs)] for i in range(args.folder)]
        folder = [make_video(args.cache, args.folder_seconds, codec, width, height, args.fps, seed=i + 1)
                  for i, codec in enumerate(codecs)]
        results["folder"] = bench_folder(folder, args.workers, args.repeat)
    if args.record is not None:
        settings = {"seconds": args.seconds, "codecs": args.codecs, "width": width, "height": height, "fps": args.fps,
                    "repeat": args.repeat, "folder": args.folder, "folder_seconds": args.folder_seconds,
                    "workers": args.workers, "extra_videos": [str(v) for v in args.videos]}
        write_record(args.record, "keyframes", argv, settings, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
