"""Batched chat generation with a transformers model (greedy by default).

Batching is the main lever on CPU (feasibility.md §3: 8x throughput from bs 1 to 32), so prompts are
grouped by token length to waste little compute on padding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Messages = list[dict[str, str]]


def render_chat(tokenizer: Any, messages: Messages) -> str:
    """The model's chat template applied to ``messages``, ending with the assistant turn opener."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # Tokenizers without a template (tiny test models): a plain, explicit transcript.
    lines = [f"{m['role']}: {m['content']}" for m in messages]
    return "\n".join(lines) + "\nassistant:"


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Index batches with similar lengths, longest first (an out-of-memory shows up at once).

    >>> length_sorted_batches([5, 1, 9, 3], 2)
    [[2, 0], [3, 1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def generate_batch(model: Any, tokenizer: Any, texts: Sequence[str], max_new_tokens: int,
                   do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0) -> list[str]:
    """Generate one completion per already-templated text; returns only the new text."""
    import torch

    encoded = tokenizer(list(texts), return_tensors="pt", padding=True, add_special_tokens=False)
    encoded = {k: v.to(model.device) for k, v in encoded.items()}
    kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id}
    if do_sample:
        kwargs.update(do_sample=True, temperature=temperature, top_p=top_p)
    else:
        kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    with torch.inference_mode():
        output = model.generate(**encoded, **kwargs)
    new_tokens = output[:, encoded["input_ids"].shape[1]:]
    return tokenizer.batch_decode(new_tokens, skip_special_tokens=True)


def generate_chats(model: Any, tokenizer: Any, conversations: Sequence[Messages], max_new_tokens: int = 256,
                   batch_size: int = 8, on_batch: Callable[[list[int], list[str]], None] | None = None,
                   **sampling: Any) -> list[str]:
    """Completions for many chats, batched by length; ``on_batch(indices, completions)`` is called as
    each batch finishes so callers can persist results incrementally."""
    texts = [render_chat(tokenizer, c) for c in conversations]
    lengths = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    results: list[str] = [""] * len(texts)
    for batch in length_sorted_batches(lengths, max(1, batch_size)):
        completions = generate_batch(model, tokenizer, [texts[i] for i in batch], max_new_tokens, **sampling)
        for index, completion in zip(batch, completions):
            results[index] = completion
        if on_batch is not None:
            on_batch(batch, completions)
    return results
