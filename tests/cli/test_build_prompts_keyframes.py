"""`build-prompts --input keyframes`: the VLM arm's rows hold the same questions as the cascade's text rows,
with each key frame as an image after its frame line, within the declared frame count and pixel budget;
bad budgets and missing key frames fail with a clear message before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from keyframe_world import TINY_MAX_PIXELS

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl
from embodied_r.core.keyframe_chat import frame_units, image_parts


def test_keyframe_rows_match_the_text_rows_question_for_question(keyframe_world: dict[str, Path]) -> None:
    from PIL import Image

    text, frames = read_jsonl(keyframe_world["text"]), read_jsonl(keyframe_world["frames"])
    assert [r["id"] for r in frames] == [r["id"] for r in text] and len(text) > 10
    for t, f in zip(text, frames):
        assert (f["task"], f["answer"], f["answer_type"], f["options"]) == (t["task"], t["answer"],
                                                                            t["answer_type"], t["options"])
        extra = {k: v for k, v in f["meta"].items() if k not in t["meta"]}
        assert {k: v for k, v in f["meta"].items() if k in t["meta"]} == t["meta"]  # the same metadata ...
        assert set(extra) == {"input", "keyframes"} and extra["input"] == "keyframes"  # ... plus what was shown
        assert f["prompt"][0] == t["prompt"][0]  # the same system prompt
        content = f["prompt"][1]["content"]
        units = frame_units(content)
        shown = f["meta"]["keyframes"]
        assert len(units) == shown["shown"] <= 4 and shown["dropped_oldest"] == shown["perceived"] - shown["shown"]
        # Each frame line opens a unit, followed by exactly one image; the question closes the turn in the
        # official wording.
        assert all(end - start == 2 for start, end in units)
        assert content[units[0][0]]["text"].lstrip("\n").startswith(f"Frame {shown['perceived'] - shown['shown']}:")
        assert all(content[s]["text"].startswith("\nFrame ") for s, _ in units)
        assert content[-1]["text"].startswith("\n>\nQuestion: ") and t["prompt"][1]["content"].endswith(
            content[-1]["text"].split("Question: ", 1)[1])
        assert content[0]["text"].startswith("Please assume the role of an agent.")
        # Actions are the ones the text arm's frame lines name, frame for frame.
        for start, _ in units[1:] if shown["dropped_oldest"] == 0 else units:
            line = content[start]["text"].strip()
            assert line in t["prompt"][1]["content"]
        for part in image_parts(f["prompt"]):
            path = keyframe_world["frames"].parent / part["image"]
            with Image.open(path) as image:
                assert image.width * image.height <= TINY_MAX_PIXELS and image.width % 28 == image.height % 28 == 0


def test_the_frame_budget_keeps_the_latest_frames(keyframe_world: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "two.jsonl"
    assert main(["build-prompts", "--qa", str(keyframe_world["world"] / "questions.jsonl"), "--perception",
                 str(keyframe_world["perception"]), "--out", str(out), "--input", "keyframes", "--keyframes",
                 str(keyframe_world["keyframes"]), "--max-frames", "2", "--max-pixels", str(28 * 28 * 2)]) == 0
    for row in read_jsonl(out):
        meta = row["meta"]["keyframes"]
        assert meta["shown"] == 2 and meta["timestamps"] == sorted(meta["timestamps"])
        assert all(w * h <= 28 * 28 * 2 for w, h in meta["sizes"])
        perception = next(json.loads(line) for line in keyframe_world["perception"].read_text().splitlines()
                          if json.loads(line)["qa_id"] == row["id"])
        assert meta["timestamps"] == [f["timestamp"] for f in perception["frames"]][-2:]


@pytest.mark.parametrize("extra, message", [
    (["--max-pixels", "700"], "--max-pixels 700 leaves no frame"),
    (["--max-frames", "0"], "--max-frames 0 leaves no frame"),
    (["--prompt-version", "official"], "key-frame rows use official-v1"),
])
def test_bad_budgets_fail_before_writing(keyframe_world: dict[str, Path], tmp_path: Path, capsys, extra: list[str],
                                         message: str) -> None:
    out = tmp_path / "rows.jsonl"
    code = main(["build-prompts", "--qa", str(keyframe_world["world"] / "questions.jsonl"), "--perception",
                 str(keyframe_world["perception"]), "--out", str(out), "--input", "keyframes", "--keyframes",
                 str(keyframe_world["keyframes"]), *extra])
    assert code == 2 and message in capsys.readouterr().err and not out.exists()


def test_key_frames_without_saved_images_are_named(keyframe_world: dict[str, Path], tmp_path: Path, capsys) -> None:
    plain = tmp_path / "keyframes"
    plain.mkdir()
    for source in keyframe_world["keyframes"].glob("*.keyframes.json"):
        data = json.loads(source.read_text())
        data["meta"].pop("images")
        (plain / source.name).write_text(json.dumps(data))
    args = ["build-prompts", "--qa", str(keyframe_world["world"] / "questions.jsonl"), "--perception",
            str(keyframe_world["perception"]), "--out", str(tmp_path / "rows.jsonl"), "--input", "keyframes"]
    assert main(args) == 2 and "--input keyframes needs --keyframes" in capsys.readouterr().err
    assert main([*args, "--keyframes", str(plain)]) == 2
    err = capsys.readouterr().err
    assert "question scene_0_" in err and "--save-images" in err
