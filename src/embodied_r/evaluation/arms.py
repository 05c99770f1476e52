"""Both arms of the paper's comparison side by side: the cascade (a reasoner reading frame descriptions)
and a vision-language model reading the key frames themselves (Embodied-R's ablation: 51.1 % against
43.8 %, Zhao et al., 2025, Fig. 4e).

An eval run's arm is its input (``metrics.json`` ``input``): ``text`` rows are the cascade's, ``image``
rows the VLM's. ``build-prompts --input keyframes`` gives the VLM arm the same question ids as the text
rows, so the arms are compared per task type on the questions both answered, with the paired difference
(VLM minus cascade), its paired-bootstrap 95 % interval and the exact paired test of
``core.intervals.paired_difference``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from embodied_r.core.intervals import format_p, paired_difference

ARM_NAMES = {"text": "cascade (frame descriptions)", "image": "VLM (key frames)"}


def arm_of(run: Mapping[str, Any]) -> str:
    """``text`` or ``image``: which arm an eval run (``report.load_runs`` entry) belongs to."""
    return "image" if run["metrics"].get("input") == "image" else "text"


def _scores(predictions: Sequence[Mapping[str, Any]], task: str | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in predictions:
        if task is None or p.get("task") == task:
            out.setdefault(str(p["id"]), float(p["score"]))  # the first prediction of a question counts
    return out


def compare_arms(cascade: Sequence[Mapping[str, Any]], vlm: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per task type and overall: each arm's mean score on the questions both answered, and the paired
    difference VLM - cascade (``paired_difference`` keys).

    >>> a = [{"id": "1", "task": "t", "score": 1.0}, {"id": "2", "task": "t", "score": 0.0}]
    >>> b = [{"id": "1", "task": "t", "score": 0.0}, {"id": "2", "task": "t", "score": 0.0}]
    >>> table = compare_arms(a, b)
    >>> table["tasks"]["t"]["cascade"], table["tasks"]["t"]["vlm"], table["overall"]["difference"]
    (0.5, 0.0, -0.5)
    """
    tasks = sorted({str(p.get("task")) for p in cascade} & {str(p.get("task")) for p in vlm})

    def entry(task: str | None) -> dict[str, Any]:
        before, after = _scores(cascade, task), _scores(vlm, task)
        shared = sorted(set(before) & set(after))
        diff = paired_difference(before, after)
        return {"n_shared": len(shared),
                "cascade": round(sum(before[i] for i in shared) / len(shared), 4) if shared else None,
                "vlm": round(sum(after[i] for i in shared) / len(shared), 4) if shared else None, **diff}

    return {"tasks": {task: entry(task) for task in tasks}, "overall": entry(None)}


def arm_pairs(evals: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """The last cascade run and the last VLM run among ``evals``, or None unless both arms are there."""
    cascade = [r for r in evals if arm_of(r) == "text"]
    vlm = [r for r in evals if arm_of(r) == "image"]
    return (cascade[-1], vlm[-1]) if cascade and vlm else None


def arms_summary(evals: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``compare_arms`` of the last run of each arm, with the runs' names (None unless both arms ran)."""
    pair = arm_pairs(evals)
    if pair is None:
        return None
    cascade, vlm = pair
    return {"cascade": cascade["name"], "vlm": vlm["name"],
            **compare_arms(cascade["predictions"], vlm["predictions"])}


def _percent(value: float | None, signed: bool = False) -> str:
    return "–" if value is None else f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def arms_html(summary: Mapping[str, Any] | None) -> str:
    """The report's section for ``arms_summary`` ("" without both arms)."""
    if summary is None:
        return ""
    rows = [(task, entry) for task, entry in summary["tasks"].items()] + [("overall", summary["overall"])]
    body = []
    for name, entry in rows:
        interval = entry["ci95"]
        cells = [name, str(entry["n_shared"]), _percent(entry["cascade"]), _percent(entry["vlm"]),
                 _percent(entry["difference"], signed=True),
                 "–" if not interval else f"[{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]",
                 format_p(entry["p_value"]), f"{entry['improved']} / {entry['worsened']}", str(entry["verdict"])]
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    headers = ["task", "shared questions", f"{ARM_NAMES['text']}: {summary['cascade']}",
               f"{ARM_NAMES['image']}: {summary['vlm']}", "VLM − cascade", "95 % interval", "p (exact test)",
               "VLM better / worse", "verdict"]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return ("<h2>Both arms of the paper's comparison</h2><p class='note'>The cascade (a reasoner reading the "
            "VLM's frame descriptions) and a vision-language model reading the key frames themselves, on the "
            "questions both answered, per task type: scores in %, the paired difference with its paired-bootstrap "
            "95 % interval and the exact paired test (the paper: 51.1 % for the cascade, 43.8 % for direct RL on "
            "Qwen2.5-VL-3B).</p>" + f"<table><tr>{head}</tr>{''.join(body)}</table>")


__all__ = ["ARM_NAMES", "arm_of", "arm_pairs", "arms_html", "arms_summary", "compare_arms"]
