"""The judge probe's cases: for each multiple-choice question of the probed rows and each of its options
in turn, short reasoning texts of six kinds (``KINDS``; the texts are in ``judge.probe_phrasings``).

``embodied_r.judge.probe`` runs them; this module only builds them. Every option of a chosen
question is the target once, so a fair judge's answers spread over the letters.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from embodied_r.core.parsing import OPTION_PREFIX_RE, option_letters
from embodied_r.judge.judges import NO_OPTION, question_for_judge
from embodied_r.judge.probe_phrasings import (
    BUILTIN_QUESTIONS,
    CONTENT_TEMPLATES,
    NO_BASIS_TEMPLATES,
    PARAPHRASE_TEMPLATES,
    TARGET_FIRST_TEMPLATES,
    free_of,
    option_words,
    paraphrases_for,
    quoted,
)
from embodied_r.judge.reference_judges import MentionedLastJudge

KINDS = ("content", "named", "conflict", "target-first", "paraphrase", "no-basis")
DEFAULT_CASES = 64
MIN_CASES = 16


class ProbeError(ValueError):
    """The probe cannot be built from these rows (too few multiple-choice questions)."""


@dataclass(frozen=True)
class ProbeCase:
    kind: str
    question: str
    options: list[str]
    think: str
    target: str  # the letter the reasoning leads to, or NO_OPTION (no-basis cases)
    named: str | None = None  # the letter the think names, for named / conflict cases
    builtin: bool = False  # from BUILTIN_QUESTIONS, not the probed rows (paraphrase cases only)


# ---------------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------------


def option_text(option: str) -> str:
    """``"B. right"`` -> ``"right"``."""
    match = OPTION_PREFIX_RE.match(str(option))
    return match.group(2).strip() if match else str(option).strip()


def _topic(question: str) -> str:
    """A few words of the question stem, lower-cased, to tie the reasoning to the question."""
    stem = question.split("\n", 1)[0]
    stem = stem.split(":", 1)[1] if stem.lower().startswith("question") and ":" in stem else stem
    words = stem.strip().rstrip("?").split()
    phrase = " ".join(words[:12]) if words else "the question"
    return phrase[:1].lower() + phrase[1:]


def _usable(options: Sequence[str] | None) -> bool:
    if not options or len(options) < 2:
        return False
    texts = [option_text(o).lower() for o in options]
    letters = option_letters(list(options))
    # Options that are empty or repeat another option cannot be told apart by their content.
    return all(texts) and len(set(texts)) == len(texts) and len(set(letters)) == len(letters)


def _probe_questions(rows: Sequence[Any]) -> list[tuple[str, list[str]]]:
    """The distinct multiple-choice questions of ``rows`` (as the judge reads them) with their options."""
    questions: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for row in rows:
        get = row.get if isinstance(row, dict) else lambda key, r=row: getattr(r, key, None)
        options = get("options")
        if (get("answer_type") or "choice") != "choice" or not _usable(options):
            continue
        question = question_for_judge(get("prompt"), list(options))
        if question in seen:
            continue
        seen.add(question)
        questions.append((question, [str(o) for o in options]))
    return questions


def build_probe_cases(
    rows: Sequence[Any], n_cases: int = DEFAULT_CASES, seed: int = 0, conflict: bool = True
) -> list[ProbeCase]:
    """About ``n_cases`` cases of each kind (``conflict`` cases only with ``conflict``) from prompt rows'
    questions; fewer when the rows have fewer (question, option) pairs, but at least 16 content cases.

    Rows are anything with ``prompt``, ``options`` and ``answer_type`` (``PromptRow`` or its dict);
    every option of a chosen question is the target once, so a fair judge's answers spread over the
    letters. Paraphrase cases come from questions whose options the paraphrase table covers; when the
    rows give fewer than 16, ``BUILTIN_QUESTIONS`` are added. Raises ``ProbeError`` when fewer than 16
    content cases can be built.
    """
    rng = random.Random(seed)
    # Each added kind draws from its own generator, so the first three kinds are the same cases a
    # given seed has always given (their measurements stay comparable across probe versions).
    extra = {kind: random.Random(f"{seed}/{kind}") for kind in ("target-first", "paraphrase", "no-basis")}
    questions = _probe_questions(rows)
    rng.shuffle(questions)
    cases: list[ProbeCase] = []
    content_count = 0
    for question, options in questions:
        if content_count >= n_cases:
            break
        cases += _letter_kinds(question, options, rng, conflict)
        cases += _target_first_cases(question, options, extra["target-first"])
        cases += _paraphrase_cases(question, options, extra["paraphrase"])
        cases += _no_basis_cases(question, options, extra["no-basis"])
        content_count += len(options)
    if content_count < MIN_CASES:
        raise ProbeError(
            f"the judge probe needs at least {MIN_CASES} cases from multiple-choice questions with distinct "
            f"option texts; these rows give {content_count} (from {len(questions)} usable questions)"
        )
    if sum(c.kind == "paraphrase" for c in cases) < MIN_CASES:
        for question, options in BUILTIN_QUESTIONS:
            cases += _paraphrase_cases(question, list(options), extra["paraphrase"], builtin=True)
    return cases


def _letter_kinds(question: str, options: list[str], rng: random.Random, conflict: bool) -> list[ProbeCase]:
    """content, named and (with ``conflict``) conflict cases, every option the target once."""
    cases = []
    letters = option_letters(options)
    texts = [option_text(o) for o in options]
    for index, letter in enumerate(letters):
        others = [t for j, t in enumerate(texts) if j != index]
        rng.shuffle(others)
        think = rng.choice(CONTENT_TEMPLATES).format(
            topic=_topic(question),
            target=texts[index],
            other=others[0],
            others=", ".join(f'"{t}"' for t in others[:3]),
        )
        wrong = rng.choice([x for x in letters if x != letter])
        cases.append(ProbeCase("content", question, options, think, letter))
        cases.append(ProbeCase("named", question, options, f"{think} That is option {letter}.", letter, letter))
        if conflict:
            cases.append(ProbeCase("conflict", question, options, f"{think} That is option {wrong}.", letter, wrong))
    return cases


def _target_first_cases(question: str, options: list[str], rng: random.Random) -> list[ProbeCase]:
    """Per option, a reasoning that names it first and a ruled-out option last (checked: the option
    mentioned last is a wrong one; an option with no such phrasing is left out)."""
    cases = []
    letters = option_letters(options)
    texts = [option_text(o) for o in options]
    for index, letter in enumerate(letters):
        others = [t for j, t in enumerate(texts) if j != index]
        rng.shuffle(others)
        for template in rng.sample(TARGET_FIRST_TEMPLATES, len(TARGET_FIRST_TEMPLATES)):
            think = template.format(topic=_topic(question), target=texts[index], other=others[0],
                                    others=quoted(others[:3]))
            if MentionedLastJudge.pick(think, options) not in (letter, NO_OPTION):
                cases.append(ProbeCase("target-first", question, options, think, letter))
                break
    return cases


def _paraphrase_cases(question: str, options: list[str], rng: random.Random,
                      builtin: bool = False) -> list[ProbeCase]:
    """Per option, a reasoning that says it without any option's words; none when the paraphrase
    table does not cover every option of the question."""
    texts = [option_text(o) for o in options]
    phrases = paraphrases_for(texts, rng)
    if phrases is None:
        return []
    forbidden = option_words(texts)
    cases = []
    for letter, phrase in zip(option_letters(options), phrases, strict=True):
        for template in rng.sample(PARAPHRASE_TEMPLATES, len(PARAPHRASE_TEMPLATES)):
            think = template.format(phrase=phrase)
            if free_of(think, forbidden):
                cases.append(ProbeCase("paraphrase", question, options, think, letter, builtin=builtin))
                break
    return cases


def _no_basis_cases(question: str, options: list[str], rng: random.Random) -> list[ProbeCase]:
    """As many reasoning texts that support no option as the question has options."""
    texts = [option_text(o) for o in options]
    cases = []
    for _ in options:
        a, b = rng.sample(texts, 2)
        rest = quoted([t for t in texts if t != a])
        think = rng.choice(NO_BASIS_TEMPLATES).format(topic=_topic(question), a=a, b=b, rest=rest)
        cases.append(ProbeCase("no-basis", question, options, think, NO_OPTION))
    return cases


__all__ = ["DEFAULT_CASES", "KINDS", "MIN_CASES", "ProbeCase", "ProbeError", "build_probe_cases", "option_text"]
