"""A tiny synthetic world taken through the stages both arms share, for tests of the key-frame (VLM) arm:
``synth world`` -> ``keyframes --save-images`` -> ``perceive --backend oracle`` -> ``build-prompts``
(text rows and key-frame rows), each through the CLI in this process."""

from __future__ import annotations

from pathlib import Path

# The tiny Qwen2.5-VL's image processor resizes to at most 112 x 112 pixels: frames built for it.
TINY_MAX_PIXELS = 112 * 112


def build_keyframe_world(folder: Path, scenes: int = 2, max_frames: int = 4) -> dict[str, Path]:
    """Render ``scenes`` small rooms and build both arms' prompt rows; returns the paths of each stage."""
    from embodied_r.cli.main import main

    world, keyframes, perception = folder / "world", folder / "keyframes", folder / "perception.jsonl"
    assert main(["synth", "world", "--out", str(world), "--scenes", str(scenes), "--seed", "0", "--resolution",
                 "160x120", "--fps", "5", "--seconds", "6", "--per-task", "1"]) == 0
    assert main(["keyframes", str(world / "videos"), "--out", str(keyframes), "--save-images",
                 "--max-frames", "6"]) == 0
    assert main(["perceive", "--qa", str(world / "questions.jsonl"), "--keyframes", str(keyframes),
                 "--backend", "oracle", "--out", str(perception)]) == 0
    text, frames = folder / "prompts" / "text.jsonl", folder / "prompts" / "keyframes.jsonl"
    common = ["build-prompts", "--qa", str(world / "questions.jsonl"), "--perception", str(perception)]
    assert main([*common, "--out", str(text)]) == 0
    assert main([*common, "--out", str(frames), "--input", "keyframes", "--keyframes", str(keyframes),
                 "--max-frames", str(max_frames), "--max-pixels", str(TINY_MAX_PIXELS)]) == 0
    return {"world": world, "keyframes": keyframes, "perception": perception, "text": text, "frames": frames}
