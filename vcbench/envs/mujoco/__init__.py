"""MuJoCo-based simulators (MetaWorld; DMC, Adroit and TriFinger later)."""
