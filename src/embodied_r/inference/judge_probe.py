"""Probe a judge before trusting it: does it follow the *content* of a reasoning text?

A judge grades another model's output (the consistency reward's reference model, the consistency rate
in evaluation). A judge that answers one letter whatever it reads, or that reads the letters a
reasoning names instead of what it argues, turns the reward into noise. The probe builds cases from
real prompt rows: for a question and each of its options in turn, a short reasoning that reaches that
option by its content (the option's text and words from the question, never its letter) while also
mentioning other options it rules out. Three kinds of case:

- ``content``: the reasoning alone (what the threshold is about);
- ``named``: the same reasoning ending by naming the target's letter ("That is option C.");
- ``conflict``: the same reasoning ending by naming a *different* letter. A content reader follows the
  content; a letter reader follows the letter. Reported, so a user sees which one the judge is.

The judge is called exactly as training calls it (same prompt, same masking: ``visible_thinks``), and
the result is written as ``judge_probe.json``. ``check`` refuses a judge whose content agreement is
below ``min_agreement`` (default 0.8) or whose most frequent letter takes more than
``max_letter_share`` of its content answers (default 0.5).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embodied_r.core.io import atomic_write_json, read_json
from embodied_r.core.parsing import OPTION_PREFIX_RE, option_letters
from embodied_r.inference.judges import Judge, JudgeError, question_for_judge, visible_thinks

KINDS = ("content", "named", "conflict")
DEFAULT_CASES = 64
MIN_CASES = 16
DEFAULT_MIN_AGREEMENT = 0.8
DEFAULT_MAX_LETTER_SHARE = 0.5

# Reasoning templates: {target} is the option text the reasoning reaches, {other}/{others} options it
# rules out, {topic} words of the question. Several phrasings, so no judge passes by one pattern.
_TEMPLATES = (
    (
        "The question asks {topic}. Going through the choices, {others} do not match what was observed, "
        'while "{target}" does. So the answer is "{target}".'
    ),
    (
        'I need to work out {topic}. It cannot be "{other}"; the observations point to "{target}". '
        'Therefore: "{target}".'
    ),
    (
        'Considering {topic}: "{target}" fits the evidence best, better than "{other}". '
        'Final conclusion: "{target}".'
    ),
    (
        "Ruling out {others}, since none of them agree with the scene, what remains for {topic} is "
        '"{target}", and that is my conclusion.'
    ),
    ('At first "{other}" looked possible, but checking {topic} again, the right description is "{target}".'),
)


class ProbeError(ValueError):
    """The probe cannot be built from these rows (too few multiple-choice questions)."""


@dataclass(frozen=True)
class ProbeCase:
    kind: str
    question: str
    options: list[str]
    think: str
    target: str  # the letter the content leads to
    named: str | None = None  # the letter the think names, for named / conflict cases


@dataclass
class ProbeResult:
    judge: str
    sees_letters: bool
    scoring: str | None
    cases: int
    questions: int
    agreement: dict[str, float | None] = field(default_factory=dict)  # per kind: answer == content target
    follows_named_letter: float | None = None  # conflict cases answered with the named letter
    letter_counts: dict[str, int] = field(default_factory=dict)  # content answers
    top_letter: str | None = None
    top_letter_share: float | None = None
    not_answered: int = 0
    seconds_per_judgement: float = 0.0
    min_agreement: float = DEFAULT_MIN_AGREEMENT
    max_letter_share: float = DEFAULT_MAX_LETTER_SHARE
    passed: bool = False
    failures: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Every field, plus ``message``: the one-line summary (what ``judge_probe.json`` holds)."""
        return {**asdict(self), "message": self.summary()}

    def summary(self) -> str:
        """One line: the numbers a user needs to decide about this judge."""
        content = self.agreement.get("content")
        parts = [
            f"judge {self.judge}" + (f" ({self.scoring} scoring)" if self.scoring else "")
            + f": content agreement {_pct(content)}",
            f"with the letter named {_pct(self.agreement.get('named'))}",
            f"follows a contradicting letter {_pct(self.follows_named_letter)}",
            f"most frequent letter {self.top_letter} on {_pct(self.top_letter_share)}",
            f"{self.cases} cases from {self.questions} questions, {self.seconds_per_judgement:.3f} s per judgement",
        ]
        return "; ".join(parts) + (" -> passes" if self.passed else " -> FAILS: " + "; ".join(self.failures))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


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


