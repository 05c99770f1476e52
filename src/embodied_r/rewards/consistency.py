"""Logical-consistency reward: does the policy's reasoning, on its own, lead to the policy's answer?

Embodied-R (research/embodied_r.md §5.3) hands a frozen reference model only the question with its
choices and the policy's ``<think>`` text, asks it for an option letter, and pays 1 when that letter is
the policy's answer. As in the official code, the reward is gated: it is 0 unless the policy's answer
is correct, so it can only ever add to a correct answer whose reasoning supports it.

Two things differ from the official implementation, on purpose:
- the reference model is called once per training step for all completions that pass the gate (the
  official code made one sequential API call per completion), and its answer is read from the
  next-token logits restricted to the option letters, so it cannot answer anything but a letter;
- a failing reference (endpoint down) is logged and counted, and its rows get ``None`` (TRL drops the
  term) instead of a 0 that would look like inconsistent reasoning. Several failed steps in a row stop
  training with an error.

The judge is a reusable object (``ReferenceJudge``, ``OpenAIJudge``) so that evaluation can compute
the logical-consistency rate with the very same prompt and decision rule.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import Any, Protocol

from embodied_r.evaluation.metrics import score_answer
from embodied_r.reasoning.parsing import DEFAULT_LETTERS, extract_think, option_letters, parse_answer
from embodied_r.rewards.text import column, completion_text, last_user_text

logger = logging.getLogger(__name__)

JUDGE_SYSTEM = "You are a careful assistant that answers multiple-choice questions."
_QUESTION_RE = re.compile(r"Question\s*:", re.IGNORECASE)
# The conclusion of a long reasoning is at its end, so an over-long think text is cut from the front.
MAX_THINK_CHARS = 6000


class JudgeError(RuntimeError):
    """The reference judge could not answer (model error, endpoint down)."""


class Judge(Protocol):
    """Anything that picks, for each (question, thinking) pair, the option letter the thinking leads to."""

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]: ...


# ---------------------------------------------------------------------------------------------------
# Prompt for the reference model
# ---------------------------------------------------------------------------------------------------


def question_for_judge(prompt: Any, options: list[str] | None) -> str:
    """The question stem and choices only, without the video description.

    The official reward keeps the text from the last ``Question:`` of the user message on, so the
    reference cannot answer from the scene description itself; when a prompt has no ``Question:``
    marker (other prompt formats) the whole user message is used.

    >>> question_for_judge([{"role": "user", "content": "Frame 0: sofa\\nQuestion: Where?\\nChoices:\\nA. l"}], ["A. l"])
    'Question: Where?\\nChoices:\\nA. l'
    """
    text = last_user_text(prompt)
    starts = [m.start() for m in _QUESTION_RE.finditer(text)]
    question = text[starts[-1] :].strip() if starts else text.strip()
    if options and not all(str(o).strip() in question for o in options):
        question += "\nChoices:\n" + "\n".join(str(o).strip() for o in options)
    return question


def judge_messages(question: str, think: str, letters: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages asking the reference which option the thinking process supports."""
    if len(think) > MAX_THINK_CHARS:
        think = "..." + think[-MAX_THINK_CHARS:]
    letter_list = ", ".join(letters)
    user = (
        "Below is a multiple-choice question and the thinking process someone wrote while answering it. "
        "Using only the question and this thinking process, decide which option the thinking leads to.\n\n"
        f"{question}\n\nThinking process: {think}\n\n"
        f"Reply with a single option letter ({letter_list}) and nothing else."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------------------------------
# Local reference model: next-token logits over the option letters
# ---------------------------------------------------------------------------------------------------


class ReferenceJudge:
    """A frozen causal LM that answers with the option letter of highest next-token logit.

    One forward pass per chunk of ``max_batch_size`` prompts and no sampling: the answer is the argmax
    over the tokens that spell each valid letter (``"B"`` and ``" B"``), so it is always a letter.
    """

    def __init__(
        self, model: Any, tokenizer: Any, max_batch_size: int = 16, max_prompt_tokens: int = 2048
    ) -> None:
        from embodied_r.reasoning.models import prepare_tokenizer

        self.model = model
        self.tokenizer = prepare_tokenizer(tokenizer)
        self.max_batch_size = max(1, int(max_batch_size))
        self.max_prompt_tokens = int(max_prompt_tokens)
        self._letter_ids: dict[str, list[int]] = {}
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)

    @classmethod
    def from_pretrained(
        cls, name_or_path: str, dtype: str = "auto", device: str | None = None, **kwargs: Any
    ) -> ReferenceJudge:
        """Load a reference model by built-in name, local folder or hub id (see ``load_reasoner``)."""
        from embodied_r.reasoning.models import load_reasoner

        model, tokenizer = load_reasoner(name_or_path, dtype=dtype, device=device or default_device())
        judge = cls(model, tokenizer, **kwargs)
        judge.name = name_or_path
        return judge

    def letter_token_ids(self, letter: str) -> list[int]:
        """Token ids that spell ``letter`` as the first answer token (with and without a space)."""
        if letter not in self._letter_ids:
            ids: list[int] = []
            for variant in (letter, f" {letter}"):
                encoded = self.tokenizer.encode(variant, add_special_tokens=False)
                if len(encoded) == 1 and encoded[0] not in ids:
                    ids.append(encoded[0])
            if not ids:  # the letter is not a single token: its first piece still discriminates
                ids.append(self.tokenizer.encode(letter, add_special_tokens=False)[0])
            self._letter_ids[letter] = ids
        return self._letter_ids[letter]

    def letter_scores(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[dict[str, float]]:
        """Per prompt, the best next-token logit of each valid letter."""
        import torch

        from embodied_r.evaluation.generation import render_chat

        texts, letter_sets = [], []
        for question, think, opts in zip(questions, thinks, options, strict=True):
            letters = option_letters(opts) if opts else DEFAULT_LETTERS
            letter_sets.append(letters)
            texts.append(render_chat(self.tokenizer, judge_messages(question, think, letters)))
        scores: list[dict[str, float]] = []
        device = next(self.model.parameters()).device
        for start in range(0, len(texts), self.max_batch_size):
            chunk = texts[start : start + self.max_batch_size]
            encoded = self.tokenizer(
                chunk,
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_prompt_tokens,
                add_special_tokens=False,
            )
            encoded = {k: v.to(device) for k, v in encoded.items()}
            with torch.inference_mode():
                logits = self.model(**encoded).logits[:, -1, :].float()  # left padding: last position is real
            for row, letters in enumerate(letter_sets[start : start + len(chunk)]):
                scores.append(
                    {
                        letter: max(float(logits[row, i]) for i in self.letter_token_ids(letter))
                        for letter in letters
                    }
                )
        return scores

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]:
        if not questions:
            return []
        try:
            scores = self.letter_scores(questions, thinks, options)
        except Exception as exc:  # noqa: BLE001 - re-raised as a JudgeError the reward counts
            raise JudgeError(f"reference model failed: {exc}") from exc
        return [max(s, key=s.get) if s else None for s in scores]


