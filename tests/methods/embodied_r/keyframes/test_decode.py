"""Decoding by timestamp: metadata, the right frames (checked against OpenCV decoding every frame),
variable frame rate, rotation, and every kind of bad input."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest
from synthetic_video import Shot, render_shots, textured_world, write_video

from embodied_r.methods.embodied_r.keyframes.decode import (
    DecodeReport,
    VideoError,
    probe,
    read_frames_at,
    sample_frames,
)


@pytest.fixture
def opencv_frames(official: ModuleType) -> Callable[[Path], list[np.ndarray]]:
    """Reference decoding: every frame, read by OpenCV."""
    return official.read_every_frame


@pytest.mark.parametrize("fixture", ["pan_mp4v", "pan_h264"])
def test_probe_reports_the_written_metadata(fixture: str, request: pytest.FixtureRequest) -> None:
    info = probe(request.getfixturevalue(fixture))
    assert (info.width, info.height, info.rotation) == (320, 240, 0)
    assert info.fps == pytest.approx(10.0)
    assert info.frame_count == 120
    assert info.duration == pytest.approx(12.0, abs=0.11)
    assert info.codec == ("mpeg4" if fixture == "pan_mp4v" else "h264")


@pytest.mark.parametrize("fixture", ["pan_mp4v", "pan_h264"])
def test_sampled_frames_are_the_frames_at_those_times(
    fixture: str, request: pytest.FixtureRequest, opencv_frames: Callable[[Path], list[np.ndarray]]
) -> None:
    # Selective decoding (GOP skipping for mp4v, skip_frame=NONREF for B-frames) must return exactly
    # the frames a full decode gives at indices 0, 10, 20, ... plus the last one.
    path = request.getfixturevalue(fixture)
    reference = opencv_frames(path)
    report = DecodeReport()
    sampled = list(sample_frames(path, 1.0, report=report))
    assert [round(t, 3) for t, _ in sampled] == [float(s) for s in range(12)] + [11.9]
    for timestamp, frame in sampled:
        expected = reference[round(timestamp * 10)]
        assert frame.shape == (240, 320, 3)
        assert np.abs(frame.astype(int) - expected).mean() < 2.0, timestamp
    assert report.frames_decoded < len(reference)  # it really skipped work
    assert report.warnings == []


def test_short_gop_h264_is_decoded_only_up_to_each_kept_frame(
    tmp_path: Path, opencv_frames: Callable[[Path], list[np.ndarray]]
) -> None:
    # 20-frame GOPs with B-frames, sampled every 10th frame without the last: each GOP is needed up to
    # its second kept frame only (39 of 120 frames decoded here; 66 when whole GOPs were decoded).
    import av

    path = tmp_path / "short_gop.mp4"
    frames = render_shots([Shot(textured_world(400, 900, 5), 12, 0.18)], 320, 240, 10)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        stream.codec_context.gop_size = 20
        stream.options = {"preset": "veryfast", "bf": "3", "sc_threshold": "0"}
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="bgr24")))
        container.mux(stream.encode(None))
    reference = opencv_frames(path)
    report = DecodeReport()
    sampled = list(sample_frames(path, 1.0, include_last=False, report=report))
    assert [round(t, 3) for t, _ in sampled] == [float(s) for s in range(12)]
    for timestamp, frame in sampled:
        assert np.abs(frame.astype(int) - reference[round(timestamp * 10)]).mean() < 2.0, timestamp
    assert report.frames_decoded <= 0.45 * len(reference)
    assert report.warnings == []


@pytest.mark.parametrize(("name", "encoder", "pixel_format", "options"), [
    ("hevc_10bit.mp4", "libx265", "yuv420p10le", {"x265-params": "log-level=error"}),  # phones, HDR
    ("hevc_open_gop.mp4", "libx265", "yuv420p", {"x265-params": "log-level=error:open-gop=1"}),
    ("vp9.webm", "libvpx-vp9", "yuv420p", {}),
    ("av1.mkv", "libsvtav1", "yuv420p", {}),
])
def test_other_codecs_and_containers_give_the_right_frames_and_key_frames(
    tmp_path: Path, opencv_frames: Callable[[Path], list[np.ndarray]], name: str, encoder: str,
    pixel_format: str, options: dict[str, str],
) -> None:
    import av

    from embodied_r.methods.embodied_r.keyframes.selection import extract_keyframes

    if encoder not in av.codecs_available:
        pytest.skip(f"this PyAV build has no {encoder} encoder")
    path = tmp_path / name
    frames = render_shots([Shot(textured_world(400, 900, 5), 12, 0.18)], 320, 240, 10)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(encoder, rate=10)
        stream.width, stream.height, stream.pix_fmt = 320, 240, pixel_format
        stream.codec_context.gop_size = 30
        stream.options = options
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="bgr24")))
        container.mux(stream.encode(None))
    report = DecodeReport()
    sampled = list(sample_frames(path, 1.0, report=report))
    assert [round(t, 3) for t, _ in sampled] == [float(s) for s in range(12)] + [11.9]
    assert report.warnings == []
    reference = opencv_frames(path)
    if reference:  # OpenCV's own FFmpeg may lack the decoder (AV1); PyAV's has it
        for timestamp, frame in sampled:
            assert np.abs(frame.astype(int) - reference[round(timestamp * 10)]).mean() < 3.0, timestamp
    # The pan crosses half a frame every ~2.8 s: key frames every 3 s, as on the mp4v and H.264 pans.
    assert extract_keyframes(path).timestamps == [0.0, 3.0, 6.0, 9.0, 11.9]


def test_decode_plan_stops_each_closed_gop_at_its_last_kept_frame() -> None:
    from embodied_r.methods.embodied_r.keyframes._pyav_backend import _decode_plan, _Packet

    # Decode order of two closed GOPs with B-frames, shown as I0 B1 B2 P3 B4 B5 P6 | I7 B8 B9 P10.
    order = [(0, True), (3, False), (1, False), (2, False), (6, False), (4, False), (5, False),
             (7, True), (10, False), (8, False), (9, False)]
    packets = [_Packet(pts, key) for pts, key in order]
    assert _decode_plan(packets, {1}) == ([True] * 3 + [False] * 8, True)
    assert _decode_plan(packets, {4, 8}) == ([True] * 6 + [False] + [True] * 3 + [False], True)
    # Open GOP: the key frame I9 is followed in decode order by B7, B8 shown before it (they
    # reference the previous GOP), so nothing can be skipped safely.
    open_gop = order[:7] + [(9, True), (7, False), (8, False)]
    assert _decode_plan([_Packet(p, k) for p, k in open_gop], {1}) == ([True] * 10, True)
    # No reordering (GOPs 0-3 and 4-7): no skip_frame, same rule.
    plain = [_Packet(pts, pts % 4 == 0) for pts in range(8)]
    assert _decode_plan(plain, {2, 4}) == ([True, True, True, False, True, False, False, False], False)


def test_gray_frames_match_bgr_converted(pan_mp4v: Path) -> None:
    bgr = [f for _, f in sample_frames(pan_mp4v, 0.5)]
    gray = [f for _, f in sample_frames(pan_mp4v, 0.5, color="gray")]
    assert len(bgr) == len(gray) == 7
    for colour, luma in zip(bgr, gray):
        assert luma.shape == (240, 320)
        assert np.abs(cv2.cvtColor(colour, cv2.COLOR_BGR2GRAY).astype(int) - luma).mean() < 2.0


def test_higher_sample_rate_and_opencv_backend_agree(pan_mp4v: Path) -> None:
    ours = [(round(t, 3), f) for t, f in sample_frames(pan_mp4v, 2.0)]
    fallback = [(round(t, 3), f) for t, f in sample_frames(pan_mp4v, 2.0, backend="opencv")]
    assert [t for t, _ in ours] == [t for t, _ in fallback] == [k / 2 for k in range(24)] + [11.9]
    for (_, a), (_, b) in zip(ours, fallback):
        assert np.abs(a.astype(int) - b).mean() < 2.0
    assert probe(pan_mp4v, backend="opencv").frame_count == 120


def test_variable_frame_rate_picks_the_nearest_frame_by_time(vfr_video: tuple[Path, list[float]]) -> None:
    path, times = vfr_video
    sampled = [t for t, _ in sample_frames(path, 1.0, include_last=False)]
    expected = []
    for target in range(int(times[-1]) + 1):
        nearest = min(times, key=lambda t: (abs(t - target), t))
        if nearest not in expected:
            expected.append(nearest)
    assert sampled == pytest.approx(expected, abs=1e-6)


def test_read_frames_at_returns_the_sampled_frames_in_the_order_asked(pan_h264: Path) -> None:
    sampled = dict(sample_frames(pan_h264, 1.0))
    asked = [7.0, 2.0, 11.9, 7.0]
    frames = read_frames_at(pan_h264, asked)
    for timestamp, frame in zip(asked, frames):
        assert np.array_equal(frame, sampled[min(sampled, key=lambda t: abs(t - timestamp))])
    with pytest.raises(VideoError, match="no frame within"):
        read_frames_at(pan_h264, [30.0])
    assert read_frames_at(pan_h264, []) == []


def test_rotated_video_comes_out_upright(
    rotated_video: Path, opencv_frames: Callable[[Path], list[np.ndarray]]
) -> None:
    info = probe(rotated_video)
    assert (info.rotation, info.width, info.height) == (90, 240, 320)
    _, frame = next(iter(sample_frames(rotated_video)))
    assert frame.shape == (320, 240, 3)
    # Rotating the stored image 90 degrees counter-clockwise moves its top-left corner to bottom-left.
    assert frame[-30:, :30, 2].mean() > 200 and frame[:30, :30, 2].mean() < 100
    upright_by_opencv = opencv_frames(rotated_video)[0]  # OpenCV applies the rotation itself
    assert np.abs(frame.astype(int) - upright_by_opencv).mean() < 3.0


def test_missing_empty_and_non_video_files_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(VideoError, match="file not found"):
        probe(tmp_path / "absent.mp4")
    (tmp_path / "empty.mp4").write_bytes(b"")
    with pytest.raises(VideoError, match="empty"):
        list(sample_frames(tmp_path / "empty.mp4"))
    (tmp_path / "notes.mp4").write_text("this is not a video\n" * 50)
    with pytest.raises(VideoError, match="cannot open as a video"):
        probe(tmp_path / "notes.mp4")
    with pytest.raises(VideoError, match="not a file"):
        probe(tmp_path)


def test_zero_frame_video_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "zero.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 64))
    writer.release()
    with pytest.raises(VideoError, match="no video stream|no frames"):
        list(sample_frames(path))


def test_single_frame_video(single_frame_video: Path) -> None:
    sampled = list(sample_frames(single_frame_video))
    assert [t for t, _ in sampled] == [0.0]
    assert probe(single_frame_video).frame_count == 1


def test_truncated_video_with_index_first_decodes_what_is_there(
    tmp_path: Path, pan_mp4v: Path, opencv_frames: Callable[[Path], list[np.ndarray]]
) -> None:
    frames = opencv_frames(pan_mp4v)
    whole = write_video(tmp_path / "faststart.mp4", iter(frames), 10, "mp4v", faststart=True)
    cut = tmp_path / "cut.mp4"
    data = whole.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])
    report = DecodeReport()
    sampled = [t for t, _ in sample_frames(cut, 1.0, report=report)]
    assert 4 <= len(sampled) < 12
    assert sampled[:4] == [0.0, 1.0, 2.0, 3.0]
    assert any("truncated" in w or "corrupt" in w or "could not be decoded" in w for w in report.warnings)


def test_truncated_video_without_index_says_so(tmp_path: Path, pan_mp4v: Path) -> None:
    cut = tmp_path / "cut.mp4"
    data = pan_mp4v.read_bytes()  # OpenCV writes the index (moov) at the end
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoError, match="truncated"):
        probe(cut)


def test_corrupt_bytes_in_the_middle_still_give_frames(tmp_path: Path, pan_mp4v: Path) -> None:
    broken = tmp_path / "broken.mp4"
    shutil.copy(pan_mp4v, broken)
    data = bytearray(broken.read_bytes())
    rng = np.random.default_rng(0)
    start = len(data) // 3
    data[start : start + 20000] = rng.integers(0, 256, 20000, dtype=np.uint8).tobytes()
    broken.write_bytes(bytes(data))
    sampled = list(sample_frames(broken, 1.0))
    assert len(sampled) >= 8  # most of the video survives a damaged stretch
    assert all(f.shape == (240, 320, 3) for _, f in sampled)


def test_raw_stream_without_timestamps_is_decoded_sequentially(tmp_path: Path) -> None:
    # A bare H.264 stream has no container timestamps: frames are timed by FFmpeg's 25 fps guess.
    import av

    path = tmp_path / "raw.h264"
    with av.open(str(path), "w", format="h264") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for index in range(60):
            image = np.full((64, 64, 3), index * 4, np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        container.mux(stream.encode(None))
    sampled = list(sample_frames(path, 1.0, color="gray"))
    assert [round(t, 2) for t, _ in sampled] == [0.0, 1.0, 2.0, 2.36]
    brightness = [int(round(float(frame.mean()) / 4)) for _, frame in sampled]
    assert brightness == [0, 25, 50, 59]  # frame k was painted k * 4
