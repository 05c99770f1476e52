"""Format warm-up: a few supervised steps that teach the official answer structure, before GRPO.

A small reasoner (SmolLM2-135M) never writes ``<think>…</think><answer>…</answer>`` from the official
prompt, so every completion of a GRPO group earns the same reward, every advantage is zero and nothing
is learned (docs/performance.md). DeepSeek-R1-style pipelines fix this with a "cold start" of supervised
examples; this module does the smallest version of it that teaches the *structure only*:

* the target of each training row is ``<think>`` + a short templated sentence + ``</think>`` +
  ``<answer>`` + an answer + ``</answer>``;
* the answer is drawn at random: option letters uniformly, and each prompt is trained with several
  different letters (numbers: other training rows' answers, never the row's own), so the warm-up carries
  no information about which answer is right and leaves the choice spread; whatever accuracy GRPO
  reaches afterwards it learned from its rewards;
* the think sentence names the option it picks, so think and answer agree (the consistency reward's
  premise) without saying anything about the question's truth.

``answers: gold`` turns the same machinery into plain supervised fine-tuning on the right answers (same
templates, one example per visited row): the supervised arm of the RL-versus-SFT comparison in
``benchmarks/learning_curve.py``. It is not a format primer and teaches the answers themselves.

TRL's ``SFTTrainer`` does the training (prompt-completion rows: the loss is on the completion only). The
warmed-up model is written atomically to ``<output_dir>/warmup/model`` and reused when the run resumes.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_r.core.chat import has_image
from embodied_r.core.io import atomic_write_json, read_json
from embodied_r.core.parsing import option_letters, option_texts
from embodied_r.core.records import PromptRow
from embodied_r.core.validity import section_keys
from embodied_r.methods import import_path, method_for_row

logger = logging.getLogger(__name__)

WARMUP_DIR = "warmup"
ANSWER_SOURCES = ("random", "gold")


class WarmupError(ValueError):
    """A ``format_warmup`` setting that cannot be used."""


@dataclass
class WarmupSettings:
    """Recipe key ``format_warmup`` (a mapping; null or ``steps: 0`` = no warm-up)."""

    steps: int = 0  # optimizer steps of supervised training on templated, random-answer targets
    batch_size: int = 2  # examples per optimizer step
    # Examples per forward pass (null = batch_size); batch_size must be a multiple, the rest is gradient
    # accumulation; smaller passes bound the memory of long prompts.
    micro_batch_size: int | None = None
    # Different answers each visited prompt is trained with (null = batch_size). One per prompt makes the
    # model answer every prompt with one confident letter; all of the options keep the choice spread.
    answers_per_prompt: int | None = None
    # random: answers drawn at random (the format primer); gold: the row's own answer, one example per row
    # (supervised fine-tuning, for comparisons with GRPO).
    answers: str = "random"
    # gold only: each visited choice row is trained in all of its option rotations (the options shifted by
    # 0..n-1 places, the gold letter following its option; training/option_rotations.py), consecutively, so
    # with batch_size a multiple of n a step holds a question's answer at every letter: the letter's
    # gradients cancel and what is learned is to look the chosen option's letter up, not a favourite letter.
    rotations: bool = False
    # How the think reaches its answer: letter-first | option-first | latest-frame | evidence (THINK_STYLES below).
    think: str = "letter-first"
    learning_rate: float = 1.0e-4
    seed: int = 0  # draws the random answers and the row order
    max_length: int = 4096  # tokens of prompt + target; longer prompts are left out of the warm-up, not cut
    # TRL's default; off trades memory for ~25 % less compute (small models on CPU).
    gradient_checkpointing: bool = True

    @classmethod
    def from_config(cls, value: Any, source: str = "recipe") -> WarmupSettings | None:
        if value is None:
            return None
        section_keys(value, "format_warmup", sorted(f.name for f in dataclasses.fields(cls)), "{steps: 16}", source,
                     WarmupError)
        settings = cls(**value)
        if settings.answers not in ANSWER_SOURCES:
            raise WarmupError(f"{source}: format_warmup.answers must be one of {list(ANSWER_SOURCES)}, "
                              f"got {settings.answers!r}")
        if settings.think not in THINK_STYLES:
            raise WarmupError(f"{source}: format_warmup.think must be one of {list(THINK_STYLES)}, "
                              f"got {settings.think!r}")
        if settings.answers_per_prompt is None:
            settings.answers_per_prompt = 1 if settings.answers == "gold" else settings.batch_size
        if settings.rotations is not False and (settings.rotations is not True or settings.answers != "gold"):
            raise WarmupError(f"{source}: format_warmup.rotations is true or false and needs answers: gold (random "
                              f"answers already vary the letter), got {settings.rotations!r} with "
                              f"answers: {settings.answers}")
        if settings.answers == "gold" and settings.answers_per_prompt != 1:
            raise WarmupError(f"{source}: format_warmup.answers_per_prompt must be 1 with answers: gold "
                              "(a row has one right answer)")
        if settings.micro_batch_size is None:
            settings.micro_batch_size = settings.batch_size
        for name in ("steps", "batch_size", "max_length", "answers_per_prompt", "micro_batch_size"):
            number = getattr(settings, name)
            if not isinstance(number, int) or number < 0 or (name != "steps" and number == 0):
                raise WarmupError(f"{source}: format_warmup.{name} must be a positive integer, got {number!r}")
        if settings.batch_size % settings.micro_batch_size:
            raise WarmupError(f"{source}: format_warmup.batch_size {settings.batch_size} must be a multiple of "
                              f"micro_batch_size {settings.micro_batch_size}")
        if not isinstance(settings.gradient_checkpointing, bool):
            raise WarmupError(f"{source}: format_warmup.gradient_checkpointing must be true or false")
        if not isinstance(settings.learning_rate, (int, float)) or settings.learning_rate <= 0:
            raise WarmupError(f"{source}: format_warmup.learning_rate must be > 0, got {settings.learning_rate!r}")
        return settings if settings.steps > 0 else None


def _answer_text(row: PromptRow, letter: str) -> str:
    # Robot-R1 prompts ask for the option written as [[X]]; Embodied-R prompts for the bare letter.
    return method_for_row(row.meta).answer_text(letter)


def _distinct(pool: list[Any], count: int, rng: random.Random) -> list[Any]:
    """``count`` draws from ``pool``, all different while the pool lasts."""
    out: list[Any] = []
    while len(out) < count:
        out.extend(rng.sample(pool, min(len(pool), count - len(out))))
    return out


# How the think of a warm-up target reaches its answer (recipe key format_warmup.think):
#   letter-first: "... and choose option C, Rotate left."  The letter is picked first, its text follows.
#   option-first: "... and choose Rotate left, which is option C."  The option's words are picked first and
#                 the letter is looked up from them: a model can match words it read in the prompt, and
#                 the letter then follows from the words instead of the reverse.
#   latest-frame: option-first, after a quote of the latest frame's action ("The latest frame: After
#                 Rotate left."), copied from the prompt: a place in the think where the current state is
#                 in view. It carries no choice (the answers stay random) but states the answer of
#                 last-action questions, so a policy can learn from its rewards to choose what it quoted.
#   evidence:     option-first, after a quote of the lines each task type's answer depends on (the row's
#                 Method.think_quote; Embodied-R's methods/embodied_r/evidence.py: the latest action, the frames
#                 where each listed category is first seen, the frames that newly see the counted category, where
#                 the asked object is in the latest frame); no quote for task types whose answer the text does
#                 not state, nor for methods without think_quote.
#   listed:       the evidence quote, then the options written back with the letter after the words, and the
#                 choice in the same form: "... Options: Move forward (A), Rotate left (B), ... I choose Rotate
#                 left (B)." In the prompt a letter comes before its option's words, so a think that has chosen
#                 the words must look the letter up behind them; here the letter follows the same words earlier
#                 in the think, one copy away. (SmolLM2-135M fine-tuned on 60 gold answers under evidence chose
#                 the quoted option's words in 58 of 60 dev questions and wrote "option A" for all 60.)
THINK_STYLES = ("letter-first", "option-first", "latest-frame", "evidence", "listed")
# The words before the choice, after the opening tag and any latest-frame quote.
CHOICE_LEAD = " I compare the observations with each option and choose"
# Below this mean normalised entropy of the choice (over the options) the warmed-up policy nearly always
# samples one option per prompt, so GRPO's groups mostly agree and carry no advantage.
MIN_SPREAD = 0.3


def _latest_quote(row: PromptRow, think: str) -> str:
    """The think's opening quote under ``latest-frame`` or ``evidence`` ("" otherwise), by the row's method
    (``Method.think_quote``: Embodied-R quotes its frame lines)."""
    if think not in ("latest-frame", "evidence", "listed"):
        return ""
    method = method_for_row(row.meta)
    if method.think_quote is None:
        # evidence quotes what a prompt states, so nothing here; latest-frame promises a quote in every think.
        if think in ("evidence", "listed"):
            return ""
        raise WarmupError(f"format_warmup.think latest-frame quotes the prompt, but {method.name} prompts have "
                          f"nothing to quote (row {row.id!r}); use option-first")
    try:
        return import_path(method.think_quote)(row, think)
    except ValueError as exc:
        raise WarmupError(str(exc)) from exc


def choice_parts(row: PromptRow, letter: str, think: str = "letter-first") -> tuple[str, str, str]:
    """A choice target in three parts: the think up to the choice, the words that make the choice, and
    the rest; ``answer_spread`` reads the model's probability of each option's middle part."""
    text = option_texts(row.options).get(letter)
    answer = f"</think>\n<answer>{_answer_text(row, letter)}</answer>"
    lead = "<think>" + _latest_quote(row, think) + CHOICE_LEAD
    if think == "letter-first" or not text:
        return lead, f" option {letter}", (f", {text}. " if text else ". ") + answer
    if think == "listed":
        listed = ", ".join(f"{words} ({key})" for key, words in option_texts(row.options).items())
        lead = "<think>" + _latest_quote(row, think) + f" Options: {listed}. I choose"
        return lead, f" {text} ({letter})", ". " + answer
    return lead, f" {text}, which is option {letter}", ". " + answer


def _choice_target(row: PromptRow, letter: str, think: str) -> str:
    return "".join(choice_parts(row, letter, think))


def _number_target(row: PromptRow, value: Any, think: str) -> str:
    return (f"<think>{_latest_quote(row, think)} I estimate the quantity from the observations: about {value}. "
            f"</think>\n<answer>{value}</answer>")


def gold_target(row: PromptRow, think: str = "letter-first") -> str:
    """The warm-up's template with the row's own answer (``answers: gold``)."""
    if row.answer_type == "choice":
        return _choice_target(row, str(row.answer), think)
    return _number_target(row, row.answer, think)


def warmup_targets(row: PromptRow, count: int, rng: random.Random,
                   numbers_by_task: dict[str, list[Any]], think: str = "letter-first") -> list[str]:
    """``count`` completions the warm-up trains on for ``row``: the official structure, each with a
    different random answer (never the gold one for numbers; any option letter for choices)."""
    if row.answer_type == "choice":
        return [_choice_target(row, letter, think)
                for letter in _distinct(list(option_letters(row.options)), count, rng)]
    # Prefer other answers of the same task (a plausible magnitude), then any other numeric answer; the
    # value only shapes the format, it is never the row's own answer.
    pool = sorted({value for value in numbers_by_task.get(row.task, []) if value != row.answer})
    if not pool:
        pool = sorted({value for values in numbers_by_task.values() for value in values if value != row.answer})
    if not pool:
        pool = [n for n in range(1, 11) if n != row.answer]
    return [_number_target(row, value, think) for value in _distinct(pool, count, rng)]


def _task_round_robin(rows: list[PromptRow], rng: random.Random) -> list[PromptRow]:
    """``rows`` shuffled within each task, then one row of each task in turn (tasks in a shuffled order):
    a warm-up of a few prompts sees every task's answer form (a numeric template too, not only letters),
    which a plain shuffle left to chance (measured: 4 visited prompts, all multiple choice, and the model
    then answered numeric questions with a letter)."""
    by_task: dict[str, list[PromptRow]] = {}
    for row in rows:
        by_task.setdefault(row.task, []).append(row)
    queues = [by_task[task] for task in sorted(by_task)]
    rng.shuffle(queues)
    for queue in queues:
        rng.shuffle(queue)
    # Answer forms alternate (a letter task, a numeric task, ...) so the first few prompts cover both.
    rank: dict[str, int] = {}
    keyed = []
    for queue in queues:
        kind = queue[0].answer_type
        keyed.append((rank.get(kind, 0), queue))
        rank[kind] = rank.get(kind, 0) + 1
    queues = [queue for _, queue in sorted(keyed, key=lambda pair: pair[0])]
    longest = max((len(q) for q in queues), default=0)
    return [queue[i] for i in range(longest) for queue in queues if i < len(queue)]


def warmup_examples(rows: list[PromptRow], steps: int, batch_size: int, seed: int,
                    answers_per_prompt: int | None = None, answers: str = "random",
                    think: str = "letter-first", rotations: bool = False) -> list[dict[str, Any]]:
    """``steps * batch_size`` conversational prompt-completion rows. Rows are visited task by task in turn
    (``_task_round_robin``) and each visited row contributes ``answers_per_prompt`` (default ``batch_size``)
    examples with *different* answers: trained on one random letter per prompt, the model learns that
    prompt's letter and answers near-deterministically (measured: every later GRPO group then has the same
    accuracy), while several letters per prompt keep the choice spread, so GRPO's groups differ."""
    from embodied_r.training.option_rotations import rotations as option_rotations  # imports torch

    if any(has_image(row) for row in rows):
        raise WarmupError("format_warmup supports text prompts only (these rows carry images)")
    rng = random.Random(seed)
    numbers_by_task: dict[str, list[Any]] = {}
    for row in rows:
        if row.answer_type != "choice":
            numbers_by_task.setdefault(row.task, []).append(row.answer)
    examples: list[dict[str, Any]] = []
    total = steps * batch_size
    per_prompt = answers_per_prompt or batch_size
    while len(examples) < total:
        for row in _task_round_robin(rows, rng):
            if len(examples) >= total:
                break
            if answers == "gold":
                shown = option_rotations(row) if rotations and row.answer_type == "choice" else [row]
                pairs = [(version, gold_target(version, think)) for version in shown]
            else:
                pairs = [(row, target) for target in
                         warmup_targets(row, min(per_prompt, total - len(examples)), rng, numbers_by_task, think)]
            for version, target in pairs:
                examples.append({"prompt": [dict(m) for m in version.prompt],
                                 "completion": [{"role": "assistant", "content": target}]})
    return examples[:total]


