"""Image prompt rows answered by a vision-language model behind an OpenAI-compatible endpoint.

``eval --model http://HOST:PORT/v1`` (vLLM or SGLang serving Qwen2.5-VL, or a hosted VLM) on image rows.
Requests go through the perception stage's client (``perception.openai_client.ChatBackend``: bounded
concurrency, timeouts, retries with backoff, the API key from ``$OPENAI_API_KEY``), with the row's own
chat messages as the body and each image part sent as a base64 JPEG data URL (``jpeg_data_url``).
Decoding is greedy (temperature 0). The served model is the one the endpoint lists at ``/models``.

The endpoint's tokenizer is not at hand, so prompts are not measured in tokens: a prompt cap
(``--max-prompt-tokens``) cannot be applied and is refused, and a prompt over the server's context is
rejected by the server and reported, never cut. Requests that fail after their retries are reported
together once every other answer has been saved; a rerun retries only them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.chat import Messages
from embodied_r.evaluation.image_prompts import image_parts, resolve_image
from embodied_r.inference.context_policy import ContextError, ContextPolicy, FittedPrompt
from embodied_r.inference.generation import Engine, _require_unskipped
from embodied_r.inference.models import ModelLoadError
from embodied_r.inference.openai_client import ChatBackend, OpenAIBackend, jpeg_data_url

logger = logging.getLogger(__name__)


class EndpointError(ModelLoadError):
    """The endpoint cannot answer these rows (no single served model, failed requests, a prefilled turn)."""


def openai_messages(messages: Messages, image_dir: Path | None, jpeg_quality: int = 90) -> list[dict[str, Any]]:
    """``messages`` with every image part as an ``image_url`` data-URL part (OpenAI chat format)."""
    import cv2

    out = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            out.append(dict(message))
            continue
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image":
                path = resolve_image(part.get("image"), image_dir)
                image = cv2.imread(str(path), cv2.IMREAD_COLOR)
                if image is None:
                    raise ModelLoadError(f"image {path} could not be read")
                parts.append({"type": "image_url", "image_url": {"url": jpeg_data_url(image, jpeg_quality)}})
            else:
                parts.append(part)
        out.append({**message, "content": parts})
    return out


class EndpointVLEngine(Engine):
    """Generation through an OpenAI-compatible chat endpoint (images as data URLs), greedy."""

    name = "openai-vl"
    tokenizer = None

    def __init__(self, base_url: str, image_dir: str | Path | None = None, served_model: str | None = None,
                 concurrency: int = 8, timeout: float = 300.0, max_retries: int = 3, jpeg_quality: int = 90) -> None:
        self.base_url = base_url.rstrip("/")
        self.image_dir = Path(image_dir) if image_dir is not None else None
        self.concurrency, self.timeout, self.max_retries = concurrency, timeout, max_retries
        self.jpeg_quality = jpeg_quality
        self._served_model = served_model

    def context_length(self) -> int:
        raise ContextError("an endpoint's context length is not known here")

    def served_model(self) -> str:
        """The model the endpoint serves (its only entry at ``/models``)."""
        if self._served_model:
            return self._served_model
        try:
            served = OpenAIBackend(model="", base_url=self.base_url).served_models()
        except ValueError as exc:
            raise EndpointError(f"{self.base_url}/models did not list the served models ({exc})") from exc
        if len(served) != 1:
            raise EndpointError(f"{self.base_url} serves {served or 'no model'}; eval needs an endpoint serving "
                                "exactly one model (start `vllm serve MODEL` for the model to evaluate)")
        self._served_model = served[0]
        return self._served_model

    def fit(self, conversations: Sequence[Messages], max_new_tokens: int, completion_prefix: str = "",
            context: ContextPolicy | None = None) -> list[FittedPrompt]:
        """Every chat as given (nothing can be measured without the server's tokenizer); images checked."""
        policy = context or ContextPolicy()
        if policy.max_prompt_tokens is not None:
            raise ContextError("--max-prompt-tokens cannot be applied to an endpoint model: its prompts are not "
                               "measured here (the server rejects a prompt over its context, and that is reported)")
        if completion_prefix:
            raise EndpointError("--completion-prefix prefills the assistant turn, which a chat endpoint does not "
                                "do; evaluate a local model for that, or drop the prefix")
        for messages in conversations:
            for part in image_parts(list(messages)):
                resolve_image(part.get("image"), self.image_dir)  # a missing image fails before any request
        return [FittedPrompt(list(c), "fits", 0, 0, 0) for c in conversations]

    def generate_fitted(self, fitted: Sequence[FittedPrompt], max_new_tokens: int, batch_size: int,
                        on_batch: Callable[[list[int], list[str]], None] | None = None,
                        context: ContextPolicy | None = None, do_sample: bool = False, temperature: float = 1.0,
                        top_p: float = 1.0) -> list[str]:
        """One completion per prompt, ``batch_size`` requests at a time (each finished batch is handed to
        ``on_batch``); failed requests raise ``EndpointError`` after the rest are done."""
        _require_unskipped(fitted)
        backend = ChatBackend(model=self.served_model(), base_url=self.base_url,
                              concurrency=max(1, min(self.concurrency, batch_size)), timeout=self.timeout,
                              max_retries=self.max_retries, temperature=temperature if do_sample else 0.0,
                              max_tokens=max_new_tokens, extra_body={"top_p": top_p} if do_sample else None)
        results = [""] * len(fitted)
        errors: list[str] = []
        step = max(1, batch_size)
        for start in range(0, len(fitted), step):
            indices = list(range(start, min(start + step, len(fitted))))
            replies = backend.complete([(openai_messages(fitted[i].messages or [], self.image_dir, self.jpeg_quality),
                                         None) for i in indices])
            done = [i for i, reply in zip(indices, replies) if reply is not None and reply.ok]
            errors += [f"prompt {i}: {reply.error if reply is not None else 'no reply'}"
                       for i, reply in zip(indices, replies) if i not in done]
            for i, reply in zip(indices, replies):
                if i in done:
                    results[i] = str(reply.text)
            if on_batch is not None and done:
                on_batch(done, [results[i] for i in done])
        if errors:
            raise EndpointError(f"{len(errors)} of {len(fitted)} request(s) to {self.base_url} failed (the others are "
                                f"saved; rerun to retry these): " + "; ".join(errors[:3]))
        return results


__all__ = ["EndpointError", "EndpointVLEngine", "openai_messages"]
