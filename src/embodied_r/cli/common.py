"""Helpers shared by subcommands: the user-facing error type and terminal output."""

from __future__ import annotations

from typing import Any


class CLIError(Exception):
    """An error the user can fix (bad path, bad option); printed as one line, exit code 2."""


def console() -> Any:
    """A rich Console writing to stdout (imported lazily: rich costs ~50 ms)."""
    from rich.console import Console

    return Console(highlight=False)


def add_generation_arguments(parser: Any, limit_help: str) -> None:
    """``--limit``, ``--batch-size``, ``--max-new-tokens`` and ``--dtype``, as every generating command
    has them."""
    parser.add_argument("--limit", type=int, default=None, help=limit_help)
    parser.add_argument("--batch-size", type=int, default=8, help="prompts per generate() call (default: 8)")
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
    from rich.table import Table

    table = Table(title=title)
    for name in columns:
        # The first column names the rows (task types such as egocentric_direction): a narrow terminal wraps
        # the numbers instead of cutting the names.
        first = name == columns[0]
        table.add_column(name, justify="left" if first else "right", no_wrap=first)
    for row in rows:
        table.add_row(*[_fmt(v) for v in row])
    console().print(table)


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