# The random-answer format primer (benchmarks/ladder.py, benchmarks/learning_curve.py): each step holds one
# prompt with all 4 letters, so the letter gradients of a step cancel and the choice stays spread (GRPO's
# groups need different answers to differ in reward). Add "steps" and "think".
PRIMER = {"answers": "random", "batch_size": 4, "micro_batch_size": 1, "answers_per_prompt": 4, "learning_rate": 1.0e-4,
          "gradient_checkpointing": False}

# Tokens left for a warm-up target after the prompt (the targets are one sentence and a tag pair).
TARGET_ROOM = 128


def rows_within(rows: list[PromptRow], model_path: str, max_length: int) -> list[PromptRow]:
    """The rows whose prompt leaves ``TARGET_ROOM`` tokens of ``max_length`` for a target: a format primer
    needs no long prompt, and a cut target would teach a broken structure. Raises when none is left."""
    from transformers import AutoTokenizer

    from embodied_r.core.chat import render_chat

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    kept = [r for r in rows if has_image(r)
            or len(tokenizer(render_chat(tokenizer, r.prompt), add_special_tokens=False)["input_ids"])
            + TARGET_ROOM <= max_length]
    if len(kept) < len(rows):
        logger.warning("format warm-up: %d of %d row(s) left out, their prompts leave under %d of format_warmup."
                       "max_length %d tokens for a target", len(rows) - len(kept), len(rows), TARGET_ROOM, max_length)
    if not kept:
        raise WarmupError(f"format_warmup: every prompt is longer than max_length {max_length} minus {TARGET_ROOM} "
                          "tokens for the target; raise format_warmup.max_length")
    return kept


