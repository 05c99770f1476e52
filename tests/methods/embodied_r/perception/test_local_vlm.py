"""The transformers backend with a tiny Qwen2.5-VL built from a config (random weights, no download)."""

from __future__ import annotations

import numpy as np
import pytest

from embodied_r.inference.requests import FrameRequest, FrameResult
from embodied_r.methods.embodied_r.perception.local_vlm import TransformersBackend

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|>"
    "<|vision_end|>{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
           "<|video_pad|>"]


def tiny_qwen25_vl():
    """A 2-layer Qwen2.5-VL (hidden 64, 2-block vision tower) and a character-level processor."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessorPil,
    )

    vocab = {t: i for i, t in enumerate(SPECIAL + [chr(c) for c in range(32, 127)] + ["\n", "Δ"])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIAL)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        chat_template=CHAT_TEMPLATE)

    class ImageOnlyProcessor(Qwen2_5_VLProcessor):
        # The video processor needs torchvision, which this environment does not have; images only here.
        def check_argument_for_proper_class(self, name, arg):
            if name == "video_processor" and arg is None:
                return None
            return super().check_argument_for_proper_class(name, arg)

    processor = ImageOnlyProcessor(image_processor=Qwen2VLImageProcessorPil(min_pixels=28 * 28 * 4,
                                                                            max_pixels=28 * 28 * 16),
                                   tokenizer=tokenizer, video_processor=None, chat_template=CHAT_TEMPLATE)
    config = Qwen2_5_VLConfig(
        text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=len(vocab), max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                         eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|endoftext|>"], bos_token_id=None),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           fullatt_block_indexes=[1], window_size=56),
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"],
    )
    torch.manual_seed(0)
    return Qwen2_5_VLForConditionalGeneration(config).eval(), processor


@pytest.fixture(scope="module")
def tiny_vlm():
    return tiny_qwen25_vl()


def requests(n: int) -> list[FrameRequest]:
    rng = np.random.default_rng(1)
    out = []
    for i in range(n):
        shape = (40 + 8 * i, 56, 3)  # different sizes -> different image-token counts -> real padding
        images = [rng.integers(0, 255, shape, dtype=np.uint8) for _ in range(1 if i == 0 else 2)]
        out.append(FrameRequest(key=f"{i:02x}", qa_id="q", frame_index=i, video=None,  # type: ignore[arg-type]
                                image_timestamps=tuple(float(t) for t in range(len(images))),
                                prompt="Describe." + " more" * i, output="numbered", images=images))
    return out


def run(backend: TransformersBackend, items: list[FrameRequest]) -> dict[str, FrameResult]:
    results: dict[str, FrameResult] = {}
    backend.run(items, lambda request, result: results.__setitem__(request.key, result))
    return results


@pytest.mark.slow  # building the tiny model imports and initialises Qwen2.5-VL: ~20 s on a busy 2-core box
def test_batched_generation_matches_one_by_one(tiny_vlm):
    model, processor = tiny_vlm
    batched = run(TransformersBackend("tiny-qwen2.5-vl", batch_size=3, max_new_tokens=6, model_obj=model,
                                      processor=processor), requests(5))
    single = run(TransformersBackend("tiny-qwen2.5-vl", batch_size=1, max_new_tokens=6, model_obj=model,
                                     processor=processor), requests(5))
    assert sorted(batched) == sorted(single) == [f"{i:02x}" for i in range(5)]
    assert all(r.ok for r in batched.values())
    # Left padding and per-row multimodal positions must not change greedy answers.
    assert {k: r.text for k, r in batched.items()} == {k: r.text for k, r in single.items()}
    assert any(r.text for r in batched.values())


@pytest.mark.slow
def test_a_failing_batch_is_retried_one_by_one(tiny_vlm):
    model, processor = tiny_vlm
    backend = TransformersBackend("tiny", batch_size=4, max_new_tokens=3, model_obj=model, processor=processor)
    original = backend._generate

    def flaky(batch):
        if any(r.key == "02" for r in batch):
            raise RuntimeError("CUDA out of memory (simulated)")
        return original(batch)

    backend._generate = flaky  # type: ignore[method-assign]
    results = run(backend, requests(4))
    assert sorted(results) == ["00", "01", "02", "03"]
    assert not results["02"].ok and "out of memory" in results["02"].error
    assert all(results[k].ok for k in ("00", "01", "03"))


def test_settings_and_validation():
    backend = TransformersBackend("m", batch_size=8, max_new_tokens=64)
    assert backend.settings() == {"max_new_tokens": 64, "temperature": 0.0}  # batch size changes no answer
    with pytest.raises(ValueError, match="batch_size"):
        TransformersBackend("m", batch_size=0)
