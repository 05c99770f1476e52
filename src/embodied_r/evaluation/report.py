"""Offline report: ``metrics.json``, ``report.html`` and PNG plots from eval runs and training runs.

Inputs are folders. An *eval run* holds ``metrics.json`` (+ ``predictions.jsonl``) from ``embodied-r
eval``; a *training run* holds ``metrics.jsonl`` (one logged dict per step, from the trainer's
callback) and/or ``checkpoint-*/trainer_state.json`` (TRL's ``log_history``), plus ``eval.jsonl``.
Plots: per-task scores of the model and its baselines, all eval runs side by side (before/after when
two are given), the letter distributions (position bias), and training curves. Given an eval run of
each arm (text rows: the cascade; image rows: a VLM on the key frames), the two are compared per task
type on their shared questions (``evaluation.arms``). A *baselines-only run* (``embodied-r score``
without completions: ``metrics.json`` with ``"model": null`` and no ``tasks``) gets its baselines tables
and their plot, and no model parts. The HTML references
the PNGs by relative path and embeds no scripts, so the folder opens offline anywhere.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_r.core.intervals import format_interval, format_p, prediction_difference
from embodied_r.core.io import DataFileError, atomic_write_json, atomic_write_text, read_json, read_jsonl
from embodied_r.evaluation.arms import arms_html, arms_summary

logger = logging.getLogger(__name__)
SAMPLES_PER_KIND = 3


# ---------------------------------------------------------------------------------------------------
# Reading runs
# ---------------------------------------------------------------------------------------------------


def is_training_run(folder: Path) -> bool:
    return (folder / "metrics.jsonl").is_file() or any(folder.glob("checkpoint-*/trainer_state.json"))


def training_history(folder: Path) -> list[dict[str, Any]]:
    """Logged training dicts: ``metrics.jsonl`` when present, else the newest checkpoint's ``log_history``."""
    if (folder / "metrics.jsonl").is_file():
        return read_jsonl(folder / "metrics.jsonl")
    states = sorted(folder.glob("checkpoint-*/trainer_state.json"),
                    key=lambda p: int(p.parent.name.split("-")[-1]) if p.parent.name.split("-")[-1].isdigit() else -1)
    if not states:
        return []
    history = read_json(states[-1]).get("log_history", [])
    return [dict(h, step=h.get("step")) for h in history if isinstance(h, dict)]


def is_baselines_only(metrics: dict[str, Any]) -> bool:
    """A ``metrics.json`` of ``embodied-r score`` without completions: baselines, no model scores."""
    return ("tasks" not in metrics and "model" in metrics and metrics["model"] is None
            and isinstance(metrics.get("baselines"), dict))


