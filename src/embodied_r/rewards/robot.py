"""Robot-R1 rewards for the recipe table, imported lazily.

``open_l1`` is the paper's Open-End ablation reward (``clip(1 - L1, 0, 1)`` between the ``[x, y, z]`` in
the completion's ``<answer>`` and the next keypoint); the implementation and its tests live with the
rest of Robot-R1 in :mod:`embodied_r.sim.robot.rewards`. The import happens on the first call, so
loading the reward table never pulls in the simulator package.

>>> open_l1(["<think>.</think><answer>[0.1, 0.6, 0.2]</answer>"], answer=["[0.1, 0.6, 0.2]"],
...         answer_type=["open"])
[1.0]
"""

from __future__ import annotations

from typing import Any


def open_l1(completions: list[Any], **columns: Any) -> list[float | None]:
    """TRL reward ``open_l1``: see :func:`embodied_r.sim.robot.rewards.open_l1_reward`."""
    from embodied_r.sim.robot.rewards import open_l1_reward

    return open_l1_reward(completions, **columns)


__all__ = ["open_l1"]
