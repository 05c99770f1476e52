"""``embodied-r synth {world,questions,robot}``: generate synthetic datasets offline.

The argument definitions of each sub-subcommand live in ``_synth_world`` and ``_synth_robot`` (kept
separate so the world and robot generators evolve independently); both import only argparse.
"""

from __future__ import annotations

import argparse

from embodied_r.cli import _synth_robot, _synth_world

HELP = "generate synthetic data: rendered egocentric worlds, VSI-style questions, robot demonstrations"
DESCRIPTION = "Generate synthetic datasets with exact ground truth, offline."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="synth_kind", metavar="KIND", required=True)
    _synth_world.register(kinds)
    _synth_robot.register(kinds)


def run(args: argparse.Namespace) -> int:
    return int(args._synth_run(args) or 0)