def load_runs(folders: Sequence[str | Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                      list[dict[str, Any]]]:
    """(eval runs, training runs, baselines-only runs); a folder that is none of them raises naming it."""
    evals, trainings, baseline_runs = [], [], []
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise DataFileError(f"{folder}: not a folder (give eval output folders or training run folders)")
        metrics = read_json(folder / "metrics.json") if (folder / "metrics.json").is_file() else {}
        if "tasks" in metrics:
            predictions = read_jsonl(folder / "predictions.jsonl") if (folder / "predictions.jsonl").is_file() else []
            evals.append({"name": _unique(folder.name, evals), "folder": str(folder), "metrics": metrics,
                          "predictions": predictions})
        elif is_baselines_only(metrics):
            baseline_runs.append({"name": _unique(folder.name, baseline_runs), "folder": str(folder),
                                  "metrics": metrics})
        elif is_training_run(folder):
            evaluations = read_jsonl(folder / "eval.jsonl") if (folder / "eval.jsonl").is_file() else []
            trainings.append({"name": _unique(folder.name, trainings), "folder": str(folder),
                              "history": training_history(folder), "eval": evaluations})
        else:
            raise DataFileError(f"{folder}: neither an eval run (metrics.json) nor a training run (metrics.jsonl or "
                                "checkpoint-*/trainer_state.json)")
    return evals, trainings, baseline_runs


def _unique(name: str, existing: list[dict[str, Any]]) -> str:
    taken = {r["name"] for r in existing}
    return name if name not in taken else f"{name} ({len(existing) + 1})"


# ---------------------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    import matplotlib.pyplot as plt

    return plt


def grouped_bars(path: Path, title: str, tasks: list[str], series: dict[str, list[float | None]], ylabel: str) -> Path:
    """One group of bars per task, one bar per series (missing values left empty)."""
    plt = _pyplot()
    width = 0.8 / max(1, len(series))
    # At most 11 inches (~1,200 px at 110 dpi) so the chart fits a laptop screen; labels shrink instead.
    fig, ax = plt.subplots(figsize=(min(11.0, max(6.0, 0.8 * len(tasks) + 2)), 4.2))
    for index, (label, values) in enumerate(series.items()):
        xs = [i + (index - (len(series) - 1) / 2) * width for i in range(len(tasks))]
        ax.bar(xs, [v if v is not None else 0.0 for v in values], width=width, label=label)
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=35, ha="right", fontsize=8 if len(tasks) <= 12 else 6)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, never over them
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def score_progression(path: Path, evals: list[dict[str, Any]]) -> Path:
    """Overall held-out score of each eval run in the order given (after SFT -> after GRPO in
    the demo), with its 95 % interval and the baselines of the last run: the held-out curve over training."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(min(11.0, 2.0 + 1.6 * len(evals)), 3.6))
    overall = [run["metrics"]["overall"] for run in evals]
    scores = [o.get("micro") or 0.0 for o in overall]
    low = [s - (o["ci95"][0] if o.get("ci95") else s) for s, o in zip(scores, overall)]
    high = [(o["ci95"][1] if o.get("ci95") else s) - s for s, o in zip(scores, overall)]
    ax.errorbar(range(len(evals)), scores, yerr=[low, high], marker="o", capsize=4, label="model (95 % interval)")
    for index, (name, table) in enumerate(evals[-1]["metrics"].get("baselines", {}).items()):
        if table.get("status") == "ok" and table.get("overall", {}).get("micro") is not None:
            ax.axhline(table["overall"]["micro"], color="grey", linestyle=(":", "--", "-.")[index % 3], linewidth=1,
                       label=f"baseline: {name}")
    ax.set_xticks(range(len(evals)))
    ax.set_xticklabels([f"{run['name']}\n(n={o.get('n')})" for run, o in zip(evals, overall)], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("overall score")
    ax.set_title("held-out score, run by run")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def training_curves(path: Path, runs: list[dict[str, Any]]) -> Path | None:
    """Loss, total reward, per-function rewards and held-out score (with its 95 % band) against the step."""
    plt = _pyplot()
    panels: dict[str, dict[str, tuple[list[float], list[float]]]] = {"loss": {}, "reward": {}, "held-out score": {}}
    bands: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for run in runs:
        for entry in run["history"]:
            step = entry.get("step")
            if step is None:
                continue
            for key, value in entry.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                panel = "loss" if key == "loss" else "reward" if key == "reward" or (
                    key.startswith("rewards/") and key.endswith("/mean")) else None
                if panel:
                    xs, ys = panels[panel].setdefault(f"{run['name']}: {key}", ([], []))
                    xs.append(float(step))
                    ys.append(float(value))
        for entry in run["eval"]:
            if entry.get("score") is not None:
                xs, ys = panels["held-out score"].setdefault(run["name"], ([], []))
                xs.append(float(entry["step"]))
                ys.append(float(entry["score"]))
                if entry.get("ci95"):
                    steps, lows, highs = bands.setdefault(run["name"], ([], [], []))
                    steps.append(float(entry["step"]))
                    lows.append(float(entry["ci95"][0]))
                    highs.append(float(entry["ci95"][1]))
    panels = {k: v for k, v in panels.items() if v}
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(min(11.0, 3.7 * len(panels)), 3.6), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels.items()):
        for label, (xs, ys) in lines.items():
            (line,) = ax.plot(xs, ys, marker="." if len(xs) < 30 else None, label=label)
            if title == "held-out score" and label in bands:
                ax.fill_between(*bands[label], color=line.get_color(), alpha=0.2, linewidth=0)
        if title == "held-out score" and bands:
            n = {e.get("n") for run in runs for e in run["eval"]} - {None}
            title = f"held-out score, 95 % band (n={', '.join(map(str, sorted(n)))})"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------------


def build_report(folders: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """Write plots, ``report.html`` and (unless ``out`` is the only eval run itself) a combined
    ``metrics.json`` into ``out``; returns the combined summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    evals, trainings, baseline_runs = load_runs(folders)
    tasks = sorted({t for run in evals for t in run["metrics"]["tasks"]})
    images: list[tuple[str, str]] = []
    for index, run in enumerate(baseline_runs):  # no model: the baselines per task only
        questions = list(run["metrics"].get("questions_per_task") or {})
        series = {name: [table["tasks"].get(t, {}).get("score") for t in questions]
                  for name, table in run["metrics"]["baselines"].items() if table.get("status") == "ok"}
        if questions and series:
            file = "baselines.png" if len(baseline_runs) == 1 else f"baselines-{index + 1}.png"
            images.append((f"Per-task scores of the baselines ({run['name']}, no model)",
                           grouped_bars(out / file, "baselines (no model)", questions, series, "score").name))
    if evals:
        main = evals[-1]
        series = {main["name"]: [main["metrics"]["tasks"].get(t, {}).get("score") for t in tasks]}
        for name, table in main["metrics"].get("baselines", {}).items():
            if table.get("status") == "ok":
                series[f"baseline: {name}"] = [table["tasks"].get(t, {}).get("score") for t in tasks]
        images.append(("Per-task scores: model vs baselines",
                       grouped_bars(out / "tasks.png", "model vs baselines", tasks, series, "score").name))
        if len(evals) > 1:
            compare = {run["name"]: [run["metrics"]["tasks"].get(t, {}).get("score") for t in tasks] for run in evals}
            title = "before / after" if len(evals) == 2 else "runs compared"
            images.append((title, grouped_bars(out / "compare.png", title, tasks, compare, "score").name))
            images.append(("Held-out score over the runs (95 % intervals)",
                           score_progression(out / "progression.png", evals).name))
        bias = main["metrics"].get("position_bias", {}).get("overall")
        if bias:
            letters = sorted(set(bias["true"]) | set(bias["predicted"]))
            n_true, n_pred = max(1, bias["n"]), max(1, bias["n_parsed"])
            shares = {"gold answers": [bias["true"].get(k, 0) / n_true for k in letters],
                      "predicted": [bias["predicted"].get(k, 0) / n_pred for k in letters]}
            images.append(("Position bias: letter shares",
                           grouped_bars(out / "position_bias.png", "letter shares", letters, shares, "share").name))
    if trainings:
        curves = training_curves(out / "training.png", trainings)
        if curves is not None:
            images.append(("Training curves", curves.name))
    summary = {"runs": [{"name": r["name"], "folder": r["folder"], "tasks": r["metrics"]["tasks"],
                         "overall": r["metrics"]["overall"], "baselines": {k: v.get("overall") for k, v in
                                                                            r["metrics"].get("baselines", {}).items()},
                         "consistency": r["metrics"].get("consistency")} for r in evals],
               "training": [{"name": r["name"], "folder": r["folder"], "steps": len(r["history"]),
                             "last": r["history"][-1] if r["history"] else None, "eval": r["eval"]} for r in trainings],
               "images": [name for _, name in images]}
    if baseline_runs:
        summary["baseline_runs"] = [{"name": r["name"], "folder": r["folder"], "n_questions": r["metrics"].get(
            "n_questions"), "baselines": {k: v.get("overall") for k, v in r["metrics"]["baselines"].items()}}
            for r in baseline_runs]
    arms = arms_summary(evals)  # the cascade and the VLM arm side by side, when both were evaluated
    if arms is not None:
        summary["arms"] = arms
    runs = evals + baseline_runs
    own_folder = len(runs) == 1 and not trainings and Path(runs[0]["folder"]).resolve() == out.resolve()
    if not own_folder:
        atomic_write_json(out / "metrics.json", summary)
    atomic_write_text(out / "report.html", render_html(evals, trainings, tasks, images, baseline_runs))
    return summary


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{100 * value:.1f}" if 0 <= value <= 1 else f"{value:.3g}"
    return html.escape(str(value))


