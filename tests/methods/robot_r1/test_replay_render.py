"""Rendering after the episode from the recorded state gives the same image as rendering live."""

from __future__ import annotations

import numpy as np

from embodied_r.methods.robot_r1.demos import Episode, make_env, render_frames, run_expert
from embodied_r.sim.robot.camera import UprightRenderer


def test_replayed_frames_equal_live_frames(tmp_path) -> None:
    env, policy, _ = make_env("pick-place-v3")
    renderer = UprightRenderer(env.model, "front", 64, 64)
    episode, live = run_expert(env, policy, "pick-place-v3", 0, seed=5, max_steps=120,
                               render_every_step=renderer)
    assert episode.success and len(live) == episode.n_steps + 1
    steps = [0, episode.n_steps // 2, episode.n_steps]
    replayed, _ = render_frames(env, renderer, episode, steps)
    for step in steps:
        assert np.array_equal(replayed[step], live[step]), step
    assert not np.array_equal(live[0], live[-1])           # the scene did change over the episode
    # Arrays round-trip through the .npz file.
    episode.save(tmp_path / "ep.npz")
    loaded = Episode.load(tmp_path / "ep.npz")
    assert np.array_equal(loaded.ee_pos, episode.ee_pos) and loaded.success
    # Object positions are recorded per step (not a view of the final state).
    assert not np.allclose(episode.object_pos[0], episode.object_pos[-1])
    renderer.close()
    env.close()
