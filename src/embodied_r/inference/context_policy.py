"""The context policy: what every stage that feeds a model does with a prompt that does not fit.

A prompt is measured in tokens (the model's chat template applied, the completion prefix included)
before anything is batched. The limit is the model's context minus the generation budget, or a
configured ``max_prompt_tokens`` when that is smaller. A prompt over the limit is handled by one
declared rule and the row records what happened (``FittedPrompt.record``):

- ``drop-frames`` (default): remove whole ``Frame k: ...`` descriptions, oldest first, until the prompt
  fits; the instructions, the question and the choices are kept. A VLM that repeated itself for
  100,000 characters loses that frame and the ones before it, not the question.
- ``truncate-left``: drop the oldest tokens of the last user message (the instructions and the first
  frames go first, the question and choices at its end stay), as the official Embodied-R trainer cuts
  prompts from the left. The system prompt and the chat template are kept, so the model still sees a
  well-formed turn.
- ``truncate-left-tokens``: the official Embodied-R trainer's rule exactly (ms-swift's left truncation):
  the last ``limit`` tokens of the rendered prompt, whatever they are, so a long prompt loses its system
  prompt and chat-template opening first. The messages are kept as given and the cut is made on the
  token ids (generation reads those; training cuts TRL's prompt ids the same way).
- ``skip``: the row is not given to the model; it is recorded (and scored as unanswered by ``eval``).

``drop-frames`` falls back to ``skip`` when the row has no frame descriptions or does not fit even
without them. Batches are then formed by a token budget (``token_budget_batches``), so one long row
cannot multiply memory: a batch's padded size, rows x longest, stays within ``max_batch_tokens``.
"""

from __future__ import annotations

import copy
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from embodied_r.core.chat import Messages, render_chat

logger = logging.getLogger(__name__)

RULES = ("drop-frames", "truncate-left", "truncate-left-tokens", "skip")
TOKEN_CUT_RULE = "truncate-left-tokens"
DEFAULT_RULE = "drop-frames"
# Padded tokens per generation batch. Measured with SmolLM2-135M on CPU: prompt attention grows with
# rows x length^2, and two 7,900-token rows plus the model stay well under 8 GB (docs/performance.md).
DEFAULT_MAX_BATCH_TOKENS = 16384
# Used when a model's config states no context length.
FALLBACK_CONTEXT = 2048

_FRAME_LINE = re.compile(r"^\s*Frame \d+:")


class ContextError(ValueError):
    """A context policy that cannot be applied (bad rule, no room left for the prompt)."""