def _differences_section(evals: list[dict[str, Any]]) -> str:
    """Each later run against the first and against the one before it, paired on shared questions."""
    pairs = [(evals[0], run) for run in evals[1:]]
    pairs += [(evals[i - 1], evals[i]) for i in range(2, len(evals))]
    # A run evaluated blind too (--baselines blind): the same model without the video text, on the same
    # questions. A gain it keeps without the text is not reading.
    pairs += [({"name": f"{run['name']} blind", "predictions": read_jsonl(blind)}, run) for run in evals
              if (blind := Path(run["folder"]) / "baselines" / "blind.jsonl").is_file()]
    rows = []
    for before, after in pairs:
        diff = prediction_difference(before["predictions"], after["predictions"])
        interval = diff["ci95"]
        test = "" if diff["test"] is None else f" ({diff['test']})" if diff["method"] == "exact" else \
            f" ({diff['test']}, {diff['method']})"
        # _table escapes every cell, so names and "< 0.001" go in as plain text.
        rows.append([f"{after['name']} − {before['name']}", str(diff["n"]),
                     "–" if diff["difference"] is None else f"{100 * diff['difference']:+.1f}",
                     "–" if not interval else f"[{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]",
                     format_p(diff["p_value"]) + test, f"{diff['improved']} / {diff['worsened']}",
                     diff["verdict"]])
    return ("<h2>Differences (paired on the same questions)</h2><p class='note'>Score points, with the "
            "paired-bootstrap 95 % interval and the p-value of an exact paired test (sign test on the questions "
            "that changed for 0/1 scores, sign-flip permutation test otherwise); the verdict is the test's at the "
            "5 % level, and \"too few differing answers\" when so few questions changed that no outcome could "
            "reach it.</p>"
            + _table(["comparison", "n", "difference", "95 % interval", "p (exact test)", "improved / worse",
                      "verdict"], rows))


