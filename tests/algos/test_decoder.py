"""The G-VUE decoder trainer: its optimiser against PyTorch's, and that it learns."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from vcbench.algos import decoder, runner


def test_schedule_warms_up_over_two_percent_then_decays_linearly_to_zero():
  s = decoder.schedule(1e-4, 1000, 0.02)
  assert float(s(0)) == 0.0
  assert float(s(10)) == pytest.approx(5e-5)
  assert float(s(20)) == pytest.approx(1e-4)
  assert float(s(510)) == pytest.approx(5e-5, rel=1e-5)
  assert float(s(1000)) == pytest.approx(0.0, abs=1e-12)


def test_optimizer_matches_torch_adamw_with_clipping_and_the_schedule():
  torch = pytest.importorskip("torch")
  config = decoder.default_config()
  config.lr = 1e-2   # Large enough that a wrong decay or clip shows.
  total = 50
  rng = np.random.default_rng(0)
  w0 = rng.normal(size=(4, 3)).astype(np.float32)
  targets = rng.normal(size=(total, 4, 3)).astype(np.float32) * 5   # Gradients above norm 1.

  tx = decoder.optimizer(config, total)
  w, opt_state = jnp.asarray(w0), tx.init(jnp.asarray(w0))
  for t in range(total):
    g = jax.grad(lambda w: jnp.sum((w - targets[t]) ** 2))(w)
    updates, opt_state = tx.update(g, opt_state, w)
    w = optax.apply_updates(w, updates)

  tw = torch.nn.Parameter(torch.tensor(w0))
  opt = torch.optim.AdamW([tw], lr=config.lr, betas=(0.9, 0.99), weight_decay=1e-2)
  warm = max(round(0.02 * total), 1)
  lam = lambda t: t / warm if t < warm else max(0.0, (total - t) / (total - warm))
  sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
  for t in range(total):
    opt.zero_grad()
    ((tw - torch.tensor(targets[t])) ** 2).sum().backward()
    torch.nn.utils.clip_grad_norm_([tw], 1.0)
    opt.step()
    sched.step()
  np.testing.assert_allclose(np.asarray(w), tw.detach().numpy(), atol=1e-5)


class _Probe(nn.Module):
  @nn.compact
  def __call__(self, x, train: bool):
    x = nn.Dropout(0.1, deterministic=not train)(nn.relu(nn.Dense(32)(x)))
    return nn.Dense(2)(x)


def _loss(model, variables, batch, key):
  logits = model.apply(variables, batch["x"], train=True, rngs={"dropout": key})
  return optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean(), {}


def test_a_probe_learns_a_separable_task_and_resumes_bit_for_bit(tmp_path):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(256, 8)).astype(np.float32)
  y = (x[:, 0] + x[:, 1] > 0).astype(np.int32)
  config = decoder.default_config()
  config.lr, config.epochs, config.batch_size = 3e-2, 20, 32
  make = lambda: decoder.make_train(config, _Probe(), {"x": x[:2]}, _loss, {"x": x, "y": y})
  key = jax.random.key(0)
  state, metrics = runner.run(make(), None, 20, key=key)
  logits = decoder.predict(lambda v, b: _Probe().apply(v, b["x"], train=False),
                           state.variables(), {"x": x}, batch_size=60)
  assert logits.shape == (256, 2)
  assert float(np.mean(np.argmax(logits, -1) == y)) > 0.95
  assert metrics["loss"][-1] < 0.5 * metrics["loss"][0]
  # Killed after 10 epochs and resumed -> the same parameters as one run.
  runner.run(make(), tmp_path / "r", 10, key=key, stop_at=10)
  resumed, _ = runner.run(make(), tmp_path / "r", 10, key=key)
  whole, _ = runner.run(make(), None, 10, key=key)
  jax.tree.map(np.testing.assert_array_equal, resumed.params, whole.params)
