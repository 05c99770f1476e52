"""Embodied-R (Zhao et al., 2025): a large VLM describes the key frames of an egocentric video, a small
LM reasons over that text and is trained with GRPO.

- ``keyframes``: video decoding by timestamp and key-frame selection (ORB + RANSAC overlap);
- ``perception``: the VLM's frame descriptions (prompts, backends, parsing, cache, runner);
- ``prompts``: the reasoner's prompt templates (``official-v1``, ``structured-v1``, ``compact-v1``);
- ``consistency``: the logical-consistency reward and its judge (the generic format and accuracy rewards are
  ``embodied_r.methods.format`` and ``.accuracy``; the three-stage weights, ``embodied_r.training.schedule``);
- ``toy``: smoke-test rows (``train_data: toy:N``); ``evidence``: the quotes a format warm-up think opens with;
- ``cascade``: the deployed pipeline on one video (key frames -> perception -> reasoner), ``embodied-r answer``;
- ``text_rules`` (with ``position_rules``), ``baseline_prompts``: its parts of evaluation's text-rule, blind and
  direct baselines; ``solver``: the exact solver over the prompt text;
- the task object (how rows are built, recognised, rewarded and scored) is ``embodied_r.methods.EMBODIED_R``.

Nothing is imported here; import the submodule you need.
"""
