"""Robustness evaluation (RobustNav): corruptions of what an agent sees and of how it moves.

  visual.py    the visual corruptions as pure JAX image functions, and their registry
               (imageops.py holds the image-processing primitives they are built from)
  dynamics.py  the dynamics corruptions
  factors.py   the robustness factors an evaluation sweeps over
  augment.py   training-time image augmentation (the "Data Aug" baseline)
"""
