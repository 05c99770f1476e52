"""Small helpers shared by reward functions: dataset columns and the completion prefix.

TRL hands a reward function every dataset column as a keyword argument holding one value per
completion. Reading a completion's text is ``embodied_r.core.chat.completion_text``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def column(columns: Mapping[str, Any], name: str, n: int, required: bool = False) -> list[Any]:
    """Column ``name`` as a list of ``n`` values (Nones when absent and not required)."""
    values = columns.get(name)
    if values is None:
        if required:
            raise KeyError(
                f"reward needs the dataset column {name!r}; prompt rows must carry it (see records.PromptRow)"
            )
        return [None] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return values


def with_completion_prefix(completions: Sequence[Any], prefix: str) -> list[Any]:
    """``completions`` with ``prefix`` put back in front of the generated text, in the same form.

    With a prefilled assistant turn (recipe key ``completion_prefix``) the prefix is part of the prompt
    the model continues, so TRL's completions lack it; the rewards must still see the whole assistant
    turn, or rules anchored at its start (``^<think>``) would fail on every completion.

    >>> with_completion_prefix(["x</think>"], "<think>")
    ['<think>x</think>']
    >>> with_completion_prefix([[{"role": "assistant", "content": "x"}]], "<think>")
    [[{'role': 'assistant', 'content': '<think>x'}]]
    """
    if not prefix:
        return list(completions)
    out: list[Any] = []
    for completion in completions:
        if isinstance(completion, str):
            out.append(prefix + completion)
        elif (
            isinstance(completion, Sequence)
            and completion
            and isinstance(completion[-1], Mapping)
            and isinstance(completion[0].get("content"), str)
        ):
            # The prefix opens the first assistant message (TRL puts the generated text there).
            first = {**completion[0], "content": prefix + completion[0]["content"]}
            out.append([first, *completion[1:]])
        else:
            raise TypeError(
                f"completion_prefix needs text completions; got {type(completion).__name__} "
                "(multimodal content parts are not supported with a prefix)"
            )
    return out
