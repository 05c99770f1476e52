"""Judges: models that read a question and someone's reasoning, and say which option it leads to.

Embodied-R's logical-consistency reward (and the consistency rate in evaluation) hands a frozen
reference model the question with its choices and the policy's ``<think>`` text, and asks for an
option letter. Two kinds of judge share one prompt (``judge_messages``) and one decision rule:

- ``ReferenceJudge``: a local causal LM, with one of two scoring rules (``SCORING_RULES``):
  ``option-text`` (the default) scores each option's *text* as the continuation of "The thinking leads
  to the option:", calibrated by the same option's score when the reasoning is empty, and answers the
  best option's letter; ``letter`` (the official rule) answers the option letter of highest next-token
  logit. Small models read a reasoning's content far better by the first rule: they copy text they
  have just read, but their letter choice is dominated by a fixed preference (docs/consistency.md);
- ``OpenAIJudge``: any OpenAI-compatible endpoint (vLLM / SGLang / hosted), greedy, constrained to
  the letters where the server supports it.

What callers and judges guarantee together:
- **letter-blind by default**: callers pass the think through ``visible_thinks``, which masks option
  letters (``letter_mask``) unless the judge's ``sees_letters`` is set (the official rule), so only
  reasoning whose *content* leads to an option is followed;
- **whole prompts**: the question, the instruction and the assistant turn are never cut. A think that
  does not fit the judge's context is cut from the front, in tokens (the conclusion is at the end); a
  question that does not fit even with an empty think is not judged (``None``, counted), never
  truncated;
- ``last_report`` counts, per call, the thinks that were cut and the rows that could not be judged;
- **an answer of "none"** (``NO_OPTION``) where the reasoning supports no option, when the judge is
  set up to give one: an option-text judge with a ``no_basis`` threshold (no option's calibrated score
  reaches it), or a letter judge with ``refusal`` (the prompt offers "none" as a reply). "none" is a
  judgement (the consistency reward pays 0 for it); ``None`` means the row could not be judged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from embodied_r.core.chat import last_user_text
from embodied_r.core.parsing import DEFAULT_LETTERS, NO_OPTION, option_letters, option_texts
from embodied_r.inference.batch_layout import cache_keyword
from embodied_r.inference.context_policy import model_context_length, token_budget_batches
from embodied_r.judge.letter_mask import mask_option_letters

if TYPE_CHECKING:
    from embodied_r.inference.openai_client import ChatBackend

logger = logging.getLogger(__name__)

JUDGE_SYSTEM = "You are a careful assistant that answers multiple-choice questions."
_QUESTION_RE = re.compile(r"Question\s*:", re.IGNORECASE)
# Endpoints have no tokenizer here: an over-long think is cut from the front to this many characters.
MAX_THINK_CHARS = 6000
# An endpoint judge's reply budget: one letter, with room for a space or a full stop where the server
# cannot constrain the reply to the letters.
REPLY_TOKENS = 4
CUT_MARK = "... "
SCORING_RULES = ("option-text", "letter")
DEFAULT_SCORING = "option-text"
# The assistant turn the option texts are scored after (option-text scoring). Of the two phrasings tried,
# "The thinking concludes that the answer is" agreed 19 points less often with the probe's content.
OPTION_ANSWER_PREFIX = "The thinking leads to the option:"
_CALIBRATION_CACHE_SIZE = 4096


class JudgeError(RuntimeError):
    """The judge could not answer (model error, endpoint down) or must not be trusted (failed probe)."""


class Judge(Protocol):
    """Anything that picks, for each (question, thinking) pair, the option letter the thinking leads to
    (``NO_OPTION`` when it leads to none, None when the pair could not be judged)."""

    name: str

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]: ...


@dataclass
class JudgeReport:
    """What the last ``judge`` call had to do to the inputs (logged as reward metrics)."""

    rows: int = 0
    thinks_cut: int = 0  # thinks cut from the front to fit the context
    not_judged: int = 0  # questions too long for the context even with an empty think: answer None


# ---------------------------------------------------------------------------------------------------
# The prompt
# ---------------------------------------------------------------------------------------------------


def question_for_judge(prompt: Any, options: list[str] | None) -> str:
    """The question stem and choices only, without the video description.

    The official reward keeps the text from the last ``Question:`` of the user message on, so the
    reference cannot answer from the scene description itself; when a prompt has no ``Question:``
    marker (other prompt formats) the whole user message is used.

    >>> question_for_judge([{"role": "user", "content": "Frame 0: sofa\\nQuestion: Where?\\nChoices:\\nA. l"}],
    ...                    ["A. l"])
    'Question: Where?\\nChoices:\\nA. l'
    """
    text = last_user_text(prompt)
    starts = [m.start() for m in _QUESTION_RE.finditer(text)]
    question = text[starts[-1] :].strip() if starts else text.strip()
    if options and not all(str(o).strip() in question for o in options):
        question += "\nChoices:\n" + "\n".join(str(o).strip() for o in options)
    return question


def judge_messages(question: str, think: str, letters: Sequence[str], refusal: bool = False) -> list[dict[str, str]]:
    """Chat messages asking the judge which option the thinking process supports (think as given);
    with ``refusal`` the judge may also reply ``none``."""
    letter_list = ", ".join(letters)
    reply = f"Reply with a single option letter ({letter_list}) and nothing else."
    if refusal:
        reply = (f"Reply with a single option letter ({letter_list}), or with {NO_OPTION} if the thinking "
                 "process does not lead to any one option, and nothing else.")
    user = (
        "Below is a multiple-choice question and the thinking process someone wrote while answering it. "
        "Using only the question and this thinking process, decide which option the thinking leads to.\n\n"
        f"{question}\n\nThinking process: {think}\n\n{reply}"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def visible_thinks(judge: Any, thinks: Sequence[str], options: Sequence[list[str] | None]) -> list[str]:
    """The think texts as ``judge`` may read them: option letters masked unless ``judge.sees_letters``.

    Every caller (the reward, evaluation, the probe) goes through this, so any judge object, a test stub
    included, reads exactly what a real judge reads.
    """
    if getattr(judge, "sees_letters", False):
        return list(thinks)
    return [
        mask_option_letters(think, letters_for(opts)) for think, opts in zip(thinks, options, strict=True)
    ]


def letters_for(options: list[str] | None) -> tuple[str, ...]:
    return option_letters(options) if options else DEFAULT_LETTERS


def check_no_option_settings(scoring: str, no_basis: Any = None, refusal: Any = False) -> None:
    """Refuse settings for answering "none" that the scoring rule cannot use (before a model loads)."""
    if not isinstance(refusal, bool):
        raise ValueError(f"judge refusal must be true or false, got {refusal!r}")
    if no_basis is not None:
        if isinstance(no_basis, bool) or not isinstance(no_basis, (int, float)):
            raise ValueError(f"judge no_basis must be a number (a threshold on option-text scores), got {no_basis!r}")
        if scoring != "option-text":
            raise ValueError("no_basis is a threshold on option-text scores; a letter judge answers none "
                             "with refusal: true")
    if refusal and scoring == "option-text":
        raise ValueError("refusal is for judges that answer by letter; an option-text judge answers none "
                         "through its no_basis threshold")


# ---------------------------------------------------------------------------------------------------
# Local reference model: next-token logits over the option letters
# ---------------------------------------------------------------------------------------------------


class ReferenceJudge:
    """A frozen causal LM that answers with the option letter of highest next-token logit.

    Prompts are tokenised whole (never truncated by the tokenizer), fitted to ``max_prompt_tokens``
    (default: the model's context) by cutting the think from the front, and run in batches of at most
    ``max_batch_tokens`` padded tokens (and ``max_batch_size`` rows), longest first.
    """

    def __init__(self, model: Any, tokenizer: Any, max_batch_size: int = 16, max_prompt_tokens: int | None = None,
                 max_batch_tokens: int = 16384, sees_letters: bool = False, name: str = "reference",
                 scoring: str = DEFAULT_SCORING, no_basis: float | None = None, refusal: bool = False) -> None:
        from embodied_r.inference.models import prepare_tokenizer

        if scoring not in SCORING_RULES:
            raise ValueError(f"judge scoring {scoring!r} not known; use one of {', '.join(SCORING_RULES)}")
        check_no_option_settings(scoring, no_basis, refusal)

        self.model = model
        self.tokenizer = prepare_tokenizer(tokenizer)
        self.max_batch_size = max(1, int(max_batch_size))
        context = model_context_length(model)  # a vision-language judge states it in its text config
        self.max_prompt_tokens = min(context, int(max_prompt_tokens)) if max_prompt_tokens else context
        self.max_batch_tokens = max(self.max_prompt_tokens, int(max_batch_tokens))
        self.sees_letters = bool(sees_letters)
        self.name = name
        self.scoring = scoring
        # option-text: answer NO_OPTION when no option's calibrated score reaches this (None: never).
        self.no_basis = None if no_basis is None else float(no_basis)
        self.refusal = refusal  # letter: the prompt offers NO_OPTION as a reply, scored like a letter
        self.last_report = JudgeReport()
        self._letter_ids: dict[str, list[int]] = {}
        # option-text scoring: each question's option scores with an empty reasoning (the calibration),
        # computed once per question; a GRPO step asks about the same question G times.
        self._calibration: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)

    @classmethod
    def from_pretrained(
        cls, name_or_path: str, dtype: str = "auto", device: str | None = None,
        attn_implementation: str | None = None, **kwargs: Any
    ) -> ReferenceJudge:
        """Load a reference model by built-in name, local folder or hub id (see ``load_reasoner``)."""
        from embodied_r.inference.models import load_reasoner

        try:
            with zero3_switched_off():
                model, tokenizer = load_reasoner(name_or_path, dtype=dtype, device=device or default_device(),
                                                 attn_implementation=attn_implementation)
        except Exception as exc:  # noqa: BLE001 - any load failure becomes one clear error, before training
            raise JudgeError(
                f"cannot load the judge model {name_or_path!r} ({type(exc).__name__}: {exc}); give a built-in "
                "name, a local model folder, a hub id this machine can download, or an endpoint"
            ) from exc
        kwargs.setdefault("name", name_or_path)
        return cls(model, tokenizer, **kwargs)

    def letter_token_ids(self, letter: str) -> list[int]:
        """Token ids that spell ``letter`` (or ``NO_OPTION``) as the first answer token (with and without
        a space; "none" also capitalised)."""
        if letter not in self._letter_ids:
            ids: list[int] = []
            variants = [letter, f" {letter}"]
            if letter == NO_OPTION:
                variants += [letter.capitalize(), f" {letter.capitalize()}"]
            for variant in variants:
                encoded = self.tokenizer.encode(variant, add_special_tokens=False)
                if len(encoded) == 1 and encoded[0] not in ids:
                    ids.append(encoded[0])
            if not ids:  # the letter is not a single token: its first piece still discriminates
                ids.append(self.tokenizer.encode(letter, add_special_tokens=False)[0])
            self._letter_ids[letter] = ids
        return self._letter_ids[letter]

    # -- fitting a prompt into the context -----------------------------------------------------------

    def _encode(self, question: str, think: str, letters: Sequence[str], answer_prefix: str = "") -> list[int]:
        from embodied_r.core.chat import render_chat

        messages = judge_messages(question, think, letters, refusal=self.refusal)
        text = render_chat(self.tokenizer, messages, completion_prefix=answer_prefix)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def fit_prompt(
        self, question: str, think: str, letters: Sequence[str], answer_prefix: str = "", reserve: int = 0
    ) -> tuple[list[int] | None, int]:
        """Token ids of the whole judge prompt (ending in ``answer_prefix``) within ``max_prompt_tokens``
        less ``reserve`` tokens, and the number of think tokens cut from its front; ``(None, 0)`` when the
        question alone does not fit."""
        limit = self.max_prompt_tokens - reserve
        ids = self._encode(question, think, letters, answer_prefix)
        if len(ids) <= limit:
            return ids, 0
        if len(self._encode(question, CUT_MARK, letters, answer_prefix)) > limit:
            return None, 0
        think_ids = self.tokenizer.encode(think, add_special_tokens=False)
        keep = max(0, len(think_ids) - (len(ids) - limit))
        # Re-tokenising the joined text can merge tokens at the seams, so shrink until it fits.
        while keep > 0:
            cut = CUT_MARK + self.tokenizer.decode(think_ids[-keep:])
            ids = self._encode(question, cut, letters, answer_prefix)
            if len(ids) <= limit:
                return ids, len(think_ids) - keep
            keep -= max(1, len(ids) - limit)
        return self._encode(question, CUT_MARK, letters, answer_prefix), len(think_ids)

    # -- scoring ---------------------------------------------------------------------------------------

    def _record(self, report: JudgeReport, why: str) -> None:
        """Keep ``report`` as ``last_report`` and warn when rows were not judged (they answer None)."""
        self.last_report = report
        if report.not_judged:
            logger.warning(
                "judge %s: %d of %d row(s) not judged (%s; context %d tokens)",
                self.name,
                report.not_judged,
                report.rows,
                why,
                self.max_prompt_tokens,
            )

    def letter_scores(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[dict[str, float] | None]:
        """Per prompt, the best next-token logit of each valid letter, and of ``NO_OPTION`` with
        ``refusal`` (None: question too long)."""
        import torch

        report = JudgeReport(rows=len(questions))
        encoded: list[list[int] | None] = []
        letter_sets = []
        for question, think, opts in zip(questions, thinks, options, strict=True):
            letters = letters_for(opts)
            letter_sets.append((*letters, NO_OPTION) if self.refusal else letters)
            ids, cut = self.fit_prompt(question, think, letters)
            report.thinks_cut += int(cut > 0)
            report.not_judged += int(ids is None)
            encoded.append(ids)
        self._record(report, "too long for its context even without reasoning")
        scores: list[dict[str, float] | None] = [None] * len(encoded)
        device = next(self.model.parameters()).device
        pad_id = self.tokenizer.pad_token_id
        for batch in token_budget_batches(
            [len(ids) if ids is not None else 0 for ids in encoded],
            self.max_batch_tokens,
            self.max_batch_size,
        ):
            batch = [i for i in batch if encoded[i] is not None]
            if not batch:
                continue
            width = max(len(encoded[i]) for i in batch)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            for row, index in enumerate(batch):  # left padding: the last position is real in every row
                ids = encoded[index]
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                attention[row, width - len(ids) :] = 1
            with torch.inference_mode():
                logits = (
                    self.model(
                        input_ids=input_ids.to(device), attention_mask=attention.to(device), logits_to_keep=1
                    )
                    .logits[:, -1, :]
                    .float()
                )
            for row, index in enumerate(batch):
                scores[index] = {
                    letter: max(float(logits[row, i]) for i in self.letter_token_ids(letter))
                    for letter in letter_sets[index]
                }
        return scores

    def option_scores(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[dict[str, float] | None]:
        """Per prompt, each option's calibrated score: log P(option text | question, think) minus
        log P(option text | question, empty think), both after ``OPTION_ANSWER_PREFIX`` (None: no
        options, or the question does not fit the context).

        The calibration removes what the model prefers regardless of the reasoning (short, frequent or
        first-listed texts), so what remains is how much the reasoning moved it toward each option.
        """
        report = JudgeReport(rows=len(questions))
        requests: list[tuple[list[int], list[list[int]]]] = []  # (prompt ids, option ids) to score
        plan: list[tuple[tuple[str, ...], int, tuple[str, tuple[str, ...]]] | None] = []  # None: not judged
        calibrate: dict[tuple[str, tuple[str, ...]], int] = {}
        for question, think, opts in zip(questions, thinks, options, strict=True):
            texts = option_texts(opts) if opts else {}
            if len(texts) < 2:
                report.not_judged += 1
                plan.append(None)
                continue
            letters = tuple(texts)
            option_ids = [self.tokenizer.encode(" " + texts[x], add_special_tokens=False) for x in letters]
            reserve = max(len(ids) for ids in option_ids)
            ids, cut = self.fit_prompt(question, think, letters, OPTION_ANSWER_PREFIX, reserve)
            if ids is None:
                report.not_judged += 1
                plan.append(None)
                continue
            report.thinks_cut += int(cut > 0)
            key = (question, tuple(str(o) for o in opts or ()))
            if key not in self._calibration and key not in calibrate:
                empty, _ = self.fit_prompt(question, "", letters, OPTION_ANSWER_PREFIX, reserve)
                calibrate[key] = len(requests)
                requests.append((empty or ids, option_ids))
            plan.append((letters, len(requests), key))
            requests.append((ids, option_ids))
        self._record(report, "no options, or too long for its context even without reasoning")
        sums = self._option_logprob_sums(requests)
        bases = {key: self._calibration[key] for *_, key in filter(None, plan) if key in self._calibration}
        bases.update({key: sums[index] for key, index in calibrate.items()})
        if len(self._calibration) + len(calibrate) > _CALIBRATION_CACHE_SIZE:
            self._calibration.clear()
        self._calibration.update({key: bases[key] for key in calibrate})
        scores: list[dict[str, float] | None] = []
        for entry in plan:
            if entry is None:
                scores.append(None)
                continue
            letters, index, key = entry
            scores.append({x: sums[index][j] - bases[key][j] for j, x in enumerate(letters)})
        return scores

    def _option_logprob_sums(self, requests: Sequence[tuple[list[int], list[list[int]]]]) -> list[list[float]]:
        """For each (prompt ids, option ids), the summed log-probability of every option's tokens as the
        prompt's continuation. The prompt is encoded once per request and its cache shared by the
        options; rows are left-padded with explicit positions, so batching does not change a score."""
        import torch

        out: list[list[float]] = [[] for _ in requests]
        device = next(self.model.parameters()).device
        pad_id = self.tokenizer.pad_token_id
        costs = [(len(p) + max(map(len, o))) * len(o) for p, o in requests]
        for batch in token_budget_batches(costs, self.max_batch_tokens, self.max_batch_size):
            k = max(len(requests[i][1]) for i in batch)
            width = max(len(requests[i][0]) for i in batch)
            span = max(len(ids) for i in batch for ids in requests[i][1])
            prompt = torch.full((len(batch), width), pad_id, dtype=torch.long)
            prompt_mask = torch.zeros((len(batch), width), dtype=torch.long)
            options = torch.full((len(batch) * k, span), pad_id, dtype=torch.long)
            option_mask = torch.zeros((len(batch) * k, span), dtype=torch.long)
            for row, index in enumerate(batch):
                ids, option_ids = requests[index]
                prompt[row, width - len(ids) :] = torch.tensor(ids)
                prompt_mask[row, width - len(ids) :] = 1
                for j, oid in enumerate(option_ids):
                    options[row * k + j, : len(oid)] = torch.tensor(oid)
                    option_mask[row * k + j, : len(oid)] = 1
            prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
            lengths = prompt_mask.sum(-1, keepdim=True)
            option_positions = (lengths + torch.arange(span)).repeat_interleave(k, dim=0)
            with torch.inference_mode():
                first = self.model(
                    input_ids=prompt.to(device),
                    attention_mask=prompt_mask.to(device),
                    position_ids=prompt_positions.to(device),
                    use_cache=True,
                    logits_to_keep=1,
                )
                first_logp = first.logits[:, -1, :].float().log_softmax(-1).repeat_interleave(k, dim=0)
                cache = first.cache if getattr(first, "cache", None) is not None else first.past_key_values
                cache.batch_repeat_interleave(k)
                rest = self.model(
                    input_ids=options.to(device),
                    attention_mask=torch.cat([prompt_mask.repeat_interleave(k, dim=0), option_mask], -1).to(device),
                    position_ids=option_positions.to(device),
                    **{cache_keyword(self.model): cache},
                ).logits.float().log_softmax(-1)
            options, option_mask = options.to(device), option_mask.to(device)
            token_logp = first_logp.gather(1, options[:, :1])  # the first option token, from the prompt
            if span > 1:  # later tokens, each from the position before it
                later = rest[:, :-1, :].gather(2, options[:, 1:, None]).squeeze(-1)
                token_logp = torch.cat([token_logp, later], dim=1)
            totals = (token_logp * option_mask).sum(-1).cpu()
            for row, index in enumerate(batch):
                out[index] = [float(totals[row * k + j]) for j in range(len(requests[index][1]))]
        return out

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]:
        if not questions:
            self.last_report = JudgeReport()
            return []
        score = self.option_scores if self.scoring == "option-text" else self.letter_scores
        try:
            scores = score(questions, thinks, options)
        except Exception as exc:  # noqa: BLE001 - re-raised as a JudgeError the reward counts
            raise JudgeError(f"reference model {self.name} failed: {type(exc).__name__}: {exc}") from exc
        return [self.answer(s) for s in scores]

    def answer(self, scores: dict[str, float] | None) -> str | None:
        """The pick from one row's scores: the best option, or ``NO_OPTION`` when ``no_basis`` is set
        and no option reaches it (with ``refusal``, "none" is among the scores already)."""
        if not scores:
            return None
        best = max(scores, key=scores.__getitem__)
        if self.no_basis is not None and scores[best] < self.no_basis:
            return NO_OPTION
        return best


def default_device() -> str:
    """This process's accelerator (one per rank under ``accelerate launch``), else the CPU."""
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return "cpu"


# ---------------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint (vLLM / SGLang / hosted)
# ---------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def zero3_switched_off() -> Iterator[None]:
    """Models loaded inside are whole on every rank even where DeepSpeed ZeRO-3 is on.

    Why: a judge is frozen and every rank judges its own rows, so a judge sharded across ranks would need
    all of them in each forward pass and deadlock when they judge different numbers of rows. transformers
    shards every ``from_pretrained`` once any ``TrainingArguments`` has set ZeRO-3 up (a module-level weak
    reference, set for instance by the format warm-up's ``SFTConfig`` before the judge of the warmed-up
    policy is loaded); it is cleared for the load and put back after.
    """
    from transformers.integrations import deepspeed as hf_deepspeed

    reference = hf_deepspeed._hf_deepspeed_config_weak_ref  # the only handle transformers keeps
    active = reference() if reference is not None else None
    if active is None:
        yield
        return
    hf_deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_deepspeed.set_hf_deepspeed_config(active)


class OpenAIJudge:
    """A reference model behind an OpenAI-compatible chat endpoint.

    Requests go through the perception stage's HTTP client (``inference.openai_client.ChatBackend``, the
    one image-row evaluation uses): all prompts of a call are in flight at once, at most
    ``max_concurrency``, each with a ``timeout`` and up to ``max_retries`` retries with backoff (429, 5xx,
    timeouts, dropped connections and malformed bodies; other 4xx fail at once). Decoding is greedy with
    ``REPLY_TOKENS`` tokens; on vLLM, ``extra_body={"structured_outputs": {"choice": [...]}}`` (added when
    ``constrain=True``) restricts the reply to the letters. A request that still fails fails the whole
    call with ``JudgeError`` (the reward counts it; it never becomes a reward of 0). ``check()`` fails fast
    when the endpoint is unreachable or does not serve ``model``. Without the server's tokenizer an
    over-long think is cut from the front to ``MAX_THINK_CHARS``. With ``refusal`` the prompt offers
    "none" as a reply (and the constrained choices include it); a "none" reply answers ``NO_OPTION``.
    """

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", timeout: float = 60.0,
                 max_concurrency: int = 32, max_retries: int = 2, constrain: bool = True,
                 sees_letters: bool = False, refusal: bool = False) -> None:
        if not base_url:  # found here, not as a client error in the middle of a training step
            raise ValueError("an endpoint judge needs a base URL: judge: {model: {base_url: "
                             "http://localhost:8000/v1, model: NAME}}")
        self.base_url, self.model, self.timeout = base_url, model, float(timeout)
        # The key stays in the environment: the client reads it per call and puts it only in a header.
        self.api_key_env = api_key_env
        self.max_concurrency, self.max_retries, self.constrain = (
            int(max_concurrency),
            int(max_retries),
            constrain,
        )
        self.sees_letters = bool(sees_letters)
        self.scoring = "letter"
        check_no_option_settings(self.scoring, None, refusal)
        self.refusal = refusal
        self.name = f"{model}@{base_url}"
        self.last_report = JudgeReport()

    def _client(self, concurrency: int = 1) -> ChatBackend:
        from embodied_r.inference.openai_client import ChatBackend

        return ChatBackend(
            model=self.model, base_url=self.base_url, api_key_env=self.api_key_env, concurrency=concurrency,
            timeout=self.timeout, max_retries=self.max_retries, temperature=0.0, max_tokens=REPLY_TOKENS,
        )

    def check(self) -> None:
        """Raise ``JudgeError`` with a clear message unless the endpoint answers and serves ``model``."""
        from embodied_r.inference.openai_client import ServerUnreachableError

        try:
            served = self._client().served_models(timeout=min(self.timeout, 15.0))
        except ServerUnreachableError as exc:
            raise JudgeError(
                f"reference endpoint {self.base_url} is not reachable ({exc}); start the server or set "
                "judge.model to a local model"
            ) from exc
        except ValueError as exc:  # it answers, but not with a model listing (e.g. a missing API key)
            raise JudgeError(f"reference endpoint {self.base_url} did not list its models: {exc}") from exc
        if served and self.model not in served:
            raise JudgeError(f"reference endpoint {self.base_url} serves {served}, not {self.model!r}")

    def judge(
        self, questions: Sequence[str], thinks: Sequence[str], options: Sequence[list[str] | None]
    ) -> list[str | None]:
        self.last_report = JudgeReport(rows=len(questions))
        if not questions:
            return []
        letter_sets = [letters_for(opts) for opts in options]
        chats = [self._chat(question, think, letters)
                 for question, think, letters in zip(questions, thinks, letter_sets, strict=True)]
        replies = self._send(chats)
        return [self._answer(reply, letters) for reply, letters in zip(replies, letter_sets, strict=True)]

    def _answer(self, reply: str, letters: Sequence[str]) -> str | None:
        # "none" is read before any letter: its own letters would otherwise read as option N, O or E.
        if self.refusal and reply.strip().lower().startswith(NO_OPTION):
            return NO_OPTION
        return reply_letter(reply, letters)

    def _chat(self, question: str, think: str, letters: Sequence[str]) -> tuple[list[dict[str, Any]],
                                                                                  dict[str, Any] | None]:
        """One row as (messages, per-request extra body: the allowed letters when constrained)."""
        if len(think) > MAX_THINK_CHARS:
            think = CUT_MARK + think[-MAX_THINK_CHARS:]
            self.last_report.thinks_cut += 1
        replies = [*letters, NO_OPTION] if self.refusal else list(letters)
        extra = {"structured_outputs": {"choice": replies}} if self.constrain else None
        return judge_messages(question, think, letters, refusal=self.refusal), extra

    def _send(self, chats: list[tuple[list[dict[str, Any]], dict[str, Any] | None]]) -> list[str]:
        """Every chat's reply text, in order; ``JudgeError`` naming the endpoint when any request fails
        after its retries (one unanswered row fails the batch: the reward then counts a failed step)."""
        client = self._client(concurrency=max(1, min(self.max_concurrency, len(chats))))
        try:
            replies = client.complete(chats)
        except Exception as exc:  # noqa: BLE001 - e.g. unreachable: re-raised as a JudgeError the reward counts
            raise JudgeError(f"reference endpoint {self.base_url} failed: {type(exc).__name__}: {exc}") from exc
        failed = [i for i, reply in enumerate(replies) if reply is None or not reply.ok]
        if failed:
            first = replies[failed[0]]
            raise JudgeError(
                f"reference endpoint {self.base_url} failed on {len(failed)} of {len(chats)} request(s) "
                f"(row {failed[0]}: {first.error if first is not None else 'no reply'})"
            )
        return [str(reply.text) for reply in replies]


