"""``embodied-r keyframes`` end to end through ``main([...])``: outputs, isolated failures, resume."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.records import KeyframeSet


@pytest.mark.timeout(120)  # worker processes: a deadlock must fail, not hang the suite
def test_keyframes_cli_writes_results_isolates_failures_and_resumes(
    tmp_path: Path, pan_mp4v: Path, cut_video: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    shutil.copy(pan_mp4v, videos / "pan.mp4")
    shutil.copy(cut_video, videos / "cut.mp4")
    (videos / "broken.mp4").write_text("not a video")
    out = tmp_path / "out"

    code = main(["keyframes", str(videos), "--out", str(out), "--save-images", "--workers", "2"])
    assert code == 1  # one video failed, the others finished
    pan = KeyframeSet.from_dict(json.loads((out / "pan.keyframes.json").read_text()))
    assert pan.timestamps == [0.0, 3.0, 6.0, 9.0, 11.9]
    assert len(list((out / "pan.keyframes").glob("*.jpg"))) == 5
    cut = KeyframeSet.from_dict(json.loads((out / "cut.keyframes.json").read_text()))
    assert 5.0 in cut.timestamps
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert [Path(f["video"]).name for f in failures] == ["broken.mp4"]
    assert "cannot open as a video" in failures[0]["error"]
    printed = capsys.readouterr().out
    assert "2 done" in printed and "1 failed" in printed

    # Rerun: finished videos are skipped, the broken one is retried; fixing it clears the failure.
    shutil.copy(pan_mp4v, videos / "broken.mp4")
    before = (out / "pan.keyframes.json").stat().st_mtime_ns
    assert main(["keyframes", str(videos), "--out", str(out), "--save-images"]) == 0
    assert (out / "pan.keyframes.json").stat().st_mtime_ns == before
    assert (out / "broken.keyframes.json").exists() and not (out / "failures.jsonl").exists()
    assert "skipping 2 video(s)" in capsys.readouterr().out

    # Different settings are not "done": uniform reruns everything into its own JSON content.
    assert main(["keyframes", str(videos / "pan.mp4"), "--out", str(out), "--strategy", "uniform",
                 "--max-frames", "4"]) == 0
    uniform = json.loads((out / "pan.keyframes.json").read_text())
    assert [f["timestamp"] for f in uniform["frames"]] == [0.0, 4.0, 8.0, 11.9]


@pytest.mark.timeout(120)
def test_batch_with_workers_ticks_while_it_waits(tmp_path: Path, pan_mp4v: Path, cut_video: Path) -> None:
    from embodied_r.methods.embodied_r.keyframes.batch import KeyframeJob, run_batch

    ticks: list[int] = []
    rows = run_batch([pan_mp4v, cut_video], tmp_path / "out", KeyframeJob(), workers=2,
                     on_tick=lambda: ticks.append(1), tick_seconds=0.05)
    assert sorted(Path(r["video"]).name for r in rows if r["ok"]) == ["cut.mp4", "pan_mp4v.mp4"]
    assert len(ticks) >= 2  # worker start-up alone takes longer than two ticks


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_workers_are_forked_only_from_a_parent_without_opencv_or_threads() -> None:
    ask = ("from embodied_r.methods.embodied_r.keyframes.batch import worker_context; "
           "print(worker_context().get_start_method())")

    def start_method(before: str) -> str:
        command = [sys.executable, "-c", before + ask]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    assert start_method("") == "fork"
    assert start_method("import cv2; ") == "spawn"
    assert start_method("import threading, time; "
                        "threading.Thread(target=time.sleep, args=(5,), daemon=True).start(); ") == "spawn"


@pytest.mark.timeout(120)
def test_cli_in_a_fresh_process_with_workers_gives_the_in_process_key_frames(
    tmp_path: Path, pan_mp4v: Path, pan_h264: Path, cut_video: Path
) -> None:
    # A fresh `embodied-r keyframes` process has not loaded OpenCV, so on Linux its workers are forked.
    from embodied_r.methods.embodied_r.keyframes.selection import extract_keyframes

    videos = tmp_path / "videos"
    videos.mkdir()
    for source in (pan_mp4v, pan_h264, cut_video):
        shutil.copy(source, videos / source.name)
    out = tmp_path / "out"
    # The CLI's main() in a fresh interpreter, reporting the start method the batch runner picked.
    script = (
        "import sys\n"
        "from embodied_r.methods.embodied_r.keyframes import batch\n"
        "picked = batch.worker_context\n"
        "def reporting():\n"
        "    context = picked()\n"
        "    print('start method:', context.get_start_method(), flush=True)\n"
        "    return context\n"
        "batch.worker_context = reporting\n"
        "from embodied_r.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, "keyframes", str(videos), "--out", str(out),
                           "--workers", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 done" in done.stdout
    expected = "fork" if sys.platform.startswith("linux") else "spawn"
    assert f"start method: {expected}" in done.stdout
    for video in sorted(videos.iterdir()):
        written = KeyframeSet.from_dict(json.loads((out / f"{video.stem}.keyframes.json").read_text()))
        assert written.frames == extract_keyframes(video).frames, video.name


def test_keyframes_cli_rejects_bad_arguments(tmp_path: Path, pan_mp4v: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keyframes", str(tmp_path / "nope.mp4"), "--out", str(tmp_path)]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["keyframes", str(pan_mp4v), "--out", str(tmp_path), "--min-frames", "9",
                 "--max-frames", "3"]) == 2
    assert "--min-frames" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(pan_mp4v, other / pan_mp4v.name)
    assert main(["keyframes", str(pan_mp4v), str(other / pan_mp4v.name), "--out", str(tmp_path / "o")]) == 2
    assert "would both write" in capsys.readouterr().err