def _choice_log_probs(model: Any, tokenizer: Any, context: str, choices: list[str]) -> list[float] | None:
    """The model's log-probability of each ``choices`` continuation of ``context`` (None when a choice does not
    start on a token boundary of the context, so its tokens cannot be told apart).

    The context (the whole prompt, hundreds of tokens) runs once; each choice's few tokens then run on its
    key/value cache, which is cut back to the context after each (one prompt pass per row, not one per option)."""
    import torch
    from transformers import DynamicCache

    from embodied_r.inference.batch_layout import cache_keyword

    start = tokenizer(context, add_special_tokens=False)["input_ids"]
    suffixes = []
    for choice in choices:
        ids = tokenizer(context + choice, add_special_tokens=False)["input_ids"]
        if ids[:len(start)] != start or len(ids) == len(start):
            return None
        suffixes.append(ids[len(start):])
    keyword = cache_keyword(model) if hasattr(model, "forward") else "past_key_values"
    cache = DynamicCache()
    scores = []
    with torch.no_grad():
        context_logits = model(input_ids=torch.tensor([start], device=model.device), use_cache=True,
                               logits_to_keep=1, **{keyword: cache}).logits[0, -1:].float()
        for suffix in suffixes:
            logits = model(input_ids=torch.tensor([suffix], device=model.device), use_cache=True,
                           **{keyword: cache}).logits[0].float()
            cache.crop(-len(suffix))  # back to the context alone
            # The first choice token is predicted by the context's last position, the rest by the choice's own.
            picked = torch.log_softmax(torch.cat([context_logits, logits[:-1]]), dim=-1)
            scores.append(float(picked.gather(1, torch.tensor(suffix, device=picked.device)[:, None]).sum()))
    return scores


