"""Baselines scored on the same questions as the model, and the position-bias report.

- ``random``: the expected accuracy of a uniform guess, 1/#options per question (exact expectation,
  no sampling noise), as the "Random" row of Embodied-R's Table 1; numeric questions have no random
  baseline and are left out of it (reported as such).
- ``prior``: always the most frequent gold letter of the question's task (numbers: the task's median
  answer, scored with MRA). Fit on a separate set when one is given; otherwise leave-one-out on the
  evaluated questions (each question's guess comes from the *other* questions of its task), so the
  baseline never sees the answer it is scored on. The report says which.
- ``answer-prior``: always the option whose *text* is the task's most frequent answer text (ties, and
  options never seen as an answer, in the letter prior's order; numbers: the median, as ``prior``), fit
  as ``prior`` is. The generators balance letters, so the letter prior cannot see a skew in what the
  answers say (e.g. "front-left" or "front-right" for most relative-direction answers); this one can,
  without a model.
- ``direct``: the reasoner answering at once, without thinking (``direct_answer_rows``: each row's method's
  direct-answer prompt, ``Method.direct_prompt``).
- ``blind``: the evaluated model answering the same questions with the frame descriptions removed
  (``blind_rows``: each row's method's blind prompt, ``Method.blind_prompt``), with the model's own
  generation settings: what it gets from the question alone.
- ``text-rule``: a deterministic rule per task over the frame descriptions (``text_rule_baseline``, each
  row's method's ``text_rules``): what the text gives away without reasoning, and the share of questions
  it answers exactly.

The prompts of ``direct`` and ``blind`` and the text rules are the row's method's, reached through
``method_for_row``; a baseline that needs a part some rows' method lacks is not run on them, saying so
(``lacking``).
- ``vlm_only``: the perception VLM answering from the frames; it needs a VLM backend and is reported
  as not run otherwise. The backend and the key frames are the rows' method's (``Method.perception_backend``,
  ``keyframe_images``), so it is not run on questions of a method without a perception stage either.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from embodied_r.core.parsing import option_letters, option_texts
from embodied_r.core.records import Prediction, PromptRow
from embodied_r.core.scoring import score_answer
from embodied_r.core.task_table import task_table
from embodied_r.methods import method_for_row


def _prediction(row: PromptRow, parsed: Any, score: float, completion: str = "") -> dict[str, Any]:
    return Prediction(id=row.id, task=row.task, completion=completion, parsed_answer=parsed, answer=row.answer,
                      answer_type=row.answer_type, correct=score >= 1.0, score=score).to_dict()


def random_baseline(rows: Sequence[PromptRow]) -> dict[str, Any]:
    """Expected per-task accuracy of a uniform guess among each question's options."""
    predictions = [_prediction(row, None, 1.0 / len(row.options)) for row in rows
                   if row.answer_type == "choice" and row.options]
    table = task_table(predictions)
    skipped = sum(1 for row in rows if row.answer_type != "choice")
    table.update({"name": "random", "status": "ok", "note": "expected accuracy of a uniform guess (1/#options)",
                  "excluded_non_choice": skipped})
    return table


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def answer_text(row: PromptRow) -> str | None:
    """The gold option's text, case-folded (``None`` when the gold letter names no option)."""
    text = option_texts(row.options).get(str(row.answer).strip().upper())
    return _folded(text) if text else None


def fit_prior(rows: Sequence[PromptRow]) -> dict[str, Any]:
    """Per task: the letter and answer-text frequencies of choice answers, or the median of numeric answers."""
    letters: dict[str, Counter[str]] = defaultdict(Counter)
    texts: dict[str, Counter[str]] = defaultdict(Counter)
    numbers: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.answer_type == "choice":
            letters[row.task][str(row.answer).strip().upper()] += 1
            text = answer_text(row)
            if text is not None:
                texts[row.task][text] += 1
        elif row.answer_type == "number":
            numbers[row.task].append(float(row.answer))
    return {"letters": {t: dict(c) for t, c in letters.items()},
            "answer_texts": {t: dict(c.most_common()) for t, c in texts.items()},
            "median": {t: statistics.median(v) for t, v in numbers.items()}}


