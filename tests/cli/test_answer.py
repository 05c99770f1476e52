from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.methods.embodied_r.cascade import normalise_options


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("world")
    code = main(["synth", "world", "--out", str(out), "--scenes", "1", "--seed", "5", "--seconds", "6",
                 "--resolution", "160x120"])
    assert code == 0
    return out


def test_answer_with_oracle_on_a_synthetic_video(tiny_world: Path, tiny_lm_dir: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    qa = json.loads((tiny_world / "questions.jsonl").read_text().splitlines()[0])
    video = tiny_world / qa["video"]
    argv = ["answer", str(video), "--question", qa["question"], "--reasoner", str(tiny_lm_dir),
            "--max-new-tokens", "8", "--work-dir", str(tmp_path / "work"), "--json"]
    if qa["options"]:
        argv += ["--options", *qa["options"]]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["keyframe_timestamps"]) >= 4            # the [4, 32] clamp of the selector
    assert len(result["perception"]) == len(result["keyframe_timestamps"])
    assert result["perception"][0]["raw"]                      # oracle text for the first key frame
    assert set(result["timings"]) == {"keyframes_s", "perception_s", "reasoner_load_s", "reasoning_s"}
    assert result["models"]["perception"].startswith("oracle")
    # Asking again reuses the key frames and the cached perception requests.
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["perception"] == result["perception"]
    assert again["keyframe_timestamps"] == result["keyframe_timestamps"]


def test_answer_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["answer", str(tmp_path / "none.mp4"), "--question", "q"]) == 2
    assert "video file not found" in capsys.readouterr().err
    video = tmp_path / "v.mp4"
    video.write_bytes(b"not a video")
    assert main(["answer", str(video), "--question", "q", "--vlm", "gpt/x"]) == 2
    assert "--vlm" in capsys.readouterr().err
    assert main(["answer", str(video), "--question", "q", "--vlm", "openai/some-vlm"]) == 2
    err = capsys.readouterr().err
    assert "--vlm openai needs --base-url" in err and "--backend" not in err  # answer has no --backend
    assert main(["answer", str(video), "--question", "q", "--vlm", "openai"]) == 2
    err = capsys.readouterr().err
    assert "--vlm openai needs a model: --vlm openai/MODEL" in err and "--backend" not in err
    assert main(["answer", str(tmp_path), "--question", "q"]) == 2
    assert "is a folder, not a video file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["answer", "--help"])
    assert "--qa" not in capsys.readouterr().out


def test_answer_fits_an_over_long_prompt_and_says_so(tiny_world: Path, tiny_lm_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    qa = json.loads((tiny_world / "questions.jsonl").read_text().splitlines()[0])
    argv = ["answer", str(tiny_world / qa["video"]), "--question", qa["question"], "--reasoner", str(tiny_lm_dir),
            "--max-new-tokens", "4", "--work-dir", str(tmp_path / "work"), "--json", "--max-prompt-tokens", "400",
            "--context-rule", "truncate-left"]
    if qa["options"]:
        argv += ["--options", *qa["options"]]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["context"]["action"] == "truncated-left" and result["context"]["kept_tokens"] <= 400
    assert main([*argv, "--context-rule", "skip"]) == 2
    assert "does not fit" in capsys.readouterr().err


def test_normalise_options() -> None:
    assert normalise_options(["left", "right"]) == ["A. left", "B. right"]
    assert normalise_options(["A. left", "B) right"]) == ["A. left", "B. right"]
    assert normalise_options(None) is None
