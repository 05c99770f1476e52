"""Probe a judge before trusting it: does it follow the *content* of a reasoning text?

A judge grades another model's output (the consistency reward's reference model, the consistency rate
in evaluation). A judge that answers one letter whatever it reads, that reads the letters a reasoning
names instead of what it argues, or that answers the option mentioned last, turns the reward into
noise. The probe builds cases from real prompt rows: for a question and each of its options in turn,
reasoning texts (``judge.probe_phrasings``) of six kinds:

- ``content``: reaches the target by its text and ends on it, ruling out other options on the way;
- ``named``: the same, ending by naming the target's letter ("That is option C.");
- ``conflict``: the same, ending by naming a *different* letter (a content reader follows the content,
  a letter reader the letter);
- ``target-first``: names the target first and a ruled-out option last;
- ``paraphrase``: says the target without any word of any option ("my clockwise side");
- ``no-basis``: supports no option; the right answer is ``none`` (``judges.NO_OPTION``).

A string matcher passes the first three and fails the last three; a judge that always picks an option
fails ``no-basis``. The judge is called exactly as training calls it (same prompt, same masking:
``visible_thinks``), and the result is written as ``judge_probe.json``. ``check`` refuses a judge when
any kind's agreement is below ``min_agreement`` (default 0.8) or its most frequent letter takes more
than ``max_letter_share`` of its content answers (default 0.5). ``calibrate_no_basis`` sets an
option-text judge's threshold for answering ``none`` on probe cases.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embodied_r.core.io import atomic_write_json, read_json
from embodied_r.judge.judges import NO_OPTION, Judge, JudgeError, visible_thinks
from embodied_r.judge.probe_cases import (
    DEFAULT_CASES,
    KINDS,
    MIN_CASES,
    ProbeCase,
    ProbeError,
    build_probe_cases,
    option_text,
)

# Part of a saved probe's fingerprint: a probe saved by an earlier version (other kinds) is not reused.
PROBE_VERSION = 2
DEFAULT_MIN_AGREEMENT = 0.8
DEFAULT_MAX_LETTER_SHARE = 0.5


@dataclass
class ProbeResult:
    judge: str
    sees_letters: bool
    scoring: str | None
    cases: int
    questions: int
    agreement: dict[str, float | None] = field(default_factory=dict)  # per kind: answer == expected answer
    counts: dict[str, int] = field(default_factory=dict)  # cases per kind (the n of each agreement)
    follows_named_letter: float | None = None  # conflict cases answered with the named letter
    letter_counts: dict[str, int] = field(default_factory=dict)  # content answers
    top_letter: str | None = None
    top_letter_share: float | None = None
    none_answers: int = 0  # "none" answered where the reasoning supports an option
    not_answered: int = 0
    builtin_cases: int = 0  # paraphrase cases on BUILTIN_QUESTIONS (the rows had too few)
    no_basis: float | None = None  # the judge's threshold for answering none (option-text)
    refusal: bool = False  # the judge may reply none (letter)
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
        kinds = [kind for kind in KINDS if self.counts.get(kind)]
        head = f"judge {self.judge}" + (f" ({self.scoring} scoring)" if self.scoring else "")
        content = f"content agreement {_pct(self.agreement.get('content'))} (n={self.counts.get('content', 0)})"
        parts = [f"{head}: {content}"]
        parts += [f"{kind} {_pct(self.agreement.get(kind))} (n={self.counts[kind]})" for kind in kinds[1:]]
        if self.counts.get("conflict"):
            parts.append(f"follows a contradicting letter {_pct(self.follows_named_letter)}")
        parts += [
            f"most frequent letter {self.top_letter} on {_pct(self.top_letter_share)}",
            f"{self.cases} cases from {self.questions} questions, {self.seconds_per_judgement:.3f} s per judgement",
        ]
        return "; ".join(parts) + (" -> passes" if self.passed else " -> FAILS: " + "; ".join(self.failures))


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


# ---------------------------------------------------------------------------------------------------
# Running and checking
# ---------------------------------------------------------------------------------------------------


def judge_cases(judge: Judge, cases: Sequence[ProbeCase], batch_size: int = 64) -> list[str | None]:
    """The judge's answer to every case, asked in batches as training asks."""
    answers: list[str | None] = []
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
    return answers