def build_probe_cases(
    rows: Sequence[Any], n_cases: int = DEFAULT_CASES, seed: int = 0, conflict: bool = True
) -> list[ProbeCase]:
    """``n_cases`` content cases (and as many named and, with ``conflict``, conflict cases) from prompt
    rows' questions; fewer when the rows have fewer (question, option) pairs, but at least 16.

    Rows are anything with ``prompt``, ``options`` and ``answer_type`` (``PromptRow`` or its dict);
    every option of a chosen question is the target once, so a fair judge's answers spread over the
    letters. Raises ``ProbeError`` when fewer than 16 content cases can be built.
    """
    rng = random.Random(seed)
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
    rng.shuffle(questions)
    cases: list[ProbeCase] = []
    content_count = 0
    for question, options in questions:
        if content_count >= n_cases:
            break
        letters = option_letters(options)
        texts = [option_text(o) for o in options]
        for index, letter in enumerate(letters):
            others = [t for j, t in enumerate(texts) if j != index]
            rng.shuffle(others)
            think = rng.choice(_TEMPLATES).format(
                topic=_topic(question),
                target=texts[index],
                other=others[0],
                others=", ".join(f'"{t}"' for t in others[:3]),
            )
            wrong = rng.choice([x for x in letters if x != letter])
            cases.append(ProbeCase("content", question, options, think, letter))
            cases.append(
                ProbeCase("named", question, options, f"{think} That is option {letter}.", letter, letter)
            )
            if conflict:
                cases.append(
                    ProbeCase(
                        "conflict", question, options, f"{think} That is option {wrong}.", letter, wrong
                    )
                )
            content_count += 1
    if content_count < MIN_CASES:
        raise ProbeError(
            f"the judge probe needs at least {MIN_CASES} cases from multiple-choice questions with distinct "
            f"option texts; these rows give {content_count} (from {len(questions)} usable questions)"
        )
    return cases


# ---------------------------------------------------------------------------------------------------
# Running and checking
# ---------------------------------------------------------------------------------------------------


def run_probe(judge: Judge, cases: Sequence[ProbeCase], min_agreement: float = DEFAULT_MIN_AGREEMENT,
              max_letter_share: float = DEFAULT_MAX_LETTER_SHARE, batch_size: int = 64) -> ProbeResult:
    """Ask ``judge`` about every case (in batches, as training does) and measure it."""
    answers: list[str | None] = []
    started = time.perf_counter()
    for start in range(0, len(cases), max(1, batch_size)):
        chunk = cases[start : start + batch_size]
        options = [c.options for c in chunk]
        got = judge.judge(
            [c.question for c in chunk], visible_thinks(judge, [c.think for c in chunk], options), options
        )
        if len(got) != len(chunk):
            raise JudgeError(
                f"judge {getattr(judge, 'name', judge)} returned {len(got)} answers for {len(chunk)}"
            )
        answers.extend(got)
    elapsed = time.perf_counter() - started
    by_kind: dict[str, list[tuple[ProbeCase, str | None]]] = {kind: [] for kind in KINDS}
    for case, answer in zip(cases, answers, strict=True):
        by_kind[case.kind].append((case, answer))
    agreement = {
        kind: (sum(a == c.target for c, a in items) / len(items)) if items else None
        for kind, items in by_kind.items()
    }
    conflict = by_kind["conflict"]
    follows = (sum(a == c.named for c, a in conflict) / len(conflict)) if conflict else None
    counts = Counter(a for _, a in by_kind["content"] if a is not None)
    top, top_count = counts.most_common(1)[0] if counts else (None, 0)
    n_content = len(by_kind["content"])
    result = ProbeResult(
        judge=str(getattr(judge, "name", type(judge).__name__)),
        sees_letters=bool(getattr(judge, "sees_letters", False)),
        scoring=getattr(judge, "scoring", None),
        cases=len(cases),
        questions=len({c.question for c in cases}),
        agreement=agreement,
        follows_named_letter=follows,
        letter_counts=dict(sorted(counts.items())),
        top_letter=top,
        top_letter_share=top_count / n_content if n_content else None,
        not_answered=sum(a is None for a in answers),
        seconds_per_judgement=elapsed / max(1, len(cases)),
        min_agreement=float(min_agreement),
        max_letter_share=float(max_letter_share),
        examples=[
            {"kind": c.kind, "think": c.think, "target": c.target, "named": c.named, "answer": a}
            for c, a in list(zip(cases, answers, strict=True))[:6]
        ],
    )
    result.failures = check(result)
    result.passed = not result.failures
    return result


