"""Meta-World as Robot-R1's simulator: the tasks used and their words (``tasks``), and upright camera
images with the projection of world points (``camera``). The method built on it (demonstrations,
keypoints, questions, prompts, rewards, the open-ended bench) is ``embodied_r.methods.robot_r1``.
Nothing is imported here, so importing the package never starts MuJoCo."""
