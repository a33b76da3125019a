"""A small BC, MAE or PPO run through `algos.runner`, checkpointing after every update, for
the kill -9 tests: they SIGKILL it at a random point and check that a re-run ends exactly where
an uninterrupted run does.

  python tests/faults/killable_training.py {bc,mae,ppo} WORKDIR   # writes WORKDIR/final.npz

`final.npz` holds every leaf of the final train state, every metric of every update and the
update the run resumed from (0: it started afresh).
"""
import os
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", d)
                for d in ("algos", "..")]

import jax  # noqa: E402
import numpy as np  # noqa: E402

from toy_nav_env import make_env  # noqa: E402
from vcbench.algos import bc  # noqa: E402
from vcbench.algos import mae  # noqa: E402
from vcbench.algos import ppo  # noqa: E402
from vcbench.algos import runner  # noqa: E402
from vcbench.data import frames  # noqa: E402
from vcbench.models.vit import ViT  # noqa: E402

UPDATES = int(os.environ.get("KT_UPDATES", 40))


def bc_trainer():
  c = bc.default_config()
  c.hidden, c.batch_size, c.epochs = (32, 32), 16, UPDATES
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 12)).astype(np.float32)
  return bc.make_train(c, x, np.tanh(x[:, :4]))


def mae_trainer():
  c = mae.default_config()
  c.encoder, c.img_size = "random_vit_ti", 16
  c.decoder_width, c.decoder_depth, c.decoder_heads = 16, 1, 2
  c.batch_size, c.warmup_steps, c.total_steps, c.chunk = 4, 2, UPDATES, 1
  rng = np.random.default_rng(0)
  ds = frames.dataset([rng.integers(0, 255, (16, 20, 20, 3), np.uint8)], [1.0], batch_size=4,
                      seed=0)
  return mae.make_train(c, ds, encoder=ViT(width=16, depth=1, heads=2, patch=8, img_size=16),
                        prefetch_threads=1)


def ppo_trainer():
  c = ppo.default_config()
  c.num_envs, c.rollout_len, c.num_updates = 8, 8, UPDATES
  c.update_epochs, c.num_minibatches, c.log_every = 1, 2, 0
  c.policy.hidden, c.policy.rnn_layers = 16, 1
  return ppo.make_train(c, make_env())


def _array(x):
  if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  return np.asarray(x)


def main(learner: str, workdir: str) -> None:
  trainer = {"bc": bc_trainer, "mae": mae_trainer, "ppo": ppo_trainer}[learner]()
  restored = []   # The runner calls back with trained == 0 right after a restore.
  state, metrics = runner.run(trainer, workdir, chunk=1, max_to_keep=2, callbacks=[
      lambda p: restored.append(p.done) if p.trained == 0 else None])
  leaves = {f"state/{i}": _array(x) for i, x in enumerate(jax.tree.leaves(state))}
  np.savez(os.path.join(workdir, "final.npz"), **leaves, resumed_from=max(restored, default=0),
           **{f"metrics/{k}": np.asarray(v) for k, v in metrics.items()})


if __name__ == "__main__":
  main(*sys.argv[1:])