def _reference_section(evals: list[dict[str, Any]]) -> str:
    """The scores under the reference harness's names (lmms-eval), one column per evaluation."""
    from embodied_r.evaluation.reference_names import reference_note, reference_rows

    keys = list(dict.fromkeys((b, k) for r in evals for b, k, _ in reference_rows(r["metrics"])))
    if not keys:
        return ""
    values = [{(b, k): v for b, k, v in reference_rows(r["metrics"])} for r in evals]
    rows = [[f"{b}: {k}"] + [_fmt(None if v.get((b, k)) is None else v[(b, k)] / 100) for v in values] for b, k in keys]
    note = reference_note(evals[-1]["metrics"])
    return ("<h2>Under the reference names (lmms-eval)</h2><p class='note'>The same answers scored by the "
            "reference harness's own rules and aggregated as it does (VSI-Bench: each &lt;answer&gt; read as "
            "lmms-eval reads it, first space-separated token for choices, its number reader for numbers; "
            "relative-direction levels averaged, overall the mean of the question types; MVBench: its letter "
            "rule, empty predictions left out), and choice accuracy with the official Embodied-R evaluation "
            "parser (embodied_r: the first &lt;answer&gt; letter, else any letter followed by a period, so "
            "letters in the reasoning count). The headline scores above use our parser."
            + (f" {html.escape(note)}." if note else "") + "</p>"
            + _table(["metric"] + [r["name"] for r in evals], rows))


