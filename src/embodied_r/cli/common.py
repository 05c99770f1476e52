"""Helpers shared by subcommands: the user-facing error type and terminal output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CLIError(Exception):
    """An error the user can fix (bad path, bad option); printed as one line, exit code 2."""


def console() -> Any:
    """A rich Console writing to stdout (imported lazily: rich costs ~50 ms)."""
    from rich.console import Console

    return Console(highlight=False)


METHOD_HELP = ("a method of your own package, by the 'module:attr' path of its embodied_r.methods.Method (e.g. "
               "my_pkg.method:METHOD; its folder on PYTHONPATH), or a known method's name: imported and registered "
               "before any row is read, so rows whose meta.prompt_version is one of its versions follow it")


def add_method_argument(parser: Any, extra: str = "") -> None:
    """``--method NAME|MODULE:ATTR`` (see :data:`METHOD_HELP`; ``extra`` says what else it does here)."""
    parser.add_argument("--method", default=None, metavar="MODULE:ATTR", help=METHOD_HELP + extra)


def method_from_args(args: Any) -> Any:
    """The method ``--method`` names, imported and registered (``methods.load_method``); None without it. A
    value that names no method is a CLIError that names it and what failed."""
    if getattr(args, "method", None) is None:
        return None
    from embodied_r.methods import MethodSpecError, load_method

    try:
        return load_method(args.method)
    except MethodSpecError as exc:
        raise CLIError(f"--method {exc}") from None


def add_generation_arguments(parser: Any, limit_help: str) -> None:
    """``--limit``, ``--batch-size``, ``--max-new-tokens`` and ``--dtype``, as every generating command
    has them."""
    parser.add_argument("--limit", type=int, default=None, help=limit_help)
    parser.add_argument("--batch-size", type=int, default=32,
                        help="prompts per batch, within the context policy's token budget (default: 32)")
    parser.add_argument("--max-new-tokens", type=int, default=256,
                        help="completion length cap (default: 256)")
    parser.add_argument("--dtype", default="auto", help="auto | bfloat16 | float32 (default: auto)")
    add_context_arguments(parser)


def add_context_arguments(parser: Any) -> None:
    """``--context-rule``, ``--max-prompt-tokens`` and ``--max-batch-tokens`` (the context policy)."""
    from embodied_r.inference.context_policy import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_RULE, RULES

    group = parser.add_argument_group("context policy (prompts longer than the model's context)")
    group.add_argument("--context-rule", default=DEFAULT_RULE, choices=list(RULES),
                       help="what to do with a prompt that does not fit: drop the oldest frame descriptions, "
                       "cut the user text from the left, keep the last tokens of the whole prompt (the official "
                       "trainer's rule), or skip the row; every affected row is recorded (default: %(default)s)")
    group.add_argument("--max-prompt-tokens", type=int, default=None, metavar="N",
                       help="prompt token cap below the model's context minus --max-new-tokens (default: none)")
    group.add_argument("--max-batch-tokens", type=int, default=DEFAULT_MAX_BATCH_TOKENS, metavar="N",
                       help="padded tokens per batch, rows x (longest prompt + new tokens); bounds memory "
                       "(default: %(default)s)")


def context_policy(args: Any) -> Any:
    """The ContextPolicy the context arguments describe, or a CLIError."""
    from embodied_r.inference.context_policy import ContextError, ContextPolicy

    try:
        return ContextPolicy(rule=args.context_rule, max_prompt_tokens=args.max_prompt_tokens,
                             max_batch_tokens=args.max_batch_tokens)
    except ContextError as exc:
        raise CLIError(f"--max-prompt-tokens / --max-batch-tokens: {exc}") from None


def check_generation_arguments(args: Any) -> None:
    """Positive ``--limit`` (when given), ``--batch-size`` and ``--max-new-tokens``, or a CLIError."""
    if args.limit is not None and args.limit <= 0:
        raise CLIError(f"--limit must be positive, got {args.limit}")
    if args.batch_size <= 0 or args.max_new_tokens <= 0:
        raise CLIError("--batch-size and --max-new-tokens must be positive")
    context_policy(args)


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """A table on stdout that fits the terminal without cutting a word: the first column (it names the
    rows, e.g. egocentric_direction) never wraps, the other headers and cells wrap between words. When
    the words do not fit the boxed table, a compact one (no vertical lines, one space between columns)
    is used; when they do not fit that either, long words are folded onto the next line, never cut
    to "…"."""
    out = console()
    cells = [[_fmt(v) for v in row] for row in rows]
    out.print(fitted_table(title, columns, cells, out.width))


# Rich's boxed table, then a compact one: (its options, the characters it adds to n columns' text: the
# boxed one a border either side of each column and a space of padding either side of the text).
_TABLE_STYLES: tuple[tuple[dict[str, Any], Callable[[int], int]], ...] = (
    ({"box": "HEAVY_HEAD"}, lambda n: (n + 1) + 2 * n),
    ({"box": "SIMPLE_HEAD", "show_edge": False, "padding": 0}, lambda n: n - 1),  # one space between columns
)


def fitted_table(title: str, columns: list[str], cells: list[list[str]], width: int) -> Any:
    """The rich Table of ``print_table`` for a console ``width`` characters wide (see there)."""
    from rich import box
    from rich.cells import cell_len
    from rich.table import Table

    texts = [[name, *(row[index] for row in cells if index < len(row))] for index, name in enumerate(columns)]
    # Each column's natural width (its longest line) and the least it needs to cut no word (its longest
    # word; the first column's longest line, as it never wraps).
    longest = [max(cell_len(line) for text in column for line in text.splitlines() or [""]) for column in texts]
    needed = [longest[0], *(max([cell_len(word) for text in column for word in text.split()] or [0])
                            for column in texts[1:])]
    # The first style whose columns have room for their longest words; else the compact one, words folded.
    rooms = [(style, width - overhead(len(columns))) for style, overhead in _TABLE_STYLES]
    style, room = next(((style, room) for style, room in rooms if sum(needed) <= room), rooms[-1])
    table = Table(title=title, **{**style, "box": getattr(box, style["box"])})
    # Rich narrows the widest columns first even below their longest word (it cuts "requests" to "requ…");
    # widths fixed here narrow them the same way, but never below their longest word.
    widths = _shared_widths(room, needed, longest) if sum(longest) > room >= sum(needed) else [None] * len(columns)
    for index, name in enumerate(columns):
        first = index == 0
        table.add_column(name, justify="left" if first else "right", no_wrap=first, width=widths[index],
                         overflow="ellipsis" if first else "fold")
    for row in cells:
        table.add_row(*row)
    return table


def _shared_widths(room: int, needed: list[int], longest: list[int]) -> list[int | None]:
    """Column widths that add up to ``room``: as rich does, the widest columns give up width first (a
    short "not run" stays on one line), but none below ``needed``: each column gets its longest line
    capped at the largest common cap that fits, never less than its longest word."""
    def capped(cap: int) -> list[int]:
        return [min(most, max(least, cap)) for most, least in zip(longest, needed)]

    cap = max(longest)
    while sum(capped(cap)) > room:
        cap -= 1
    widths: list[int | None] = list(capped(cap))
    for index in [i for i, width in enumerate(widths) if width == cap < longest[i]][:room - sum(capped(cap))]:
        widths[index] = cap + 1  # what the cap leaves over (less than one per capped column)
    return widths


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)


def print_task_scores(metrics: dict[str, Any]) -> None:
    """The per-task table of a ``metrics.json`` (``eval`` and ``score``): n, score with its interval,
    unparsed, and the micro and macro overall rows."""
    from embodied_r.core.intervals import format_interval

    rows = [[task, t["n"], format_interval(t["score"], t.get("ci95")), t["unparsed"]]
            for task, t in metrics["tasks"].items()]
    overall = metrics["overall"]
    rows.append(["overall (micro, sample-weighted)", overall["n"],
                 format_interval(overall["micro"], overall.get("ci95")), overall["unparsed"]])
    rows.append(["overall (macro, mean of tasks)", overall["n"], format_interval(overall["macro"], None), None])
    print_table(f"{metrics['model']} on {metrics['data']}",
                ["task", "n", "score % [95 % interval] (accuracy or MRA)", "unparsed"], rows)
