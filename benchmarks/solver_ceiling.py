"""The exact solver's answerable ceiling per task type at each perception detail level, as a record and a table.

Reads the ``metrics.json`` of one `embodied-r score --baselines solver` folder per level and writes
``docs/records/solver_ceiling.json`` (per level and task type: questions, applicable share, ceiling, copy),
then prints the markdown table docs/world.md shows. A docs test reads every number of that table back from
the record. The folders come from (one world, one key-frame set, each level in turn):

    embodied-r synth world --out W --scenes 40 --seed 11 --seconds 12 --per-task 3
    embodied-r keyframes W/videos --out KF --max-frames 6
    embodied-r perceive --qa W/questions.jsonl --keyframes KF --backend oracle --detail map --out P_map.jsonl
    embodied-r build-prompts --qa W/questions.jsonl --perception P_map.jsonl --span any --out rows_map.jsonl
    embodied-r score --data rows_map.jsonl --baselines solver --out S_map
    python benchmarks/solver_ceiling.py --run words=S_words --run bearings=S_bearings --run map=S_map \\
        --run relations=S_relations --world "40 rooms, seed 11, 12 s, 6 key frames, --span any"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from embodied_r.core.io import atomic_write_json

RECORD = Path(__file__).resolve().parents[1] / "docs" / "records" / "solver_ceiling.json"
LEVELS = ("words", "bearings", "map", "relations")


def level_table(metrics_path: Path) -> dict[str, dict[str, Any]]:
    """Per task type: n, applicable share, ceiling (None when nothing applies) and copy, from one score run."""
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    solver = (metrics.get("baselines") or {}).get("solver")
    if not solver or solver.get("status") != "ok":
        raise SystemExit(f"{metrics_path}: no solver baseline (run `embodied-r score --baselines solver`)")
    return {task: {"n": row["n"], "applicable": round(row["applicable"], 3),
                   "ceiling": None if row["ceiling"] is None else round(row["ceiling"], 3), "copy": row["copy"]}
            for task, row in sorted(solver["tasks"].items())}


def cell(row: dict[str, Any] | None) -> str:
    """``100.0 (87 %)``: the ceiling in percent and the applicable share; ``-`` when nothing applies."""
    if row is None:
        return ""
    if row["ceiling"] is None:
        return f"- (0 % of {row['n']})"
    copy = " copy" if row["copy"] is True else ""
    return f"{100 * row['ceiling']:.1f} ({100 * row['applicable']:.0f} % of {row['n']}){copy}"


def markdown(record: dict[str, Any]) -> str:
    levels = list(record["levels"])  # in the order the runs were given
    tasks = sorted({task for level in levels for task in record["levels"][level]})
    lines = [f"| task type | {' | '.join(levels)} |", f"|---|{'---|' * len(levels)}"]
    for task in tasks:
        lines.append(f"| {task} | {' | '.join(cell(record['levels'][level].get(task)) for level in levels)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=DIR",
                        help="a column label starting with the detail level (e.g. 'map' or 'map, 12 key frames') and "
                        "its `score --baselines solver` folder; repeat per column")
    parser.add_argument("--world", required=True, help="how the world and prompts were made, for the record")
    parser.add_argument("--record", type=Path, default=RECORD, help="where to write the record (default: docs)")
    args = parser.parse_args(argv)
    levels = {}
    for spec in args.run:
        level, _, folder = spec.partition("=")
        if level.split(",")[0] not in LEVELS or not folder:
            parser.error(f"--run {spec!r}: expected LABEL=DIR with LABEL starting with one of {', '.join(LEVELS)}")
        levels[level] = level_table(Path(folder) / "metrics.json")
    record = {"world": args.world, "command": "embodied-r score --baselines solver (one folder per level)",
              "levels": levels}
    atomic_write_json(args.record, record)
    print(markdown(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
