"""Arguments for ``embodied-r synth robot`` (issue: Robot-R1 demonstrations and questions)."""

from __future__ import annotations

import argparse
from typing import Any


def register(kinds: Any) -> None:
    robot = kinds.add_parser("robot", help="Meta-World expert demonstrations -> Robot-R1 keypoint questions")
    robot.add_argument("--out", required=True, help="output folder")
    robot.set_defaults(_synth_run=run_robot)


def run_robot(args: argparse.Namespace) -> int:
    raise NotImplementedError("synth robot is not implemented yet")
