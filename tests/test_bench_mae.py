"""launch.bench.mae on its --quick setting: the models mode measures, and the scaling mode's
subprocesses run the sharded MAE step on 1 and 2 forced host devices with the same loss."""
import pytest

import vcbench  # noqa: F401  # XLA defaults before JAX starts.
from launch.bench import mae as bench_mae


@pytest.mark.slow  # A benchmark script's smoke run (~12 s): kept out of the default suite.
def test_quick_models_rows_have_positive_rates():
  run = bench_mae.QUICK
  rows = bench_mae.models_rows([bench_mae.QUICK_MODEL], [bench_mae.QUICK_SIZE], run,
                               log=lambda s: None)
  assert len(rows) == 1
  row = rows[0]
  assert row["model"] == bench_mae.QUICK_MODEL and row["input"] == bench_mae.QUICK_SIZE
  assert row["images_per_s"] > 0 and 0 < row["min"] <= row["images_per_s"] <= row["max"]
  assert row["compile_s"] > 0 and len(row["times"]) == run.repeats
  assert len(row["first_losses"]) == run.steps
  text = bench_mae.models_table(rows, run)
  assert f"| {bench_mae.QUICK_MODEL} | {bench_mae.QUICK_SIZE} | 1 x 32, 2 heads | 4 |" in text


@pytest.mark.slow  # Two fresh JAX processes (~1-2 min); tests/algos/test_mae.py already checks
def test_scaling_subprocesses_agree_on_the_first_loss():  # 4 devices train as 1 does.
  run = bench_mae.QUICK
  # Concurrent: the two fresh processes compile side by side; their timings are not checked.
  rows = bench_mae.scaling_rows([2, 1], bench_mae.QUICK_MODEL, bench_mae.QUICK_SIZE, run,
                                log=lambda s: None, concurrent=True)
  assert [r["devices"] for r in rows] == [1, 2]
  assert all(r["images_per_s"] > 0 for r in rows)
  assert rows[0]["speedup"] == 1.0 and rows[0]["loss_rel_diff"] == 0.0
  assert rows[1]["loss_rel_diff"] < 1e-4, [r["first_losses"] for r in rows]
  text = bench_mae.scaling_table(rows, run)
  assert "| 2 |" in text and "Max relative difference" in text
