"""Entry point: builds the argument parser from the subcommand modules and dispatches."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from embodied_r import __version__

# In the order ``embodied-r --help`` lists them: the demo, then the pipeline's stages as they run.
COMMANDS = ("demo", "synth", "data", "keyframes", "perceive", "build-prompts", "train", "judge-probe", "eval",
            "score", "robot-bench", "report", "answer")


def _command_module(name: str) -> ModuleType:
    """``embodied_r.cli.<name>``: its ``HELP``, ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args)``."""
    return importlib.import_module(f"embodied_r.cli.{name.replace('-', '_')}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embodied-r",
        description="Embodied spatial reasoning with RL: key frames -> VLM perception -> small-LM "
        "reasoner trained with GRPO (Embodied-R), and Robot-R1 keypoint questions.",
    )
    parser.add_argument("--version", action="version", version=f"embodied-r {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = _command_module(name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (defaults to ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    from embodied_r.cli.common import CLIError
    from embodied_r.core.io import DataFileError
    from embodied_r.core.records import RecordError
    from embodied_r.inference.context_policy import ContextError
    from embodied_r.inference.models import ModelLoadError

    try:
        return int(args._run(args) or 0)
    except (CLIError, DataFileError, RecordError, ModelLoadError, ContextError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ConnectionError as exc:
        from embodied_r.inference.openai_client import ServerUnreachableError

        if not isinstance(exc, ServerUnreachableError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished results are kept on disk; rerun the same command to resume",
              file=sys.stderr)
        return 130


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
