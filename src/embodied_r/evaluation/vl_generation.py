"""Generation from image prompt rows: a local vision-language model, or an OpenAI-compatible endpoint.

Image rows (Robot-R1's ``prompts_vl.jsonl``) hold ``{"type": "image", "image": PATH}`` parts in the
user content, with PATH relative to the data file's folder (``image_dir`` here). The text engines of
``inference.generation`` would render only the text, so these rows go through:

- :class:`VisionLanguageEngine`: ``AutoModelForImageTextToText`` with the model's processor
  (``reasoning.vl_processor``, so no torchvision is needed), greedy, left-padded batches bounded by the
  same token budget as the text engines;
- ``evaluation.vl_endpoint.EndpointVLEngine`` for an ``http(s)://`` model, images sent as data URLs.

The context policy is applied as for text rows, with the prompt measured by the processor (image
tokens included). Key-frame prompts (Embodied-R's VLM arm) are measured from their image sizes and lose
their oldest key frames first under ``drop-frames``, keeping at least the latest one
(``inference.image_context``). Another over-long image prompt can be skipped (``skip``, or ``drop-frames``
when it has no frame descriptions: the documented fallback), and the skip is recorded; the token-cutting
rules would cut image tokens, so they raise a ``ContextError`` instead of cutting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.chat import Messages, render_chat
from embodied_r.core.image_files import ImageSizes
from embodied_r.core.keyframe_chat import is_keyframe_chat
from embodied_r.evaluation.image_prompts import load_images, prompt_text
from embodied_r.inference.context_policy import (
    ContextError,
    ContextPolicy,
    FittedPrompt,
    frame_line_numbers,
    model_context_length,
)
from embodied_r.inference.generation import Engine, _require_unskipped, batched_completions
from embodied_r.inference.image_context import ImageTokenCounter, fit_keyframe_chat
from embodied_r.inference.models import ModelLoadError

logger = logging.getLogger(__name__)

ENDPOINT_PREFIXES = ("http://", "https://")
TEXT_ROWS_HINT = "or evaluate the text rows of the same questions (Robot-R1: prompts.jsonl, the text path)"


def fit_over_long(messages: Messages, total: int, limit: int, rule: str, completion_prefix: str) -> FittedPrompt:
    """What the context policy does with an image prompt of ``total`` tokens over ``limit``."""
    if rule in ("truncate-left", "truncate-left-tokens"):
        raise ContextError(f"an image prompt of {total} tokens exceeds the limit of {limit}, and the {rule} rule "
                           "would cut its image tokens; use --context-rule skip (recorded, scored unanswered), "
                           "raise --max-prompt-tokens, or give smaller images")
    if rule == "drop-frames" and frame_line_numbers(prompt_text(messages)):
        raise ContextError(f"an image prompt of {total} tokens exceeds the limit of {limit}; drop-frames cannot "
                           "remove frame descriptions from image prompts: use --context-rule skip")
    reason = f"{total} prompt tokens (image tokens included) exceed the limit of {limit}"
    if rule == "drop-frames":
        reason += " and the prompt has no frame descriptions to drop"
    return FittedPrompt(None, "skipped", total, 0, limit, reason=reason, completion_prefix=completion_prefix)


# ---------------------------------------------------------------------------------------------------
# A local vision-language model
# ---------------------------------------------------------------------------------------------------


class VisionLanguageEngine(Engine):
    """Batched greedy generation from image (and text) chats with a loaded vision-language model."""

    name = "transformers-vl"

    def __init__(self, model: Any, processor: Any, image_dir: str | Path | None = None) -> None:
        self.model, self.processor = model, processor
        self.tokenizer = processor.tokenizer
        self.image_dir = Path(image_dir) if image_dir is not None else None
        self._counter: ImageTokenCounter | None = None
        self._counter_known = False  # whether this processor's image tokens can be counted was decided

    def context_length(self) -> int:
        return model_context_length(self.model)

    def _inputs(self, conversations: Sequence[Messages], prefixes: Sequence[str]) -> Any:
        texts = [render_chat(self.processor, list(c), p) for c, p in zip(conversations, prefixes)]
        # Images flattened in prompt order: the processor pairs them with the image tokens in order.
        images = [image for c in conversations for image in load_images(list(c), self.image_dir)]
        return self.processor(text=texts, images=images or None, padding=True, return_tensors="pt")

    def fit(self, conversations: Sequence[Messages], max_new_tokens: int, completion_prefix: str = "",
            context: ContextPolicy | None = None) -> list[FittedPrompt]:
        """Every chat measured by the processor (image tokens included) and fitted by the policy; key-frame
        chats lose their oldest key frames first (``inference.image_context``)."""
        policy = context or ContextPolicy()
        limit = policy.limit(self.context_length(), max_new_tokens)
        fitted = []
        for messages in conversations:
            counter = self._keyframe_counter() if is_keyframe_chat(messages) else None
            if counter is not None:
                fitted.append(fit_keyframe_chat(counter, messages, limit, policy.rule, completion_prefix))
                continue
            ids = [int(t) for t in self._inputs([messages], [completion_prefix])["input_ids"][0]]
            if len(ids) <= limit:
                fitted.append(FittedPrompt(list(messages), "fits", len(ids), len(ids), limit, token_ids=ids,
                                           completion_prefix=completion_prefix))
            else:
                fitted.append(fit_over_long(list(messages), len(ids), limit, policy.rule, completion_prefix))
        skipped = sum(f.skipped for f in fitted)
        if skipped:
            logger.warning("%d of %d image prompt(s) exceed the %d-token limit and are skipped", skipped, len(fitted),
                           limit)
        return fitted

    def _keyframe_counter(self) -> ImageTokenCounter | None:
        """Image tokens counted from image sizes (the Qwen2-VL family); None for other processors, whose
        key-frame prompts are measured whole by the processor instead (and skipped when over)."""
        if not self._counter_known:
            self._counter_known = True
            try:
                self._counter = ImageTokenCounter(self.processor, ImageSizes(self.image_dir))
            except ContextError as exc:
                logger.warning("key frames cannot be dropped one by one for this processor (%s)", exc)
        return self._counter

    def generate_fitted(self, fitted: Sequence[FittedPrompt], max_new_tokens: int, batch_size: int,
                        on_batch: Callable[[list[int], list[str]], None] | None = None,
                        context: ContextPolicy | None = None, do_sample: bool = False, temperature: float = 1.0,
                        top_p: float = 1.0) -> list[str]:
        """Completions for fitted prompts (none skipped), in token-budget batches, longest first."""
        import torch

        _require_unskipped(fitted)
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": self.tokenizer.pad_token_id}
        if do_sample:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)

        def generate(batch: list[int]) -> list[str]:
            inputs = self._inputs([fitted[i].messages or [] for i in batch],
                                  [fitted[i].completion_prefix for i in batch]).to(self.model.device)
            with torch.inference_mode():
                output = self.model.generate(**inputs, **kwargs)
            return self.tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

        return batched_completions(fitted, max_new_tokens, batch_size, context, generate, on_batch)


# ---------------------------------------------------------------------------------------------------
# Which model, and building the engine
# ---------------------------------------------------------------------------------------------------


def is_endpoint(model_name: str) -> bool:
    return str(model_name).startswith(ENDPOINT_PREFIXES)


def require_vision_model(model_name: str) -> None:
    """Raise ``ModelLoadError`` unless ``model_name`` is a vision-language model (read from its config;
    an endpoint is taken at its word). Cheap: only the config is read, no weights."""
    from embodied_r.inference.models import BUILTIN_MODELS, resolve_model_path

    if is_endpoint(model_name):
        return
    if model_name in BUILTIN_MODELS:
        raise ModelLoadError(f"these prompt rows carry images, and {model_name} is a text-only model; give a "
                             f"vision-language model (e.g. Qwen/Qwen2.5-VL-3B-Instruct) {TEXT_ROWS_HINT}")
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    try:
        config = AutoConfig.from_pretrained(resolve_model_path(model_name))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read the config of {model_name!r} ({exc})") from exc
    if config.model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        architecture = ", ".join(getattr(config, "architectures", None) or [config.model_type])
        raise ModelLoadError(f"these prompt rows carry images, and {model_name} is a text-only model ({architecture}); "
                             f"give a vision-language model (e.g. Qwen/Qwen2.5-VL-3B-Instruct) {TEXT_ROWS_HINT}")


def load_vision_model(model_name: str, dtype: str = "auto") -> tuple[Any, Any]:
    """A vision-language model (eval mode, on the GPU when there is one) and its left-padded processor."""
    import torch
    from transformers import AutoModelForImageTextToText
    from transformers.utils import logging as hf_logging

    from embodied_r.inference.models import hub_kernel_kwargs, resolve_model_path, torch_dtype
    from embodied_r.inference.vl_processor import load_vl_processor

    hf_logging.disable_progress_bar()
    require_vision_model(model_name)
    path = resolve_model_path(model_name)
    processor = load_vl_processor(path)
    try:
        model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch_dtype(dtype), **hub_kernel_kwargs())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load the vision-language model {model_name!r}: {exc}") from exc
    if processor.tokenizer.pad_token is None:  # batched generation pads; many chat models ship no pad token
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    if torch.cuda.is_available():
        model.to("cuda")
    return model.eval(), processor


def make_vl_engine(model_name: str, engine: str = "auto", dtype: str = "auto",
                   image_dir: str | Path | None = None) -> Engine:
    """The engine for image rows: an endpoint for an ``http(s)://`` model, else a local VL model."""
    if engine not in ("auto", "transformers", "vllm"):
        raise ValueError(f"unknown engine {engine!r}; choose auto, transformers or vllm")
    if is_endpoint(model_name):
        from embodied_r.evaluation.vl_endpoint import EndpointVLEngine

        return EndpointVLEngine(model_name, image_dir=image_dir)
    if engine == "vllm":
        raise ModelLoadError("--engine vllm generates from text prompts only; for image rows serve the model with "
                             "`vllm serve MODEL` and give --model http://HOST:PORT/v1, or use --engine transformers")
    return VisionLanguageEngine(*load_vision_model(model_name, dtype=dtype), image_dir=image_dir)


__all__ = ["VisionLanguageEngine", "fit_over_long", "is_endpoint", "load_vision_model", "make_vl_engine",
           "require_vision_model"]
