"""The ``transformers`` perception backend: a local Qwen2.5-VL-family model, batched.

The official local script runs Qwen2.5-VL-72B through ms-swift one request at a time
(the official pipeline). Here requests are grouped into batches of ``batch_size`` (left-padded,
so every row's new tokens start at the same column) and generated together, which is what keeps a
GPU busy. Any model that loads with ``AutoModelForImageTextToText`` and whose processor accepts
``text=`` + ``images=`` with chat-template image tokens works (Qwen2-VL, Qwen2.5-VL, Qwen3-VL).

A batch that raises (e.g. out of memory on one long prompt) is retried one request at a time, and a
request that still fails becomes a failed result carrying the exception text — finished work is
never lost and the failure is reported, not turned into an empty description.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from embodied_r.inference.requests import FrameRequest, FrameResult, OnResult

logger = logging.getLogger(__name__)


class TransformersBackend:
    name = "transformers"
    needs_images = True
    per_question = False

    def __init__(self, model: str, batch_size: int = 4, max_new_tokens: int = 512, temperature: float = 0.0,
                 device: str = "auto", dtype: str = "auto", model_obj: Any = None, processor: Any = None) -> None:
        """``model`` is a Hugging Face id or local path (also the name written into records);
        ``model_obj``/``processor`` let a caller pass an already loaded model (tests build a tiny one
        from a config)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.device = device
        self.dtype = dtype
        self._model = model_obj
        self._processor = processor

    def settings(self) -> dict[str, Any]:
        # Batch size is left out on purpose: with greedy decoding it does not change the answers.
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature}

    # -- loading -------------------------------------------------------------------------------------

    def _load(self) -> tuple[Any, Any]:
        if self._model is None or self._processor is None:
            import torch
            from transformers import AutoModelForImageTextToText

            from embodied_r.inference.models import hub_kernel_kwargs
            from embodied_r.inference.vl_processor import load_vl_processor

            dtype = self.dtype if self.dtype == "auto" else getattr(torch, self.dtype)
            device_map = self.device if self.device != "cpu" else None
            logger.info("loading %s (dtype=%s, device=%s)", self.model, self.dtype, self.device)
            self._processor = load_vl_processor(self.model)  # works without torchvision, for images
            self._model = AutoModelForImageTextToText.from_pretrained(
                self.model, dtype=dtype, device_map=device_map, **hub_kernel_kwargs()).eval()
        tokenizer = getattr(self._processor, "tokenizer", self._processor)
        tokenizer.padding_side = "left"  # generation appends on the right of every row
        return self._model, self._processor

    # -- generation ----------------------------------------------------------------------------------

    @staticmethod
    def _conversation(request: FrameRequest) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = [{"type": "image"} for _ in request.images or []]
        content.append({"type": "text", "text": request.prompt})
        return [{"role": "user", "content": content}]

    def _generate(self, batch: list[FrameRequest]) -> list[str]:
        import torch
        from PIL import Image

        model, processor = self._load()
        texts = [processor.apply_chat_template(self._conversation(r), tokenize=False, add_generation_prompt=True)
                 for r in batch]
        # Images flattened in prompt order; the processor pairs them with the image tokens in order.
        images = [Image.fromarray(image[:, :, ::-1].copy()) for r in batch for image in (r.images or [])]
        inputs = processor(text=texts, images=images or None, padding=True, return_tensors="pt")
        inputs = inputs.to(model.device)
        sampling = {"do_sample": True, "temperature": self.temperature} if self.temperature > 0 else \
            {"do_sample": False}
        with torch.inference_mode():
            output = model.generate(**inputs, max_new_tokens=self.max_new_tokens, **sampling)
        new_tokens = output[:, inputs["input_ids"].shape[1]:]
        tokenizer = getattr(processor, "tokenizer", processor)
        return tokenizer.batch_decode(new_tokens, skip_special_tokens=True)

    def _batches(self, requests: Iterable[FrameRequest]) -> Iterator[list[FrameRequest]]:
        iterator = iter(requests)
        while batch := list(islice(iterator, self.batch_size)):
            yield batch

    def run(self, requests: Iterable[FrameRequest], on_result: OnResult) -> None:
        for batch in self._batches(requests):
            started = time.perf_counter()
            try:
                texts = self._generate(batch)
            except (RuntimeError, ValueError) as exc:
                if len(batch) == 1:
                    on_result(batch[0], FrameResult(error=f"generation failed: {type(exc).__name__}: {exc}"))
                    batch[0].images = None
                    continue
                logger.warning("batch of %d failed (%s); retrying one by one", len(batch), exc)
                for request in batch:
                    self.run([request], on_result)
                continue
            seconds = (time.perf_counter() - started) / len(batch)
            for request, text in zip(batch, texts):
                request.images = None
                on_result(request, FrameResult(text=text.strip(), seconds=seconds))
