"""Upright camera images of a Meta-World scene, and where world points and axes land in them.

Robot-R1 gives the model one front-camera RGB image (paper §3.2, 224x224). Meta-World's own ``corner*``
cameras are defined with their "up" vector pointing at the floor (e.g. ``corner`` has
``xyaxes="-1 1 0 -0.2 -0.2 -1"``), so their images come out upside down (Metaworld issues #505/#516).
That is a 180-degree roll of the camera, so the fix is a 180-degree rotation of the image, not a
vertical flip (a flip would also mirror left and right). The fix is decided from the camera's actual
up vector, so it holds for any camera. The default ``front`` view is a free camera on the far side of
the table looking back at the robot, like RLBench's front camera.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

FRONT = "front"
# Free camera across the table from the robot (Meta-World's robot base is at y=0, facing +y).
FRONT_LOOKAT = (0.0, 0.62, 0.12)
FRONT_DISTANCE = 1.15
FRONT_AZIMUTH = -90.0   # looks along -y, i.e. back toward the robot
FRONT_ELEVATION = -28.0


class CameraError(ValueError):
    """A camera that the scene does not have, or a resolution the renderer cannot produce."""


@dataclass(frozen=True)
class CameraPose:
    """The GL camera that produced an image, after the orientation fix.

    ``right``/``up`` are world-frame unit vectors of the *fixed* image's +u (column) and up (-v, row)
    directions; ``forward`` points from the camera into the scene.
    """

    position: np.ndarray
    forward: np.ndarray
    right: np.ndarray
    up: np.ndarray
    fovy_deg: float
    width: int
    height: int
    rotated_180: bool

    def project(self, points: np.ndarray) -> np.ndarray:
        """Pixel coordinates ``(u, v)`` (column, row; row 0 at the top) of world points ``(N, 3)``."""
        rel = np.atleast_2d(np.asarray(points, dtype=float)) - self.position
        depth = rel @ self.forward
        focal = 0.5 * self.height / np.tan(np.radians(self.fovy_deg) / 2)
        u = self.width / 2 + focal * (rel @ self.right) / depth
        v = self.height / 2 - focal * (rel @ self.up) / depth
        return np.stack([u, v], axis=1)

    def axis_words(self) -> dict[int, tuple[str, str]]:
        """For each world axis, the (negative, positive) direction words as seen in the image.

        Words follow Robot-R1-Bench's convention (paper Fig. 9): up = away from the ground, front =
        toward the camera, left/right from the camera's point of view. Each world axis takes the image
        direction it is most aligned with.
        """
        toward_camera = -self.forward
        words: dict[int, tuple[str, str]] = {}
        for axis in range(3):
            unit = np.zeros(3)
            unit[axis] = 1.0
            scores = {"right": unit @ self.right, "up": unit @ self.up, "front": unit @ toward_camera}
            best = max(scores, key=lambda k: abs(scores[k]))
            pair = {"right": ("left", "right"), "up": ("down", "up"), "front": ("back", "front")}[best]
            words[axis] = pair if scores[best] > 0 else (pair[1], pair[0])
        return words


def ensure_gl_backend() -> None:
    """Pick a headless OpenGL backend before MuJoCo is imported (EGL; set MUJOCO_GL=osmesa to override)."""
    os.environ.setdefault("MUJOCO_GL", "egl")


def camera_names(model: Any) -> list[str]:
    return [model.camera(i).name for i in range(model.ncam)]


class UprightRenderer:
    """Renders one camera of a MuJoCo model at a fixed size, always upright (shadows off for speed)."""

    def __init__(self, model: Any, camera: str = FRONT, width: int = 224, height: int = 224) -> None:
        ensure_gl_backend()
        import mujoco

        self._mujoco = mujoco
        if camera != FRONT and camera not in camera_names(model):
            raise CameraError(
                f"camera {camera!r} not in this scene; choose {FRONT!r} or one of {camera_names(model)}"
            )
        offwidth, offheight = model.vis.global_.offwidth, model.vis.global_.offheight
        if width > offwidth or height > offheight:
            raise CameraError(f"resolution {width}x{height} exceeds the scene's offscreen buffer "
                              f"{offwidth}x{offheight}; choose a smaller --resolution")
        self.model = model
        self.camera = camera
        self.width, self.height = width, height
        try:
            self._renderer = mujoco.Renderer(model, height=height, width=width)
        except Exception as exc:  # mujoco.FatalError: no usable headless GL
            raise CameraError(
                f"cannot create an offscreen OpenGL context ({exc}); set MUJOCO_GL=egl or MUJOCO_GL=osmesa "
                f"before mujoco/metaworld are imported (currently {os.environ.get('MUJOCO_GL')!r})"
            ) from exc
        # Shadows and reflections cost most of the software-GL frame time and add nothing the
        # questions need (DESIGN.md: shadows off).
        self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        self._camera_arg: Any = camera
        if camera == FRONT:
            free = mujoco.MjvCamera()
            free.type = mujoco.mjtCamera.mjCAMERA_FREE
            free.lookat[:] = FRONT_LOOKAT
            free.distance = FRONT_DISTANCE
            free.azimuth = FRONT_AZIMUTH
            free.elevation = FRONT_ELEVATION
            self._camera_arg = free

    def render(self, data: Any) -> tuple[np.ndarray, CameraPose]:
        """An upright RGB image ``(H, W, 3) uint8`` of ``data`` and the pose that maps points into it."""
        self._renderer.update_scene(data, camera=self._camera_arg)
        image = self._renderer.render()
        pose = self._pose()
        if pose.rotated_180:
            image = image[::-1, ::-1]
        return np.ascontiguousarray(image), pose

    def _pose(self) -> CameraPose:
        # The scene's GL camera is what was actually drawn (for free and fixed cameras alike).
        gl = self._renderer.scene.camera[0]
        forward = np.array(gl.forward, dtype=float)
        up = np.array(gl.up, dtype=float)
        forward /= np.linalg.norm(forward)
        up /= np.linalg.norm(up)
        right = np.cross(forward, up)
        fovy = 2 * np.degrees(np.arctan(gl.frustum_top / gl.frustum_near))
        # A camera whose image-up points below the horizon is rolled past 90 degrees: rotate 180.
        rotated = bool(up[2] < 0)
        if rotated:
            up, right = -up, -right
        return CameraPose(np.array(gl.pos, dtype=float), forward, right, up, float(fovy),
                          self.width, self.height, rotated)

    def close(self) -> None:
        self._renderer.close()
