"""Headless MuJoCo rendering of egocentric frames with per-object visible pixel counts, and mp4 writing.

MuJoCo picks its GL backend from ``MUJOCO_GL`` when first imported, so ``import_mujoco`` sets it
(EGL by default, OSMesa when EGL cannot start) before the import. Segmentation runs on a second,
smaller renderer (``seg_scale`` times smaller per side, counts scaled back to full-resolution pixels):
visibility only needs object areas, and this keeps the RGB+segmentation pass above 100 frames/s.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.sim.world.mjcf import scene_to_mjcf
from embodied_r.sim.world.scenes import Scene

log = logging.getLogger(__name__)


class RenderError(RuntimeError):
    """Rendering could not start (no usable GL backend) or a frame failed."""


def import_mujoco() -> Any:
    """Import mujoco with a headless GL backend (``MUJOCO_GL`` wins if the user set it)."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    if os.environ["MUJOCO_GL"] == "osmesa":
        os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RenderError(
            "mujoco is not installed; install the simulator extra: pip install 'embodied-r[sim]'"
        ) from exc
    return mujoco


def camera_forward(yaw_deg: float, pitch_deg: float) -> np.ndarray:
    """Unit viewing direction for a yaw (counter-clockwise from +x) and pitch (negative looks down)."""
    yaw, pitch = math.radians(yaw_deg), math.radians(pitch_deg)
    return np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)])


class WorldRenderer:
    """Renders one scene from camera poses. Use as a context manager so GL contexts are released::

        with WorldRenderer(scene, 320, 240) as renderer:
            rgb, counts = renderer.render(pose)
    """

    def __init__(self, scene: Scene, width: int, height: int, seg_scale: int = 2, shadows: bool = False,
                 segmentation: bool = True) -> None:
        if width < 32 or height < 32 or width % 2 or height % 2:
            raise RenderError(f"resolution {width}x{height}: width and height must be even and >= 32 "
                              f"(H.264 needs even sizes)")
        if seg_scale < 1:
            raise RenderError(f"seg_scale must be >= 1, got {seg_scale}")
        mujoco = import_mujoco()
        self._mujoco = mujoco
        self.width, self.height, self.seg_scale = width, height, seg_scale
        self.model = mujoco.MjModel.from_xml_string(scene_to_mjcf(scene, width, height, shadows=shadows))
        self.data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, self.data)  # place bodies; without it every geom sits at the origin
        try:
            self._rgb = mujoco.Renderer(self.model, height, width)
        except Exception as exc:  # GL context creation errors come in many types
            raise RenderError(f"could not create a {os.environ.get('MUJOCO_GL')} GL context ({exc}); set "
                              f"MUJOCO_GL=osmesa with libosmesa6 installed, or MUJOCO_GL=egl with libegl1") from exc
        self._seg = None
        if segmentation:
            self._seg = mujoco.Renderer(self.model, max(16, height // seg_scale), max(16, width // seg_scale))
            self._seg.enable_segmentation_rendering()
        # geom id -> object index (-1 for floor, walls, ceiling)
        names = [self.model.body(b).name for b in range(self.model.nbody)]
        body_obj = np.array([int(n[3:]) if n.startswith("obj") else -1 for n in names])
        self._geom_obj = body_obj[self.model.geom_bodyid]
        self.labels = [o.label for o in scene.objects]
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FREE

    def _place_camera(self, pose: dict[str, Any]) -> None:
        pos = np.asarray(pose["position"], float)
        self._camera.lookat[:] = pos + camera_forward(pose["yaw"], pose["pitch"])
        self._camera.distance = 1.0
        self._camera.azimuth = float(pose["yaw"])
        self._camera.elevation = float(pose["pitch"])

    def render(self, pose: dict[str, Any]) -> tuple[np.ndarray, dict[str, int]]:
        """RGB frame (H, W, 3) uint8 and visible pixel counts per object label (objects with 0 omitted)."""
        self._place_camera(pose)
        self._rgb.update_scene(self.data, self._camera)
        rgb = self._rgb.render()
        counts: dict[str, int] = {}
        if self._seg is not None:
            self._seg.update_scene(self.data, self._camera)
            seg = self._seg.render()[..., 0]
            geom_ids = seg[seg >= 0]
            objects = self._geom_obj[geom_ids]
            objects = objects[objects >= 0]
            if objects.size:
                per_obj = np.bincount(objects, minlength=len(self.labels))
                # scale to full-resolution pixels
                area = (self.width * self.height) / (seg.shape[0] * seg.shape[1])
                counts = {self.labels[i]: int(round(c * area)) for i, c in enumerate(per_obj) if c > 0}
        return rgb, counts

    def close(self) -> None:
        for renderer in (self._rgb, self._seg):
            if renderer is not None:
                renderer.close()
        self._seg = None

    def __enter__(self) -> WorldRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class VideoWriter:
    """H.264 mp4 writer (PyAV); writes to a temporary name and renames on close, so a killed run never
    leaves a truncated video under the final name. The same frames give the same bytes."""

    def __init__(self, path: str | os.PathLike[str], width: int, height: int, fps: float, crf: int = 23) -> None:
        from fractions import Fraction

        import av

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.stem}.tmp.mp4")
        self._container = av.open(str(self._tmp), "w")
        self._stream = self._container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000))
        self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, "yuv420p"
        # MB-tree off: with it, x264 wrote different bytes for the same frames from one encode to the next
        # (3 and 6 distinct files in 6 encodes of one clip at 320x240 and 160x120), and the key frames chosen
        # from the decoded pixels, with every later stage, changed between reruns.
        self._stream.options = {"preset": "veryfast", "crf": str(crf), "x264-params": "mbtree=0"}
        self._av = av

    def write(self, rgb: np.ndarray) -> None:
        frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        for packet in self._stream.encode(frame):
            self._container.mux(packet)

    def close(self) -> None:
        for packet in self._stream.encode():
            self._container.mux(packet)
        self._container.close()
        os.replace(self._tmp, self.path)
