"""Completions whose advantage is zero, in the GRPO update (recipe key ``zero_variance_groups``).

A GRPO group whose completions all earn the same reward has advantage 0 in every row, and so does any
row whose reward equals its group's mean. With no KL term (beta = 0) such a row's per-token loss is
``-A * ratio = 0``: it moves no weight, yet TRL runs its forward and backward pass like any other. Early
in a run on a small model most groups are like that (all wrong, or all one letter), so most of the
update is spent on rows that change nothing.

Such a group's advantage is 0 only in exact arithmetic. TRL subtracts the group's mean reward computed in
float32, and the mean of 8 or 16 equal rewards of 0.2 (formatted and wrong: the commonest uniform group)
is not exactly 0.2, so every row of it gets one advantage of rounding size (~1e-8, ~1e-4 after division by
the group's std + 1e-4), and TRL's ``frac_reward_zero_std`` does not count it either (its ``isclose``
tolerance is 1e-8). Under ``skip`` and ``drop`` the trainer therefore sets the advantage of every row of a
group whose rewards did not vary to exactly 0 (``uniform_group_rows``, read off the rewards of the whole
generation batch, where every group is complete), for TRL's ``sum_then_normalize`` aggregation, where
that is the exact value. Four treatments:

- ``update``: TRL's: every row goes through the update, its advantages as TRL computed them.
- ``skip`` (default): rows with advantage exactly 0 are left out of the forward and backward passes.
  The loss's normaliser is untouched (each kept row carries its share, ``token_budget.slice_scale``), so
  the gradient is the same as ``update``'s (but for the rounding term above), for less compute. Where
  that cannot be guaranteed (beta > 0, a loss or input that is not a per-row sum, see
  ``token_budget.unsupported_reason``) every row is updated, as TRL does, and the reason is logged once.
- ``drop``: DAPO's dynamic sampling without the resampling (Yu et al., 2025, "DAPO", section 3.2):
  groups whose rewards do not vary are removed from the loss *and its normaliser*, so the informative
  groups are not diluted by the ones that carry nothing; the step's gradient is then an average over
  informative groups only. This changes the update (it is a learning lever, not a speed-up) and is
  defined for TRL's default ``dapo`` loss with one micro-batch per generation batch on one process,
  where the normaliser is known within the micro-batch.
- ``resample``: ``drop`` with DAPO's resampling: the uniform groups of a step are first replaced by varying
  groups of fresh training prompts, up to ``resample_rounds`` more generation calls
  (training/dynamic_sampling.py); any left are dropped as under ``drop``.
"""

from __future__ import annotations

from typing import Any

import torch

TREATMENTS = ("update", "skip", "drop", "resample")
DROP_LOSSES = ("dapo",)


def drop_unsupported_reason(loss_type: str, steps_per_generation: int, num_processes: int) -> str | None:
    """Why ``drop`` cannot be applied exactly as defined, or None.

    >>> drop_unsupported_reason("dapo", 1, 1) is None, drop_unsupported_reason("grpo", 1, 1)
    (True, "loss_type 'grpo' (drop renormalises the dapo loss only)")
    """
    if loss_type not in DROP_LOSSES:
        return f"loss_type {loss_type!r} (drop renormalises the dapo loss only)"
    if steps_per_generation != 1:
        return f"steps_per_generation {steps_per_generation} (the normaliser spans micro-batches not in view)"
    if num_processes != 1:
        return f"{num_processes} processes (the normaliser spans processes)"
    return None


def uniform_group_rows(rewards_per_func: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Per row of a generation batch (TRL's gathered ``rewards_per_func``: rows x reward functions, each
    group's ``num_generations`` rows consecutive): whether every completion of its group earned the same
    reward from every function (a function's "not scored", NaN, counts as one value).

    >>> rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [1.0, float("nan")],
    ...                         [1.0, float("nan")]])
    >>> uniform_group_rows(rewards, 2).tolist()
    [True, True, False, False, True, True]
    """
    grouped = torch.nan_to_num(rewards_per_func.float(), nan=float("inf"))
    grouped = grouped.view(-1, num_generations, rewards_per_func.shape[-1])
    same = (grouped == grouped[:, :1]).all(dim=2).all(dim=1)
    return same.repeat_interleave(num_generations)


def rows_with_advantage(inputs: dict[str, Any]) -> list[int]:
    """Rows whose advantage is not exactly zero.

    >>> rows_with_advantage({"advantages": torch.tensor([0.0, 1.2, -0.4, 0.0])})
    [1, 2]
    """
    advantages = inputs["advantages"]
    if advantages.dim() > 1:  # per-token advantages: a row counts when any token's is non-zero
        advantages = advantages.abs().sum(dim=-1)
    return [int(i) for i in torch.nonzero(advantages != 0).flatten().tolist()]


def rows_of_varying_groups(inputs: dict[str, Any], groups: list[list[int]]) -> list[int]:
    """Rows of the groups (rows sharing a prompt) in which some advantage is not zero: the groups whose
    rewards varied.

    >>> inputs = {"advantages": torch.tensor([0.0, 0.0, 0.5, -0.5])}
    >>> rows_of_varying_groups(inputs, [[0, 1], [2, 3]])
    [2, 3]
    """
    live = set(rows_with_advantage(inputs))
    return sorted(row for group in groups if live & set(group) for row in group)


def renormalised(inputs: dict[str, Any], rows: list[int], take_rows: Any) -> dict[str, Any]:
    """The inputs of ``rows`` with the dapo normaliser (``num_items_in_batch``) counted over them alone."""
    kept = take_rows(inputs, rows)
    mask = kept["completion_mask"]
    if "tool_mask" in kept:
        mask = mask * kept["tool_mask"]
    kept["num_items_in_batch"] = mask.sum().to(inputs["num_items_in_batch"].dtype
                                                if isinstance(inputs.get("num_items_in_batch"), torch.Tensor)
                                                else mask.dtype)
    return kept
