"""Meta-World expert demonstrations: per-step end-effector position, gripper state and simulator state.

Robot-R1 builds its questions from expert demonstrations (paper §4.1: RLBench's scripted demos). Here
each episode runs a Meta-World scripted expert (``metaworld.policies``) and records, per step, what the
questions and keypoint rule need. The full MuJoCo state is recorded too, so images are rendered *after*
the episode only for the frames that get questions: rendering costs ~50x a simulation step on a CPU,
and only one frame in ten is asked about (paper: frame interval 10). An expert that does not solve its
task within ``max_steps`` yields an episode with ``success=False``; callers discard and count it.
"""

from __future__ import annotations

import io
import logging
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embodied_r.sim.robot.camera import CameraPose, UprightRenderer, ensure_gl_backend
from embodied_r.sim.robot.tasks import TaskSpec, get_task_spec

log = logging.getLogger(__name__)

ARM_JOINTS = tuple(f"right_j{i}" for i in range(7))
_GRIPPER_BODIES = ("hand", "rightclaw", "leftclaw", "rightpad", "leftpad")
# Meta-World normalises the finger distance by 0.1 m (SawyerXYZEnv._get_curr_obs_combined_no_goal).
MAX_FINGER_OPENING_M = 0.1
_ARRAY_FIELDS = ("ee_pos", "gripper_closed", "gripper_opening", "joint_vel", "object_pos", "goal_pos",
                 "actions", "expert_target", "qpos", "qvel", "mocap_pos", "mocap_quat")


@dataclass
class Episode:
    """One expert rollout. Arrays indexed by step have ``n_steps + 1`` rows (state before each action
    and after the last); ``actions`` has ``n_steps`` rows."""

    task: str
    index: int
    seed: int
    success: bool
    ee_pos: np.ndarray            # (T+1, 3) end-effector (hand) xyz, metres
    gripper_closed: np.ndarray    # (T+1,) bool: last commanded gripper state
    gripper_opening: np.ndarray   # (T+1,) finger distance / 0.1 m, in [0, 1]
    joint_vel: np.ndarray         # (T+1, 7) arm joint velocities, rad/s
    object_pos: np.ndarray        # (T+1, K, 3) task object positions
    goal_pos: np.ndarray          # (3,)
    actions: np.ndarray           # (T, 4)
    expert_target: np.ndarray     # (T+1, 3) position the scripted expert heads for (NaN if unknown)
    qpos: np.ndarray
    qvel: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return int(self.actions.shape[0])

    @property
    def key(self) -> str:
        return episode_key(self.task, self.index)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the arrays as one compressed ``.npz``, atomically (a killed run leaves no torn file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **{name: getattr(self, name) for name in _ARRAY_FIELDS},
                            task=self.task, index=self.index, seed=self.seed, success=self.success)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(buffer.getvalue())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Episode:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: episode file not found; rerun `embodied-r synth robot`")
        with np.load(path) as data:
            missing = [name for name in _ARRAY_FIELDS if name not in data]
            if missing:
                raise ValueError(f"{path}: episode file lacks arrays {missing}; regenerate it")
            arrays = {name: data[name] for name in _ARRAY_FIELDS}
            return cls(task=str(data["task"]), index=int(data["index"]), seed=int(data["seed"]),
                       success=bool(data["success"]), **arrays)


def episode_key(task: str, index: int) -> str:
    return f"{task}/ep{index:03d}"


def episode_seed(base_seed: int, task: str, index: int) -> int:
    """A per-episode seed that does not change when tasks are added or reordered."""
    return int(np.random.SeedSequence([base_seed, zlib.crc32(task.encode()), index]).generate_state(1)[0])


# ---------------------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------------------


def make_env(task: str) -> tuple[Any, Any, TaskSpec]:
    """A goal-observable Meta-World env for ``task`` and its scripted expert policy."""
    spec = get_task_spec(task)  # raises UnknownTaskError with the list of valid names
    ensure_gl_backend()  # must precede the first mujoco import (metaworld imports it)
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE
    from metaworld.policies import ENV_POLICY_MAP

    env = ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[f"{task}-goal-observable"](seed=0)
    return env, ENV_POLICY_MAP[task](), spec


def reset_env(env: Any, seed: int) -> np.ndarray:
    """Reset with object/goal positions drawn from ``seed`` (Meta-World's own randomisation space)."""
    env.seeded_rand_vec = True
    env.seed(seed)
    env._freeze_rand_vec = False
    obs, _ = env.reset()
    env._freeze_rand_vec = True
    # Meta-World's reset leaves derived quantities (body positions) from *before* the objects were
    # moved, so the first observation reports the previous episode's object positions. Recompute.
    import mujoco

    mujoco.mj_forward(env.model, env.data)
    current = env._get_curr_obs_combined_no_goal()
    env._prev_obs = current.copy()
    obs = np.array(obs, dtype=np.float64)
    obs[:18] = current
    obs[18:36] = current
    return obs


def _arm_dof_indices(model: Any) -> np.ndarray:
    return np.array([model.jnt_dofadr[model.joint(name).id] for name in ARM_JOINTS])


def restore_state(env: Any, episode: Episode, step: int) -> None:
    """Put the simulator back into the recorded state of ``step`` (positions drive rendering)."""
    import mujoco

    env.data.qpos[:] = episode.qpos[step]
    env.data.qvel[:] = episode.qvel[step]
    env.data.mocap_pos[:] = episode.mocap_pos[step]
    env.data.mocap_quat[:] = episode.mocap_quat[step]
    mujoco.mj_forward(env.model, env.data)


# ---------------------------------------------------------------------------------------------------
# Rollout
# ---------------------------------------------------------------------------------------------------


