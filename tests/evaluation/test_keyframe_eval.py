"""`embodied-r eval` on key-frame rows (the VLM arm): an OpenAI-compatible endpoint gets every frame as an
image part after its frame line, a local VL model's prompts lose their oldest key frames when over the
context (recorded per row), and the report compares the two arms on the questions both answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embodied_r.cli.main import main
from embodied_r.core.io import read_jsonl
from embodied_r.evaluation.arms import compare_arms


def _eval(data: Path, model: Path | str, out: Path, *extra: str) -> int:
    return main(["eval", "--data", str(data), "--model", str(model), "--out", str(out), "--batch-size", "2",
                 "--max-new-tokens", "3", "--dtype", "float32", "--no-report", "--limit", "3", *extra])


def test_an_endpoint_gets_the_frames_in_order_after_their_lines(keyframe_world: dict[str, Path],
                                                                tmp_path: Path) -> None:
    from fake_vlm_server import FakeVLMServer

    bodies: list[dict] = []

    def reply(body: dict, fingerprint: str) -> str:
        bodies.append(body)
        return "<think> the last frame shows it </think><answer> A </answer>"

    with FakeVLMServer(reply=reply) as server:
        assert _eval(keyframe_world["frames"], server.base_url, tmp_path / "eval") == 0
    rows = {r["id"]: r for r in read_jsonl(keyframe_world["frames"])}
    assert len(bodies) == 3
    for body in bodies:
        parts = body["messages"][1]["content"]
        kinds = [p["type"] for p in parts]
        question = parts[-1]["text"]
        row = next(r for r in rows.values() if r["prompt"][1]["content"][-1]["text"] == question)
        shown = row["meta"]["keyframes"]["shown"]
        assert kinds == ["text"] + ["text", "image_url"] * shown + ["text"]
        assert all(parts[i]["text"].startswith("\nFrame ") for i in range(1, 2 * shown, 2))
        assert all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in parts if "image_url" in p)
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["input"] == "image" and metrics["generation"]["engine"] == "openai-vl"


def test_local_prompts_over_the_context_lose_their_oldest_frames(keyframe_world: dict[str, Path], tiny_vl_model: Path,
                                                                 tmp_path: Path) -> None:
    from embodied_r.core.image_files import ImageSizes
    from embodied_r.evaluation.vl_generation import load_vision_model
    from embodied_r.inference.image_context import ImageTokenCounter

    _, processor = load_vision_model(str(tiny_vl_model), dtype="float32")
    counter = ImageTokenCounter(processor, ImageSizes(keyframe_world["frames"].parent))
    rows = read_jsonl(keyframe_world["frames"])[:3]
    lengths = [len(counter.token_ids(r["prompt"])) for r in rows]
    cap = min(lengths) - 1  # every prompt is over by at least one token: each loses its oldest frame(s)
    out = tmp_path / "eval"
    assert _eval(keyframe_world["frames"], tiny_vl_model, out, "--max-prompt-tokens", str(cap)) == 0
    predictions = read_jsonl(out / "predictions.jsonl")
    assert len(predictions) == 3
    for p in predictions:
        context = p["meta"]["context"]
        assert context["action"] == "dropped-frames" and context["frames_dropped"] >= 1
        assert context["kept_tokens"] <= cap
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["context"]["actions"] == {"dropped-frames": 3}
    # A cap that leaves no frame: recorded as skipped (scored unanswered), never answered without the video.
    out = tmp_path / "none"
    assert _eval(keyframe_world["frames"], tiny_vl_model, out, "--max-prompt-tokens", "40") == 0
    skipped = read_jsonl(out / "predictions.jsonl")
    assert all(p["meta"]["context"]["action"] == "skipped" and "no key frame fits" in p["meta"]["context"]["reason"]
               for p in skipped)


def test_arms_are_compared_on_shared_questions_only() -> None:
    cascade = [{"id": str(i), "task": "a" if i < 4 else "b", "score": 1.0} for i in range(6)]
    vlm = [{"id": str(i), "task": "a" if i < 4 else "b", "score": float(i % 2)} for i in range(1, 8)]
    table = compare_arms(cascade, vlm)
    assert table["overall"]["n_shared"] == 5 and table["tasks"]["a"]["n_shared"] == 3
    assert table["tasks"]["a"]["cascade"] == 1.0 and table["tasks"]["a"]["vlm"] == pytest.approx(2 / 3, abs=1e-4)
    assert table["overall"]["difference"] == pytest.approx(-0.4) and table["overall"]["worsened"] == 2


def test_the_blind_baseline_removes_every_key_frame(keyframe_world: dict[str, Path]) -> None:
    from embodied_r.core.keyframe_chat import image_parts, is_keyframe_chat
    from embodied_r.core.records import PromptRow
    from embodied_r.evaluation.baselines import keyframe_blind_rows

    rows = [PromptRow.from_dict(r) for r in read_jsonl(keyframe_world["frames"])[:3]]
    for row, blind in zip(rows, keyframe_blind_rows(rows)):
        assert not list(image_parts(blind.prompt)) and not is_keyframe_chat(blind.prompt)
        texts = [p["text"] for p in blind.prompt[1]["content"]]
        assert not any(t.lstrip("\n").startswith("Frame ") for t in texts)
        assert texts == [row.prompt[1]["content"][0]["text"], row.prompt[1]["content"][-1]["text"]]
        assert blind.meta["blind_removed_frames"] == row.meta["keyframes"]["shown"] and blind.id == row.id
