"""The solver baseline: each row's method's exact solver, reading only the prompt text.

A method may name an exact solver (``Method.solver``, a function ``row -> core.solving.Solved``). It answers
where the row's text determines the answer, by computation, and otherwise says why not; it never guesses.
It is reached through the row's method (``method_for_row(row.meta).solve(row)``), so evaluation imports no
method's modules; the rows of a method without a solver count as not applicable, with that reason.

What it measures, per task:

- ``applicable``: the share of the task's questions whose text determines the answer (0..1, as the
  text-rule table's shares);
- ``ceiling``: the mean score of the solver's answers over those applicable questions only, scored by
  ``core.scoring.score_answer`` as a model's answers are (a choice 1 or 0, a number by MRA): how much of
  what the text determines a perfect reader of that text gets right. None when no question is applicable;
- ``copy``: whether the text states the answer outright (True for every applicable question, False for
  none, ``"mixed"`` for some; None when none is applicable), with ``n_copy``. A task that is all copies is
  answered by reading, not by reasoning;
- ``not_applicable``: why not, counted (the most frequent reasons; the rest as ``"other reasons"``);
- ``detail``: the perception detail levels the task's rows record (``meta["detail"]``: "words",
  "bearings", "map", "relations"; ``"missing"`` for rows without one), counted.

Its ``score`` (the table's accuracy, as for every baseline) scores a question that is not applicable as
the text-rule baseline does: 1/#options for a choice (the uniform guess's expectation) and 0 for a number.
A solver that raises on a row is a bug in the solver: the exception propagates, it is not recorded as a
row it could not answer.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from embodied_r.core.records import Prediction, PromptRow
from embodied_r.core.scoring import score_answer
from embodied_r.core.solving import Solved
from embodied_r.methods import method_for_row

NAME = "solver"
TOP_REASONS = 5  # reasons listed per task in ``not_applicable``; the rest are counted together
OTHER_REASONS = "other reasons"
NO_DETAIL = "missing"  # the ``detail`` key of rows that record no perception detail level


def _guess_score(row: PromptRow) -> float:
    # Not applicable: a reader without the answer guesses, 1/#options for a choice, nothing for a number.
    return 1.0 / len(row.options) if row.answer_type == "choice" and row.options else 0.0


def solver_predictions(rows: Sequence[PromptRow]) -> list[dict[str, Any]]:
    """One scored prediction per row with ``method``, ``applicable``, ``reason`` (None when applicable),
    ``copy`` and ``detail`` (the row's ``meta["detail"]``).

    >>> from embodied_r.core.records import PromptRow
    >>> p = solver_predictions([PromptRow("q", "t", [], "B", "choice", ["A. x", "B. y"],
    ...                                   meta={"prompt_version": "robot_r1_mw_v1"})])[0]
    >>> p["applicable"], p["reason"], p["score"], p["parsed_answer"]
    (False, 'method robot_r1 has no solver', 0.5, None)
    """
    out = []
    for row in rows:
        method = method_for_row(row.meta)
        solved: Solved = method.solve(row)  # an exception here is the solver's bug: it propagates
        applicable = solved.applicable
        answer = solved.answer if applicable else None
        score = score_answer(answer, row.answer, row.answer_type) if applicable else _guess_score(row)
        prediction = Prediction(id=row.id, task=row.task, completion="", parsed_answer=answer, answer=row.answer,
                                answer_type=row.answer_type, correct=score >= 1.0, score=score).to_dict()
        reason = None if applicable else (solved.reason or "the solver gave no answer and no reason")
        prediction.update({"method": method.name, "applicable": applicable, "reason": reason,
                           "copy": bool(applicable and solved.copy), "detail": row.meta.get("detail")})
        out.append(prediction)
    return out


def _copy_flag(applicable: Sequence[dict[str, Any]]) -> bool | str | None:
    copies = sum(p["copy"] for p in applicable)
    if not applicable:
        return None
    return True if copies == len(applicable) else False if copies == 0 else "mixed"


def _reach(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``applicable``, ``n_applicable``, ``ceiling``, ``copy``, ``n_copy`` of some predictions."""
    applicable = [p for p in items if p["applicable"]]
    return {"n_applicable": len(applicable), "applicable": len(applicable) / len(items) if items else None,
            "ceiling": sum(float(p["score"]) for p in applicable) / len(applicable) if applicable else None,
            "copy": _copy_flag(applicable), "n_copy": sum(p["copy"] for p in applicable)}


def _reasons(items: Sequence[dict[str, Any]]) -> dict[str, int]:
    counts = Counter(str(p["reason"]) for p in items if not p["applicable"])
    top = dict(counts.most_common(TOP_REASONS))
    rest = sum(counts.values()) - sum(top.values())
    return {**top, OTHER_REASONS: rest} if rest else top


def solver_table(rows: Sequence[PromptRow],
                 predictions: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per task: ``n``, ``score`` (with its interval; not applicable as a guess), ``applicable`` (share),
    ``n_applicable``, ``ceiling`` (mean score over the applicable questions), ``copy`` and ``n_copy``,
    ``not_applicable`` (reason -> count) and ``detail`` (detail level -> count). ``overall`` adds the same
    reach over all questions; ``solvers`` names each method's solver (None: it has none).

    >>> from embodied_r.core.records import PromptRow
    >>> table = solver_table([PromptRow("r", "t", [], 20.0, "number", meta={"prompt_version": "robot_r1_mw_v1"})])
    >>> t = table["tasks"]["t"]
    >>> t["applicable"], t["ceiling"], t["copy"], t["not_applicable"], t["detail"], t["score"]
    (0.0, None, None, {'method robot_r1 has no solver': 1}, {'missing': 1}, 0.0)
    """
    from embodied_r.core.task_table import task_table

    predictions = list(predictions) if predictions is not None else solver_predictions(rows)
    table = task_table(predictions)
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for prediction in predictions:
        by_task[str(prediction["task"])].append(prediction)
    for task, items in by_task.items():
        details = Counter(NO_DETAIL if p["detail"] is None else str(p["detail"]) for p in items)
        table["tasks"][task].update({**_reach(items), "not_applicable": _reasons(items),
                                     "detail": dict(sorted(details.items()))})
    table["overall"].update(_reach(predictions))
    methods = {method.name: method for method in map(method_for_row, (row.meta for row in rows))}
    table.update({"name": NAME, "status": "ok",
                  "note": "each row's method's exact solver over the prompt text; where the text does not determine "
                          "the answer a choice scores 1/#options and a number 0; ceiling: mean score over the "
                          "applicable questions",
                  "solvers": {name: methods[name].solver for name in sorted(methods)}})
    return table
