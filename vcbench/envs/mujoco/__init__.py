"""MuJoCo-based simulators: MetaWorld, the DeepMind Control Suite (and its experts), the
Colosseum's scene; TriFinger (pybullet) lives in `vcbench/envs/trifinger.py`."""
