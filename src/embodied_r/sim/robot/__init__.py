"""Robot-R1 data from Meta-World: expert demonstrations (``demos``), keypoints, multiple-choice
questions, text/image prompts (``scene_text``), the open-ended L1 reward (``rewards``) and an open-ended
judge set (``bench``); ``pipeline`` ties them together for ``embodied-r synth robot``. Nothing is
imported here, so importing the package never starts MuJoCo."""
