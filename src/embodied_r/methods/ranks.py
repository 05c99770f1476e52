"""What the processes of a distributed GRPO run agree on before a reward term is kept or dropped.

A GRPO group can span processes (TRL gathers the rewards of all ranks before computing advantages), so
a reward that drops its term for some rows must drop it for the same groups on every rank, and a judge
that must pass a probe must pass it everywhere. These helpers gather one flag per row (or per process)
over ``torch.distributed`` when a process group exists, and are no-ops in a single process. They serve
any reward that needs them (the consistency reward, the judge gate in training).
"""

from __future__ import annotations

from typing import Any


def process_group() -> tuple[int, int]:
    """(rank, world size) of the default torch.distributed group, or (0, 1) when there is none."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch always ships it
        return 0, 1
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_flags(local: list[bool]) -> list[list[bool]]:
    """Every process's ``local`` list, in rank order (the order TRL gathers rewards in).

    >>> gather_flags([True, False])  # one process: its own list
    [[True, False]]
    """
    _, world = process_group()
    if world == 1:
        return [list(local)]
    import torch.distributed as dist

    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, list(local))
    return [list(item) for item in gathered]


def groups_to_drop(dropped: list[list[bool]], group_size: int) -> set[int]:
    """Global indices of the groups (``group_size`` consecutive rows over all ranks) holding a dropped row.

    >>> sorted(groups_to_drop([[False, False], [True, False]], group_size=4))
    [0]
    >>> sorted(groups_to_drop([[False, True, False, False]], group_size=2))
    [0]
    """
    flat = [flag for rank_flags in dropped for flag in rank_flags]
    size = max(1, int(group_size))
    return {i // size for i, flag in enumerate(flat) if flag}


__all__ = ["gather_flags", "groups_to_drop", "process_group"]
