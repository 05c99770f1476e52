"""The 0-3 grading judge's prompt and reply parser, and its probe: does it tell right from wrong answers?

``robot-bench`` scores open answers with a judge model (Robot-R1 Bench's 0-3 scale). A judge that gives
every answer the same grade, or that rewards any answer mentioning the right objects, makes the bench
score noise. The probe builds answers whose grade is known from bench items themselves, asks the
judge exactly as the bench does (:func:`embodied_r.methods.robot_r1.bench.judge_messages`), and counts how
often the grade falls in the expected band:

- ``equivalent``: the reference reworded (synonyms, other units, another list layout): expect 2 or 3;
- ``partial``: the reference with parts left out (one of two moves, the first step of a plan): 1 or 2;
- ``wrong``: the reference with its meaning reversed (up for down, release for grasp, another
  distance): 0 or 1.

The judge passes when every kind it was asked about agrees at least ``min_agreement`` of the time
(default 0.75). A reply without a score counts against the judge (it is not an agreement).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from embodied_r.core.records import QARecord

KINDS = ("equivalent", "partial", "wrong")
EXPECTED: dict[str, tuple[int, ...]] = {"equivalent": (2, 3), "partial": (1, 2), "wrong": (0, 1)}
DEFAULT_ITEMS = 24
DEFAULT_MIN_AGREEMENT = 0.75

# Opposites used to reverse a reference's meaning; applied as whole words in one pass.
_OPPOSITES = {"up": "down", "down": "up", "left": "right", "right": "left", "front": "back", "back": "front",
              "above": "below", "below": "above", "grasp": "release", "release": "grasp", "lift": "lower",
              "behind": "in front of", "forward": "backward", "backward": "forward"}
# Meaning-preserving rewordings.
# ("front" is left alone: "in front of" has no one-word swap.)
_SYNONYMS = {"move": "shift", "slightly": "a little", "back": "backward", "grasp": "grab", "lift": "raise",
             "release": "let go of", "above": "over", "below": "under"}
_WORD_RE = re.compile(r"[A-Za-z]+")


JUDGE_SYSTEM = (
    "You grade an answer about a robot scene against a reference answer. Give 3 if it means the same "
    "as the reference or says the same with more detail, 2 if it mostly matches, 1 if it matches only "
    "in part with important differences, 0 if it means something different. Accept paraphrases and "
    "synonyms (front/forward, back/backward). Reply exactly as 'Score: N' on the first line, then "
    "'Reason: ...'."
)
_SCORE_RE = re.compile(r"score\s*[:=]?\s*\[?\s*([0-3])\b", re.IGNORECASE)


def judge_messages(record: QARecord, model_answer: str) -> list[dict[str, str]]:
    user = (f"Question category: {record.task}\nQuestion: {record.question}\n"
            f"Reference answer: {record.answer}\nModel answer: {model_answer}")
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def parse_judge_score(text: str) -> int | None:
    """The 0-3 score of a judge reply, or None when it gives none.

    >>> parse_judge_score("Score: 2\\nReason: close")
    2
    >>> parse_judge_score("I think it is fine") is None
    True
    """
    match = _SCORE_RE.search(text or "")
    return int(match.group(1)) if match else None


class GradingProbeError(ValueError):
    """The bench items allow no probe case (e.g. no item with a reference)."""


@dataclass
class GradingCase:
    """One probe answer: the bench item it is about, its kind and the answer text given to the judge."""

    item_id: str
    category: str
    kind: str
    answer: str


@dataclass
class GradingProbeResult:
    """What the probe measured; ``passed`` is False with ``failures`` saying why."""

    n_cases: int
    agreement: dict[str, float | None]
    grades: dict[str, dict[str, int]]
    no_score: int
    min_agreement: float
    passed: bool = False
    failures: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        parts = [f"{kind} {_pct(self.agreement.get(kind))}" for kind in KINDS if kind in self.agreement]
        return f"grade in the expected band: {', '.join(parts)} ({self.n_cases} cases, {self.no_score} without a score)"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _swap_words(text: str, table: dict[str, str]) -> str:
    """Replace whole words by ``table`` in one pass (so up->down->up cannot happen), keeping capitals."""

    def one(match: re.Match[str]) -> str:
        word = match.group(0)
        new = table.get(word.lower())
        if new is None:
            return word
        return new.capitalize() if word[0].isupper() else new

    return _WORD_RE.sub(one, text)


def _parts(text: str) -> list[str]:
    """The comma/"and" separated parts of a one-line reference ("down, left and slightly front")."""
    return [p.strip() for p in re.split(r",\s*|\s+and\s+", text.strip().rstrip(".")) if p.strip()]


def _distance(reference: str) -> float | None:
    match = re.search(r"(\d+(?:\.\d+)?)\s*m\b", reference)
    return float(match.group(1)) if match else None


def cases_for(record: QARecord) -> list[GradingCase]:
    """The probe answers that can be built from one bench item (a kind is left out when its answer
    would not be clearly in its band, e.g. no partial answer to a single move)."""
    reference = str(record.answer).strip()
    cases: dict[str, str] = {}
    if record.task == "planning":
        steps = [re.sub(r"^\d+\.\s*", "", line).strip() for line in reference.splitlines() if line.strip()]
        if steps:
            cases["equivalent"] = "First, " + "; then ".join(s[0].lower() + s[1:] for s in steps) + "."
            if len(steps) >= 3:
                cases["partial"] = f"1. {steps[0]}"
            reversed_steps = [_swap_words(s, _OPPOSITES) for s in steps]
            if reversed_steps != steps:
                cases["wrong"] = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(reversed_steps))
    elif (metres := _distance(reference)) is not None:
        cases["equivalent"] = f"Roughly {round(metres * 100)} cm."
        cases["wrong"] = f"About {metres * 4 + 0.5:.2f} m."
    else:
        reworded = _swap_words(reference, _SYNONYMS)
        cases["equivalent"] = (reworded if reworded != reference
                               else f"The answer is: {reference[0].lower()}{reference[1:]}")
        reversed_text = _swap_words(reference, _OPPOSITES)
        if reversed_text != reference:
            cases["wrong"] = reversed_text
        parts = _parts(reference)
        if len(parts) >= 2 and record.task == "movement":  # one of two or more moves
            cases["partial"] = parts[0] + "."
    return [GradingCase(record.id, record.task, kind, answer) for kind, answer in cases.items()]


def build_grading_cases(records: Sequence[QARecord], n_items: int = DEFAULT_ITEMS, seed: int = 0) -> list[GradingCase]:
    """Probe cases from up to ``n_items`` bench items, spread over the categories."""
    if n_items < 1:
        raise GradingProbeError(f"the grading probe needs at least 1 item, got {n_items}")
    by_category: dict[str, list[QARecord]] = {}
    for record in records:
        if str(record.answer).strip():
            by_category.setdefault(record.task, []).append(record)
    if not by_category:
        raise GradingProbeError("no bench item with a reference answer to build the grading probe from")
    rng = random.Random(seed)
    for items in by_category.values():
        rng.shuffle(items)
    chosen: list[QARecord] = []
    while len(chosen) < n_items and any(by_category.values()):  # round robin over the categories
        for category in sorted(by_category):
            if by_category[category] and len(chosen) < n_items:
                chosen.append(by_category[category].pop())
    return [case for record in chosen for case in cases_for(record)]


def run_grading_probe(records: Sequence[QARecord], judge: Callable[[list[list[dict[str, str]]]], list[str]],
                      n_items: int = DEFAULT_ITEMS, min_agreement: float = DEFAULT_MIN_AGREEMENT,
                      seed: int = 0) -> GradingProbeResult:
    """Ask ``judge`` about the probe cases and measure agreement per kind."""
    cases = build_grading_cases(records, n_items, seed)
    by_id = {r.id: r for r in records}
    replies = judge([judge_messages(by_id[c.item_id], c.answer) for c in cases])
    if len(replies) != len(cases):
        raise RuntimeError(f"judge returned {len(replies)} replies for {len(cases)} probe cases")
    hits: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    grades: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    no_score = 0
    examples = []
    for case, reply in zip(cases, replies):
        score = parse_judge_score(reply)
        totals[case.kind] += 1
        grades[case.kind][str(score) if score is not None else "none"] += 1
        no_score += score is None
        hits[case.kind] += score in EXPECTED[case.kind]
        if len(examples) < 6:
            examples.append({"item": case.item_id, "kind": case.kind, "answer": case.answer,
                             "reference": str(by_id[case.item_id].answer), "grade": score,
                             "reply": str(reply)[:200]})
    agreement = {kind: hits[kind] / totals[kind] for kind in KINDS if totals[kind]}
    result = GradingProbeResult(n_cases=len(cases), agreement=agreement,  # type: ignore[arg-type]
                                grades={k: dict(v) for k, v in grades.items() if v}, no_score=no_score,
                                min_agreement=min_agreement, examples=examples)
    result.failures = [f"{kind} answers graded in {EXPECTED[kind]} only {_pct(value)} of the time "
                       f"(below {min_agreement:.0%})" for kind, value in agreement.items() if value < min_agreement]
    result.passed = not result.failures
    return result


__all__ = ["EXPECTED", "GradingCase", "GradingProbeError", "GradingProbeResult", "JUDGE_SYSTEM", "KINDS",
           "build_grading_cases", "cases_for", "judge_messages", "parse_judge_score", "run_grading_probe"]
