"""Robot-R1 demonstration generation speed: render question frames only (ours) vs every step (naive).

Both sides run the same scripted experts on the same seeds and produce the same question images; the
naive side renders every simulation step during the rollout (what a recorder that does not know the
keypoints yet must do), ours records MuJoCo state and re-renders only the frames that get questions.

    MUJOCO_GL=egl .venv/bin/python benchmarks/robot_demos.py --episodes 1 --resolution 224

``--record PATH`` also writes the numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import os
import time

from bench_record import add_record_argument, write_record

os.environ.setdefault("MUJOCO_GL", "egl")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1, help="episodes per task and side")
    parser.add_argument("--resolution", type=int, default=224)
    add_record_argument(parser)
    args = parser.parse_args(argv)

    from embodied_r.methods.robot_r1.demos import episode_seed, make_env, render_frames, run_expert
    from embodied_r.methods.robot_r1.keypoints import discover_keypoints, question_steps
    from embodied_r.sim.robot.camera import UprightRenderer
    from embodied_r.sim.robot.tasks import DEFAULT_TASKS

    timings = {"ours (question frames only)": 0.0, "naive (render every step)": 0.0}
    count, frames_ours, frames_naive = 0, 0, 0
    for task in DEFAULT_TASKS:
        env, policy, _ = make_env(task)
        renderer = UprightRenderer(env.model, "front", args.resolution, args.resolution)
        for index in range(args.episodes):
            seed = episode_seed(0, task, index)
            start = time.perf_counter()
            episode, _ = run_expert(env, policy, task, index, seed)
            kps = discover_keypoints(episode.gripper_closed, episode.joint_vel,
                                     expert_targets=episode.expert_target)
            steps = question_steps(kps, episode.n_steps + 1)
            images, _ = render_frames(env, renderer, episode, steps)
            timings["ours (question frames only)"] += time.perf_counter() - start
            start = time.perf_counter()
            _, live = run_expert(env, policy, task, index, seed, render_every_step=renderer)
            timings["naive (render every step)"] += time.perf_counter() - start
            count += 1
            frames_ours += len(images)
            frames_naive += len(live)
        renderer.close()
        env.close()
    print(f"{count} episodes over {len(DEFAULT_TASKS)} tasks, {args.resolution}x{args.resolution}, "
          f"frames rendered: ours {frames_ours}, naive {frames_naive}")
    print(f"{'method':32s} {'seconds':>8s} {'episodes/min':>13s}")
    for name, seconds in timings.items():
        print(f"{name:32s} {seconds:8.2f} {60 * count / seconds:13.1f}")
    ours, naive = timings.values()
    print(f"speed-up (naive time / ours): {naive / ours:.1f}x")
    if args.record is not None:
        frames = {"ours (question frames only)": frames_ours, "naive (render every step)": frames_naive}
        results = {"episodes": count,
                   "methods": [{"method": name, "frames_rendered": frames[name], "seconds": seconds,
                                "episodes_per_min": 60 * count / seconds} for name, seconds in timings.items()],
                   "speedup": naive / ours}
        settings = {"episodes_per_task": args.episodes, "resolution": args.resolution, "tasks": list(DEFAULT_TASKS)}
        write_record(args.record, "robot_demos", argv, settings, results)


if __name__ == "__main__":
    main()
