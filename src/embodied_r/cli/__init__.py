"""The ``embodied-r`` console script: one subcommand per pipeline stage.

Each name in ``main.COMMANDS`` is a module here with ``HELP`` (its line in ``embodied-r --help``),
``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args) -> int``. Modules import only ``argparse``
at top level; heavy libraries are imported inside ``run`` so that ``embodied-r <cmd> --help`` answers
instantly.
"""
