"""load_vl_processor: a saved tiny Qwen2.5-VL loads back without torchvision, processes image + text,
refuses videos clearly, and saves into a folder that loads back the same."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from embodied_r.inference.vl_processor import VLProcessorError, load_vl_processor


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_vl import save_tiny_qwen25_vl

    return save_tiny_qwen25_vl(tmp_path_factory.mktemp("tiny_vl"))


def _inputs(processor):
    from PIL import Image

    messages = [{"role": "system", "content": "You see a robot."},
                {"role": "user", "content": [{"type": "image", "image": "images/a.png"},
                                             {"type": "text", "text": "Where is the gripper?"}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    images = [Image.new("RGB", (96, 80), (200, 30, 30)), Image.new("RGB", (96, 80), (30, 200, 30))]
    return processor(text=[text, text + "More."], images=images, padding=True, return_tensors="pt")


def test_loads_without_torchvision_and_processes_images(vl_dir: Path) -> None:
    from transformers import Qwen2_5_VLProcessor

    from embodied_r.inference.vl_processor import torchvision_importable

    processor = load_vl_processor(vl_dir)
    assert isinstance(processor, Qwen2_5_VLProcessor)
    if not torchvision_importable():
        assert processor.video_processor is None  # the torchvision-free build
    assert processor.tokenizer.padding_side == "left"
    inputs = _inputs(processor)
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merged = inputs["image_grid_thw"].prod(dim=1) // 4  # spatial merge 2x2
    assert (inputs["input_ids"] == image_id).sum(dim=1).tolist() == merged.tolist()
    assert inputs["attention_mask"][0, 0] == 0  # left padding: the shorter row starts with padding
    assert inputs["pixel_values"].shape[0] == int(inputs["image_grid_thw"].prod(dim=1).sum())


def test_videos_raise_a_clear_error(vl_dir: Path) -> None:
    from PIL import Image

    from embodied_r.inference.vl_processor import torchvision_importable

    if torchvision_importable():
        pytest.skip("torchvision is importable: the full processor handles videos")
    processor = load_vl_processor(vl_dir)
    with pytest.raises(VLProcessorError, match="torchvision"):
        processor(text=["<|vision_start|><|video_pad|><|vision_end|>"], videos=[[Image.new("RGB", (56, 56))] * 2])


def test_save_pretrained_round_trip(vl_dir: Path, tmp_path: Path) -> None:
    processor = load_vl_processor(vl_dir, truncation_side="left")
    processor.save_pretrained(tmp_path / "saved")
    assert {"tokenizer.json", "chat_template.jinja", "preprocessor_config.json"} <= {
        p.name for p in (tmp_path / "saved").iterdir()}
    again = load_vl_processor(tmp_path / "saved")
    assert type(again).__name__ == "Qwen2_5_VLProcessor"
    assert again.chat_template == processor.chat_template
    assert again.image_processor.to_dict() == processor.image_processor.to_dict()
    first, second = _inputs(processor), _inputs(again)
    for key in ("input_ids", "attention_mask", "image_grid_thw", "pixel_values"):
        assert (first[key] == second[key]).all(), key
    # Trainers and data loaders may pickle the processing class.
    copied = pickle.loads(pickle.dumps(again))
    assert (_inputs(copied)["input_ids"] == first["input_ids"]).all()


def test_text_only_and_missing_models_are_clear_errors(tiny_lm_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(VLProcessorError, match="text tokenizer only"):
        load_vl_processor(tiny_lm_dir)
    (tmp_path / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    with pytest.raises(VLProcessorError, match="cannot load the (processor|tokenizer)"):
        load_vl_processor(tmp_path)
