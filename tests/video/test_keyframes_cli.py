"""``embodied-r keyframes`` end to end through ``main([...])``: outputs, isolated failures, resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.records import KeyframeSet


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