def _consistency_section(consistency: dict[str, Any]) -> str:
    """The rate, the judge's probe beside it, and any flag that makes the rate uninformative."""
    o = consistency["overall"]
    probe = consistency.get("probe") or {}
    agreement = (probe.get("agreement") or {}).get("content")
    verdict = {True: "passed", False: "FAILED"}.get(probe.get("passed"), "not run")
    section = "<h2>Logical consistency</h2>" + _table(
        ["judge", "letters", "scoring", "judged", "consistent", "rate", "rate (unjudged count as inconsistent)",
         "judge probe", "probe: content agreement", "probe: most frequent letter"],
        [[consistency.get("judge"), "visible" if consistency.get("sees_letters") else "masked",
          consistency.get("scoring") or (probe.get("scoring") or "letter"), str(o["judged"]),
          str(o["consistent"]), o["rate"], o["rate_all"], verdict, agreement,
          f"{probe.get('top_letter')} ({_fmt(probe.get('top_letter_share'))})" if probe.get("top_letter") else None]])
    notes = [html.escape(str(probe.get("message", "")))] if probe.get("message") else []
    notes += [f"<b>Warning:</b> {html.escape(flag)}" for flag in consistency.get("flags", [])]
    return section + "".join(f"<p class='note'>{note}</p>" for note in notes)


def _baseline_note(table: dict[str, Any]) -> str | None:
    if table.get("name") == "text-rule" and table.get("status") == "ok":
        o = table["overall"]
        return (f"applies to {o['n_applies']} of {o['n']}; answerable ceiling {_fmt(o.get('ceiling'))} % of the "
                f"{o['n_with_rule']} question(s) of tasks with a rule")
    if table.get("name") == "solver" and table.get("status") == "ok":
        o = table["overall"]
        return (f"applicable to {o['n_applicable']} of {o['n']}; ceiling {_fmt(o.get('ceiling'))} % of those "
                f"({o['n_copy']} stated outright in the text)")
    return table.get("reason") or "; ".join(filter(None, (table.get("note"), table.get("fit_on")))) or None


def _solver_cells(solver: dict[str, Any], task: str) -> list[Any]:
    t = solver.get(task, {})
    copy = {True: "yes", False: "no", "mixed": "mixed"}.get(t.get("copy"))
    return [t.get("applicable"), t.get("ceiling"), copy]


def _baselines_per_task(metrics: dict[str, Any]) -> str:
    """Per task: the model (when one was scored) beside every baseline that ran, the text rule's reach
    (applies, ceiling) and the solver's (applicable share, ceiling over the applicable questions, copies)."""
    ran = {name: b for name, b in metrics.get("baselines", {}).items() if b.get("status") == "ok"}
    if not ran:
        return ""
    rule = ran.get("text-rule", {}).get("tasks", {})
    solver = ran.get("solver", {}).get("tasks", {})
    with_model = "tasks" in metrics
    # Without a model, the tasks and their question counts are the scored questions' (questions_per_task).
    tasks = metrics["tasks"] if with_model else {task: {"n": n} for task, n in
                                                  (metrics.get("questions_per_task") or {}).items()}
    rows = [[task, str(t.get("n")), *([t.get("score")] if with_model else []),
             *[b.get("tasks", {}).get(task, {}).get("score") for b in ran.values()]]
            + ([rule.get(task, {}).get("rule"), str(rule.get(task, {}).get("n_applies", "–")),
                rule.get(task, {}).get("ceiling")] if rule else [])
            + (_solver_cells(solver, task) if solver else [])
            for task, t in tasks.items()]
    headers = (["task", "n", *(["model"] if with_model else []), *ran]
               + (["text rule", "rule applies", "answerable ceiling"] if rule else [])
               + (["solver applicable", "solver ceiling", "solver copy"] if solver else []))
    note = ("<p class='note'>Answerable ceiling: the share of the task's questions where the text rule applies and "
            "gives exactly the gold answer (– for a task without a rule); where the rule does not apply it scores "
            "1/#options for a choice and 0 for a number. Blind: the model without the frame descriptions.</p>")
    solver_note = ("<p class='note'>Solver: each question's method's exact solver over the prompt text. Solver "
                   "applicable: the share of the task's questions whose text determines the answer; solver ceiling: "
                   "its mean score over those questions only (accuracy, MRA for numbers; – when none is "
                   "applicable); solver copy: whether the text states the answer outright (yes, no, mixed). Where "
                   "it is not applicable it never guesses, and its score column counts 1/#options for a choice "
                   "and 0 for a number.</p>")
    return ("<h3>Baselines per task</h3>" + (note if rule or "blind" in ran else "") + (solver_note if solver else "")
            + _table(headers, rows))


