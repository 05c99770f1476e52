"""The image path of GRPO training: prompt rows with an image part train a vision-language policy.

Robot-R1 (paper §3.3-3.4) trains Qwen2.5-VL on the front-camera image plus the question. TRL's
``GRPOTrainer`` handles vision-language models when it gets a processor (not a bare tokenizer) and an
``image`` column; this module decides whether a run is on that path, checks what that path cannot do
here, and loads the processor with an error that says what is missing. The rows themselves become a
data set in :func:`embodied_r.training.data.image_rows_to_dataset`, or, for key-frame rows (the key frames
interleaved with their frame lines, Embodied-R's VLM arm), in
:func:`embodied_r.training.keyframe_data.keyframe_rows_to_dataset`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embodied_r.core.chat import has_image
from embodied_r.core.keyframe_chat import is_keyframe_chat
from embodied_r.core.records import PromptRow
from embodied_r.training.data import TOY_PREFIX
from embodied_r.training.recipe import Recipe, RecipeError


def data_dir(source: str | None) -> Path | None:
    """The folder image paths of a ``.jsonl`` source are relative to (None for the toy set)."""
    if not source or str(source).startswith(TOY_PREFIX):
        return None
    return Path(source).parent


def processor_for_rows(recipe: Recipe, rows: list[PromptRow], eval_rows: list[PromptRow], model_path: str,
                       processing_class: Any = None) -> Any:
    """The processing class to hand TRL: ``processing_class`` or, for image rows, the model's processor
    (None for text rows lets TRL load the tokenizer itself). Raises ``RecipeError`` for what the image
    path does not support."""
    if any(has_image(row) for row in eval_rows):
        raise RecipeError(
            f"eval_data {recipe.eval_data}: held-out evaluation during training reads text prompts only; "
            "set eval_data to text rows (prompts.jsonl) or null and score checkpoints with `embodied-r eval`"
        )
    if not any(has_image(row) for row in rows):
        return processing_class
    if eval_rows:
        raise RecipeError(
            "train_data has images but eval_data is text: held-out scores would not measure the image "
            "policy; set eval_data: null"
        )
    if recipe.completion_prefix:
        raise RecipeError("completion_prefix works with text prompts only; remove it for image rows")
    keyframe_row = next((row for row in rows if is_keyframe_chat(row.prompt)), None)
    if keyframe_row is not None and recipe.context_rule not in ("drop-frames", "skip"):
        raise RecipeError(f"context_rule {recipe.context_rule} would cut through the image tokens of key-frame rows "
                          f"(e.g. row {keyframe_row.id}); use drop-frames (the oldest key frames go first) or skip")
    if processing_class is not None:
        return processing_class
    if keyframe_row is not None:
        require_vision_language_model(model_path, keyframe_row)
    return load_processor(model_path)


def require_vision_language_model(model_path: str, row: PromptRow) -> None:
    """Raise ``RecipeError`` naming ``row`` unless ``model_path`` is a vision-language model (only its
    config is read): a text model would be handed images it has no way to see."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    try:
        config = AutoConfig.from_pretrained(model_path)
    except (OSError, ValueError) as exc:
        raise RecipeError(f"cannot read the config of {model_path} ({exc})") from exc
    if config.model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        raise RecipeError(
            f"train_data row {row.id} holds key frames as images, and {model_path} is a text-only model "
            f"({config.model_type}); give a vision-language model (e.g. Qwen/Qwen2.5-VL-3B-Instruct), or train on "
            "the text rows of the same questions (build-prompts without --input keyframes)")


def load_processor(model_path: str) -> Any:
    """The processor of a vision-language model, left-padded for batched generation and left-truncated
    (``reasoning.vl_processor.load_vl_processor``: images work without torchvision, and it saves)."""
    from embodied_r.inference.vl_processor import VLProcessorError, load_vl_processor

    try:
        return load_vl_processor(model_path, padding_side="left", truncation_side="left")
    except VLProcessorError as exc:
        raise RecipeError(f"train_data has images: {exc}; or train on the text rows (prompts.jsonl)") from exc


__all__ = ["data_dir", "load_processor", "processor_for_rows", "require_vision_language_model"]
