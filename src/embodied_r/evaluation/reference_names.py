"""Scores under the names and aggregation rules of the reference harness (lmms-eval), beside ours.

A reader comparing with a paper's table needs the reference's numbers, not a translation:

- **VSI-Bench** (lmms-eval ``vsibench``): one mean per question type (accuracy, or MRA for numeric
  answers) named ``<type>_accuracy`` / ``<type>_mra``; the three relative-direction levels replaced by
  their unweighted mean, ``object_rel_direction_accuracy``; ``vsibench_overall`` the unweighted mean
  of the eight. Percent, as the reference reports its overall. Computed over the rows whose task is a
  VSI-Bench question type (real VSI-Bench or the synthetic worlds that follow its rules); a missing type
  is listed, and the overall is then over fewer types than the benchmark's (``complete`` false).
- **MVBench** (lmms-eval ``mvbench_<task>``): per-task accuracy as ``100 * correct / answered``, where
  the reference leaves empty predictions out of the denominator; ``mvbench_average`` their unweighted
  mean.

- **Embodied-R's evaluation script** (``embodied_r``): choice accuracy per question category and in
  total, with the official script's answer parser instead of ours: the first ``<answer> X`` letter
  (any case), else the last letter A-H followed by a period, else the whole completion upper-cased; the
  number of questions where the two parsers read a different letter is reported beside it.

EgoSchema gets no reference name: lmms-eval's ``egoschema_subset`` replaces an unparsable answer with
a random choice, which a deterministic score cannot reproduce (ours counts it wrong and reports it as
unparsed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from embodied_r.evaluation.benchmarks.mvbench import VIDEO_FOLDERS as MVBENCH_TASKS
from embodied_r.evaluation.benchmarks.vsibench import MCQ_TYPES, NUMERIC_TYPES, REL_DIRECTION

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


def vsibench(task_scores: Mapping[str, float]) -> dict[str, Any] | None:
    """VSI-Bench's reported numbers from per-task mean scores in [0, 1] (ours, by task name), or None
    when no task is a VSI-Bench question type.

    >>> out = vsibench({"object_rel_direction_easy": 0.6, "object_rel_direction_hard": 0.2,
    ...                 "route_planning": 0.5, "last_action": 1.0})
    >>> out["object_rel_direction_accuracy"], out["vsibench_overall"], out["complete"]
    (40.0, 45.0, False)
    """
    present = {task: float(score) for task, score in task_scores.items() if task in VSIBENCH_TYPES}
    if not present:
        return None
    values: dict[str, float] = {}
    levels = [present[t] for t in REL_DIRECTION_LEVELS if t in present]
    if REL_DIRECTION in present:  # rows loaded with the levels merged (Embodied-R's task selection)
        levels.append(present[REL_DIRECTION])
    if levels:
        values[VSIBENCH_KEYS[REL_DIRECTION]] = sum(levels) / len(levels)
    for task, key in VSIBENCH_KEYS.items():
        if task != REL_DIRECTION and task in present:
            values[key] = present[task]
    missing = [key for key in VSIBENCH_KEYS.values() if key not in values]
    out: dict[str, Any] = {key: 100 * value for key, value in values.items()}
    out["vsibench_overall"] = 100 * sum(values.values()) / len(values)
    out["complete"] = not missing
    out["missing"] = missing
    out["levels_averaged"] = [t for t in REL_DIRECTION_LEVELS if t in present]
    return out


def mvbench(predictions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """MVBench's per-task and average accuracy from prediction dicts, or None without MVBench tasks."""
    per_task: dict[str, list[Mapping[str, Any]]] = {}
    for p in predictions:
        if p["task"] in MVBENCH_TASKS:
            per_task.setdefault(str(p["task"]), []).append(p)
    if not per_task:
        return None
    out: dict[str, Any] = {}
    excluded = 0
    for task in sorted(per_task):
        answered = [p for p in per_task[task] if str(p.get("completion", "")).strip()]
        excluded += len(per_task[task]) - len(answered)
        out[f"mvbench_{task}"] = 100 * sum(float(p["score"]) for p in answered) / len(answered) if answered else None
    scored = [v for v in out.values() if v is not None]
    out["mvbench_average"] = sum(scored) / len(scored) if scored else None
    out["empty_predictions_excluded"] = excluded
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


def reference_metrics(task_scores: Mapping[str, float], predictions: Sequence[Mapping[str, Any]],
                      embodied_r_ids: set[str] | None = None) -> dict[str, Any]:
    """Every reference table that applies to these predictions, by benchmark (``vsibench``, ``mvbench``,
    ``embodied_r``). The official Embodied-R parser reads only the predictions in ``embodied_r_ids``
    (rows built with an Embodied-R prompt; all when None): other methods' answers (Robot-R1's ``[[X]]``)
    are not in its format."""
    official = [p for p in predictions if embodied_r_ids is None or str(p["id"]) in embodied_r_ids]
    out: dict[str, Any] = {}
    for name, table in (("vsibench", vsibench(task_scores)), ("mvbench", mvbench(predictions)),
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
    """One line on what makes these numbers differ from the benchmark's own, or None."""
    table = (metrics.get("reference") or {}).get("vsibench")
    if table and not table["complete"]:
        return f"vsibench_overall is over the question types present; missing: {', '.join(table['missing'])}"
    return None