def _choice_guess(row: PromptRow, prior: dict[str, Any], by_text: bool) -> str | None:
    """The prior's letter among this question's options: by the task's letter frequencies, or first by how
    often each option's text is the task's answer (then by letter frequency; last tie: alphabetical)."""
    letters = prior["letters"].get(row.task, {})
    answers = prior["answer_texts"].get(row.task, {}) if by_text else {}
    texts = option_texts(row.options)

    def rank(letter: str) -> tuple[int, int, str]:
        return -answers.get(_folded(texts.get(letter, "")), 0), -letters.get(letter, 0), letter

    ranked = sorted(option_letters(row.options), key=rank)
    return ranked[0] if ranked else None


PRIOR_KINDS = {"prior": "letter", "answer-prior": "answer text"}
PRIORS = tuple(PRIOR_KINDS)  # the baselines ``prior_baseline`` computes, and ``--prior-from`` fits


def prior_baseline(rows: Sequence[PromptRow], fit_rows: Sequence[PromptRow] | None = None,
                   name: str = "prior") -> dict[str, Any]:
    """A prior per task scored like a model's answers: ``prior`` guesses the most frequent letter,
    ``answer-prior`` the option whose text is most often the answer; numbers get the median either way.

    >>> from embodied_r.core.records import PromptRow
    >>> rows = [PromptRow(str(i), "t", [], a, "choice", ["A. x", "B. y"]) for i, a in enumerate("AAB")]
    >>> round(prior_baseline(rows)["overall"]["micro"], 3)
    0.667
    >>> skewed = [PromptRow(str(i), "t", [], a, "choice", o) for i, (a, o) in
    ...           enumerate([("A", ["A. x", "B. y"]), ("B", ["A. y", "B. x"]), ("A", ["A. x", "B. y"])])]
    >>> [round(prior_baseline(skewed, name=n)["overall"]["micro"], 3) for n in ("prior", "answer-prior")]
    [0.667, 1.0]
    """
    if name not in PRIOR_KINDS:
        raise ValueError(f"unknown prior {name!r}; choose from {list(PRIOR_KINDS)}")
    by_text = name == "answer-prior"
    prior = fit_prior(fit_rows if fit_rows is not None else rows)
    predictions = []
    for index, row in enumerate(rows):
        if fit_rows is None:
            # Leave-one-out: fitting on the scored question itself would let the prior read its answer.
            prior = fit_prior([r for j, r in enumerate(rows) if j != index and r.task == row.task])
        if row.answer_type == "choice":
            guess: Any = _choice_guess(row, prior, by_text)
        elif row.answer_type == "number":
            guess = prior["median"].get(row.task)
        else:
            guess = None
        predictions.append(_prediction(row, guess, score_answer(guess, row.answer, row.answer_type)))
    table = task_table(predictions)
    if fit_rows is None:
        prior = fit_prior(rows)  # reported for reading; each guess above left its own question out
    if not by_text:
        prior.pop("answer_texts")  # one entry per distinct answer: only the prior that uses them reports them
    table.update({"name": name, "status": "ok", "note": f"the task's most frequent {PRIOR_KINDS[name]}",
                  "fit_on": "evaluated questions, leave-one-out" if fit_rows is None else "separate prior set",
                  "prior": prior})
    return table


def lacking(rows: Sequence[PromptRow], part: str) -> dict[str, int]:
    """Method name -> how many of ``rows`` belong to a method whose ``part`` (a ``Method`` field such as
    ``"blind_prompt"``) is None: the rows a baseline that needs that part cannot run on.

    >>> from embodied_r.core.records import PromptRow
    >>> lacking([PromptRow("r", "t", [], "A", "choice", meta={"prompt_version": "robot_r1_mw_v1"}),
    ...          PromptRow("e", "t", [], "A", "choice")], "direct_prompt")
    {'robot_r1': 1}
    """
    counts: Counter[str] = Counter()
    for row in rows:
        method = method_for_row(row.meta)
        if getattr(method, part) is None:
            counts[method.name] += 1
    return dict(sorted(counts.items()))


def lacking_reason(rows: Sequence[PromptRow], part: str, what: str) -> str | None:
    """Why a baseline that needs each row's method's ``part`` (``what`` in words) cannot run on ``rows``, or
    None when every row's method has one."""
    missing = lacking(rows, part)
    if not missing:
        return None
    return (f"{sum(missing.values())} of {len(rows)} question(s) belong to a method without {what} "
            f"({', '.join(missing)}); not run")


