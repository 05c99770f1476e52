"""Robot-R1 on held-out work: per split and question type, each model's score with its 95 % interval,
the random, letter-prior and answer-prior baselines, and the paired difference between two models.

Reads `embodied-r eval` output folders (``metrics.json`` + ``predictions.jsonl``) named
``<model>_<split>`` under ``--runs`` and prints a markdown table; ``--json`` also writes the numbers.
The folders come from (MUJOCO_GL=egl for `synth robot`):

    embodied-r synth robot --out DATA --episodes 5 --test-episodes 4
    embodied-r train --recipe recipes/robot_r1/cpu_smollm2_text.yaml --set train_data=DATA/prompts.jsonl \\
        --set output_dir=RUN
    embodied-r eval --data DATA/prompts_test_in.jsonl --model RUN/warmup/model --out RUNS/warmup_test_in \\
        --max-new-tokens 128 --batch-size 16 --no-report        # likewise final, base; test_out

    python benchmarks/robot_r1_heldout.py --runs RUNS --models base warmup final --compare warmup final \
        --prior-from DATA/prompts.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from embodied_r.core.intervals import format_comparison, format_interval, prediction_difference
from embodied_r.core.io import read_jsonl
from embodied_r.evaluation.baselines import PRIORS

SPLITS = ("test_in", "test_out")


def _load(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    if not (folder / "metrics.json").is_file():
        return None
    return json.loads((folder / "metrics.json").read_text()), read_jsonl(folder / "predictions.jsonl")


def training_priors(test_file: str, prior_from: Path) -> dict[str, Any]:
    """Both prior baselines fit on the training rows: each task's most frequent training letter, and the
    option whose text is most often a training answer."""
    from embodied_r.evaluation.baselines import prior_baseline
    from embodied_r.evaluation.inputs import load_prior_rows
    from embodied_r.evaluation.runner import load_eval_rows

    rows, train = load_eval_rows(test_file)[0], load_prior_rows(prior_from)
    return {name: prior_baseline(rows, train, name=name) for name in PRIORS}


def summarise(runs: Path, models: list[str], compare: tuple[str, str] | None,
              prior_from: Path | None = None) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for split in SPLITS:
        loaded = {m: _load(runs / f"{m}_{split}") for m in models}
        present = {m: v for m, v in loaded.items() if v is not None}
        if not present:
            continue
        first_metrics = next(iter(present.values()))[0]
        if prior_from is not None:  # the eval runs' own priors are leave-one-out; these are fit on training
            first_metrics = {**first_metrics, "baselines": {**first_metrics.get("baselines", {}),
                                                            **training_priors(first_metrics["data"], prior_from)}}
        tasks = sorted(first_metrics["tasks"])
        rows: dict[str, Any] = {}
        for task in [*tasks, "all"]:
            row: dict[str, Any] = {}
            for model, (metrics, predictions) in present.items():
                block = metrics["tasks"][task] if task != "all" else {
                    "n": metrics["overall"]["n"], "score": metrics["overall"]["micro"],
                    "ci95": metrics["overall"].get("ci95")}
                row[model] = {"n": block["n"], "score": block["score"], "ci95": block.get("ci95"),
                              "unparsed": sum(p.get("parsed_answer") is None for p in predictions
                                              if task == "all" or p["task"] == task)}
            for name in ("random", *PRIORS):
                base = first_metrics.get("baselines", {}).get(name, {})
                block = base.get("tasks", {}).get(task) if task != "all" else base.get("overall")
                if block:
                    row[name] = block.get("score", block.get("micro"))
            if compare and all(m in present for m in compare):
                before, after = (present[m][1] for m in compare)
                if task != "all":
                    before = [p for p in before if p["task"] == task]
                    after = [p for p in after if p["task"] == task]
                row["difference"] = prediction_difference(before, after)
            rows[task] = row
        summary[split] = rows
    return summary


def markdown(summary: dict[str, Any], models: list[str], compare: tuple[str, str] | None) -> str:
    lines = []
    for split, rows in summary.items():
        present = [m for m in models if m in rows["all"]]
        head = ["question type", "n" if len({rows["all"][m]["n"] for m in present}) == 1 else
                "n (" + " / ".join(present) + ")", *present, "random", "letter prior", "answer prior"]
        compare_here = compare and "difference" in rows["all"]
        if compare_here:
            head.append(f"{compare[1]} − {compare[0]} [95 % CI], exact-test p")
        lines += [f"\n**{split}**\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for task, row in rows.items():
            counts = list(dict.fromkeys(str(row[m]["n"]) for m in present))  # one, or each model's where they differ
            cells = [f"**{task}**" if task == "all" else task, " / ".join(counts)]
            for model in present:
                block = row[model]
                text = format_interval(block["score"], block["ci95"])
                if block["unparsed"]:
                    text += f" ({block['unparsed']} unparsed)"
                cells.append(text)
            cells += [f"{100 * row[k]:.1f}" if row.get(k) is not None else "–" for k in ("random", *PRIORS)]
            if compare_here:
                cells.append(format_comparison(row["difference"]))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", required=True, type=Path, help="folder holding <model>_<split> eval folders")
    parser.add_argument("--models", nargs="+", default=["base", "warmup", "final"])
    parser.add_argument("--compare", nargs=2, default=None, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--prior-from", type=Path, default=None,
                        help="fit the letter and answer priors on these training rows (default: the eval runs' own)")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    compare = tuple(args.compare) if args.compare else None
    summary = summarise(args.runs, args.models, compare, args.prior_from)  # type: ignore[arg-type]
    if not summary:
        raise SystemExit(f"no <model>_<split> eval folders with metrics.json under {args.runs}")
    print(markdown(summary, args.models, compare))  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
