"""Does PPO fine-tuning keep a trained navigation agent? Validation SR and stopping behaviour
every few updates of RobustNav's fine-tuning (`robustnav.finetune_trainer` + `init_from`).

  python -m launch.bench.nav_finetune --config configs/nav.py:pointnav_rgb \\
      --config.workdir=/work/runs/ppo_diag2 --config.ppo.num_updates=500 \\
      --updates 100 --every 10 --frames augment [--condition defocus_blur] [--lr 2.5e-4]

The agent is the config's trained run (its best-on-val checkpoint under `workdir`). Fine-tuning
runs in its training apartments on clean, augmented (`--frames augment`) or corrupted
(`--condition`) frames for `--updates` PPO updates, the lr annealed from `--lr` to 0 as
RobustNav's Table 3 does; after every `--every` updates the params are evaluated on the val
episodes (clean, or under the condition). Each row: SR, SPL, episode length, RobustNav's stop
failures (END out of range, % of episodes; steps in range without END, % of those steps) and
the training metrics of those updates (success, entropy, KL, value loss). Row 0 is the agent
itself evaluated through the fine-tuning trainer's `init_from` state.
"""
from __future__ import annotations

import json

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import flags
from ml_collections import config_flags

from launch import cli
from launch.bench import timing

_CONFIG = config_flags.DEFINE_config_file("config", None, "A configs/nav.py variant.")
_UPDATES = flags.DEFINE_integer("updates", 100, "PPO updates of fine-tuning.")
_EVERY = flags.DEFINE_integer("every", 10, "Updates between evaluations.")
_FRAMES = flags.DEFINE_enum("frames", "clean", ["clean", "augment"], "Training frames.")
_CONDITION = flags.DEFINE_string("condition", None, "A RobustNav condition name (severity 5).")
_LR = flags.DEFINE_float("lr", 2.5e-4, "Peak lr (annealed to 0).")
_SEED = flags.DEFINE_integer("seed", 0, "Fine-tuning seed (envs, actions).")


def fine_tune_curve(nav_config, updates: int, every: int, frames: str = "clean",
                    condition: str | None = None, lr: float = 2.5e-4, seed: int = 0,
                    log=print) -> list[dict]:
  """The rows described in the module docstring, one per evaluation."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from vcbench.benchmarks import robustnav as rn  # pylint: disable=g-import-not-at-top
  from vcbench.robustness import augment  # pylint: disable=g-import-not-at-top

  agent = rn.Agent(nav_config)
  train_env, val = agent.env("train"), agent.env("val", nav_config.val_episodes)
  cond = rn.Condition.parse(condition, 5) if condition else None
  if cond is not None:
    train_env, val = rn.corrupted(train_env, cond, seed), rn.corrupted(val, cond, seed)
  if frames == "augment":
    train_env = augment.augmented(train_env, seed)
  trainer = rn.finetune_trainer(nav_config, train_env,
                                updates * trainer_steps(nav_config), lr)
  state = trainer.init_from(jax.random.key(seed), agent.params)
  rows = []

  def record(update, metrics):
    s = rn.evaluate(agent.trainer, state.params, val, batch=nav_config.eval_batch)
    row = {"update": update, "sr": s["success"], "spl": s["spl"],
           "length": s["episode_length"], "end_out_of_range": s["stop_failure"],
           "in_range_without_end": s["stop_failure_neg"]}
    row.update({f"train_{k}": float(np.nanmean(np.asarray(metrics[k])))
                for k in ("success", "entropy", "approx_kl", "value_loss")} if metrics else {})
    rows.append(row)
    log(json.dumps({k: round(v, 4) for k, v in row.items()}))

  record(0, None)
  for done in range(every, updates + 1, every):
    state, metrics = trainer.train_chunk(state, every)
    record(done, metrics)
  return rows


def trainer_steps(nav_config) -> int:
  """Env steps per PPO update of the config's learner."""
  return nav_config.ppo.num_envs * nav_config.ppo.rollout_len


def main() -> None:
  fine_tune_curve(_CONFIG.value, _UPDATES.value, _EVERY.value, _FRAMES.value, _CONDITION.value,
                  _LR.value, _SEED.value)


if __name__ == "__main__":
  cli.run(timing.main_of(main))
