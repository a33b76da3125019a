"""The fine-tuning curve: row 0 is the agent itself, then one row per evaluation."""
import jax
import numpy as np

from configs import nav as nav_configs
from launch.bench import nav_finetune
from vcbench.algos import runner
from vcbench.benchmarks import nav as nav_bench
from vcbench.benchmarks import robustnav as rn


def test_curve_of_a_tiny_agent(tmp_path):
  config = nav_configs.get_config("tiny_rgbd")
  config.workdir = str(tmp_path)
  trainer = nav_bench.make_trainer(config, log_fn=False)
  state = trainer.init(jax.random.key(0))
  # A "trained" agent: its untrained params saved as the best-on-val checkpoint.
  select = runner.SelectBest(lambda s: {"success": 0.0, "spl": 0.0},
                             lambda e: e["success"], directory=tmp_path / "tiny_rgbd" / "best")
  select(runner.Progress(done=1, trained=1, state=state, metrics={}))
  lines = []
  rows = nav_finetune.fine_tune_curve(config, updates=2, every=1, frames="augment",
                                      condition="defocus_blur", log=lines.append)
  assert [r["update"] for r in rows] == [0, 1, 2] and len(lines) == 3
  val = rn.corrupted(nav_bench.make_env(config, "val", config.val_episodes),
                     rn.Condition("defocus_blur", 5))
  agent = rn.evaluate(trainer, state.params, val, batch=config.eval_batch)
  assert rows[0]["sr"] == agent["success"] and rows[0]["length"] == agent["episode_length"]
  assert np.isfinite(rows[2]["train_entropy"]) and "train_success" not in rows[0]
