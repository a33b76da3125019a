"""Hand-checkable CortexBench store rows shared by the benchmark and report tests.

pvr -> task key -> {seed: score}:
  metaworld: A = mean(85, 65) = 75, per-seed (70, 80) -> se 5;  B = 75, se 5 (ties A);
             C = mean(50, 45) = 47.5, per-seed (50, 45) -> se 2.5.
  dmc (one task, one seed): B 40 > A 30 > C 20, se NaN.
"""
from vcbench.store import config_hash

H = config_hash({"protocol": "quick"})

SCORES = {
    "A": {"metaworld/assembly": {0: 80, 1: 90}, "metaworld/hammer": {0: 60, 1: 70},
          "dmc/walker-walk": {0: 30}},
    "B": {"metaworld/assembly": {0: 70, 1: 80}, "metaworld/hammer": {0: 70, 1: 80},
          "dmc/walker-walk": {0: 40}},
    "C": {"metaworld/assembly": {0: 50, 1: 50}, "metaworld/hammer": {0: 50, 1: 40},
          "dmc/walker-walk": {0: 20}},
}


def row(pvr, task, seed, score, **kw):
  r = dict(benchmark="cortexbench", task=task, pvr=pvr, adaptation="frozen", seed=seed,
           corruption="none", severity=0, config_hash=H, code_version="test",
           time="2026-01-01T00:00:00+00:00", score=score)
  r.update(kw)
  return r


def rows(scores=SCORES):
  return [row(pvr, task, seed, s) for pvr, tasks in scores.items()
          for task, seeds in tasks.items() for seed, s in seeds.items()]
