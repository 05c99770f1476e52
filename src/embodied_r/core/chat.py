"""Chat messages: reading a completion's or a prompt's text, and rendering messages with a chat template.

TRL hands reward functions ``completions`` either as strings (plain prompts) or as lists of chat
messages (conversational prompts, what our prompt rows are); prompts are chat messages. Rewards,
evaluation, training and the judges all read and render them the same way, through this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Messages = list[dict[str, str]]


def completion_text(completion: Any) -> str:
    """The generated text of one completion, whichever form TRL passed.

    >>> completion_text([{"role": "assistant", "content": "<answer>A</answer>"}])
    '<answer>A</answer>'
    >>> completion_text("plain")
    'plain'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # multimodal content parts
            # Image parts carry no text (a data set may store theirs as None): only text is joined.
            return "".join(str(part.get("text") or "") for part in content if isinstance(part, Mapping))
        return str(content)
    if isinstance(completion, Mapping):
        return str(completion.get("content", ""))
    raise TypeError(f"cannot read completion text from {type(completion).__name__}")


def last_user_text(prompt: Any) -> str:
    """Content of the last user message of a chat prompt (or the prompt itself when it is a string)."""
    if isinstance(prompt, str):
        return prompt
    for message in reversed(list(prompt or [])):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return completion_text([message])
    return ""


def render_chat(tokenizer: Any, messages: Messages, completion_prefix: str = "") -> str:
    """The model's chat template applied to ``messages``, ending with the assistant turn opener and then
    ``completion_prefix`` (a prefilled start of the answer, e.g. ``"<think>"``, that the model continues;
    training appends the same text to the same rendered prompt, see ``training.grpo``)."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:
        # Tokenizers without a template (tiny test models): a plain, explicit transcript.
        lines = [f"{m['role']}: {m['content']}" for m in messages]
        text = "\n".join(lines) + "\nassistant:"
    return text + completion_prefix


def has_image(row: Any) -> bool:
    """Whether a row's prompt holds an image part (``{"type": "image", "image": PATH}``), as the rows of
    Robot-R1's ``prompts_vl.jsonl`` do."""
    return any(
        isinstance(part, dict) and part.get("type") == "image"
        for message in row.prompt
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for part in message["content"]
    )
