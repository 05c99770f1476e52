"""Logical-consistency rate: does a judge, given only the question and the model's reasoning, reach the
model's answer? (the Embodied-R paper reports 46% -> 99% with GPT-4o as the judge.)

The judge is built like the consistency *reward*'s (``embodied_r.judge.judges``: same prompt, same
question-only view, letters masked unless asked otherwise), but it should be another model than the
one the reward used, or the rate measures what training optimised rather than consistency; the
runner probes it first and flags a judge that is the training reward's or the evaluated model itself.
Unlike the reward it is not gated on correctness: a wrong answer that its reasoning supports is
consistent.

``judge_completions`` is the one way a judge reads completions: the consistency reward
(``methods.embodied_r.consistency``) and this rate both call it. Judgements are appended to
``judgements.jsonl`` chunk by chunk, so a killed run resumes.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.chat import completion_text
from embodied_r.core.io import JsonlAppender
from embodied_r.core.parsing import extract_think
from embodied_r.core.records import PromptRow
from embodied_r.judge.judges import Judge, build_judge, question_for_judge, visible_thinks

logger = logging.getLogger(__name__)


def judge_completions(
    judge: Judge, prompts: Sequence[Any], completions: Sequence[Any], options: Sequence[list[str] | None]
) -> list[str | None]:
    """The judge's letter for each completion's reasoning (``NO_OPTION`` where the reasoning supports no
    option; None where there is no think text or the judge could not read it). Callers compare this with
    the policy's own answer."""
    wanted = [i for i, c in enumerate(completions) if extract_think(completion_text(c))]
    wanted_options = [options[i] for i in wanted]
    thinks = [extract_think(completion_text(completions[i])) or "" for i in wanted]
    letters = judge.judge(
        [question_for_judge(prompts[i], options[i]) for i in wanted],
        visible_thinks(judge, thinks, wanted_options),
        wanted_options,
    )
    out: list[str | None] = [None] * len(completions)
    for i, letter in zip(wanted, letters, strict=True):
        out[i] = letter
    return out


def make_judge(spec: str, policy_model: str, judge_model: str | None = None, dtype: str = "auto",
               sees_letters: bool = False, scoring: str | None = None) -> Any:
    """``policy`` (a frozen copy of the evaluated model), a model name/path, or an ``http(s)://`` URL of
    an OpenAI-compatible endpoint serving ``judge_model``; built by the reward's own factory."""
    if spec.startswith(("http://", "https://")):
        return build_judge({"base_url": spec, "model": judge_model or policy_model}, policy_model, dtype=dtype,
                           sees_letters=sees_letters, scoring=scoring)
    return build_judge(spec, policy_model, dtype=dtype, sees_letters=sees_letters, scoring=scoring)


def judge_predictions(judge: Any, rows: Mapping[str, PromptRow], predictions: Sequence[Mapping[str, Any]],
                      out_path: str | Path, chunk_size: int = 32) -> list[dict[str, Any]]:
    """Judge every choice prediction that has a parsed answer and a think block; returns all judgements
    (resumed ones included). Predictions without reasoning are recorded as not judged."""
    appender = JsonlAppender(out_path)
    done = appender.done_keys("id")
    todo: list[Mapping[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for prediction in predictions:
        pid = str(prediction["id"])
        if pid in done or pid not in rows:
            continue
        if prediction.get("answer_type") != "choice":
            continue
        if prediction.get("parsed_answer") is None:
            skipped.append({"id": pid, "task": prediction["task"], "judged": False, "reason": "unparsed answer"})
        elif not extract_think(str(prediction.get("completion", ""))):
            skipped.append({"id": pid, "task": prediction["task"], "judged": False, "reason": "no <think> block"})
        else:
            todo.append(prediction)
    appender.extend(skipped)
    for start in range(0, len(todo), max(1, chunk_size)):
        chunk = todo[start:start + chunk_size]
        chunk_rows = [rows[str(p["id"])] for p in chunk]
        letters = judge_completions(judge, [r.prompt for r in chunk_rows], [p["completion"] for p in chunk],
                                    [r.options for r in chunk_rows])
        appender.extend({
            "id": str(p["id"]), "task": p["task"], "judged": True, "model_answer": p["parsed_answer"],
            "judge_answer": letter, "consistent": letter is not None and letter == p["parsed_answer"],
            "correct": bool(p.get("correct")),
        } for p, letter in zip(chunk, letters, strict=True))
    wanted = {str(p["id"]) for p in predictions}
    return [j for j in appender.existing() if j["id"] in wanted]


def consistency_summary(judgements: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rates overall and per task.

    ``rate`` = consistent / judged; ``rate_all`` counts unjudged answers (no reasoning, unparsed) as not
    consistent, the stricter reading of "share of logically consistent outputs".

    >>> js = [{"task": "t", "judged": True, "consistent": True, "correct": True},
    ...       {"task": "t", "judged": True, "consistent": False, "correct": False},
    ...       {"task": "t", "judged": False, "reason": "no <think> block"}]
    >>> s = consistency_summary(js)["overall"]
    >>> s["rate"], round(s["rate_all"], 3)
    (0.5, 0.333)
    """
    def summary(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        judged = [j for j in items if j.get("judged")]
        consistent = sum(1 for j in judged if j.get("consistent"))
        correct = [j for j in judged if j.get("correct")]
        reasons: dict[str, int] = defaultdict(int)
        for j in items:
            if not j.get("judged"):
                reasons[str(j.get("reason"))] += 1
        return {"n": len(items), "judged": len(judged), "consistent": consistent,
                "rate": consistent / len(judged) if judged else None,
                "rate_all": consistent / len(items) if items else None,
                "rate_when_correct": ((sum(1 for j in correct if j.get("consistent")) / len(correct))
                                      if correct else None),
                "not_judged": dict(reasons)}

    by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for item in judgements:
        by_task[str(item["task"])].append(item)
    return {"overall": summary(judgements), "tasks": {t: summary(v) for t, v in sorted(by_task.items())}}
