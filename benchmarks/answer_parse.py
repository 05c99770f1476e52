"""Reading the last ``<answer>`` span: the one-pass reader beside the old regex reader, in one run.

Goal: time linear in the completion's length, whatever the model wrote. The old reader (copied below as
the baseline) was ``ANSWER_RE.findall(completion)[-1]`` with ``<answer>(.*?)</answer>``: an opening tag
that is never closed makes the lazy ``.*?`` run to the end of the text from every later opening tag, so
n unclosed tags cost n * n / 2 characters (0.5 s at 2,000 tags; 100,000 never finished). The same holds
for the first ``<think>`` span. Each case is timed at 2,000 / 8,000 / 100,000 tags, best of
``--repeats``; the old reader is run only up to ``--max-old-tags`` (default 8,000: it takes seconds
there already), and the ratio old / new is printed where both ran. Last, a typical 2 KB completion (one
pair of each tag), per call: the common case must not get slower by more than microseconds.

    python benchmarks/answer_parse.py
    python benchmarks/answer_parse.py --record docs/records/bench_answer_parse.json   # the docs' numbers
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from typing import Any

from bench_record import add_record_argument, write_record

from embodied_r.core.parsing import extract_answer_span, extract_think

# The baseline: the readers as they were before the one-pass rewrite.
_OLD_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_OLD_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)


def old_extract_answer_span(completion: str) -> str | None:
    matches = _OLD_ANSWER_RE.findall(completion)
    return matches[-1] if matches else None


def old_extract_think(completion: str) -> str | None:
    match = _OLD_THINK_RE.search(completion)
    return match.group(1).strip() if match else None


# name -> (completion with n tags, new reader, old reader)
CASES: dict[str, tuple[Callable[[int], str], Callable[[str], str | None], Callable[[str], str | None]]] = {
    "unclosed <answer>": (lambda n: "<think>r</think>" + "<answer>" * n + "B",
                          extract_answer_span, old_extract_answer_span),
    "closed <answer> pairs": (lambda n: "<answer>A</answer> " * n, extract_answer_span, old_extract_answer_span),
    "unclosed <think>": (lambda n: "<think>" * n + "<answer>B</answer>", extract_think, old_extract_think),
}
TAG_COUNTS = (2_000, 8_000, 100_000)
TYPICAL_CALLS = 2_000  # calls per timing of the typical completion (one is too quick to time)


def best_seconds(fn: Callable[[str], object], text: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def repeated(fn: Callable[[str], object], calls: int) -> Callable[[str], object]:
    """``fn`` called ``calls`` times on the same text (a short text is too quick to time once)."""
    return lambda text: [fn(text) for _ in range(calls)]


def table_row(name: str, tags: int, chars: int, new_s: float, old_s: float | None) -> dict[str, Any]:
    """One printed line as the record holds it: milliseconds, and old / new where the old reader ran."""
    return {"case": name, "tags": tags, "chars": chars, "new_ms": new_s * 1e3,
            "old_ms": None if old_s is None else old_s * 1e3, "old_over_new": None if old_s is None else old_s / new_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timings per reader and size; the best is kept")
    parser.add_argument("--max-old-tags", type=int, default=8_000,
                        help="largest tag count the old (quadratic) reader is run on (default 8000)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    rows = []
    print(f"{'case':<24}{'tags':>9}{'chars':>11}{'new (ms)':>11}{'old (ms)':>11}{'old/new':>11}")
    for name, (make, new, old) in CASES.items():
        for tags in TAG_COUNTS:
            text = make(tags)
            new_s = best_seconds(new, text, args.repeats)
            old_s = None
            line = f"{name:<24}{tags:>9,}{len(text):>11,}{new_s * 1e3:>11.2f}"
            if tags <= args.max_old_tags:
                assert old(text) == new(text), f"{name}, {tags} tags: the readers disagree"
                # One timing of the quadratic reader past 2,000 tags: it takes seconds.
                old_s = best_seconds(old, text, args.repeats if tags <= 2_000 else 1)
                line += f"{old_s * 1e3:>11.2f}{old_s / new_s:>10.1f}x"
            else:
                line += f"{'-':>11}{'-':>11}"
            rows.append(table_row(name, tags, len(text), new_s, old_s))
            print(line, flush=True)
    # The common case: one short completion with one pair of each tag, per call.
    typical = "<think>" + "The chair is left of the table, so " * 60 + "</think>\n<answer>B</answer>"
    calls = TYPICAL_CALLS
    for name, new, old in (("typical <answer>", extract_answer_span, old_extract_answer_span),
                           ("typical <think>", extract_think, old_extract_think)):
        assert old(typical) == new(typical)
        new_s = best_seconds(repeated(new, calls), typical, args.repeats) / calls
        old_s = best_seconds(repeated(old, calls), typical, args.repeats) / calls
        rows.append(table_row(name, 1, len(typical), new_s, old_s))
        print(f"{name:<24}{1:>9}{len(typical):>11,}{new_s * 1e3:>11.4f}{old_s * 1e3:>11.4f}{old_s / new_s:>10.1f}x")
    if args.record is not None:
        write_record(args.record, "answer_parse", argv, {"repeats": args.repeats, "max_old_tags": args.max_old_tags,
                                                         "typical_calls": calls}, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
