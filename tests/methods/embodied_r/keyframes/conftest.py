"""Small real video files made in the tests (320x240 at 10 fps like the synthetic worlds), shared by
the whole session so that each is encoded once."""

from __future__ import annotations

import importlib.util
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from synthetic_video import Shot, render_shots, textured_world, write_video

WIDTH, HEIGHT, FPS = 320, 240, 10
REPO_ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="session")
def official() -> ModuleType:
    """``benchmarks/official_keyframes.py``: the official-pipeline baseline and an OpenCV frame reader."""
    spec = importlib.util.spec_from_file_location("official_keyframes",
                                                  REPO_ROOT / "benchmarks" / "official_keyframes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def video_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("videos")


def _pan(seconds: float, speed: float, seed: int) -> list[Shot]:
    world = textured_world(int(HEIGHT * 1.6), int(WIDTH * (1.3 + speed * seconds)) + 2, seed)
    return [Shot(world, seconds, speed)]


@pytest.fixture(scope="session")
def pan_mp4v(video_dir: Path) -> Path:
    """12 s pan at 0.18 frame widths per second: the overlap falls below 0.5 every 3 s, with a margin
    of at least 0.05 at every 1-fps sample (so the expected key frames are not borderline)."""
    return write_video(video_dir / "pan_mp4v.mp4", render_shots(_pan(12, 0.18, 1), WIDTH, HEIGHT, FPS), FPS)


@pytest.fixture(scope="session")
def pan_h264(video_dir: Path) -> Path:
    """The same pan in H.264 with B-frames (reordered decoding)."""
    frames = render_shots(_pan(12, 0.18, 1), WIDTH, HEIGHT, FPS)
    return write_video(video_dir / "pan_h264.mp4", frames, FPS, "h264")


@pytest.fixture(scope="session")
def cut_video(video_dir: Path) -> Path:
    """4.5 s static on one room, a hard cut, 4.5 s static on another."""
    rooms = [textured_world(HEIGHT + 40, WIDTH + 40, seed) for seed in (2, 3)]
    shots = [Shot(rooms[0], 4.5), Shot(rooms[1], 4.5)]
    return write_video(video_dir / "cut.mp4", render_shots(shots, WIDTH, HEIGHT, FPS), FPS)


@pytest.fixture(scope="session")
def static_video(video_dir: Path) -> Path:
    shots = [Shot(textured_world(HEIGHT + 40, WIDTH + 40, 4), 8.0)]
    return write_video(video_dir / "static.mp4", render_shots(shots, WIDTH, HEIGHT, FPS), FPS)


@pytest.fixture(scope="session")
def blank_video(video_dir: Path) -> Path:
    """A featureless grey wall: ORB finds nothing to match."""
    frames = (np.full((HEIGHT, WIDTH, 3), 128, np.uint8) for _ in range(int(6 * FPS)))
    return write_video(video_dir / "blank.mp4", frames, FPS)


@pytest.fixture(scope="session")
def rotated_video(video_dir: Path) -> Path:
    """A phone-style video: stored 320x240 with a 90 degree display rotation, marker at top-left."""
    def frames():
        for index in range(int(3 * FPS)):
            image = np.full((HEIGHT, WIDTH, 3), 40, np.uint8)
            image[:60, :80] = (0, 0, 255)  # red block in the stored top-left corner
            image[100:140, 100 + index: 140 + index] = 255
            yield image
    return write_video(video_dir / "rotated.mp4", frames(), FPS, "h264", rotation=90)


@pytest.fixture(scope="session")
def single_frame_video(video_dir: Path) -> Path:
    return write_video(video_dir / "single.mp4", render_shots(_pan(0.1, 0.0, 5), WIDTH, HEIGHT, FPS), FPS)


@pytest.fixture(scope="session")
def vfr_video(video_dir: Path) -> tuple[Path, list[float]]:
    """Variable frame rate: irregular gaps of 30-200 ms; returns the file and its frame times."""
    import av

    rng = np.random.default_rng(0)
    path = video_dir / "vfr.mp4"
    times: list[float] = []
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        millis = 0
        for index in range(40):
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), index * 5, np.uint8), format="bgr24")
            frame.pts, frame.time_base = millis, Fraction(1, 1000)
            times.append(millis / 1000)
            container.mux(stream.encode(frame))
            millis += int(rng.integers(30, 200))
        container.mux(stream.encode(None))
    return path, times