def direct_answer_rows(rows: Sequence[PromptRow]) -> list[PromptRow]:
    """The same questions with the no-thinking prompt of each row's method (``Method.direct_prompt``;
    Embodied-R's: the same user text under an answer-only instruction). A row whose method has none is a
    ValueError (``lacking`` finds them first)."""
    out = []
    for row in rows:
        out.append(PromptRow(id=row.id, task=row.task, prompt=method_for_row(row.meta).direct_messages(row),
                             answer=row.answer, answer_type=row.answer_type, options=row.options,
                             meta={**row.meta, "baseline": "direct"}))
    return out


def blind_rows(rows: Sequence[PromptRow]) -> list[PromptRow]:
    r"""The same questions with the video description removed by each row's method (``Method.blind_prompt``;
    Embodied-R's drops every ``Frame k:`` block of the last user message, and the system prompt, the rest of
    the user text (question, options) and the answer stay). ``meta["blind_removed_frames"]`` says how many
    frames were removed (0: no video text to remove; the row is still asked, as it is). Image rows are
    returned unchanged (``has_image``): the caller refuses them. A row whose method has no blind prompt is a
    ValueError (``lacking`` finds them first).

    >>> from embodied_r.core.records import PromptRow
    >>> text = "Video content: \n<\nHeader.\nFrame 0: Observe: a sofa.\n>\nQuestion: Where?\nChoices:\nA. l"
    >>> blind = blind_rows([PromptRow("q", "t", [{"role": "user", "content": text}], "A", "choice", ["A. l"])])[0]
    >>> blind.prompt[-1]["content"]
    'Video content: \n<\nHeader.\n>\nQuestion: Where?\nChoices:\nA. l'
    """
    from embodied_r.core.chat import has_image

    out = []
    for row in rows:
        if has_image(row):
            out.append(row)
            continue
        prompt, removed = method_for_row(row.meta).blind_messages(row)
        out.append(PromptRow(id=row.id, task=row.task, prompt=prompt, answer=row.answer, answer_type=row.answer_type,
                             options=row.options, meta={**row.meta, "baseline": "blind",
                                                        "blind_removed_frames": removed}))
    return out


def keyframe_blind_rows(rows: Sequence[PromptRow]) -> list[PromptRow]:
    """Key-frame rows (the VLM arm) with every key frame removed, its frame line and its image: the same
    question, asked of the same vision-language model without the video. ``meta["blind_removed_frames"]``
    as for text rows."""
    from embodied_r.core.keyframe_chat import keyframe_count, without_oldest_keyframes

    out = []
    for row in rows:
        count = keyframe_count(row.prompt)
        out.append(PromptRow(id=row.id, task=row.task, prompt=without_oldest_keyframes(row.prompt, count),
                             answer=row.answer, answer_type=row.answer_type, options=row.options,
                             meta={**row.meta, "baseline": "blind", "blind_removed_frames": count}))
    return out


def not_run(name: str, reason: str) -> dict[str, Any]:
    return {"name": name, "status": "not run", "reason": reason, "tasks": {}, "overall": {}}


# ---------------------------------------------------------------------------------------------------
# Position bias
# ---------------------------------------------------------------------------------------------------


def position_bias(predictions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How often each letter is predicted versus how often it is the answer (choice questions only).

    ``max_excess`` is the largest (predicted share − true share) over letters: 0 for an unbiased
    model, close to 1 for one that always answers the same letter.

    >>> preds = [{"answer_type": "choice", "answer": a, "parsed_answer": "A", "task": "t"} for a in "AB"]
    >>> position_bias(preds)["overall"]["max_excess"]
    0.5
    """
    def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        true = Counter(str(r["answer"]).upper() for r in rows)
        predicted = Counter(str(r["parsed_answer"]).upper() for r in rows if r.get("parsed_answer") is not None)
        n_true, n_pred = sum(true.values()), sum(predicted.values())
        letters = sorted(set(true) | set(predicted))
        excess = {k: (predicted[k] / n_pred if n_pred else 0.0) - true[k] / n_true for k in letters}
        return {"n": n_true, "n_parsed": n_pred, "true": dict(sorted(true.items())),
                "predicted": dict(sorted(predicted.items())), "excess": excess,
                "max_excess": round(max(excess.values()), 10) if excess and n_pred else None,
                "most_predicted": predicted.most_common(1)[0][0] if predicted else None}

    choice = [p for p in predictions if p.get("answer_type", "choice") == "choice"]
    by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in choice:
        by_task[str(row["task"])].append(row)
    return {"overall": summary(choice) if choice else None,
            "tasks": {task: summary(rows) for task, rows in sorted(by_task.items())}}

