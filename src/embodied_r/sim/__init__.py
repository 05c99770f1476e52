"""Simulators that produce training and evaluation data with exact ground truth.

``sim.world`` renders procedural indoor rooms to egocentric videos with VSI-Bench-style questions;
``sim.robot`` records Meta-World demonstrations for Robot-R1 questions. Nothing is imported here, so
importing ``embodied_r.sim`` never starts MuJoCo.
"""
