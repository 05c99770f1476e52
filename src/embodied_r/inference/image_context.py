"""The context policy for key-frame prompts: image tokens counted, the oldest key frames dropped first.

A key-frame row (``core.keyframe_chat``) is measured as the model reads it: the chat template's text
tokens plus, for each image, the tokens the processor expands its placeholder into. Those come from the
image's size alone (its file header) and the image processor's own resize rule, so a 32-frame row is
measured without decoding or resizing a pixel. What does not fit is handled by the same declared rules
as text (``inference.context_policy``):

- ``drop-frames`` (default): remove whole key frames (frame line and image), oldest first, until the
  prompt fits, always keeping at least the latest frame; a row where even that one does not fit is
  skipped with the reason recorded (training refuses such rows by name instead: a question without its
  video would be trained blind);
- ``skip``: the row is not given to the model, and that is recorded;
- ``truncate-left`` / ``truncate-left-tokens`` would cut through image tokens: a ``ContextError``.

Counting is implemented for processors whose image processor states its patch count per image size and
merges patches (the Qwen2-VL family's; tested with Qwen2.5-VL's); others raise a ``ContextError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from embodied_r.core.chat import render_chat
from embodied_r.core.keyframe_chat import image_parts, keyframe_count, without_oldest_keyframes
from embodied_r.inference.context_policy import TOKEN_CUT_RULE, ContextError, FittedPrompt, smallest_passing

ImageSize = Callable[[Mapping[str, Any]], tuple[int, int]]  # an image part -> (width, height)


class ImageTokenCounter:
    """Prompt tokens of chats with image parts, as ``processor`` would produce them (``image_size`` gives an
    image part's ``(width, height)``, e.g. ``core.image_files.ImageSizes``)."""

    def __init__(self, processor: Any, image_size: ImageSize) -> None:
        image_processor = getattr(processor, "image_processor", None)
        image_token = getattr(processor, "image_token", None)
        if image_processor is None or image_token is None or \
                not hasattr(image_processor, "get_number_of_image_patches"):
            raise ContextError(f"{type(processor).__name__} does not say how many tokens an image of a given size "
                               "takes; counting image tokens is implemented for the Qwen2-VL family's processors "
                               "(Qwen2-VL, Qwen2.5-VL)")
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.image_processor = image_processor
        self.image_token_id = int(self.tokenizer.convert_tokens_to_ids(image_token))
        # Qwen2-VL merges merge_size x merge_size patches into one token of the language model.
        self.merge = int(getattr(image_processor, "merge_size", 1) or 1)
        self.image_size = image_size
        self._tokens: dict[tuple[int, int], int] = {}

    def image_tokens(self, width: int, height: int) -> int:
        """Language-model tokens of one image of this size, after the processor's own resize."""
        key = (int(width), int(height))
        if key not in self._tokens:
            patches = self.image_processor.get_number_of_image_patches(key[1], key[0], {})
            self._tokens[key] = max(1, int(patches) // (self.merge * self.merge))
        return self._tokens[key]

    def token_ids(self, messages: Sequence[Mapping[str, Any]], completion_prefix: str = "") -> list[int]:
        """The prompt's token ids with every image placeholder expanded to its image's tokens (what the
        processor's ``input_ids`` hold for the same chat and images)."""
        text = render_chat(self.processor, list(messages), completion_prefix)  # type: ignore[arg-type]
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        counts = [self.image_tokens(*self.image_size(part)) for part in image_parts(messages)]
        placeholders = sum(1 for token in ids if token == self.image_token_id)
        if placeholders != len(counts):
            raise ContextError(f"the chat template wrote {placeholders} image placeholder(s) for {len(counts)} "
                               "image(s); this processor's template does not expand image parts one by one")
        out: list[int] = []
        images = iter(counts)
        for token in ids:
            out.extend([token] * next(images) if token == self.image_token_id else [token])
        return out


def fit_keyframe_chat(counter: ImageTokenCounter, messages: Sequence[Mapping[str, Any]], limit: int,
                      rule: str = "drop-frames", completion_prefix: str = "") -> FittedPrompt:
    """Apply ``rule`` to one key-frame chat so that its prompt, image tokens included, is at most ``limit``."""
    chat = [dict(m) for m in messages]
    ids = counter.token_ids(chat, completion_prefix)
    total = len(ids)
    if total <= limit:
        return FittedPrompt(chat, "fits", total, total, limit, token_ids=ids,  # type: ignore[arg-type]
                            completion_prefix=completion_prefix)
    if rule in ("truncate-left", TOKEN_CUT_RULE):
        raise ContextError(f"a key-frame prompt of {total} tokens (image tokens included) exceeds the limit of "
                           f"{limit}, and the {rule} rule would cut through image tokens; use drop-frames (the "
                           "oldest key frames go first) or skip")
    frames = keyframe_count(chat)

    def skipped(reason: str) -> FittedPrompt:
        return FittedPrompt(None, "skipped", total, 0, limit, reason=reason, completion_prefix=completion_prefix)

    if rule == "skip":
        return skipped(f"{total} prompt tokens (image tokens included) exceed the limit of {limit}")
    if frames == 0:
        return skipped(f"{total} prompt tokens (image tokens included) exceed the limit of {limit} and the prompt "
                       "has no key frames to drop")
    cache: dict[int, list[int]] = {}

    def fits(count: int) -> bool:
        cache[count] = counter.token_ids(without_oldest_keyframes(chat, count), completion_prefix)
        return len(cache[count]) <= limit

    # At least the latest key frame stays: a key-frame question without any frame would be answered blind.
    count = smallest_passing(1, frames - 1, fits)
    if count is None:
        last_only = cache.get(frames - 1) or counter.token_ids(without_oldest_keyframes(chat, frames - 1),
                                                               completion_prefix)
        return skipped(f"no key frame fits: {total} prompt tokens (image tokens included) exceed the limit of "
                       f"{limit}, and {len(last_only)} remain with only its latest of {frames} key frames; lower "
                       "the pixel budget (build-prompts --max-pixels) or raise max_prompt_tokens")
    kept = cache[count] if count in cache else counter.token_ids(without_oldest_keyframes(chat, count),
                                                                 completion_prefix)
    return FittedPrompt(without_oldest_keyframes(chat, count), "dropped-frames", total, len(kept), limit,  # type: ignore[arg-type]
                        frames_dropped=count, token_ids=kept, completion_prefix=completion_prefix)


NO_FRAME_FITS = "no key frame fits"

__all__ = ["NO_FRAME_FITS", "ImageTokenCounter", "fit_keyframe_chat"]
