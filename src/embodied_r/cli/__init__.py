"""The ``embodied-r`` console script: one subcommand per pipeline stage.

Each module in this package that defines ``register(subparsers)`` and ``run(args) -> int`` is a
subcommand. Modules import only ``argparse`` at top level; heavy libraries are imported inside
``run`` so that ``embodied-r <cmd> --help`` answers instantly.
"""