def _steps_ran(folder: Path) -> str:
    """"<b>GRPO steps run: 20 of 40</b> (the time budget ended it). " from the run's summary.json, or ""."""
    path = folder / "summary.json"
    if not path.is_file():
        return ""
    summary = read_json(path)
    budget = summary.get("time_budget") or {}
    planned = budget.get("max_steps")
    text = f"<b>GRPO steps run: {summary.get('global_step')}" + (f" of {planned}" if planned else "") + "</b>"
    if budget.get("stopped_at_step"):
        text += f" (its time budget of {budget.get('minutes')} min ended it)"
    return text + ". "


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _samples(predictions: list[dict[str, Any]]) -> str:
    right = [p for p in predictions if p.get("correct")][:SAMPLES_PER_KIND]
    wrong = [p for p in predictions if not p.get("correct")][:SAMPLES_PER_KIND]
    blocks = []
    for p in right + wrong:
        verdict = "correct" if p.get("correct") else "wrong"
        blocks.append(f"<div class='sample {verdict}'><b>{html.escape(str(p['id']))}</b> "
                      f"({html.escape(str(p['task']))}) "
                      f"gold {html.escape(str(p['answer']))}, "
                      f"parsed {html.escape(str(p.get('parsed_answer')))}: {verdict}"
                      f"<pre>{html.escape(str(p.get('completion', '')))}</pre></div>")
    return "".join(blocks) or "<p>no predictions</p>"


def _baselines_section(metrics: dict[str, Any], title: str) -> str:
    """The overall table of every baseline and, per task, those that ran ("" when none was asked for)."""
    rows = [[name, b.get("status"), b.get("overall", {}).get("micro"), b.get("overall", {}).get("macro"),
             _baseline_note(b)] for name, b in metrics.get("baselines", {}).items()]
    if not rows:
        return ""
    return (f"<h2>{html.escape(title)}</h2>" + _table(["baseline", "status", "micro", "macro", "note"], rows)
            + _baselines_per_task(metrics))


def _excluded_section(metrics: dict[str, Any]) -> str:
    loader = metrics.get("loader", {})
    if not loader.get("n_skipped"):
        return ""
    return "<h2>Excluded questions</h2>" + _table(
        ["reason", "count"], [[k, str(v)] for k, v in loader.get("skipped_by_reason", {}).items()])


