"""``embodied-r data {split,check}``: benchmark questions -> checked QARecords and seeded splits."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "load benchmarks into questions, check them, and make the Embodied-R scene-level splits"
DESCRIPTION = ("Benchmark questions as QARecords: `check` loads any data spec and reports what was kept and "
               "skipped; `split` selects the eight Embodied-R tasks and writes seeded scene-level splits.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="data_action", metavar="ACTION", required=True)

    split = actions.add_parser("split", help="Embodied-R task selection + seeded scene-level split / k folds",
                               description="Select Landmark Position, Counterfactual, Progress Evaluation and "
                               "Action Generation (UrbanVideo-Bench) and the four VSI-Bench multiple-choice "
                               "tasks (relative direction levels merged), then split by scene.")
    split.add_argument("--urbanvideo", default=None, metavar="PATH", help="UrbanVideo-Bench MCQ.parquet or folder")
    split.add_argument("--vsibench", default=None, metavar="PATH", help="VSI-Bench parquet/jsonl or folder")
    split.add_argument("--data", action="append", default=[], metavar="SPEC",
                       help="more questions as a loader spec (e.g. synthetic:DIR, or my_pkg.loaders:load_mine:DIR "
                       "for your own); repeatable")
    split.add_argument("--all-tasks", action="store_true",
                       help="keep every task instead of the Embodied-R selection")
    split.add_argument("--tasks", default=None, metavar="T1,T2",
                       help="keep only these task types (after --all-tasks or the Embodied-R selection)")
    split.add_argument("--out", required=True, metavar="DIR", help="output folder")
    split.add_argument("--seed", type=int, default=0, help="shuffle seed (default: 0)")
    split.add_argument("--ratios", default="0.75,0.05,0.20", help="train,val,test scene shares (default: %(default)s)")
    split.add_argument("--folds", type=int, default=0,
                       help="write K scene-level folds (fold_i/train.jsonl, test.jsonl) instead of one split")
    split.set_defaults(_data_run=run_split)

    check = actions.add_parser("check", help="load a data spec and report kept / skipped questions")
    check.add_argument("spec", help="loader spec, e.g. urbanvideo:PATH, vsibench:PATH, egoschema:DIR, mvbench:DIR, "
                       "or MODULE:FUNCTION:PATH for a loader of your own package (my_pkg.loaders:load_mine:DIR)")
    check.add_argument("--out", default=None, metavar="FILE", help="also write the questions as QARecord .jsonl")
    check.set_defaults(_data_run=run_check)


def run(args: argparse.Namespace) -> int:
    return int(args._data_run(args) or 0)


def _print_report(name: str, report: Any) -> None:
    from embodied_r.cli.common import console

    out = console()
    out.print(f"{name}: kept {report.kept}, skipped {len(report.skipped)}, warnings {len(report.warnings)}",
              markup=False)
    for reason, count in report.reason_counts().items():
        out.print(f"  skipped {count} x {reason}", markup=False)
    for item in report.skipped[:5]:
        out.print(f"    e.g. {item['id']}: {item['reason']}", markup=False)
    for item in report.warnings[:3]:
        out.print(f"  warning {item['id']}: {item['reason']}", markup=False)


def run_split(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import CLIError, print_table
    from embodied_r.evaluation.benchmarks.registry import load_qa
    from embodied_r.evaluation.split import embodied_r_selection, kfold_by_scene, split_by_scene, write_split

    specs = ([f"urbanvideo:{args.urbanvideo}"] if args.urbanvideo else []) + \
        ([f"vsibench:{args.vsibench}"] if args.vsibench else []) + list(args.data)
    if not specs:
        raise CLIError("give at least one of --urbanvideo, --vsibench or --data SPEC")
    try:
        ratios = [float(x) for x in args.ratios.split(",")]
    except ValueError:
        raise CLIError(f"--ratios {args.ratios!r}: expected three numbers like 0.75,0.05,0.20") from None
    records = []
    for spec in specs:
        loaded, report = load_qa(spec)
        _print_report(spec, report)
        records.extend(loaded)
    if not args.all_tasks:
        records = embodied_r_selection(records)
    if args.tasks:
        wanted = [t.strip() for t in args.tasks.split(",") if t.strip()]
        missing = sorted(set(wanted) - {r.task for r in records})
        if missing:
            raise CLIError(f"--tasks: no questions of {missing}; the data holds {sorted({r.task for r in records})}")
        records = [r for r in records if r.task in set(wanted)]
    if not records:
        raise CLIError("no questions left after the task selection (use --all-tasks for other benchmarks)")
    info = {"seed": args.seed, "sources": specs, "selection": "all" if args.all_tasks else "embodied_r",
            **({"tasks": args.tasks} if args.tasks else {})}
    try:
        if args.folds:
            folds = kfold_by_scene(records, args.folds, seed=args.seed)
            summaries = [write_split(f, f"{args.out}/fold_{i}", {**info, "fold": i, "folds": args.folds})
                         for i, f in enumerate(folds)]
            rows = [[f"fold {i}", s["parts"]["train"]["n"], s["parts"]["test"]["n"], s["parts"]["test"]["scenes"]]
                    for i, s in enumerate(summaries)]
            print_table(f"{args.folds} scene-level folds in {args.out}", ["fold", "train", "test", "test scenes"], rows)
            return 0
        parts = split_by_scene(records, ratios, seed=args.seed)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    summary = write_split(parts, args.out, {**info, "ratios": ratios})
    tasks = sorted({t for p in summary["parts"].values() for t in p["tasks"]})
    rows = [[t] + [summary["parts"][name]["tasks"].get(t, 0) for name in parts] for t in tasks]
    rows.append(["scenes"] + [summary["parts"][name]["scenes"] for name in parts])
    rows.append(["total"] + [summary["parts"][name]["n"] for name in parts])
    print_table(f"scene-level split (seed {args.seed}) in {args.out}", ["task", *parts], rows)
    return 0


def run_check(args: argparse.Namespace) -> int:
    from embodied_r.cli.common import print_table
    from embodied_r.core.io import write_jsonl
    from embodied_r.evaluation.benchmarks.registry import load_qa, summarize_records

    records, report = load_qa(args.spec)
    _print_report(args.spec, report)
    counts = summarize_records(records)
    print_table(f"questions in {args.spec}", ["task", "n"], [[t, n] for t, n in counts.items()])
    if args.out:
        write_jsonl(args.out, [r.to_dict() for r in records])
    return 0
