"""Camera images are upright: world points land where the camera geometry says, for every camera."""

from __future__ import annotations

import numpy as np
import pytest

from embodied_r.sim.robot.camera import CameraError, UprightRenderer


@pytest.fixture(scope="module")
def env():
    from embodied_r.methods.robot_r1.demos import make_env, reset_env

    environment, _, _ = make_env("pick-place-v3")
    reset_env(environment, 0)
    yield environment
    environment.close()


def _hand_centroid(env, renderer: UprightRenderer) -> np.ndarray:
    """Centroid (u, v) of the gripper's pixels in the upright image, from a segmentation render."""
    import mujoco

    seg = mujoco.Renderer(env.model, renderer.height, renderer.width)
    seg.enable_segmentation_rendering()
    seg.update_scene(env.data, camera=renderer._camera_arg)
    ids = seg.render()[..., 0]
    seg.close()
    _, pose = renderer.render(env.data)
    if pose.rotated_180:
        ids = ids[::-1, ::-1]
    bodies = {env.model.body(n).id for n in ("hand", "rightclaw", "leftclaw", "rightpad", "leftpad")}
    geoms = [g for g in range(env.model.ngeom) if env.model.geom_bodyid[g] in bodies]
    rows, cols = np.nonzero(np.isin(ids, geoms))
    assert len(rows) > 10, "gripper not visible"
    return np.array([cols.mean(), rows.mean()])


def _move_hand(env, delta) -> None:
    from embodied_r.methods.robot_r1.demos import reset_env

    reset_env(env, 0)
    for _ in range(15):
        env.step(np.array([*delta, -1.0]))


@pytest.mark.parametrize("camera", ["front", "corner", "corner2"])
def test_projection_matches_rendered_gripper(env, camera: str) -> None:
    renderer = UprightRenderer(env.model, camera, 128, 128)
    _move_hand(env, [0.0, 0.0, 0.0])
    _, pose = renderer.render(env.data)
    projected = pose.project(env.data.body("hand").xpos)[0]
    seen = _hand_centroid(env, renderer)
    # The gripper's pixel centroid sits near the projection of the hand body; an image left upside
    # down (or mirrored) would put it on the other side of the frame.
    assert np.linalg.norm(projected - seen) < 18, (camera, projected, seen)
    renderer.close()


def test_corner_cameras_are_rotated_and_up_is_up(env) -> None:
    corner = UprightRenderer(env.model, "corner", 128, 128)
    front = UprightRenderer(env.model, "front", 128, 128)
    assert corner.render(env.data)[1].rotated_180           # Meta-World's corner camera is upside down
    assert not front.render(env.data)[1].rotated_180
    for renderer in (corner, front):
        _move_hand(env, [0.0, 0.0, -1.0])
        low = _hand_centroid(env, renderer)
        _move_hand(env, [0.0, 0.0, 1.0])
        high = _hand_centroid(env, renderer)
        assert high[1] < low[1] - 3, (renderer.camera, low, high)   # raising the hand moves it up the image
        renderer.close()


def test_front_axis_words_follow_the_image(env) -> None:
    renderer = UprightRenderer(env.model, "front", 128, 128)
    words = renderer.render(env.data)[1].axis_words()
    assert words[2] == ("down", "up")
    assert words[1] == ("back", "front")      # +y points from the robot toward the front camera
    _move_hand(env, [1.0, 0.0, 0.0])
    plus_x = _hand_centroid(env, renderer)
    _move_hand(env, [-1.0, 0.0, 0.0])
    minus_x = _hand_centroid(env, renderer)
    # The words for +x must match where +x moves in the image.
    assert (plus_x[0] > minus_x[0]) == (words[0][1] == "right")
    renderer.close()


def test_missing_camera_and_oversized_resolution_raise(env) -> None:
    with pytest.raises(CameraError, match="not in this scene"):
        UprightRenderer(env.model, "no_such_camera")
    with pytest.raises(CameraError, match="offscreen buffer"):
        UprightRenderer(env.model, "front", 5000, 5000)
