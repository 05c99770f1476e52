"""embodied-r: Embodied-R and Robot-R1, end to end.

Nothing heavy is imported here: ``import embodied_r`` must stay instant so that the CLI's ``--help``
is instant too.
"""

__version__ = "0.1.0"