def agreement_by_kind(
    cases: Sequence[ProbeCase], answers: Sequence[str | None]
) -> tuple[dict[str, float | None], dict[str, int]]:
    """Per kind, the share of cases answered as expected, and the number of cases."""
    hits: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for case, answer in zip(cases, answers, strict=True):
        totals[case.kind] += 1
        hits[case.kind] += int(answer == case.target)
    agreement = {kind: (hits[kind] / totals[kind]) if totals[kind] else None for kind in KINDS}
    return agreement, {kind: totals[kind] for kind in KINDS}


def run_probe(judge: Judge, cases: Sequence[ProbeCase], min_agreement: float = DEFAULT_MIN_AGREEMENT,
              max_letter_share: float = DEFAULT_MAX_LETTER_SHARE, batch_size: int = 64) -> ProbeResult:
    """Ask ``judge`` about every case (in batches, as training does) and measure it."""
    started = time.perf_counter()
    answers = judge_cases(judge, cases, batch_size)
    elapsed = time.perf_counter() - started
    agreement, counts = agreement_by_kind(cases, answers)
    conflict = [(c, a) for c, a in zip(cases, answers, strict=True) if c.kind == "conflict"]
    content = [a for c, a in zip(cases, answers, strict=True) if c.kind == "content"]
    letters = Counter(a for a in content if a not in (None, NO_OPTION))
    top, top_count = letters.most_common(1)[0] if letters else (None, 0)
    result = ProbeResult(
        judge=str(getattr(judge, "name", type(judge).__name__)),
        sees_letters=bool(getattr(judge, "sees_letters", False)),
        scoring=getattr(judge, "scoring", None),
        cases=len(cases),
        questions=len({c.question for c in cases}),
        agreement=agreement,
        counts=counts,
        follows_named_letter=(sum(a == c.named for c, a in conflict) / len(conflict)) if conflict else None,
        letter_counts=dict(sorted(letters.items())),
        top_letter=top,
        top_letter_share=top_count / len(content) if content else None,
        none_answers=sum(a == NO_OPTION for c, a in zip(cases, answers, strict=True) if c.target != NO_OPTION),
        not_answered=sum(a is None for a in answers),
        builtin_cases=sum(c.builtin for c in cases),
        no_basis=getattr(judge, "no_basis", None),
        refusal=bool(getattr(judge, "refusal", False)),
        seconds_per_judgement=elapsed / max(1, len(cases)),
        min_agreement=float(min_agreement),
        max_letter_share=float(max_letter_share),
        examples=_examples(cases, answers),
    )
    result.failures = check(result)
    result.passed = not result.failures
    return result


def _examples(cases: Sequence[ProbeCase], answers: Sequence[str | None]) -> list[dict[str, Any]]:
    """The first case of each kind, with the judge's answer."""
    first: dict[str, dict[str, Any]] = {}
    for c, a in zip(cases, answers, strict=True):
        first.setdefault(c.kind, {"kind": c.kind, "think": c.think, "target": c.target, "named": c.named,
                                  "answer": a})
    return [first[kind] for kind in KINDS if kind in first]


def check(result: ProbeResult) -> list[str]:
    """Why the judge fails the probe (empty when it passes): every kind that was run must pass."""
    failures = []
    for kind in KINDS:
        if kind != "content" and not result.counts.get(kind):
            continue
        value = result.agreement.get(kind)
        if value is None or value < result.min_agreement:
            failures.append(f"{kind} agreement {_pct(value)} is below {result.min_agreement:.0%}")
    if result.top_letter_share is not None and result.top_letter_share > result.max_letter_share:
        failures.append(
            f"it answers {result.top_letter} on {_pct(result.top_letter_share)} of the cases "
            f"(more than {result.max_letter_share:.0%}) although every letter is right equally often"
        )
    return failures