def check(result: ProbeResult) -> list[str]:
    """Why the judge fails the probe (empty when it passes)."""
    failures = []
    content = result.agreement.get("content")
    if content is None or content < result.min_agreement:
        failures.append(f"content agreement {_pct(content)} is below {result.min_agreement:.0%}")
    if result.top_letter_share is not None and result.top_letter_share > result.max_letter_share:
        failures.append(
            f"it answers {result.top_letter} on {_pct(result.top_letter_share)} of the cases "
            f"(more than {result.max_letter_share:.0%}) although every letter is right equally often"
        )
    return failures


def weak_judge_message(summary: str, where: str = "training") -> str:
    """The error a run gives for a judge that failed the probe (``summary``: its numbers) and the ways out."""
    return (
        f"the consistency judge failed its probe, so the consistency reward would measure noise: "
        f"{summary}. Ways out: a stronger `reference_model` (a larger instruct model's name or "
        f"folder), an OpenAI-compatible endpoint (`reference_model: {{base_url: http://host:8000/v1, model: "
        f"NAME}}`), or `allow_weak_judge: true` to go on knowingly ({where} records it)."
    )


def probe_fingerprint(judge: Judge, rows: Sequence[Any], **settings: Any) -> dict[str, Any]:
    """What a saved probe must match to be reused: the judge, its letter rule, the rows (a digest of
    their ids) and the probe settings."""
    ids = sorted(str(row["id"] if isinstance(row, dict) else row.id) for row in rows)
    return {
        "judge": str(getattr(judge, "name", type(judge).__name__)),
        "sees_letters": bool(getattr(judge, "sees_letters", False)),
        "scoring": getattr(judge, "scoring", None),
        "rows": hashlib.sha1("\n".join(ids).encode("utf-8")).hexdigest()[:16],
        **settings,
    }


def probe_record(judge: Judge, rows: Sequence[Any], path: Path, fingerprint: dict[str, Any],
                 n_cases: int = DEFAULT_CASES, seed: int = 0, conflict: bool = True,
                 min_agreement: float = DEFAULT_MIN_AGREEMENT, max_letter_share: float = DEFAULT_MAX_LETTER_SHARE,
                 write: bool = True) -> dict[str, Any]:
    """The probe of ``judge`` on ``rows`` as a dict (``ProbeResult.to_dict`` plus ``fingerprint``), reused
    from ``path`` when an earlier probe there has the same ``fingerprint`` (a resumed run), else run and
    (with ``write``) saved there. Raises ``ProbeError`` when the rows cannot make a probe."""
    if path.is_file():
        previous = read_json(path)
        if previous.get("fingerprint") == fingerprint:
            return previous
    cases = build_probe_cases(rows, n_cases=n_cases, seed=seed, conflict=conflict)
    result = run_probe(judge, cases, min_agreement=min_agreement, max_letter_share=max_letter_share)
    record = {**result.to_dict(), "fingerprint": fingerprint}
    if write:
        atomic_write_json(path, record)
    return record


__all__ = ["KINDS", "ProbeCase", "ProbeError", "ProbeResult", "build_probe_cases", "check", "probe_fingerprint",
           "probe_record", "run_probe", "weak_judge_message"]
