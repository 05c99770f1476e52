"""Robot-R1 (Kim et al., 2025): GRPO on keypoint, current-state and movement questions built from
robot demonstrations (here Meta-World's scripted experts, simulated by ``embodied_r.sim.robot``).

- ``demos``: expert episodes with per-step end-effector, gripper and simulator state;
- ``keypoints`` and ``questions``: the question steps and the multiple-choice/open questions;
- ``prompts``: the scene as text or as the camera image, and the ``[[X]]`` answer form;
- ``rewards``: the open-ended L1 reward; ``bench``: the open-ended judged bench; ``grading_probe``:
  whether a judge can grade it; ``pipeline``: ``embodied-r synth robot`` end to end;
- the task object is ``embodied_r.methods.ROBOT_R1``.

Nothing is imported here, so importing the package never starts MuJoCo.
"""
