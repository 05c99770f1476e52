"""A tiny Qwen2.5-VL saved as a model folder (no downloads), for tests of the image path."""

from __future__ import annotations

from pathlib import Path


def save_tiny_qwen25_vl(folder: str | Path) -> Path:
    """Save the tiny Qwen2.5-VL of ``tiny_models`` as a hub model folder holds it: weights and config,
    tokenizer files with the chat template, and ``preprocessor_config.json``; returns the folder."""
    from tiny_models import build_tiny_qwen25_vl, build_tiny_qwen25_vl_processor

    folder = Path(folder)
    processor = build_tiny_qwen25_vl_processor()
    build_tiny_qwen25_vl(processor.tokenizer).save_pretrained(folder)
    processor.tokenizer.save_pretrained(folder)
    processor.image_processor.save_pretrained(folder)
    return folder


if __name__ == "__main__":  # python tests/tiny_vl.py FOLDER: the model of recipes/embodied_r/cpu_vlm_tiny.yaml
    import sys

    print(save_tiny_qwen25_vl(sys.argv[1] if len(sys.argv) > 1 else "runs/tiny_qwen2.5-vl"))