def calibrate_no_basis(judge: Any, cases: Sequence[ProbeCase], batch_size: int = 64) -> float:
    """The ``no_basis`` threshold for an option-text judge (``ReferenceJudge``) that makes its worst
    kind on ``cases`` as good as it can be (then its mean over kinds): below it, the judge answers
    ``none``. Use other cases than those the judge is then probed on, or the probe is optimistic."""
    if getattr(judge, "scoring", None) != "option-text" or not hasattr(judge, "option_scores"):
        raise ValueError(
            f"judge {getattr(judge, 'name', judge)}: a no-basis threshold is set on option-text scores, so it "
            "needs a local model with option-text scoring (a letter judge answers none with refusal instead)"
        )
    scores: list[dict[str, float] | None] = []
    for start in range(0, len(cases), max(1, batch_size)):
        chunk = cases[start : start + batch_size]
        options = [c.options for c in chunk]
        scores += judge.option_scores(
            [c.question for c in chunk], visible_thinks(judge, [c.think for c in chunk], options), options
        )
    best = [(max(s, key=s.__getitem__), max(s.values())) if s else (None, 0.0) for s in scores]
    values = sorted({value for letter, value in best if letter is not None})
    if not values:
        raise ValueError("the judge scored none of the calibration cases")
    # Candidates halfway between neighbouring best scores, and one below / above them all.
    candidates = [values[0] - 1.0, *((a + b) / 2 for a, b in zip(values, values[1:])), values[-1] + 1.0]

    def quality(threshold: float) -> tuple[float, float]:
        answers = [None if letter is None else NO_OPTION if value < threshold else letter for letter, value in best]
        measured = [a for a in agreement_by_kind(cases, answers)[0].values() if a is not None]
        return min(measured), sum(measured) / len(measured)

    return max(candidates, key=quality)


def weak_judge_message(summary: str, where: str = "training") -> str:
    """The error a run gives for a judge that failed the probe (``summary``: its numbers) and the ways out."""
    return (
        f"the consistency judge failed its probe, so the consistency reward would measure noise: "
        f"{summary}. Ways out: a stronger `judge.model` (a larger instruct model's name or "
        f"folder), an OpenAI-compatible endpoint (`judge: {{model: {{base_url: http://host:8000/v1, model: "
        f"NAME}}}}`), a judge that can answer none for reasoning that supports no option (`judge: {{model: "
        f"{{model: NAME, no_basis: T}}}}` with a threshold from `embodied-r judge-probe --no-basis calibrate`, or "
        f"`refusal: true` for a letter judge), or `judge.allow_weak: true` to go on knowingly ({where} records it)."
    )


def probe_fingerprint(judge: Judge, rows: Sequence[Any], **settings: Any) -> dict[str, Any]:
    """What a saved probe must match to be reused: the probe version, the judge, its letter and "none"
    rules, the rows (a digest of their ids) and the probe settings."""
    ids = sorted(str(row["id"] if isinstance(row, dict) else row.id) for row in rows)
    return {
        "probe": PROBE_VERSION,
        "judge": str(getattr(judge, "name", type(judge).__name__)),
        "sees_letters": bool(getattr(judge, "sees_letters", False)),
        "scoring": getattr(judge, "scoring", None),
        "no_basis": getattr(judge, "no_basis", None),
        "refusal": bool(getattr(judge, "refusal", False)),
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


__all__ = ["DEFAULT_CASES", "KINDS", "MIN_CASES", "PROBE_VERSION", "ProbeCase", "ProbeError", "ProbeResult",
           "agreement_by_kind", "build_probe_cases", "calibrate_no_basis", "check", "judge_cases", "option_text",
           "probe_fingerprint", "probe_record", "run_probe", "weak_judge_message"]
