"""Rendering speed of synthetic worlds at 320x240, against a naive baseline, plus dataset generation time.

Project: MuJoCo with shadows and MSAA off, RGB at full resolution and segmentation (for visible pixel
counts) at half resolution. Baseline: the same scene and camera path with MuJoCo's default 4096 shadow
map and 4x MSAA, and segmentation at full resolution. Both render the same poses in the same process;
the ratio is printed. Then a small dataset is generated end to end (layout, path, render, H.264,
questions) and the time per scene is extrapolated to 200 scenes.

    python benchmarks/render_world.py --frames 300 --baseline-frames 30 --scenes 20 --workers 2

``--record PATH`` also writes the numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_record import add_record_argument, write_record

from embodied_r.sim.world.camera_path import plan_camera_path
from embodied_r.sim.world.dataset import WorldConfig, generate_world
from embodied_r.sim.world.layout import sample_scene
from embodied_r.sim.world.render import WorldRenderer


def render_fps(scene, poses, width: int, height: int, **kwargs) -> float:
    with WorldRenderer(scene, width, height, **kwargs) as renderer:
        renderer.render(poses[0])  # warm-up: GL context and first upload
        start = time.perf_counter()
        for pose in poses:
            renderer.render(pose)
        return len(poses) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--baseline-frames", type=int, default=30)
    parser.add_argument("--scenes", type=int, default=20, help="dataset scenes to generate (0: skip)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    add_record_argument(parser)
    args = parser.parse_args(argv)

    scene = sample_scene("bench", np.random.default_rng(args.seed))
    poses = plan_camera_path(scene, np.random.default_rng(args.seed + 1), max_seconds=60).poses(30.0)
    poses = (poses * (args.frames // len(poses) + 1))[: args.frames]
    ours = render_fps(scene, poses, 320, 240)
    rgb_only = render_fps(scene, poses, 320, 240, segmentation=False)
    baseline = render_fps(scene, poses[: args.baseline_frames], 320, 240, shadows=True, seg_scale=1)
    print(f"{'renderer (320x240)':44s} {'frames/s':>9s}")
    print(f"{'project: RGB + half-res segmentation':44s} {ours:9.1f}")
    print(f"{'project: RGB only':44s} {rgb_only:9.1f}")
    print(f"{'baseline: shadows+MSAA on, full-res seg':44s} {baseline:9.1f}")
    print(f"speed-up vs baseline: {ours / baseline:.1f}x")
    results = {"project_fps": ours, "rgb_only_fps": rgb_only, "baseline_fps": baseline, "speedup": ours / baseline}

    if args.scenes > 0:
        with tempfile.TemporaryDirectory() as tmp:
            config = WorldConfig(out=Path(tmp), scenes=args.scenes, seed=args.seed, workers=args.workers)
            summary = generate_world(config)
        per_scene = summary["total_seconds"] / args.scenes
        print(f"dataset: {summary['scenes']} scenes ({summary['frames']} frames at 320x240, 10 fps), "
              f"{summary['questions']} questions in {summary['total_seconds']:.1f} s with {args.workers} workers "
              f"= {per_scene:.2f} s/scene -> 200 scenes ~ {200 * per_scene / 60:.1f} min; "
              f"end-to-end {summary['frames'] / summary['render_seconds']:.0f} frames/s")
        results["dataset"] = {"scenes": summary["scenes"], "frames": summary["frames"],
                              "questions": summary["questions"], "seconds": summary["total_seconds"],
                              "seconds_per_scene": per_scene, "minutes_per_200_scenes": 200 * per_scene / 60,
                              "end_to_end_fps": summary["frames"] / summary["render_seconds"]}
    if args.record is not None:
        settings = {"width": 320, "height": 240, "frames": args.frames, "baseline_frames": args.baseline_frames,
                    "scenes": args.scenes, "workers": args.workers, "seed": args.seed}
        write_record(args.record, "render_world", argv, settings, results)


if __name__ == "__main__":
    main()
