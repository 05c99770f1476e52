"""Synthetic egocentric worlds: procedural rooms rendered with MuJoCo, VSI-Bench-style questions with
exact answers, and oracle perception text.

Modules: ``categories`` (furniture vocabulary), ``geometry`` (boxes, distances, angles), ``scenes``
(meta_info schema), ``layout`` (procedural rooms), ``camera_path`` (egocentric walks), ``mjcf`` and
``render`` (MuJoCo), ``questions``/``routes``/``video_questions`` (QA), ``oracle`` (perception text),
``oracle_backend`` (that text as the ``oracle`` perception backend), ``dataset`` (the whole pipeline behind
``embodied-r synth world``). Nothing heavy is imported here.
"""