def default_device() -> str:
    """This process's accelerator (one per rank under ``accelerate launch``), else the CPU."""
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


# ---------------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint (vLLM / SGLang / hosted)
# ---------------------------------------------------------------------------------------------------


class OpenAIJudge:
    """A reference model behind an OpenAI-compatible chat endpoint.

    All prompts of a step are sent concurrently (bounded), with greedy decoding of a few tokens; on
    vLLM, ``extra_body={"structured_outputs": {"choice": [...]}}`` (added when ``constrain=True``)
    restricts the reply to the letters. ``check()`` fails fast when the endpoint is unreachable.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_concurrency: int = 32,
        max_retries: int = 2,
        constrain: bool = True,
    ) -> None:
        self.base_url, self.model, self.timeout = base_url, model, float(timeout)
        self.api_key = os.environ.get(api_key_env) or "EMPTY"
        self.max_concurrency, self.max_retries, self.constrain = (
            int(max_concurrency),
            int(max_retries),
            constrain,
        )
        self.name = f"{model}@{base_url}"

    def check(self) -> None:
        """Raise ``JudgeError`` with a clear message unless the endpoint answers and serves ``model``."""
        from openai import OpenAI

        client = OpenAI(
            base_url=self.base_url, api_key=self.api_key, timeout=min(self.timeout, 15.0), max_retries=0
        )
        try:
            served = [m.id for m in client.models.list().data]
        except Exception as exc:  # noqa: BLE001
            raise JudgeError(
                f"reference endpoint {self.base_url} is not reachable ({type(exc).__name__}: {exc}); start the "
                f"server or set reference_model to a local model"
            ) from exc
        if served and self.model not in served:
            raise JudgeError(f"reference endpoint {self.base_url} serves {served}, not {self.model!r}")

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]:
        import asyncio

        if not questions:
            return []
        return asyncio.run(self._judge_all(list(questions), list(thinks), list(options)))

    async def _judge_all(
        self, questions: list[str], thinks: list[str], options: list[list[str] | None]
    ) -> list[str | None]:
        import asyncio

        from openai import AsyncOpenAI

        client = AsyncOpenAI(
            base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=self.max_retries
        )
        limit = asyncio.Semaphore(self.max_concurrency)

        async def one(question: str, think: str, opts: list[str] | None) -> str | None:
            letters = option_letters(opts) if opts else DEFAULT_LETTERS
            extra = {"structured_outputs": {"choice": list(letters)}} if self.constrain else None
            async with limit:
                reply = await client.chat.completions.create(
                    model=self.model,
                    messages=judge_messages(question, think, letters),
                    max_tokens=4,
                    temperature=0.0,
                    extra_body=extra,
                )
            text = (reply.choices[0].message.content or "").strip().upper()
            return next((ch for ch in text if ch in letters), None)

        try:
            return list(await asyncio.gather(*(one(q, t, o) for q, t, o in zip(questions, thinks, options))))
        except Exception as exc:  # noqa: BLE001 - one failed request fails the batch; the reward counts it
            raise JudgeError(
                f"reference endpoint {self.base_url} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            await client.close()


def build_judge(spec: Any, policy_model: str, dtype: str = "auto") -> Judge:
    """A judge from a recipe's ``reference_model``: ``"policy"``/None (a frozen copy of the starting
    policy), a model name/path, or ``{"base_url": ..., "model": ...}`` for an endpoint."""
    if spec is None or spec == "policy":
        return ReferenceJudge.from_pretrained(policy_model, dtype=dtype)
    if isinstance(spec, str):
        return ReferenceJudge.from_pretrained(spec, dtype=dtype)
    if isinstance(spec, dict) and "base_url" in spec:
        options = dict(spec)
        judge = OpenAIJudge(
            base_url=options.pop("base_url"), model=options.pop("model", policy_model), **options
        )
        judge.check()
        return judge
    if isinstance(spec, dict) and "model" in spec:
        options = dict(spec)
        name = options.pop("model")
        return ReferenceJudge.from_pretrained(
            policy_model if name == "policy" else name, dtype=options.pop("dtype", dtype), **options
        )
    raise ValueError(
        f"reference_model {spec!r} not understood: use 'policy', a model name/path, or "
        "{base_url: http://host:port/v1, model: NAME}"
    )


# ---------------------------------------------------------------------------------------------------
# The reward
# ---------------------------------------------------------------------------------------------------


def judge_completions(
    judge: Judge, prompts: Sequence[Any], completions: Sequence[Any], options: Sequence[list[str] | None]
) -> list[str | None]:
    """The reference's letter for each completion's reasoning (None where there is no think text).

    Evaluation compares this with the policy's own answer to get the logical-consistency rate.
    """
    wanted = [i for i, c in enumerate(completions) if extract_think(completion_text(c))]
    letters = judge.judge(
        [question_for_judge(prompts[i], options[i]) for i in wanted],
        [extract_think(completion_text(completions[i])) or "" for i in wanted],
        [options[i] for i in wanted],
    )
    out: list[str | None] = [None] * len(completions)
    for i, letter in zip(wanted, letters, strict=True):
        out[i] = letter
    return out


class ConsistencyReward:
    """TRL reward function ``consistency`` (a callable object holding the judge).

    Returns 1.0 when the judge reaches the policy's (correct) answer from the reasoning, 0.0 when it
    does not or when the answer is wrong or the think block is missing (the official gate), and None
    for rows it does not apply to (non-choice questions), for a step whose judge failed, and for steps
    where the schedule gives it weight 0 (``skip_when_unweighted``: no reference compute is spent).
    """

    def __init__(
        self,
        judge: Judge,
        gate: bool = True,
        skip_when_unweighted: bool = True,
        max_consecutive_failures: int = 3,
    ) -> None:
        self.__name__ = "consistency"  # TRL names reward columns and metrics after this
        self.judge = judge
        self.gate = gate
        self.skip_when_unweighted = skip_when_unweighted
        self.max_consecutive_failures = int(max_consecutive_failures)
        self.weight: float | None = None  # set by the stage schedule callback
        self.failures = 0
        self.consecutive_failures = 0

    def set_weight(self, weight: float) -> None:
        self.weight = float(weight)

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], log_metric: Any = None, **columns: Any
    ) -> list[float | None]:
        n = len(completions)
        metric = log_metric or (lambda name, value: None)
        if self.skip_when_unweighted and self.weight == 0.0:
            metric("consistency/active", 0.0)
            return [None] * n
        metric("consistency/active", 1.0)
        answers = column(columns, "answer", n, required=True)
        answer_types = [t or "choice" for t in column(columns, "answer_type", n)]
        options = column(columns, "options", n)

        rewards: list[float | None] = [None] * n
        to_judge: list[int] = []
        parsed_answers: dict[int, Any] = {}
        for i, completion in enumerate(completions):
            if answer_types[i] != "choice":
                continue  # the reference answers with letters only; numbers are out of scope (None)
            text = completion_text(completion)
            parsed = parse_answer(text, options[i], "choice")
            correct = score_answer(parsed, answers[i], "choice") >= 1.0
            if parsed is None or (self.gate and not correct) or not extract_think(text):
                rewards[i] = 0.0
                continue
            parsed_answers[i] = parsed
            to_judge.append(i)
        if not to_judge:
            metric("consistency/judged", 0.0)
            return rewards
        try:
            letters = judge_completions(
                self.judge,
                [prompts[i] for i in to_judge],
                [completions[i] for i in to_judge],
                [options[i] for i in to_judge],
            )
        except JudgeError as exc:
            return self._failed(exc, rewards, metric)
        self.consecutive_failures = 0
        agree = 0
        for i, letter in zip(to_judge, letters, strict=True):
            rewards[i] = 1.0 if letter is not None and letter == parsed_answers[i] else 0.0
            agree += int(rewards[i] == 1.0)
        metric("consistency/judged", float(len(to_judge)))
        metric("consistency/agreement", agree / len(to_judge))
        return rewards

    def _failed(self, exc: Exception, rewards: list[float | None], metric: Any) -> list[float | None]:
        self.failures += 1
        self.consecutive_failures += 1
        metric("consistency/judge_failures", float(self.failures))
        logger.error(
            "consistency reward: judge failed (%d in a row, %d in total); the consistency term is "
            "dropped for this step: %s",
            self.consecutive_failures,
            self.failures,
            exc,
        )
        if self.consecutive_failures >= self.max_consecutive_failures:
            raise JudgeError(
                f"the consistency judge failed {self.consecutive_failures} steps in a row ({exc}); fix the "
                "reference model/endpoint and resume from the last checkpoint"
            ) from exc
        # Drop the term for every row of the step (not just the judged ones), so no completion in a group
        # is ranked against another on a reward that was never measured.
        return [None] * len(rewards)
