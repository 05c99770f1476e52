"""PyAV decoding: the two-pass, decode-only-what-is-needed reader behind ``decode`` in this package
(the module docstring there explains the plan). Imported lazily: PyAV is an optional dependency."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.methods.embodied_r.keyframes.frames import Color, DecodeReport, VideoError, VideoInfo, rotate_upright
from embodied_r.methods.embodied_r.keyframes.sampling import pick_nearest, select_indices

# One decoding thread: on H.264 with B-frames FFmpeg's frame threading made key-frame extraction
# 1.3x slower (benchmarks/keyframes.py, row "ours, FFmpeg threads"), because ORB runs on the other
# cores meanwhile (0 lets FFmpeg pick one thread per core).
DECODER_THREADS = 1


def probe(path: Path) -> VideoInfo:
    container, stream = _open(path)
    try:
        return _probe_open(path, container, stream)
    finally:
        container.close()


def frames(
    path: Path, targets: Iterable[float], include_last: bool, color: Color, report: DecodeReport
) -> Iterator[tuple[float, np.ndarray]]:
    packets = _demux_index(path, report)
    if packets is None:  # some packet has no timestamp: decode everything, pick on the fly
        yield from _frames_sequential(path, targets, include_last, color, report)
        return
    if not packets:
        raise VideoError(f"{path}: the video stream has no frames")
    yield from _frames_planned(path, packets, targets, include_last, color, report)


def _open(path: Path) -> tuple[Any, Any]:
    import av

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, UnicodeDecodeError) as exc:
        hint = ("the index (moov atom) is missing: the file is probably truncated (an interrupted "
                "download or recording); download or export it again"
                if "moov" in str(exc) else "it is not a video FFmpeg can read, or it is corrupt")
        raise VideoError(f"{path}: cannot open as a video: {hint} ({exc})") from exc
    if not container.streams.video:
        container.close()
        raise VideoError(f"{path}: contains no video stream (no frames, or audio/data only)")
    stream = container.streams.video[0]
    # With DECODER_THREADS != 1, frame threading delays the output; harmless, because kept frames are
    # matched by pts and the decoder is flushed at the end.
    stream.codec_context.thread_type = "AUTO"
    stream.codec_context.thread_count = DECODER_THREADS
    return container, stream


def _probe_open(path: Path, container: Any, stream: Any) -> VideoInfo:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    fps = float(rate) if rate else 0.0
    if stream.duration is not None and stream.time_base is not None:
        duration = float(stream.duration * stream.time_base)
    elif container.duration is not None:
        duration = container.duration / 1_000_000
    else:
        duration = 0.0
    frame_count = int(stream.frames) if stream.frames else int(round(duration * fps))
    rotation = _first_frame_rotation(container, stream)
    width, height = stream.codec_context.width, stream.codec_context.height
    if rotation % 180:
        width, height = height, width
    return VideoInfo(str(path), fps, frame_count, duration, width, height, rotation,
                     stream.codec_context.name, "pyav")


def _first_frame_rotation(container: Any, stream: Any) -> int:
    # FFmpeg attaches the container's display matrix to decoded frames; decoding one frame is cheap.
    import av

    try:
        for frame in container.decode(stream):
            return _normalise_rotation(frame.rotation)
    except av.error.FFmpegError:
        pass
    return 0


def _normalise_rotation(degrees: float) -> int:
    return int(round(degrees / 90.0)) * 90 % 360


@dataclass(frozen=True)
class _Packet:
    pts: int
    keyframe: bool


def _demux_index(path: Path, report: DecodeReport) -> list[_Packet] | None:
    """Every frame packet's pts and key flag, in decode order, without decoding (pass 1)."""
    import av

    container, stream = _open(path)
    packets: list[_Packet] = []
    try:
        for packet in container.demux(stream):
            if packet.size == 0:
                continue  # the demuxer's end-of-stream marker
            if packet.pts is None:
                return None
            packets.append(_Packet(int(packet.pts), bool(packet.is_keyframe)))
        expected = int(stream.frames or 0)
        if expected > len(packets):
            report.warn(f"{path}: only {len(packets)} of the {expected} frames its index lists are "
                        "present; the file looks truncated: using the frames that are there")
    except av.error.FFmpegError as exc:
        report.warn(f"{path}: reading stopped after {len(packets)} frames ({exc}); the file looks "
                    "truncated or corrupt: using the frames before that point")
    finally:
        container.close()
    return packets


def _frames_planned(path: Path, packets: list[_Packet], targets: Iterable[float], include_last: bool, color: Color,
                    report: DecodeReport) -> Iterator[tuple[float, np.ndarray]]:
    """Pass 2: choose frames from the packet timestamps, then decode only what they depend on."""
    container, stream = _open(path)
    try:
        time_base = float(stream.time_base)
        presented = sorted(p.pts for p in packets)
        first = presented[0]
        times = [(pts - first) * time_base for pts in presented]
        chosen_pts = {presented[i] for i in select_indices(times, targets, include_last=include_last)}
        need, skip_nonref = _decode_plan(packets, chosen_pts)
        codec = stream.codec_context
        position = 0
        for packet in _demux_safely(container, stream, report):
            index = position
            position += 1
            if index >= len(need) or not need[index]:
                continue
            if skip_nonref:
                codec.skip_frame = "DEFAULT" if packet.pts in chosen_pts else "NONREF"
            for frame in _decode_packet(codec, packet, path, report):
                if frame.pts in chosen_pts:
                    chosen_pts.discard(frame.pts)
                    yield (frame.pts - first) * time_base, _to_array(frame, color)
        codec.skip_frame = "DEFAULT"
        for frame in _decode_packet(codec, None, path, report):
            if frame.pts in chosen_pts:
                chosen_pts.discard(frame.pts)
                yield (frame.pts - first) * time_base, _to_array(frame, color)
        if chosen_pts:
            report.warn(f"{path}: {len(chosen_pts)} sampled frame(s) could not be decoded (corrupt data)")
    finally:
        container.close()


