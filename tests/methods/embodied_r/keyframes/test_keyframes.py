"""Key-frame selection on real mp4 files: pans, hard cuts, static and blank shots, clamping, the
uniform baseline, agreement with the official pipeline, and matching identical to OpenCV's."""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest

from embodied_r.core.records import KeyframeSet
from embodied_r.methods.embodied_r.keyframes.decode import VideoError, sample_frames
from embodied_r.methods.embodied_r.keyframes.pipeline import mapped_ahead, prefetched
from embodied_r.methods.embodied_r.keyframes.selection import extract_keyframes, mutual_hamming_matches


def true_overlap(a: int, b: int, speed: float = 0.18, fps: float = 10, width: int = 320,
                 height: int = 240) -> float:
    """Overlap of frames a and b of the conftest pan, from the motion render_shots applies."""
    def position(index: int) -> tuple[float, float]:
        return speed * width * index / fps, (384 - height) / 2 * (1 + 0.3 * np.sin(index / (2 * fps)))

    (xa, ya), (xb, yb) = position(a), position(b)
    return max(0.0, width - abs(xa - xb)) * max(0.0, height - abs(ya - yb)) / (width * height)


def greedy_on_truth(samples: list[int], threshold: float = 0.5) -> list[int]:
    keys = [samples[0]]
    for index in samples[1:]:
        if true_overlap(keys[-1], index) < threshold:
            keys.append(index)
    return keys if keys[-1] == samples[-1] else keys + [samples[-1]]


@pytest.mark.parametrize("fixture", ["pan_mp4v", "pan_h264"])
def test_pan_key_frames_follow_the_true_camera_motion(fixture: str, request: pytest.FixtureRequest) -> None:
    keyframes = extract_keyframes(request.getfixturevalue(fixture))
    samples = list(range(0, 120, 10)) + [119]
    expected = greedy_on_truth(samples)
    assert [round(t * 10) for t in keyframes.timestamps] == expected
    assert len(expected) >= 4 and keyframes.meta["clamped"] is None
    for previous, frame in zip(expected, keyframes.frames[1:-1]):
        truth = true_overlap(previous, round(frame["timestamp"] * 10))
        assert frame["overlap"] == pytest.approx(truth, abs=0.02)
    assert [f["index"] for f in keyframes.frames] == [samples.index(i) for i in expected]
    assert (keyframes.width, keyframes.height, keyframes.sample_fps) == (320, 240, 1.0)
    assert keyframes.meta["sampled_frames"] == 13
    assert KeyframeSet.from_dict(keyframes.to_dict()) == keyframes


def test_hard_cut_yields_a_key_frame_right_after_it(cut_video: Path) -> None:
    keyframes = extract_keyframes(cut_video, min_frames=1)
    assert keyframes.timestamps == [0.0, 5.0, 8.9]  # the cut is at 4.5 s; 5.0 is the first sample after
    assert keyframes.frames[1]["overlap"] is None or keyframes.frames[1]["overlap"] < 0.1


@pytest.mark.parametrize("fixture", ["static_video", "blank_video"])
def test_static_shots_still_give_min_frames(fixture: str, request: pytest.FixtureRequest) -> None:
    keyframes = extract_keyframes(request.getfixturevalue(fixture))
    assert keyframes.meta["selected_before_clamp"] == 2  # first and last only: the view never changes
    assert keyframes.meta["clamped"] == "min"
    assert len(keyframes.frames) == 4
    assert keyframes.timestamps[0] == 0.0 and keyframes.timestamps == sorted(keyframes.timestamps)


def test_max_frames_clamp_keeps_first_and_last(pan_mp4v: Path) -> None:
    keyframes = extract_keyframes(pan_mp4v, sample_fps=4.0, threshold=0.95, max_frames=6)
    assert keyframes.meta["selected_before_clamp"] > 6
    assert keyframes.meta["clamped"] == "max"
    assert len(keyframes.timestamps) == 6
    assert keyframes.timestamps[0] == 0.0 and keyframes.timestamps[-1] == pytest.approx(11.9)


def test_uniform_strategy_spreads_max_frames(pan_mp4v: Path) -> None:
    keyframes = extract_keyframes(pan_mp4v, strategy="uniform", max_frames=5)
    assert keyframes.timestamps == [0.0, 3.0, 6.0, 9.0, 11.9]
    assert all(f["overlap"] is None for f in keyframes.frames)


def test_single_frame_video_gives_one_key_frame_and_a_warning(single_frame_video: Path) -> None:
    keyframes = extract_keyframes(single_frame_video)
    assert keyframes.timestamps == [0.0]
    assert any("fewer than min_frames" in w for w in keyframes.meta["warnings"])