def render_html(evals: list[dict[str, Any]], trainings: list[dict[str, Any]], tasks: list[str],
                images: list[tuple[str, str]], baseline_runs: Sequence[dict[str, Any]] = ()) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>embodied-r report</title><style>",
             "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}",
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}",
             "pre{white-space:pre-wrap;background:#f6f6f6;padding:6px}"
             ".wrong{border-left:4px solid #c33;padding-left:8px}",
             ".correct{border-left:4px solid #3a3;padding-left:8px}img{max-width:100%;height:auto}</style></head>"
             "<body><h1>embodied-r report</h1>",
             "<p>Scores in %: accuracy for choice tasks, mean relative accuracy (MRA) for numeric ones.</p>"]
    if evals:
        headers = ["task", "n"] + [f"{r['name']} [95 % interval]" for r in evals]

        def cell(table: dict[str, Any], n_column: Any, key: str = "score") -> str:
            # A run that answered another number of questions (e.g. the untrained model on the first few)
            # says its own n, so no interval is read against the wrong count.
            text = format_interval(table.get(key), table.get("ci95"))
            n = table.get("n")
            return text if n is None or n == n_column else f"{text} (n {n})"

        rows = []
        for t in tasks:
            n_column = evals[-1]["metrics"]["tasks"].get(t, {}).get("n")
            rows.append([t, "–" if n_column is None else str(n_column)]
                        + [cell(r["metrics"]["tasks"].get(t, {}), n_column) for r in evals])
        n_overall = evals[-1]["metrics"]["overall"].get("n")
        rows.append(["overall (micro)", str(n_overall)]
                    + [cell(r["metrics"]["overall"], n_overall, "micro") for r in evals])
        rows.append(["overall (macro)", ""] + [_fmt(r["metrics"]["overall"].get("macro")) for r in evals])
        rows.append(["unparsed answers (count)", ""] + [str(r["metrics"]["overall"].get("unparsed")) for r in evals])
        parts.append("<h2>Per-task scores</h2><p class='note'>n questions per task (of the last run; another "
                     "run's own n beside its score where it differs); a task of a few questions moves by many "
                     "points per question, as its interval shows.</p>" + _table(headers, rows))
        if len(evals) > 1 or any((Path(r["folder"]) / "baselines" / "blind.jsonl").is_file() for r in evals):
            parts.append(_differences_section(evals))
        parts.append(arms_html(arms_summary(evals)))
        parts.append(_reference_section(evals))
        main = evals[-1]["metrics"]
        parts.append(_baselines_section(main, f"Baselines ({evals[-1]['name']})"))
        consistency = main.get("consistency") or {}
        if consistency.get("status") == "ok":
            parts.append(_consistency_section(consistency))
        elif consistency:
            parts.append(f"<h2>Logical consistency</h2><p>{html.escape(str(consistency.get('status')))}: "
                         f"{html.escape(str(consistency.get('reason')))}</p>")
        context = main.get("context") or {}
        if context.get("affected"):
            parts.append(f"<h2>Prompts over the context ({html.escape(str(context['policy']['rule']))})</h2>" + _table(
                ["question", "action", "prompt tokens", "limit", "kept tokens", "frames dropped"],
                [[html.escape(str(r["id"])), r["action"], str(r["prompt_tokens"]), str(r["limit"]),
                  str(r["kept_tokens"]), str(r.get("frames_dropped", ""))] for r in context.get("rows", [])[:50]]))
        parts.append(_excluded_section(main))
    for run in baseline_runs:
        metrics = run["metrics"]
        parts.append(f"<h2>No model scored: {html.escape(run['name'])}</h2><p class='note'>The baselines alone, on "
                     f"{html.escape(str(metrics.get('n_questions')))} question(s) of "
                     f"{html.escape(str(metrics.get('data')))} (embodied-r score without completions).</p>"
                     + _baselines_section(metrics, f"Baselines ({run['name']})") + _excluded_section(metrics))
    for title, name in images:
        parts.append(f"<h2>{html.escape(title)}</h2><img src='{html.escape(name)}' alt='{html.escape(title)}'>")
    for run in trainings:
        last = run["history"][-1] if run["history"] else {}
        parts.append(f"<h2>Training run {html.escape(run['name'])}</h2><p>{_steps_ran(Path(run['folder']))}"
                     f"{len(run['history'])} logged steps; last: "
                     f"{html.escape(', '.join(f'{k}={v}' for k, v in list(last.items())[:8]))}</p>")
        if run["eval"]:
            parts.append("<p>Held-out evaluations during training (greedy):</p>" + _table(
                ["step", "n", "score [95 % interval]", "unparsed"],
                [[str(e.get("step")), str(e.get("n", "")), format_interval(e.get("score"), e.get("ci95")),
                  _fmt(e.get("unparsed_rate"))] for e in run["eval"]]))
        probe_path = Path(run["folder"]) / "judge_probe.json"
        if probe_path.is_file():
            probe = read_json(probe_path)
            verdict = "passed" if probe.get("passed") else "FAILED"
            extra = (" The run went on with judge.allow_weak: its consistency reward does not measure consistency."
                     if probe.get("allowed_weak") else "")
            parts.append(f"<p class='note'>Consistency reward's judge probe: <b>{verdict}</b>. "
                         f"{html.escape(str(probe.get('message', '')))}{extra}</p>")
    if evals:
        parts.append(f"<h2>Sample reasoning ({html.escape(evals[-1]['name'])})</h2>"
                     + _samples(evals[-1]["predictions"]))
    parts.append("</body></html>")
    return "\n".join(parts)