def _decode_plan(packets: list[_Packet], chosen_pts: set[int]) -> tuple[list[bool], bool]:
    """Which packets (decode order) must be decoded, and whether to drop unneeded non-reference
    frames with ``skip_frame``. See the module docstring for the rules."""
    n = len(packets)
    reordered = any(b.pts < a.pts for a, b in zip(packets, packets[1:]))
    gop_of = []
    gop = -1
    for index, packet in enumerate(packets):
        if packet.keyframe or index == 0:
            gop += 1
        gop_of.append(gop)
    if reordered and _has_open_gop(packets, gop_of):
        return [True] * n, True
    # In a closed GOP a frame only references frames decoded before it, so a chosen frame needs its
    # GOP from the key frame up to its own packet in decode order; the rest of the GOP is skipped.
    need = [False] * n
    for index in range(n - 1, -1, -1):
        if packets[index].pts in chosen_pts:
            need[index] = True
        elif index + 1 < n and need[index + 1] and gop_of[index + 1] == gop_of[index]:
            need[index] = True
    return need, reordered


def _has_open_gop(packets: list[_Packet], gop_of: list[int]) -> bool:
    # A frame decoded after a key frame but shown before it references the previous GOP.
    key_pts: dict[int, int] = {}
    for index, packet in enumerate(packets):
        if packet.keyframe:
            key_pts[gop_of[index]] = packet.pts
        elif gop_of[index] in key_pts and packet.pts < key_pts[gop_of[index]]:
            return True
    return False


def _frames_sequential(
    path: Path, targets: Iterable[float], include_last: bool, color: Color, report: DecodeReport
) -> Iterator[tuple[float, np.ndarray]]:
    """Fallback for streams without packet timestamps: decode everything, pick while decoding."""
    container, stream = _open(path)
    try:
        fps = float(stream.average_rate or stream.guessed_rate or 25)
        seen: list[tuple[float, Any]] = []  # [first frame, latest frame], as (time, frame)

        def timed() -> Iterator[tuple[float, Any]]:
            for count, frame in enumerate(_all_frames(container, stream, path, report)):
                time = frame.time if frame.time is not None else count / fps
                if not seen:
                    seen.append((time, frame))
                current = (time - seen[0][0], frame)
                seen[1:] = [current]
                yield current

        last_yielded = None
        stream_of_frames = timed()
        for time, frame in pick_nearest(stream_of_frames, targets, tail_tolerance=0.5 / fps):
            last_yielded = time
            yield time, _to_array(frame, color)
        if not seen:
            raise VideoError(f"{path}: no frame could be decoded")
        if include_last:
            for _ in stream_of_frames:  # drain: the last frame is only known at the end
                pass
            if seen[-1][0] != last_yielded:
                yield seen[-1][0], _to_array(seen[-1][1], color)
    finally:
        container.close()


def _all_frames(container: Any, stream: Any, path: Path, report: DecodeReport) -> Iterator[Any]:
    codec = stream.codec_context
    for packet in _demux_safely(container, stream, report):
        yield from _decode_packet(codec, packet, path, report)
    yield from _decode_packet(codec, None, path, report)


def _demux_safely(container: Any, stream: Any, report: DecodeReport) -> Iterator[Any]:
    import av

    try:
        for packet in container.demux(stream):
            if packet.size:
                yield packet
    except av.error.FFmpegError:
        pass  # pass 1 already reported where reading stops


def _decode_packet(codec: Any, packet: Any, path: Path, report: DecodeReport) -> list[Any]:
    import av

    try:
        frames = codec.decode(packet)
    except av.error.FFmpegError as exc:
        report.decode_errors += 1
        if report.decode_errors <= 3:
            report.warn(f"{path}: a corrupt packet was skipped ({exc})")
        return []
    report.frames_decoded += len(frames)
    return frames


# ---------------------------------------------------------------------------------------------------
# Frame conversion
# ---------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _studio_to_full() -> np.ndarray:
    return np.clip((np.arange(256) - 16.0) * 255.0 / 219.0 + 0.5, 0, 255).astype(np.uint8)


def _to_array(frame: Any, color: Color) -> np.ndarray:
    """Convert one decoded frame (only the kept ones reach here) and rotate it upright."""
    import cv2

    if frame.format.name == "yuv420p" and frame.width % 2 == 0 and frame.height % 2 == 0:
        if color == "gray":
            # Luma is gray up to the studio-range scaling (16..235 -> 0..255) that BGR->gray undoes.
            plane = frame.planes[0]
            luma = np.frombuffer(plane, np.uint8).reshape(-1, plane.line_size)[: frame.height, : frame.width]
            image = cv2.LUT(luma, _studio_to_full())
        else:
            # OpenCV's I420 conversion is ~3x faster than swscale to bgr24 here, same BT.601 maths.
            image = cv2.cvtColor(frame.to_ndarray(format="yuv420p"), cv2.COLOR_YUV2BGR_I420)
    else:
        image = frame.to_ndarray(format="bgr24")
        if color == "gray":
            image = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    return rotate_upright(image, _normalise_rotation(frame.rotation))
