"""A tiny Qwen2.5-VL built from a config consumes one prompts_vl.jsonl row through its processor."""

from __future__ import annotations

from pathlib import Path

from embodied_r.io import read_jsonl
from embodied_r.sim.robot.scene_text import trl_vl_example


def _tiny_qwen_vl_processor(monkeypatch):
    from tiny_models import build_tiny_tokenizer
    from transformers import Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.processing_utils import ProcessorMixin

    # transformers 5.24 without torchvision cannot run the processor's argument class check (it looks
    # the names up in a video-processor registry that is only a placeholder then); the check is all we
    # skip -- tokenizer, image processor and the processor's own __call__ are the real ones.
    monkeypatch.setattr(ProcessorMixin, "check_argument_for_proper_class", lambda self, name, arg: None)

    tokenizer = build_tiny_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": [
        "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]})
    # Chat template that expands image entries into the vision tokens, as Qwen2.5-VL's does.
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
        "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
        "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    image_processor = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112)
    return Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                               chat_template=tokenizer.chat_template)


def _tiny_qwen_vl(tokenizer):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    config = Qwen2_5_VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 128,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
                     "max_position_embeddings": 4096},
        vision_config={"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                       "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2,
                       "temporal_patch_size": 2, "fullatt_block_indexes": [0], "window_size": 56},
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tokenizer.convert_tokens_to_ids("<|vision_end|>"),
    )
    torch.manual_seed(0)
    return Qwen2_5_VLForConditionalGeneration(config).eval()


def test_tiny_qwen25_vl_consumes_a_vl_row(robot_dataset: Path, monkeypatch) -> None:
    import torch

    row = read_jsonl(robot_dataset / "prompts_vl.jsonl")[0]
    example = trl_vl_example(row, robot_dataset)
    assert example["image"].size == (96, 80)
    assert all(isinstance(m["content"], str) for m in example["prompt"])
    processor = _tiny_qwen_vl_processor(monkeypatch)
    # The stored row itself (image entry in the user content) renders through the chat template.
    text = processor.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    assert text.count("<|image_pad|>") == 1 and "[[A]]" in text
    inputs = processor(text=[text], images=[example["image"]], return_tensors="pt")
    grid = inputs["image_grid_thw"][0]
    expected_tokens = int(grid.prod()) // 4                       # spatial merge 2x2
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((inputs["input_ids"] == image_id).sum()) == expected_tokens
    model = _tiny_qwen_vl(processor.tokenizer)
    with torch.no_grad():
        out = model(**inputs)
    assert out.logits.shape[:2] == inputs["input_ids"].shape
    assert torch.isfinite(out.logits).all()
