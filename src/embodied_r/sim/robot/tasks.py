"""Meta-World tasks used as stand-ins for Robot-R1's RLBench tasks, with the words used to describe them.

Robot-R1 trains on five RLBench tasks (pick_up_cup, push_button, put_rubbish_in_bin, phone_on_base,
take_lid_off_saucepan; paper §4.1). RLBench needs CoppeliaSim, which is not installable offline, so each
is mapped to the Meta-World task whose motion is closest (its task list). Any other Meta-World
v3 task with a scripted expert also works, with generic object names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskSpec:
    """How one Meta-World task is described in questions.

    ``object_names`` name the positions that ``_get_pos_objects`` returns (3 values each), in order;
    ``goal_name`` names ``_target_pos``. ``rlbench_analogue`` records which paper task it stands in for.
    """

    name: str
    description: str
    object_names: tuple[str, ...]
    goal_name: str
    rlbench_analogue: str = ""


# The default five mirror the paper's training tasks one to one.
_SPECS: tuple[TaskSpec, ...] = (
    TaskSpec("pick-place-v3", "pick up the puck and move it to the goal position", ("puck",),
             "goal position", "pick_up_cup"),
    TaskSpec("button-press-topdown-v3", "press the button down from the top", ("button top",),
             "pressed button position", "push_button"),
    TaskSpec("bin-picking-v3", "pick up the cube and drop it into the target bin", ("cube",),
             "target bin", "put_rubbish_in_bin"),
    TaskSpec("shelf-place-v3", "pick up the block and place it on the shelf", ("block",),
             "shelf spot", "phone_on_base"),
    TaskSpec("disassemble-v3", "grasp the ring's handle and lift the ring off the peg", ("ring handle",),
             "lift target", "take_lid_off_saucepan"),
    # Extra tasks with hand-written names; the first two are the default held-out ("Out") tasks.
    TaskSpec("assembly-v3", "grasp the ring's handle and put the ring onto the peg", ("ring handle",),
             "peg"),
    TaskSpec("box-close-v3", "pick up the lid and put it on the box", ("lid",), "box"),
    TaskSpec("coffee-pull-v3", "pull the mug back from the coffee machine", ("mug",), "mug target"),
    TaskSpec("peg-insert-side-v3", "pick up the peg and insert it sideways into the hole", ("peg",),
             "hole"),
)
TASK_SPECS: dict[str, TaskSpec] = {spec.name: spec for spec in _SPECS}
DEFAULT_TASKS: tuple[str, ...] = tuple(spec.name for spec in _SPECS[:5])
DEFAULT_HELD_OUT_TASKS: tuple[str, ...] = tuple(spec.name for spec in _SPECS[5:7])


class UnknownTaskError(ValueError):
    """A task name that Meta-World does not provide (with a scripted expert)."""


def available_tasks() -> list[str]:
    """Every Meta-World v3 task that has a scripted expert policy (imports metaworld)."""
    from metaworld.policies import ENV_POLICY_MAP

    return sorted(ENV_POLICY_MAP)


def get_task_spec(name: str) -> TaskSpec:
    """The spec of ``name``; tasks without a hand-written spec get generic words.

    >>> get_task_spec("pick-place-v3").object_names
    ('puck',)
    """
    if name in TASK_SPECS:
        return TASK_SPECS[name]
    known = available_tasks()
    if name not in known:
        raise UnknownTaskError(
            f"unknown Meta-World task {name!r}; choose from: {', '.join(known)}"
        )
    words = name.removesuffix("-v3").replace("-", " ")
    return TaskSpec(name, f"complete the '{words}' task", ("object", "second object"), "goal position")
