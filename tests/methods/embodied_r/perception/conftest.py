"""Fixtures for perception tests: a tiny dataset of real video files, key frames and questions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from embodied_r.core.records import KeyframeSet, QARecord

VIDEO_SECONDS = 4
VIDEO_FPS = 5


@dataclass
class PerceptionDataset:
    root: Path
    qa: Path
    keyframes: Path
    questions: list[QARecord]
    timestamps: list[float]


def write_video(path: Path, seed: int, width: int = 64, height: int = 48) -> None:
    """A few seconds of a textured image panning sideways (mp4v), so frames differ from each other."""
    import cv2

    rng = np.random.default_rng(seed)
    world = rng.integers(0, 255, size=(height, width * 3, 3), dtype=np.uint8)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), VIDEO_FPS, (width, height))
    assert writer.isOpened(), "OpenCV cannot write mp4v here"
    for i in range(VIDEO_SECONDS * VIDEO_FPS):
        writer.write(np.ascontiguousarray(world[:, i * 4:i * 4 + width]))
    writer.release()


def make_dataset(root: Path, videos: int = 2, per_video: int = 3) -> PerceptionDataset:
    (root / "videos").mkdir(parents=True)
    (root / "kf").mkdir()
    timestamps = [0.0, 1.0, 2.0, 3.0]
    questions = []
    for v in range(videos):
        video = root / "videos" / f"clip{v}.mp4"
        write_video(video, seed=v)
        frames = [{"index": i, "timestamp": t, "overlap": None if i == 0 else 0.4} for i, t in enumerate(timestamps)]
        kfs = KeyframeSet(video=str(video), sample_fps=1.0, frames=frames, width=64, height=48)
        (root / "kf" / f"clip{v}.keyframes.json").write_text(json.dumps(kfs.to_dict()))
        for q in range(per_video):
            questions.append(QARecord(
                id=f"v{v}q{q}", source="test", task="object_rel_direction", video=f"videos/clip{v}.mp4",
                question=f"Standing by the chair and facing the table {q}, where is the door?",
                options=["A. left", "B. right", "C. back"], answer="B"))
    qa = root / "questions.jsonl"
    qa.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in questions))
    return PerceptionDataset(root, qa, root / "kf", questions, timestamps)


@pytest.fixture
def dataset(tmp_path: Path) -> PerceptionDataset:
    return make_dataset(tmp_path / "data")


@pytest.fixture
def dataset_factory():
    """``make_dataset`` itself, for tests that need a bigger or second dataset."""
    return make_dataset


SHARED_DATA = Path(__file__).resolve().parents[4] / ".." / "shared" / "data"


@pytest.fixture
def urban_processed() -> list[dict]:
    """The 14 real official Embodied-R prompts (UrbanVideo-Bench) from ../shared/data, or a skip."""
    path = SHARED_DATA / "embodied_r_processed" / "urban_original_test.json"
    if not path.is_file():
        pytest.skip("reference data embodied_r_processed/urban_original_test.json not present")
    return json.loads(path.read_text(encoding="utf-8"))