def answer_spread(model: Any, tokenizer: Any, rows: list[PromptRow], limit: int = 8,
                  think: str = "letter-first") -> dict[str, Any] | None:
    """How spread the warmed-up model's choice is: on up to ``limit`` multiple-choice rows, its probability
    of each option's choice words (``choice_parts``: " option C" or " Rotate left, which is option C") right
    after the template's lead, normalised over the options; ``entropy`` is the mean normalised entropy (1:
    every option equally likely, 0: always one) and ``top`` counts each row's most likely letter. None when
    no row has options."""
    import math

    import torch

    from embodied_r.core.chat import render_chat

    entropies: list[float] = []
    top: dict[str, int] = {}
    for row in [r for r in rows if r.answer_type == "choice" and r.options][:limit]:
        letters = list(option_letters(row.options))
        if len(letters) < 2:
            continue
        parts = [choice_parts(row, letter, think) for letter in letters]
        scores = _choice_log_probs(model, tokenizer, render_chat(tokenizer, row.prompt) + parts[0][0],
                                   [middle for _, middle, _ in parts])
        if scores is None:
            continue
        probs = torch.softmax(torch.tensor(scores), dim=-1)
        entropies.append(float(-(probs * probs.clamp_min(1e-12).log()).sum()) / math.log(len(letters)))
        best = letters[int(probs.argmax())]
        top[best] = top.get(best, 0) + 1
    if not entropies:
        return None
    return {"rows": len(entropies), "entropy": round(sum(entropies) / len(entropies), 4), "top": top}


