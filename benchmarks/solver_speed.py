"""The exact solver's speed beside the text-rule baseline's, on the same prompt rows, in one run.

Goal: 1,000 prompts answered in under 10 s on a 2-core CPU, and time linear in the prompt's length. The
rows of ``--prompts`` (a prompt file from `embodied-r build-prompts`, any detail level) are repeated up to
``--count``; each pass is timed over all of them, the best of ``--repeats`` is kept, and the ratio to the
text rule's time on the same rows is printed. Linearity: the same rows with their frame text doubled
(every frame line written twice, so twice the characters to read) must take about twice as long.

    embodied-r perceive --qa W/questions.jsonl --keyframes KF --backend oracle --detail map --out P.jsonl
    embodied-r build-prompts --qa W/questions.jsonl --perception P.jsonl --out rows.jsonl
    python benchmarks/solver_speed.py --prompts rows.jsonl

``--record PATH`` also writes the numbers as JSON for the docs (benchmarks/bench_record.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench_record import add_record_argument, write_record

from embodied_r.core.io import read_jsonl
from embodied_r.core.records import PromptRow
from embodied_r.evaluation.text_rule_baseline import text_rule_predictions
from embodied_r.methods import method_for_row
from embodied_r.methods.embodied_r.frame_text import video_frames


def best_seconds(fn: Callable[[Sequence[PromptRow]], Any], rows: Sequence[PromptRow], repeats: int) -> float:
    """The fastest of ``repeats`` passes of ``fn`` over all ``rows``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(rows)
        best = min(best, time.perf_counter() - start)
    return best


def doubled(row: PromptRow) -> PromptRow:
    """The row with its ``Frame k:`` lines written twice (the copies numbered after the originals)."""
    prompt = [dict(m) for m in row.prompt]
    text = str(prompt[-1]["content"])
    frames = video_frames(text)
    if not frames:
        return row
    block = text[frames[0].start:frames[-1].end]  # ends with the newline before what closes the frames
    copy = block
    for frame in reversed(frames):  # renumber from the last, so "Frame 1" never rewrites "Frame 10"
        copy = copy.replace(f"Frame {frame.index}: ", f"Frame {frame.index + len(frames)}: ")
    prompt[-1]["content"] = text[:frames[0].start] + block + copy + text[frames[-1].end:]
    return dataclasses.replace(row, prompt=prompt)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", required=True, help="prompt rows (.jsonl) from build-prompts")
    parser.add_argument("--count", type=int, default=1000, help="rows to answer per pass (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="passes; the best is kept (default 3)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    rows = [PromptRow.from_dict(r) for r in read_jsonl(args.prompts)]
    if not rows:
        parser.error(f"{args.prompts}: no prompt rows")
    rows = (rows * (args.count // len(rows) + 1))[: args.count]

    def solver(batch: Sequence[PromptRow]) -> Any:
        return [method_for_row(row.meta).solve(row) for row in batch]

    solver_s = best_seconds(solver, rows, args.repeats)
    rule_s = best_seconds(text_rule_predictions, rows, args.repeats)
    long_rows = [doubled(r) for r in rows]
    long_s = best_seconds(solver, long_rows, args.repeats)
    chars = sum(len(str(r.prompt[-1]["content"])) for r in rows)
    long_chars = sum(len(str(r.prompt[-1]["content"])) for r in long_rows)
    result = {"rows": len(rows), "solver_s": round(solver_s, 3), "text_rule_s": round(rule_s, 3),
              "solver_over_text_rule": round(solver_s / rule_s, 2),
              "doubled_text_s": round(long_s, 3), "doubled_chars_ratio": round(long_chars / chars, 2),
              "doubled_time_ratio": round(long_s / solver_s, 2),
              "goal_1000_under_10s": solver_s * 1000 / len(rows) < 10}
    print(f"solver: {len(rows)} prompts in {solver_s:.2f} s ({1000 * solver_s / len(rows):.2f} ms each); "
          f"text rule: {rule_s:.2f} s; solver / text rule = {solver_s / rule_s:.2f}")
    print(f"text doubled ({long_chars / chars:.2f}x the characters): {long_s:.2f} s, {long_s / solver_s:.2f}x the time")
    print(json.dumps(result))
    if args.record is not None:
        # The unrounded measurements (the printed JSON rounds them); write_record keeps 4 significant digits.
        results = {**result, "solver_s": solver_s, "text_rule_s": rule_s, "solver_over_text_rule": solver_s / rule_s,
                   "doubled_text_s": long_s, "doubled_chars_ratio": long_chars / chars,
                   "doubled_time_ratio": long_s / solver_s, "solver_ms_each": 1000 * solver_s / len(rows)}
        settings = {"prompts": args.prompts, "count": args.count, "repeats": args.repeats, "chars": chars,
                    "doubled_chars": long_chars}
        write_record(args.record, "solver_speed", argv, settings, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