def reply_letter(reply: str, letters: Sequence[str]) -> str | None:
    """The first allowed letter in an endpoint's reply, read case-blind (None: no allowed letter).

    >>> reply_letter(" b.", ("A", "B", "C")), reply_letter("none", ("A", "B"))
    ('B', None)
    """
    return next((ch for ch in reply.strip().upper() if ch in letters), None)


# ---------------------------------------------------------------------------------------------------
# Building a judge from a spec
# ---------------------------------------------------------------------------------------------------


def build_judge(
    spec: Any, policy_model: str, dtype: str = "auto", sees_letters: bool = False, scoring: str | None = None,
    attn_implementation: str | None = None,
) -> Judge:
    """A judge from a recipe's ``judge.model`` (``judge.settings``): ``"policy"``/None (a frozen copy of the starting
    policy), a model name/path, ``{"model": NAME, ...settings}``, ``{"base_url": ..., "model": ...}`` for an
    endpoint, or the name of a parameter-free reference judge (``mentioned-last``, ``always-a``:
    ``judge.reference_judges``, for calibrating the probe).

    ``scoring`` is a local judge's rule (``SCORING_RULES``; None: ``DEFAULT_SCORING``). An endpoint
    always answers by letter (a chat endpoint returns a reply, not the likelihood of given texts), so
    asking it for ``option-text`` is an error. Settings for answering "none" (``no_basis`` for
    option-text, ``refusal`` for a letter judge) go in the mapping and are checked before a model loads."""
    from embodied_r.judge.reference_judges import REFERENCE_JUDGES

    if scoring is not None and scoring not in SCORING_RULES:
        raise ValueError(f"judge scoring {scoring!r} not known; use one of {', '.join(SCORING_RULES)}")
    if isinstance(spec, str) and spec in REFERENCE_JUDGES:
        return REFERENCE_JUDGES[spec]()
    local = {"sees_letters": sees_letters, "scoring": scoring or DEFAULT_SCORING,
             "attn_implementation": attn_implementation}
    if spec is None or spec == "policy":
        return ReferenceJudge.from_pretrained(policy_model, dtype=dtype, **local)
    if isinstance(spec, str):
        if spec.startswith(("http://", "https://")):
            raise ValueError(
                f"judge model {spec!r}: give an endpoint as {{base_url: {spec}, model: NAME}}"
            )
        return ReferenceJudge.from_pretrained(spec, dtype=dtype, **local)
    if isinstance(spec, dict) and "base_url" in spec:
        options = {"sees_letters": sees_letters, **spec}
        if options.pop("scoring", scoring) not in (None, "letter"):
            raise ValueError(
                "an endpoint judge answers by letter; option-text scoring needs a local model "
                "(drop the scoring setting, or give judge.scoring: letter)"
            )
        if options.pop("no_basis", None) is not None:
            raise ValueError("no_basis is a threshold on option-text scores, which an endpoint does not give; "
                             "an endpoint judge answers none with refusal: true")
        judge = OpenAIJudge(
            base_url=options.pop("base_url"), model=options.pop("model", policy_model), **options
        )
        judge.check()
        return judge
    if isinstance(spec, dict) and "model" in spec:
        options = {**local, **spec}
        name = options.pop("model")
        check_no_option_settings(options["scoring"], options.get("no_basis"), options.get("refusal", False))
        return ReferenceJudge.from_pretrained(
            policy_model if name == "policy" else name, dtype=options.pop("dtype", dtype), **options
        )
    raise ValueError(
        f"judge model {spec!r} not understood: use 'policy', a model name/path, or "
        "{base_url: http://host:port/v1, model: NAME}"
    )


__all__ = ["DEFAULT_SCORING", "NO_OPTION", "SCORING_RULES", "Judge", "JudgeError", "JudgeReport", "OpenAIJudge",
           "ReferenceJudge", "build_judge", "check_no_option_settings", "judge_messages", "question_for_judge",
           "visible_thinks"]
