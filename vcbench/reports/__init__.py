"""Reports: tables, plots and the leaderboard, built from result-store rows only.

Reports read the records of `vcbench.store` (and the benchmarks' metric definitions), never a
run's in-memory state or a simulator, so any table can be rebuilt from the records on disk.
Pictures of scenes, episodes and models are in `vcbench.viz`.
"""
