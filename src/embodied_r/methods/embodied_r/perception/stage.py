"""Embodied-R's perception stage as evaluation reaches it, through ``Method`` (``methods/__init__.py``).

Evaluation imports no module of this method: it names the method's parts by ``"module:attr"`` paths, and these
two functions are the ones that need more than a single existing function of the perception package:

- ``perceive_questions`` (``Method.perception_stage``): ``runner.perceive`` with its cache opened at the folder
  evaluation chooses, so ``eval --perception-backend`` resumes as ``embodied-r perceive`` does;
- ``keyframe_images`` (``Method.keyframe_images``): a video's key frames decoded and resized exactly as the
  runner sends them to the VLM, which the ``vlm_only`` baseline shows the same VLM at once.

Both import their dependencies when called, so naming them costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from embodied_r.core.records import QARecord
    from embodied_r.methods.embodied_r.perception.backends import PerceptionBackend
    from embodied_r.methods.embodied_r.perception.runner import PerceiveSummary


def perceive_questions(questions: Sequence[QARecord], qa_dir: Path, keyframes_dir: Path, backend: PerceptionBackend,
                       out_path: Path, cache_dir: Path) -> PerceiveSummary:
    """One ``Perception`` record per question appended to ``out_path`` (resumable: finished questions are read
    back, finished requests kept in the cache under ``cache_dir``); the summary counts what was done."""
    from embodied_r.methods.embodied_r.perception.cache import PerceptionCache
    from embodied_r.methods.embodied_r.perception.runner import perceive

    return perceive(questions, qa_dir, keyframes_dir, backend, PerceptionCache(cache_dir), out_path)


def keyframe_images(keyframes_dir: Path, video: Path, max_side: int | None) -> tuple[list[float], list[np.ndarray]]:
    """(timestamps, images): the key frames `embodied-r keyframes` chose for ``video`` (its file under
    ``keyframes_dir``), decoded and downscaled to ``max_side`` as the perception runner does. A missing or
    unreadable key-frame file or video raises ``DataFileError`` (a ``ValueError``) or ``OSError``."""
    from embodied_r.core.io import read_json
    from embodied_r.core.records import KeyframeSet
    from embodied_r.methods.embodied_r.keyframes.decode import read_frames_at
    from embodied_r.methods.embodied_r.perception.runner import keyframes_path, resize_to_max_side

    timestamps = KeyframeSet.from_dict(read_json(keyframes_path(keyframes_dir, video))).timestamps
    return timestamps, [resize_to_max_side(frame, max_side) for frame in read_frames_at(video, timestamps)]