def warmup_model_dir(output_dir: Path) -> Path:
    return output_dir / WARMUP_DIR / "model"


def run_format_warmup(settings: WarmupSettings, rows: list[PromptRow], model_path: str, output_dir: Path,
                      dtype: str = "auto", attn_implementation: str | None = None) -> str:
    """Train ``model_path`` on the warm-up targets; returns the folder of the warmed-up model. A folder
    finished by an earlier run (same settings) is reused; one from other settings is refused."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from embodied_r.inference.models import hub_kernel_kwargs
    from embodied_r.training.precision import training_precision

    final = warmup_model_dir(output_dir)
    marker = final / "warmup.json"
    wanted = {"settings": dataclasses.asdict(settings), "base_model": model_path, "rows": len(rows)}
    if marker.exists():
        done = read_json(marker)
        if done != wanted:
            raise WarmupError(
                f"{final} was trained with {done}, this recipe asks for {wanted}; use a new output_dir"
            )
        logger.info("format warm-up: reusing %s", final)
        return str(final)
    examples = warmup_examples(rows_within(rows, model_path, settings.max_length), settings.steps,
                               settings.batch_size, settings.seed, settings.answers_per_prompt, settings.answers,
                               settings.think, settings.rotations)
    work = output_dir / WARMUP_DIR / "trainer"
    precision = training_precision(dtype)  # full fine-tuning: float32 weights under auto
    config = SFTConfig(
        output_dir=str(work),
        max_steps=settings.steps,
        per_device_train_batch_size=settings.micro_batch_size,
        gradient_accumulation_steps=settings.batch_size // settings.micro_batch_size,
        # In the order built here: with batch_size = answers_per_prompt a step holds one prompt with all its
        # letters, whose gradients on the letter cancel (TRL's shuffle scattered them across steps).
        train_sampling_strategy="sequential",
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=settings.seed,
        max_length=settings.max_length,
        gradient_checkpointing=settings.gradient_checkpointing,
        completion_only_loss=True,  # the prompt (perception text) is context, not something to imitate
        bf16=precision.bf16_autocast,
        use_cpu=not torch.cuda.is_available(),
        model_init_kwargs={"dtype": precision.weights, **hub_kernel_kwargs(),
                           **({"attn_implementation": attn_implementation} if attn_implementation else {})},
    )
    trainer = SFTTrainer(model=model_path, args=config, train_dataset=Dataset.from_list(examples))
    longest = max(len(ids) for ids in trainer.train_dataset["input_ids"])
    if longest >= settings.max_length:
        raise WarmupError(
            f"format_warmup: a row has {longest} tokens, at or over max_length {settings.max_length}; the target "
            "would be cut. Raise format_warmup.max_length"
        )
    output = trainer.train()
    state = trainer.accelerator
    spread = None
    if state.is_main_process:
        trainer.model.eval()
        spread = answer_spread(trainer.model, trainer.processing_class, rows, think=settings.think)
        if spread and spread["entropy"] < MIN_SPREAD:
            logger.warning("format warm-up: the model now picks nearly one option per prompt (mean normalised option "
                           "entropy %.2f over %d prompts, most likely letters %s): GRPO's groups will mostly agree "
                           "and carry no signal. Train each prompt's letters in one step (batch_size = "
                           "answers_per_prompt, micro_batch_size to bound memory) or lower learning_rate",
                           spread["entropy"], spread["rows"], spread["top"])
    staging = final.with_name(final.name + ".partial")
    if state.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
    state.wait_for_everyone()
    trainer.save_model(str(staging))  # every rank: ZeRO-3 gathers the shards here
    if state.is_main_process:
        trainer.processing_class.save_pretrained(str(staging))
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        atomic_write_json(output_dir / WARMUP_DIR / "log.json",
                          {"losses": losses, "train_loss": output.training_loss, "examples": len(examples),
                           "answer_spread": spread, **wanted})
        atomic_write_json(staging / "warmup.json", wanted)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)  # the marker lands with the weights, in one rename
        shutil.rmtree(work, ignore_errors=True)
    state.wait_for_everyone()
    return str(final)
