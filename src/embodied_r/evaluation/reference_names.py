"""Scores under the names and rules of the reference harness (lmms-eval 0.7.3), beside ours.

A reader comparing with a paper's table needs the reference's numbers, not a translation. Each
question is scored again with the reference's own per-question rule applied to the text of its
``<answer>`` block (``reference_rules``), and the scores are aggregated as the reference aggregates
them; our parser's scores stay the headline (``tasks``), and the number of questions the two rules
score differently is reported beside each table (``item_disagreements``).

- **VSI-Bench** (lmms-eval ``vsibench``): one mean per question type (accuracy, or MRA for numeric
  answers) named ``<type>_accuracy`` / ``<type>_mra``; the three relative-direction levels replaced by
  their unweighted mean, ``object_rel_direction_accuracy``; ``vsibench_overall`` the unweighted mean of
  the types present. The level of a question is its ``question_type`` (rows of the ``vsibench-merged:``
  loader keep it in ``meta``), so merged rows are averaged by level too. lmms-eval reports fractions
  rounded to 6 decimals; here they are in percent, unrounded. A missing type is listed; a missing
  relative-direction level (where lmms-eval stops with an error) is listed and the levels present are
  averaged; relative-direction rows whose level is unknown leave ``object_rel_direction_accuracy`` out.
  Any of these makes ``complete`` false.
- **MVBench** (lmms-eval ``mvbench_<task>``, metric ``mvbench_accuracy``): ``100 * correct /
  answered`` with the reference's letter rule, empty predictions left out of the denominator (a task
  without any answer scores 0, as there); ``mvbench_average`` is their unweighted mean, the MVBench
  paper's average (lmms-eval's ``mvbench`` group reports none).

- **Embodied-R's evaluation script** (``embodied_r``): choice accuracy per question category and in
  total, with the official script's answer parser instead of ours: the first ``<answer> X`` letter
  (any case), else the last letter A-H followed by a period, else the whole completion upper-cased; the
  number of questions where the two parsers read a different letter is reported beside it.

Each question's own reference score (``item_reference``) is what these tables average: a row of
``predictions.jsonl`` carries it as ``reference`` = ``{"vsibench": score}`` or ``{"mvbench": score}`` (a
fraction; ``None`` for an MVBench answer the reference leaves out), only when a reference applies to it.

EgoSchema gets no reference name: lmms-eval's ``egoschema_subset`` replaces an unparsable answer with
a random choice, which a deterministic score cannot reproduce (ours counts it wrong and reports it as
unparsed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from embodied_r.core.records import PromptRow
from embodied_r.evaluation.benchmarks.mvbench import VIDEO_FOLDERS as MVBENCH_TASKS
from embodied_r.evaluation.benchmarks.vsibench import MCQ_TYPES, NUMERIC_TYPES, REL_DIRECTION
from embodied_r.evaluation.reference_rules import mvbench_item_score, reference_text, vsibench_item_score

VSIBENCH_KEYS: dict[str, str] = {
    "obj_appearance_order": "obj_appearance_order_accuracy",
    "object_abs_distance": "object_abs_distance_mra",
    "object_counting": "object_counting_mra",
    "object_rel_distance": "object_rel_distance_accuracy",
    "object_size_estimation": "object_size_estimation_mra",
    "room_size_estimation": "room_size_estimation_mra",
    "route_planning": "route_planning_accuracy",
    REL_DIRECTION: "object_rel_direction_accuracy",
}
REL_DIRECTION_LEVELS = tuple(t for t in MCQ_TYPES if t.startswith(REL_DIRECTION + "_"))
VSIBENCH_TYPES = frozenset((*MCQ_TYPES, *NUMERIC_TYPES, REL_DIRECTION))


def question_type(prediction: Mapping[str, Any], question_types: Mapping[str, str] | None = None) -> str:
    """A prediction's VSI-Bench question type: its row's ``question_type`` when known, else its task."""
    known = (question_types or {}).get(str(prediction["id"]))
    return str(known) if known else str(prediction["task"])


def row_question_types(rows: Iterable[PromptRow]) -> dict[str, str]:
    """id -> VSI-Bench question type of the prompt rows that keep it in ``meta`` (merged relative-direction
    rows keep their level there)."""
    return {row.id: str(row.meta["question_type"]) for row in rows if row.meta.get("question_type")}


def vsibench_item(prediction: Mapping[str, Any],
                  question_types: Mapping[str, str] | None = None) -> tuple[str, float] | None:
    """(question type, the reference's score) of a prediction of a VSI-Bench question type, else None.

    >>> vsibench_item({"id": 1, "task": "route_planning", "answer": "B", "completion": "<answer>b</answer>"})
    ('route_planning', 1.0)
    >>> vsibench_item({"id": 1, "task": "egoschema_subset", "answer": "B", "completion": ""}) is None
    True
    """
    qtype = question_type(prediction, question_types)
    if qtype not in VSIBENCH_TYPES:
        return None
    return qtype, vsibench_item_score(reference_text(prediction.get("completion")), prediction["answer"],
                                      qtype in NUMERIC_TYPES)


def mvbench_item(prediction: Mapping[str, Any]) -> tuple[str, float | None] | None:
    """(task, the reference's score; None for an empty answer, left out) of an MVBench prediction, else None."""
    if prediction["task"] not in MVBENCH_TASKS:
        return None
    return str(prediction["task"]), mvbench_item_score(reference_text(prediction.get("completion")),
                                                       prediction["answer"])


def item_reference(prediction: Mapping[str, Any],
                   question_types: Mapping[str, str] | None = None) -> dict[str, float | None] | None:
    """The question's score under each reference name that applies to it (the per-question values the
    tables average, as fractions), or None when none applies.

    >>> item_reference({"id": "7", "task": "object_counting", "answer": "200",
    ...                 "completion": "<answer>two hundred</answer>"})
    {'vsibench': 1.0}
    >>> item_reference({"id": "7", "task": "dir", "answer": "B", "completion": "<answer>B</answer>"}) is None
    True
    """
    out: dict[str, float | None] = {}
    vsi = vsibench_item(prediction, question_types)
    if vsi is not None:
        out["vsibench"] = vsi[1]
    mvb = mvbench_item(prediction)
    if mvb is not None:
        out["mvbench"] = mvb[1]
    return out or None


def with_item_reference(prediction: dict[str, Any],
                        question_types: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``prediction`` (a ``predictions.jsonl`` row) with its ``reference`` scores (``item_reference``) added
    when a reference applies to it; other rows are returned as they are."""
    scores = item_reference(prediction, question_types)
    return prediction if scores is None else {**prediction, "reference": scores}


def vsibench(predictions: Sequence[Mapping[str, Any]],
             question_types: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """VSI-Bench's reported numbers from prediction dicts, each question scored by the reference's rule
    (``question_types``: id -> question type, for rows whose task does not say it), or None when no
    question is of a VSI-Bench type.

    >>> rows = [("e1", "object_rel_direction_easy", "B", "B"), ("e2", "object_rel_direction_easy", "(B)", "B"),
    ...         ("h1", "object_rel_direction_hard", "C", "C"), ("c1", "object_counting", "two hundred", "200")]
    >>> predictions = [{"id": i, "task": t, "answer": a, "completion": f"<answer>{c}</answer>", "score": 1.0}
    ...                for i, t, c, a in rows]
    >>> out = vsibench(predictions)
    >>> out["object_rel_direction_accuracy"], out["vsibench_overall"], out["item_disagreements"]
    (75.0, 87.5, 1)
    >>> out["complete"], out["missing"][-1]
    (False, 'object_rel_direction_medium')
    """
    scores: dict[str, list[float]] = {}
    disagreements = 0
    for p in predictions:
        item = vsibench_item(p, question_types)
        if item is None:
            continue
        qtype, score = item
        scores.setdefault(qtype, []).append(score)
        disagreements += score != float(p["score"])
    if not scores:
        return None
    # math.fsum: the mean of a type does not depend on the order of its questions.
    means = {qtype: math.fsum(values) / len(values) for qtype, values in scores.items()}
    values = {VSIBENCH_KEYS[t]: means[t] for t in sorted(means) if t in VSIBENCH_KEYS and t != REL_DIRECTION}
    levels = [means[t] for t in REL_DIRECTION_LEVELS if t in means]
    if levels and REL_DIRECTION not in means:
        # Appended after the other types, so that the overall adds them up in the reference's order.
        values[VSIBENCH_KEYS[REL_DIRECTION]] = sum(levels) / len(levels)
    missing = [key for key in VSIBENCH_KEYS.values() if key not in values]
    if levels:
        missing += [t for t in REL_DIRECTION_LEVELS if t not in means]
    out: dict[str, Any] = {key: 100 * value for key, value in values.items()}
    out["vsibench_overall"] = 100 * (sum(values.values()) / len(values)) if values else None
    out["complete"] = not missing
    out["missing"] = missing
    out["levels_averaged"] = [t for t in REL_DIRECTION_LEVELS if t in means]
    out["levels_unknown"] = len(scores.get(REL_DIRECTION, []))
    out["n_items"] = sum(len(v) for v in scores.values())
    out["item_disagreements"] = disagreements
    return out


def mvbench(predictions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """MVBench's per-task and average accuracy from prediction dicts, each question scored by the
    reference's rule, or None without MVBench tasks.

    >>> predictions = [{"task": "action_sequence", "answer": "B", "completion": c, "score": s}
    ...                for c, s in (("<answer>(B)</answer>", 1.0), ("<answer>a cup</answer>", 0.0), ("", 0.0))]
    >>> out = mvbench(predictions)
    >>> out["mvbench_action_sequence"], out["empty_predictions_excluded"], out["item_disagreements"]
    (50.0, 1, 0)
    """
    per_task: dict[str, list[float]] = {}
    excluded = disagreements = 0
    for p in predictions:
        item = mvbench_item(p)
        if item is None:
            continue
        task, score = item
        answered = per_task.setdefault(task, [])
        if score is None:
            excluded += 1
            continue
        answered.append(score)
        disagreements += score != float(p["score"])
    if not per_task:
        return None
    # A task without a single answer is 0 in the reference, not undefined.
    out: dict[str, Any] = {f"mvbench_{task}": 100 * sum(scores) / len(scores) if scores else 0.0
                           for task, scores in sorted(per_task.items())}
    out["mvbench_average"] = sum(out.values()) / len(out)
    out["empty_predictions_excluded"] = excluded
    out["n_items"] = sum(len(v) for v in per_task.values()) + excluded
    out["item_disagreements"] = disagreements
    return out


_OFFICIAL_ANSWER_RE = re.compile(r"<answer>\s*([A-H])", re.IGNORECASE)
_OFFICIAL_LETTER_RE = re.compile(r"(?:^|[^A-Za-z])([A-H])\s*\.")


def official_letter(completion: str) -> str:
    """The letter Embodied-R's evaluation script reads from a completion.

    >>> official_letter("<think>A. is wrong</think><answer> b</answer>"), official_letter("so C. then D.")
    ('B', 'D')
    >>> official_letter("no letter")
    'NO LETTER'
    """
    match = _OFFICIAL_ANSWER_RE.search(completion)
    if match:
        return match.group(1).upper()
    letters = _OFFICIAL_LETTER_RE.findall(completion)
    return letters[-1] if letters else completion.upper()


def embodied_r_official(predictions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Choice accuracy with the official script's parser, per task and in total (%), or None without
    choice questions."""
    choice = [p for p in predictions if p.get("answer_type") == "choice"]
    if not choice:
        return None
    hits: dict[str, list[bool]] = {}
    disagreements = 0
    for p in choice:
        letter = official_letter(str(p.get("completion", "")))
        hits.setdefault(str(p["task"]), []).append(letter == str(p["answer"]).strip().upper())
        read = letter if len(letter) == 1 and "A" <= letter <= "H" else None  # the whole-string fallback
        disagreements += read != (p.get("parsed_answer") or None)
    out: dict[str, Any] = {f"{task}_accuracy": 100 * sum(h) / len(h) for task, h in sorted(hits.items())}
    out["total_accuracy"] = 100 * sum(sum(h) for h in hits.values()) / len(choice)
    out["parser_disagreements"] = disagreements
    return out


def reference_metrics(predictions: Sequence[Mapping[str, Any]], embodied_r_ids: set[str] | None = None,
                      question_types: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every reference table that applies to these predictions, by benchmark (``vsibench``, ``mvbench``,
    ``embodied_r``). ``question_types`` maps ids to VSI-Bench question types where the task does not say
    it (merged relative-direction rows). The official Embodied-R parser reads only the predictions in
    ``embodied_r_ids`` (rows built with an Embodied-R prompt; all when None): other methods' answers
    (Robot-R1's ``[[X]]``) are not in its format."""
    official = [p for p in predictions if embodied_r_ids is None or str(p["id"]) in embodied_r_ids]
    out: dict[str, Any] = {}
    for name, table in (("vsibench", vsibench(predictions, question_types)), ("mvbench", mvbench(predictions)),
                        ("embodied_r", embodied_r_official(official))):
        if table is not None:
            out[name] = table
    return out


def reference_rows(metrics: Mapping[str, Any]) -> list[tuple[str, str, float | None]]:
    """(benchmark, reference metric name, value in %) of a ``metrics.json``, for tables."""
    rows = []
    for benchmark, table in (metrics.get("reference") or {}).items():
        for key, value in table.items():
            if isinstance(value, float) or value is None:
                rows.append((benchmark, key, value))
    return rows


def reference_note(metrics: Mapping[str, Any]) -> str | None:
    """What makes these numbers differ from ours or from the benchmark's own, in one line, or None."""
    reference = metrics.get("reference") or {}
    notes = []
    for name in ("vsibench", "mvbench"):
        table = reference.get(name)
        if table and "item_disagreements" in table:
            notes.append(f"{name}: lmms-eval's rules score {table['item_disagreements']} of {table['n_items']} "
                         "question(s) differently from ours")
    table = reference.get("vsibench")
    if table and not table["complete"]:
        unknown = (f" ({table['levels_unknown']} relative-direction question(s) without their level)"
                   if table.get("levels_unknown") else "")
        notes.append(f"vsibench_overall is over the question types present; missing: {', '.join(table['missing'])}"
                     + unknown)
    return "; ".join(notes) or None