@dataclass(frozen=True)
class ContextPolicy:
    """A rule for over-long prompts, an optional prompt cap, and the batch token budget."""

    rule: str = DEFAULT_RULE
    max_prompt_tokens: int | None = None
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ContextError(f"unknown context rule {self.rule!r}; choose one of {', '.join(RULES)}")
        if self.max_prompt_tokens is not None and int(self.max_prompt_tokens) < 1:
            raise ContextError(f"max_prompt_tokens must be a positive integer, got {self.max_prompt_tokens}")
        if int(self.max_batch_tokens) < 1:
            raise ContextError(f"max_batch_tokens must be a positive integer, got {self.max_batch_tokens}")

    def limit(self, model_context: int | None, max_new_tokens: int = 0) -> int:
        """Prompt tokens allowed: the context minus the generation budget, capped by ``max_prompt_tokens``.

        >>> ContextPolicy(max_prompt_tokens=6144).limit(8192, 256)
        6144
        >>> ContextPolicy().limit(8192, 256)
        7936
        """
        context = int(model_context or FALLBACK_CONTEXT)
        room = context - int(max_new_tokens)
        if room < 1:
            raise ContextError(f"a generation budget of {max_new_tokens} new tokens leaves no room for a prompt in "
                               f"the model's {context}-token context; lower max_new_tokens")
        return min(room, int(self.max_prompt_tokens)) if self.max_prompt_tokens else room

    def describe(self) -> dict[str, Any]:
        return {"rule": self.rule, "max_prompt_tokens": self.max_prompt_tokens,
                "max_batch_tokens": int(self.max_batch_tokens)}

    def report(self, records: Iterable[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
        """The policy and ``context_summary`` of ``(id, FittedPrompt.record())`` pairs (metrics, context.json)."""
        return {"policy": self.describe(), **context_summary(records)}


def model_context_length(model: Any) -> int:
    """The context length a model's config states (``max_position_embeddings``), else 2,048."""
    config = getattr(model, "config", model)
    text_config = getattr(config, "text_config", None) or config  # vision-language models nest it
    value = getattr(text_config, "max_position_embeddings", None)
    return int(value) if value else FALLBACK_CONTEXT


# ---------------------------------------------------------------------------------------------------
# Fitting one prompt
# ---------------------------------------------------------------------------------------------------


@dataclass
class FittedPrompt:
    """A prompt after the policy: the messages to use (``None`` when skipped) and what was done."""

    messages: Messages | None
    action: str  # fits | dropped-frames | truncated-left | truncated-left-tokens | skipped
    prompt_tokens: int  # the whole prompt, as given
    kept_tokens: int  # what the model reads (0 when skipped)
    limit: int
    frames_dropped: int = 0
    reason: str = ""
    token_ids: list[int] = field(default_factory=list, repr=False)  # the rendered, fitted prompt
    completion_prefix: str = ""  # part of token_ids: the opening of the assistant turn the model continues

    @property
    def skipped(self) -> bool:
        return self.messages is None

    def record(self) -> dict[str, Any] | None:
        """What a prediction or training row stores about its prompt; ``None`` when it fit untouched."""
        if self.action == "fits":
            return None
        out: dict[str, Any] = {"action": self.action, "prompt_tokens": self.prompt_tokens,
                               "kept_tokens": self.kept_tokens, "limit": self.limit}
        if self.frames_dropped:
            out["frames_dropped"] = self.frames_dropped
        if self.reason:
            out["reason"] = self.reason
        return out


def _token_ids(tokenizer: Any, messages: Messages, completion_prefix: str) -> list[int]:
    return list(tokenizer(render_chat(tokenizer, messages, completion_prefix), add_special_tokens=False)["input_ids"])


def _last_user_index(messages: Messages) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user" and isinstance(messages[index].get("content"), str):
            return index
    return None


def frame_line_numbers(text: str) -> list[int]:
    """Line numbers of the ``Frame k:`` descriptions in a reasoner prompt's user text.

    >>> frame_line_numbers("Video content: \\n<\\nheader\\nFrame 0: a\\nFrame 1: b\\n>\\nQuestion: q")
    [3, 4]
    """
    return [i for i, line in enumerate(text.split("\n")) if _FRAME_LINE.match(line)]


def without_oldest_frames(messages: Messages, count: int) -> Messages:
    """``messages`` with the first ``count`` frame descriptions of the last user message removed."""
    index = _last_user_index(messages)
    if index is None or count <= 0:
        return messages
    lines = messages[index]["content"].split("\n")
    drop = set(frame_line_numbers(messages[index]["content"])[:count])
    out = copy.deepcopy(messages)
    out[index]["content"] = "\n".join(line for i, line in enumerate(lines) if i not in drop)
    return out


def smallest_passing(low: int, high: int, passes: Callable[[int], bool]) -> int | None:
    """The smallest ``k`` in ``[low, high]`` with ``passes(k)`` (monotone in k), else ``None``.

    >>> smallest_passing(0, 10, lambda k: k * k >= 20), smallest_passing(3, 2, lambda k: True)
    (5, None)
    """
    if high < low or not passes(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle + 1
    return low


def fit_chat(tokenizer: Any, messages: Messages, limit: int, rule: str = DEFAULT_RULE,
             completion_prefix: str = "") -> FittedPrompt:
    """Apply ``rule`` to one chat prompt so that its rendered length is at most ``limit`` tokens.

    Only text is measured: image tokens of a vision-language row are not counted here.
    """
    ids = _token_ids(tokenizer, messages, completion_prefix)
    total = len(ids)
    if total <= limit:
        return FittedPrompt(messages, "fits", total, total, limit, token_ids=ids, completion_prefix=completion_prefix)

    def skipped(reason: str) -> FittedPrompt:
        return FittedPrompt(None, "skipped", total, 0, limit, reason=reason, completion_prefix=completion_prefix)

    if rule == "skip":
        return skipped(f"{total} prompt tokens exceed the limit of {limit}")
    if rule == TOKEN_CUT_RULE:
        return FittedPrompt(messages, "truncated-left-tokens", total, limit, limit, token_ids=ids[total - limit:],
                            completion_prefix=completion_prefix)
    index = _last_user_index(messages)
    if index is None:
        return skipped(f"{total} prompt tokens exceed the limit of {limit} and there is no text user message to cut")
    if rule == "drop-frames":
        frames = len(frame_line_numbers(messages[index]["content"]))
        if not frames:
            return skipped(f"{total} prompt tokens exceed the limit of {limit} and the prompt has no frame "
                           "descriptions to drop")
        cache: dict[int, list[int]] = {}

        def fits(count: int) -> bool:
            cache[count] = _token_ids(tokenizer, without_oldest_frames(messages, count), completion_prefix)
            return len(cache[count]) <= limit

        count = smallest_passing(1, frames, fits)
        if count is None:
            return skipped(f"{total} prompt tokens exceed the limit of {limit} even without its {frames} frame "
                           "descriptions")
        kept = cache[count] if count in cache else _token_ids(tokenizer, without_oldest_frames(messages, count),
                                                              completion_prefix)
        return FittedPrompt(without_oldest_frames(messages, count), "dropped-frames", total, len(kept), limit,
                            frames_dropped=count, token_ids=kept, completion_prefix=completion_prefix)
    # truncate-left: keep the last k tokens of the user text, the largest k that fits.
    content = messages[index]["content"]
    user_ids = tokenizer(content, add_special_tokens=False)["input_ids"]

    def cut(keep: int) -> Messages:
        out = copy.deepcopy(messages)
        out[index]["content"] = tokenizer.decode(user_ids[len(user_ids) - keep:]) if keep else ""
        return out

    overhead = total - len(user_ids)
    if overhead >= limit:
        return skipped(f"{total} prompt tokens exceed the limit of {limit} and the prompt without its user text "
                       f"still needs {overhead}")
    # Search the number of user tokens to drop; decoding and re-encoding can shift counts by a token.
    drop = smallest_passing(max(0, total - limit), len(user_ids),
                             lambda d: len(_token_ids(tokenizer, cut(len(user_ids) - d), completion_prefix)) <= limit)
    if drop is None:
        return skipped(f"{total} prompt tokens exceed the limit of {limit}")
    fitted = cut(len(user_ids) - drop)
    kept = _token_ids(tokenizer, fitted, completion_prefix)
    return FittedPrompt(fitted, "truncated-left", total, len(kept), limit, token_ids=kept,
                        completion_prefix=completion_prefix)


def fit_chats(tokenizer: Any, conversations: Sequence[Messages], limit: int, rule: str = DEFAULT_RULE,
              completion_prefix: str = "") -> list[FittedPrompt]:
    """``fit_chat`` for every conversation; logs one line when any prompt was cut or skipped (callers
    record the details per row)."""
    fitted = [fit_chat(tokenizer, c, limit, rule, completion_prefix) for c in conversations]
    actions = Counter(f.action for f in fitted if f.action != "fits")
    if actions:
        logger.warning("%d of %d prompt(s) exceed the %d-token limit: %s", sum(actions.values()), len(fitted), limit,
                       dict(actions))
    return fitted


def context_summary(records: Iterable[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    """Counts of what the policy did over many rows, and one entry per affected row, from
    ``(id, FittedPrompt.record())`` pairs.

    >>> context_summary([("a", None), ("b", {"action": "skipped"})])
    {'affected': 1, 'actions': {'skipped': 1}, 'rows': [{'id': 'b', 'action': 'skipped'}]}
    """
    rows = [{"id": str(name), **record} for name, record in records if record]
    return {"affected": len(rows), "actions": dict(Counter(r["action"] for r in rows)), "rows": rows}


# ---------------------------------------------------------------------------------------------------
# Batches by token budget
# ---------------------------------------------------------------------------------------------------


def token_budget_batches(lengths: Sequence[int], max_tokens: int, max_rows: int) -> list[list[int]]:
    """Index batches, longest first, whose padded size (rows x longest) stays within ``max_tokens``.

    A row longer than the budget runs alone.

    >>> token_budget_batches([10, 300, 20, 290], max_tokens=600, max_rows=8)
    [[1, 3], [2, 0]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for index in order:
        if batches:
            current = batches[-1]
            width = lengths[current[0]]  # longest first: the first row sets the width
            if len(current) < max_rows and width * (len(current) + 1) <= max_tokens:
                current.append(index)
                continue
        batches.append([index])
    return batches
