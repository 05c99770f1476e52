"""The text-rule baseline: per task, a simple deterministic rule over the row's prompt text, its method's.

A method may name text rules (``Method.text_rules``: per task, a rule name and ``fn(row) -> (answer,
reason)``); Embodied-R's read the frame descriptions (methods/embodied_r/text_rules.py). They are reached
through the row's method (``method_for_row(row.meta).text_rule(row)``), so evaluation imports no method's
modules; a task without a rule, and every row of a method without text rules, counts as not applicable with
that reason. A reasoner that scores no better than the rules has not shown that it reasons; a task where a
rule is often exactly right is one whose answer the text spells out (its **answerable ceiling**).

Scoring (``text_rule_table``): a row where the rule applies is scored with ``core.scoring.score_answer``
like a model's answer; where it does not, a choice row scores the uniform guess's expectation
1/#options (what a reader without the rule would get on average) and a numeric row 0 (there is no
guess without an answer).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from embodied_r.core.records import Prediction, PromptRow
from embodied_r.core.scoring import score_answer
from embodied_r.core.task_table import task_table
from embodied_r.methods import NO_TEXT_RULE, Method, method_for_row

NAME = "text-rule"


def _guess_score(row: PromptRow) -> float:
    # A reader without the rule guesses: the uniform guess's expectation for a choice, nothing for a number.
    return 1.0 / len(row.options) if row.answer_type == "choice" and row.options else 0.0


def _same_answer(answer: Any, row: PromptRow) -> bool:
    if row.answer_type == "number":
        return float(answer) == float(row.answer)
    return str(answer).strip().upper() == str(row.answer).strip().upper()


def text_rule_predictions(rows: Sequence[PromptRow]) -> list[dict[str, Any]]:
    """One scored prediction per row with ``rule``, ``applies``, ``reason`` (None when it applies) and
    ``exact`` (the rule gives exactly the gold answer).

    >>> from embodied_r.core.records import PromptRow
    >>> text = "Frame 0: Observe: a sofa.\\nFrame 1: After Rotate left, Observe: a door.\\nQuestion: Which action?"
    >>> row = PromptRow("q", "last_action", [{"role": "user", "content": text}], "B", "choice",
    ...                 ["A. Rotate right", "B. Rotate left"])
    >>> p = text_rule_predictions([row])[0]
    >>> p["parsed_answer"], p["score"], p["applies"]
    ('B', 1.0, True)
    >>> other = text_rule_predictions([PromptRow("r", "room_size_estimation", [], 20.0, "number")])[0]
    >>> other["applies"], other["reason"], other["score"]
    (False, 'no rule for task room_size_estimation', 0.0)
    >>> robot = text_rule_predictions([PromptRow("b", "t", [], "B", "choice", ["A. x", "B. y"],
    ...                                          meta={"prompt_version": "robot_r1_mw_v1"})])[0]
    >>> robot["rule"], robot["applies"], robot["reason"], robot["score"]
    ('none', False, 'method robot_r1 has no text rule', 0.5)
    """
    out = []
    for row in rows:
        name, answer, reason = method_for_row(row.meta).text_rule(row)
        applies = reason is None
        score = score_answer(answer, row.answer, row.answer_type) if applies else _guess_score(row)
        exact = applies and _same_answer(answer, row)
        prediction = Prediction(id=row.id, task=row.task, completion="", parsed_answer=answer, answer=row.answer,
                                answer_type=row.answer_type, correct=score >= 1.0, score=score).to_dict()
        prediction.update({"rule": name, "applies": applies, "reason": reason, "exact": bool(exact)})
        out.append(prediction)
    return out


def _rule_names(rows: Sequence[PromptRow]) -> dict[str, str]:
    """Task -> rule name of the rows' methods' text rules (each method once, in the order its rows come)."""
    methods: dict[str, Method] = {}
    for row in rows:
        method = method_for_row(row.meta)
        methods.setdefault(method.name, method)
    return {task: name for method in methods.values() for task, name in method.text_rule_names().items()}


def text_rule_table(rows: Sequence[PromptRow],
                    predictions: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per task: ``n``, ``n_applies``, ``score`` (with its interval), the ``rule`` (``none`` for a task
    without one), the answerable ``ceiling`` (share of the task's questions where the rule applies and
    is exactly right; None without a rule) and why it did not apply (``not_applied``, counts by reason).
    ``overall`` adds ``n_applies`` and the ceiling over the questions of tasks with a rule; ``rules`` names
    the rule of each task the rows' methods have one for.

    >>> from embodied_r.core.records import PromptRow
    >>> table = text_rule_table([PromptRow("r", "object_size_estimation", [], 90.0, "number")])
    >>> table["tasks"]["object_size_estimation"]["rule"], table["tasks"]["object_size_estimation"]["ceiling"]
    ('none', None)
    """
    predictions = list(predictions) if predictions is not None else text_rule_predictions(rows)
    table = task_table(predictions)
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for prediction in predictions:
        by_task[str(prediction["task"])].append(prediction)
    for task, items in by_task.items():
        rule = items[0]["rule"]
        table["tasks"][task].update({
            "rule": rule, "n_applies": sum(p["applies"] for p in items),
            "ceiling": None if rule == NO_TEXT_RULE else sum(p["exact"] for p in items) / len(items),
            "not_applied": dict(Counter(str(p["reason"]).split(":")[0] for p in items if not p["applies"])),
        })
    ruled = [p for p in predictions if p["rule"] != NO_TEXT_RULE]
    table["overall"].update({"n_applies": sum(p["applies"] for p in predictions), "n_with_rule": len(ruled),
                             "ceiling": sum(p["exact"] for p in ruled) / len(ruled) if ruled else None})
    table.update({"name": NAME, "status": "ok",
                  "note": "a deterministic rule per task over the frame descriptions; where it does not apply a "
                          "choice scores 1/#options and a number 0",
                  "rules": _rule_names(rows)})
    return table
