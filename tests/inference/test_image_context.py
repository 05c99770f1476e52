"""The context policy on key-frame prompts: image tokens counted exactly from image sizes, the oldest key
frames dropped first (the latest always kept, else a recorded skip), and a 32-frame row at the default
pixel budget fitted to a model's context instead of being run out of memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from embodied_r.core.image_files import ImageSizes
from embodied_r.core.io import DataFileError
from embodied_r.inference.context_policy import ContextError, ContextPolicy
from embodied_r.inference.image_context import ImageTokenCounter, fit_keyframe_chat
from embodied_r.methods.embodied_r.keyframe_images import DEFAULT_MAX_PIXELS, budget_size
from embodied_r.methods.embodied_r.keyframe_rows import keyframe_user_content


def keyframe_chat(folder: Path, count: int, size: tuple[int, int]) -> list[dict]:
    """A key-frame chat of ``count`` distinct frames of ``size`` pixels, written into ``folder``."""
    from PIL import Image

    frames = []
    for index in range(count):
        Image.new("RGB", size, (7 * index % 256, 90, 160)).save(folder / f"{index:03d}.png")
        frames.append({"index": index, "action": None if index == 0 else "Move forward", "image": f"{index:03d}.png"})
    content = keyframe_user_content(frames, "Which object did you see first?", ["A. sofa", "B. door"], "official-v1")
    return [{"role": "system", "content": "Think, then answer."}, {"role": "user", "content": content}]


def processor(max_pixels: int = 112 * 112):
    from tiny_models import build_tiny_qwen25_vl_processor

    proc = build_tiny_qwen25_vl_processor()
    proc.image_processor.max_pixels = max_pixels
    proc.image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": max_pixels}
    return proc


def test_counted_tokens_are_the_processors_own(tmp_path: Path) -> None:
    from embodied_r.core.chat import render_chat
    from embodied_r.evaluation.image_prompts import load_images

    proc = processor()
    chat = keyframe_chat(tmp_path, 3, (160, 120))
    counter = ImageTokenCounter(proc, ImageSizes(tmp_path))
    inputs = proc(text=[render_chat(proc, chat)], images=load_images(chat, tmp_path), return_tensors="pt")
    assert counter.token_ids(chat) == inputs["input_ids"][0].tolist()


def test_oldest_key_frames_go_first_and_the_latest_stays(tmp_path: Path) -> None:
    proc = processor()
    chat = keyframe_chat(tmp_path, 4, (160, 120))
    counter = ImageTokenCounter(proc, ImageSizes(tmp_path))
    total = len(counter.token_ids(chat))
    fit = fit_keyframe_chat(counter, chat, total - 1)
    assert fit.action == "dropped-frames" and fit.frames_dropped == 1 and fit.kept_tokens <= total - 1
    images = [p["image"] for p in fit.messages[1]["content"] if p["type"] == "image"]
    assert images == ["001.png", "002.png", "003.png"]
    assert fit.record() == {"action": "dropped-frames", "prompt_tokens": total, "kept_tokens": fit.kept_tokens,
                            "limit": total - 1, "frames_dropped": 1}
    # Not even the latest frame fits: skipped with the reason, never answered without its video.
    fit = fit_keyframe_chat(counter, chat, 30)
    assert fit.skipped and fit.reason.startswith("no key frame fits") and "--max-pixels" in fit.reason
    assert fit_keyframe_chat(counter, chat, total - 1, rule="skip").skipped
    for rule in ("truncate-left", "truncate-left-tokens"):
        with pytest.raises(ContextError, match="cut through image tokens"):
            fit_keyframe_chat(counter, chat, total - 1, rule=rule)


def test_missing_or_broken_frames_are_named(tmp_path: Path) -> None:
    proc = processor()
    chat = keyframe_chat(tmp_path, 2, (160, 120))
    counter = ImageTokenCounter(proc, ImageSizes(tmp_path))
    (tmp_path / "001.png").write_text("not a picture")
    with pytest.raises(DataFileError, match=r"001.png is not a readable image"):
        fit_keyframe_chat(counter, chat, 4000)
    (tmp_path / "001.png").unlink()
    with pytest.raises(DataFileError, match=r"001.png not found"):
        fit_keyframe_chat(ImageTokenCounter(proc, ImageSizes(tmp_path)), chat, 4000)


def test_a_32_frame_row_at_the_default_budget_is_fitted_not_run_out_of_memory(tmp_path: Path) -> None:
    """32 key frames of an UrbanVideo-sized video at the default pixel budget take ~8,100 image tokens: over
    the tiny model's 4,096-token context. The policy drops the oldest frames until the prompt fits, the
    row records it, and the fitted prompt is what the model is run on (one greedy token here)."""
    import resource

    import torch
    from tiny_models import build_tiny_qwen25_vl

    from embodied_r.evaluation.vl_generation import VisionLanguageEngine

    size = budget_size(1280, 720, DEFAULT_MAX_PIXELS, 28)  # what build-prompts writes for such a frame
    proc = processor(DEFAULT_MAX_PIXELS)  # a processor that keeps frames of the default budget as they are
    chat = keyframe_chat(tmp_path, 32, size)
    model = build_tiny_qwen25_vl(proc.tokenizer).eval()
    engine = VisionLanguageEngine(model, proc, image_dir=tmp_path)
    policy = ContextPolicy()
    limit = policy.limit(engine.context_length(), 4)
    counter = ImageTokenCounter(proc, ImageSizes(tmp_path))
    assert len(counter.token_ids(chat)) > 32 * 250 > limit  # the row as built does not fit
    fitted = engine.fit([chat], max_new_tokens=4, context=policy)[0]
    assert fitted.action == "dropped-frames" and fitted.kept_tokens <= limit
    kept = sum(1 for p in fitted.messages[1]["content"] if p["type"] == "image")
    assert kept == 32 - fitted.frames_dropped and 1 <= kept < 32
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.set_num_threads(1)
    [completion] = engine.generate_fitted([fitted], max_new_tokens=1, batch_size=1, context=policy)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert isinstance(completion, str) and grown_mib < 2048  # the fitted prompt's forward pass stays bounded
