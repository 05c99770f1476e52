"""A straightforward re-implementation of the official Embodied-R key-frame pipeline (the baseline).

Written from the description of ``train/conver_format/utils.py`` (Embodied-R.code, commit bea3ef4),
not copied. Steps, as the official code does them:

1. read every frame with ``cv2.VideoCapture`` (decoded *and* converted to BGR) and keep frame indices
   ``0, int(fps), 2*int(fps), ...`` plus the last frame;
2. write those frames to a temporary 1-fps ``mp4v`` file and read it back (the official code caches
   that file and the perception stage reads it);
3. walk the frames: ORB (OpenCV defaults) on *both* frames of every (last key frame, current) pair,
   brute-force Hamming matching with cross-check sorted by distance, a RANSAC (5.0 px) homography
   current -> key frame when there are more than 10 matches, and the overlap measured by rasterising
   both outlines with ``cv2.fillPoly``; keep the frame when the overlap is below the threshold or no
   homography exists; always keep the first and last frames;
4. clamp the count to [min, max] with the official even resampling.

Only the sampled frames are kept in memory (the official code holds every frame; keeping fewer only
makes this baseline faster). Returns key-frame timestamps in seconds (frame index / fps).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import cv2
import numpy as np

from embodied_r.methods.embodied_r.keyframes.sampling import constrained_sampling


def downsample(path: Path) -> tuple[list[np.ndarray], list[int], float]:
    capture = cv2.VideoCapture(str(path))
    fps = capture.get(cv2.CAP_PROP_FPS)
    step = max(1, int(fps))
    kept: list[np.ndarray] = []
    indices: list[int] = []
    last: np.ndarray | None = None
    index = -1
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        index += 1
        last = frame
        if index % step == 0:
            kept.append(frame)
            indices.append(index)
    capture.release()
    if last is not None and indices and indices[-1] != index:
        kept.append(last)
        indices.append(index)
    return kept, indices, fps


def roundtrip_mp4(frames: list[np.ndarray], folder: Path) -> list[np.ndarray]:
    height, width = frames[0].shape[:2]
    target = folder / "keyframes_1fps.mp4"
    writer = cv2.VideoWriter(str(target), cv2.VideoWriter_fourcc(*"mp4v"), 1, (width, height))
    for frame in frames:
        writer.write(frame)
    writer.release()
    return read_every_frame(target)


def read_every_frame(path: Path) -> list[np.ndarray]:
    """Every frame of a video as BGR, read with OpenCV (also the tests' reference decoder)."""
    capture = cv2.VideoCapture(str(path))
    frames: list[np.ndarray] = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def rasterised_overlap(quad: np.ndarray, width: int, height: int) -> float:
    canvas_ref = np.zeros((height, width), np.uint8)
    canvas_cur = np.zeros((height, width), np.uint8)
    rect = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.int32)
    cv2.fillPoly(canvas_ref, [rect], 1)
    cv2.fillPoly(canvas_cur, [quad.reshape(-1, 2).astype(np.int32)], 1)
    return float(np.sum(cv2.bitwise_and(canvas_ref, canvas_cur))) / float(width * height)


def greedy_select(frames: list[np.ndarray], threshold: float) -> list[int]:
    orb = cv2.ORB_create()
    matcher = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)
    height, width = frames[0].shape[:2]
    corners = np.float32([[0, 0], [width, 0], [width, height], [0, height]]).reshape(-1, 1, 2)
    keys = [0]
    reference = frames[0]
    for index in range(1, len(frames)):
        # The baseline recomputes the key frame's features for every pair, as the official code does.
        ref_kp, ref_des = orb.detectAndCompute(cv2.cvtColor(reference, cv2.COLOR_BGR2GRAY), None)
        cur_kp, cur_des = orb.detectAndCompute(cv2.cvtColor(frames[index], cv2.COLOR_BGR2GRAY), None)
        if ref_des is None or cur_des is None:
            keys.append(index)
            reference = frames[index]
            continue
        matches = sorted(matcher.match(ref_des, cur_des), key=lambda m: m.distance)
        if len(matches) <= 10:
            keys.append(index)
            reference = frames[index]
            continue
        ref_pts = np.float32([ref_kp[m.queryIdx].pt for m in matches]).reshape(-1, 1, 2)
        cur_pts = np.float32([cur_kp[m.trainIdx].pt for m in matches]).reshape(-1, 1, 2)
        homography, _ = cv2.findHomography(cur_pts, ref_pts, cv2.RANSAC, 5.0)
        if homography is None:
            keys.append(index)
            reference = frames[index]
            continue
        quad = cv2.perspectiveTransform(corners, homography)
        if rasterised_overlap(quad, width, height) < threshold:
            keys.append(index)
            reference = frames[index]
    if keys[-1] != len(frames) - 1:
        keys.append(len(frames) - 1)
    return keys


def official_keyframes(path: str | Path, threshold: float = 0.5, min_frames: int = 4,
                       max_frames: int = 32) -> list[float]:
    """Key-frame timestamps (seconds) chosen by the official-style pipeline."""
    frames, indices, fps = downsample(Path(path))
    if not frames:
        return []
    with tempfile.TemporaryDirectory() as folder:
        frames = roundtrip_mp4(frames, Path(folder))
    keys = greedy_select(frames, threshold)
    if len(keys) < min_frames:
        keys = constrained_sampling(list(range(len(frames))), min_frames)
    elif len(keys) > max_frames:
        keys = constrained_sampling(keys, max_frames)
    return [indices[k] / fps for k in keys if k < len(indices)]