def test_rotated_video_reports_upright_size(rotated_video: Path) -> None:
    keyframes = extract_keyframes(rotated_video)
    assert (keyframes.width, keyframes.height, keyframes.meta["rotation"]) == (240, 320, 90)


def test_bad_arguments_and_inputs_raise(tmp_path: Path, pan_mp4v: Path) -> None:
    with pytest.raises(ValueError, match="strategy"):
        extract_keyframes(pan_mp4v, strategy="sift")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_frames"):
        extract_keyframes(pan_mp4v, min_frames=5, max_frames=4)
    with pytest.raises(ValueError, match="threshold"):
        extract_keyframes(pan_mp4v, threshold=1.5)
    (tmp_path / "text.mp4").write_text("not a video")
    with pytest.raises(VideoError):
        extract_keyframes(tmp_path / "text.mp4")


@pytest.mark.parametrize("fixture", ["pan_mp4v", "pan_h264", "cut_video"])
def test_agrees_with_the_official_pipeline(fixture: str, request: pytest.FixtureRequest,
                                           official: ModuleType) -> None:
    path = request.getfixturevalue(fixture)
    baseline = official.official_keyframes(path)
    ours = extract_keyframes(path).timestamps
    left, right = {round(t, 3) for t in baseline}, {round(t, 3) for t in ours}
    assert len(left & right) / len(left | right) >= 0.9, (baseline, ours)


def test_numpy_matching_equals_opencv_crosscheck(pan_mp4v: Path) -> None:
    orb = cv2.ORB_create()
    matcher = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)
    frames = [g for _, g in sample_frames(pan_mp4v, 2.0, color="gray")]
    descriptors = [orb.detectAndCompute(g, None)[1] for g in frames]
    for a, b in zip(descriptors, descriptors[1:]):
        query, train = mutual_hamming_matches(a, b)
        expected = sorted((m.queryIdx, m.trainIdx) for m in matcher.match(a, b))
        assert list(zip(query.tolist(), train.tolist())) == expected


def test_prefetch_keeps_order_and_reraises_errors() -> None:
    assert list(prefetched(iter(range(50)), 3)) == list(range(50))

    def failing():
        yield 1
        raise VideoError("boom")

    consumed = []
    with pytest.raises(VideoError, match="boom"):
        for item in prefetched(failing(), 2):
            consumed.append(item)
    assert consumed == [1]
    stopped_early = prefetched(iter(range(1000)), 2)
    assert next(stopped_early) == 0
    stopped_early.close()  # must not hang on the producer


def test_mapped_ahead_keeps_order_reraises_errors_and_stops_early() -> None:
    def uneven_square(x: int) -> int:
        time.sleep(0.002 * (x % 3))  # later items often finish first on the worker threads
        return x * x

    assert list(mapped_ahead(uneven_square, range(40), threads=3, depth=5)) == [x * x for x in range(40)]
    assert list(mapped_ahead(uneven_square, range(5), threads=0, depth=0)) == [0, 1, 4, 9, 16]

    def fails_at_seven(x: int) -> int:
        if x == 7:
            raise VideoError("seven")
        return x

    consumed = []
    with pytest.raises(VideoError, match="seven"):
        for item in mapped_ahead(fails_at_seven, range(20), threads=2, depth=4):
            consumed.append(item)
    assert consumed == list(range(7))
    stopped_early = mapped_ahead(uneven_square, iter(range(1000)), threads=2, depth=4)
    assert next(stopped_early) == 0
    stopped_early.close()  # must not wait for the 999 others


@pytest.mark.parametrize("fixture", ["pan_mp4v", "pan_h264", "cut_video"])
def test_threads_do_not_change_the_key_frames(fixture: str, request: pytest.FixtureRequest) -> None:
    path = request.getfixturevalue(fixture)
    serial = extract_keyframes(path, prefetch=0, feature_threads=0)
    threaded = extract_keyframes(path, prefetch=4, feature_threads=3)
    assert threaded.frames == serial.frames
    assert len(serial.frames) >= 4


def test_featureless_frames_that_differ_are_new_views(tmp_path: Path) -> None:
    from synthetic_video import write_video

    frames = [np.full((120, 160, 3), 30 if i < 20 else 220, np.uint8) for i in range(40)]
    path = write_video(tmp_path / "flash.mp4", iter(frames), 10)
    keyframes = extract_keyframes(path, min_frames=1)
    assert keyframes.timestamps == [0.0, 2.0, 3.9]
