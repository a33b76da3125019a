"""Benchmarks: task lists, protocols and metrics (CortexBench, G-VUE, RobustNav, Colosseum)."""