def run_expert(env: Any, policy: Any, task: str, index: int, seed: int, max_steps: int = 300,
               settle_steps: int = 0, render_every_step: UprightRenderer | None = None,
               ) -> tuple[Episode, list[np.ndarray]]:
    """Roll the scripted expert until the task reports success (plus ``settle_steps``) or ``max_steps``.

    ``render_every_step`` renders every frame during the rollout: the naive baseline that the speed
    benchmark compares against; normal use renders afterwards with :func:`render_frames`.
    """
    obs = reset_env(env, seed)
    arm = _arm_dof_indices(env.model)
    n_obj = len(env._get_pos_objects()) // 3
    rows: dict[str, list[Any]] = {name: [] for name in ("ee", "open", "jv", "obj", "target", "qpos",
                                                         "qvel", "mpos", "mquat")}
    actions: list[np.ndarray] = []
    frames: list[np.ndarray] = []

    def record(observation: np.ndarray) -> None:
        rows["ee"].append(observation[:3].copy())
        rows["open"].append(float(observation[3]))
        rows["jv"].append(env.data.qvel[arm].copy())
        # copy: _get_pos_objects returns a live view into MjData for most tasks
        rows["obj"].append(np.array(env._get_pos_objects(), dtype=float, copy=True).reshape(n_obj, 3))
        rows["target"].append(expert_target(policy, observation))
        rows["qpos"].append(env.data.qpos.copy())
        rows["qvel"].append(env.data.qvel.copy())
        rows["mpos"].append(env.data.mocap_pos[0].copy())
        rows["mquat"].append(env.data.mocap_quat[0].copy())
        if render_every_step is not None:
            frames.append(render_every_step.render(env.data)[0])

    record(obs)
    success, success_at = False, None
    for step in range(max_steps):
        action = np.clip(np.asarray(policy.get_action(obs), dtype=float), -1.0, 1.0)
        obs, _reward, _terminated, truncated, info = env.step(action)
        actions.append(action)
        record(obs)
        if info.get("success") and success_at is None:
            success, success_at = True, step
        if success_at is not None and step - success_at >= settle_steps:
            break
        if truncated:
            break
    acts = np.array(actions).reshape(-1, 4)
    # Gripper state = last command (Meta-World: effort > 0 closes). Step 0 takes the first command so
    # that an expert that starts by closing does not create a keypoint at step 1.
    commanded = acts[:, 3] > 0
    closed = np.concatenate([commanded[:1], commanded]) if len(commanded) else np.zeros(1, dtype=bool)
    episode = Episode(
        task=task, index=index, seed=seed, success=success,
        ee_pos=np.array(rows["ee"]), gripper_closed=closed, gripper_opening=np.array(rows["open"]),
        joint_vel=np.array(rows["jv"]), object_pos=np.array(rows["obj"]),
        goal_pos=np.asarray(env._target_pos, dtype=float).copy(), actions=acts,
        expert_target=np.array(rows["target"]),
        qpos=np.array(rows["qpos"]), qvel=np.array(rows["qvel"]),
        mocap_pos=np.array(rows["mpos"]), mocap_quat=np.array(rows["mquat"]),
    )
    return episode, frames


def expert_target(policy: Any, obs: np.ndarray) -> np.ndarray:
    """The sub-goal position the scripted expert is steering to (its ``_desired_pos`` phase logic);
    NaNs for the few policies that do not expose it."""
    desired = getattr(policy, "_desired_pos", None)
    parse = getattr(policy, "_parse_obs", None)
    if desired is None or parse is None:
        return np.full(3, np.nan)
    return np.asarray(desired(parse(obs)), dtype=float).reshape(3)


def render_frames(env: Any, renderer: UprightRenderer, episode: Episode, steps: list[int],
                  ) -> tuple[dict[int, np.ndarray], CameraPose | None]:
    """Re-render the recorded states of ``steps`` (call before the env is reset for another episode:
    goal markers are model-level and change on reset)."""
    images: dict[int, np.ndarray] = {}
    pose = None
    for step in steps:
        restore_state(env, episode, step)
        images[step], pose = renderer.render(env.data)
    return images, pose


# ---------------------------------------------------------------------------------------------------
# Scene facts for the prompt (Robot-R1's metadata M, rebuilt for Meta-World; paper §3.2)
# ---------------------------------------------------------------------------------------------------


def scene_facts(env: Any, pose: CameraPose) -> dict[str, Any]:
    """Table-surface centre, gripper size and axis words, measured from the model, not typed in."""
    model, data = env.model, env.data
    table = model.body("tablelink").id
    tops = [(data.geom_xpos[g][2] + model.geom_size[g][2], g) for g in range(model.ngeom)
            if model.geom_bodyid[g] == table and model.geom_type[g] == 6]  # 6 = mjGEOM_BOX
    top_z, table_geom = max(tops)
    centre = [float(data.geom_xpos[table_geom][0]), float(data.geom_xpos[table_geom][1]), float(top_z)]
    corners = []
    for name in _GRIPPER_BODIES:
        body = model.body(name).id
        for g in range(model.ngeom):
            if model.geom_bodyid[g] != body or model.geom_type[g] != 6:
                continue
            rot = data.geom_xmat[g].reshape(3, 3)
            for signs in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3):
                corners.append(data.geom_xpos[g] + rot @ (signs * model.geom_size[g]))
    extent = np.ptp(np.array(corners), axis=0)
    words = pose.axis_words()
    return {
        "table_centre": [round(v, 3) for v in centre],
        "gripper_size": [round(float(v), 3) for v in extent],
        "max_finger_opening": MAX_FINGER_OPENING_M,
        "axis_words": {str(axis): list(pair) for axis, pair in words.items()},
        "camera_rotated_180": pose.rotated_180,
    }
