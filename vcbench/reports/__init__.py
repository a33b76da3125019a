"""Results: the append-only result store, and the tables, plots and leaderboard built from it.

Reports are built only from the store (`vcbench.reports.store`), never from a run's in-memory
state, so any table can be rebuilt from the records on disk.
"""
