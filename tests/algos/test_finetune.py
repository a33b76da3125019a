"""End-to-end BC fine-tuning: windows, gradients and the lr split, learning, frozen parity, fit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.algos import bc, finetune
from vcbench.benchmarks import bc_protocol
from vcbench.data.demos import Demos
from vcbench.models import embedder as embedder_lib
from vcbench.models import remat, zoo
from vcbench.models.preprocess import Preprocess
from vcbench.models.vit import ViT

SIZE, HISTORY, PROPRIO = 32, 3, 2
LENGTHS = (20, 12, 16)


@pytest.fixture(scope="module")
def encoder():
  """A one-block ViT (a 2 x 2 patch grid): a zoo.Encoder small enough to train in seconds."""
  module = ViT(width=32, depth=1, heads=2, patch=16, img_size=SIZE)
  variables = jax.jit(module.init)(jax.random.key(7), jnp.zeros((1, SIZE, SIZE, 3)))
  return zoo.Encoder(module, variables, Preprocess(SIZE, SIZE, "bilinear"))


@pytest.fixture(scope="module")
def data():
  """Episodes of noisy single-colour frames whose action is a function of the colour."""
  rng = np.random.default_rng(0)
  n = sum(LENGTHS)
  colour = rng.integers(0, 256, (n, 3))
  noise = rng.integers(-20, 21, (n, SIZE, SIZE, 3))
  frames = np.clip(colour[:, None, None] + noise, 0, 255).astype(np.uint8)
  actions = np.tanh(np.stack([colour[:, 0] - colour[:, 1], colour[:, 2] - 128.0], -1) / 64)
  return {"frames": frames, "episode": np.repeat(np.arange(len(LENGTHS)), LENGTHS),
          "proprio": rng.normal(size=(n, PROPRIO)).astype(np.float32),
          "actions": actions.astype(np.float32)}


def config(**kw):
  c = finetune.default_config()
  c.history, c.hidden, c.batch_size = HISTORY, (32, 32), 16
  c.update(kw)
  return c


def make(encoder, data, **kw):
  return finetune.make_train(config(**kw), encoder, jnp.asarray(data["frames"]),
                             data["episode"], jnp.asarray(data["proprio"]), data["actions"])


def leaves(tree):
  return [np.asarray(x) for x in jax.tree.leaves(tree)]


def assert_trees_equal(a, b):
  jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


def test_history_indices_are_history_windows():
  episode = np.repeat(np.arange(3), [4, 1, 3])
  emb = np.arange(8)[:, None] * np.ones((1, 2))
  idx = bc.history_indices(episode, 3)
  np.testing.assert_array_equal(idx[:, :1].ravel(), [0, 0, 0, 1, 4, 5, 5, 5])
  np.testing.assert_array_equal(idx[-1], [5, 6, 7])
  np.testing.assert_array_equal(emb[idx], bc.history_windows(emb, episode, 3))


@pytest.fixture(scope="module")
def frozen_emb(encoder, data):
  """The frames' embeddings by the frozen encoder (the frozen BC path's cache)."""
  return embedder_lib.embed_all(embedder_lib.of_encoder("tiny", encoder), data["frames"])


def test_features_equal_the_frozen_features(encoder, data, frozen_emb):
  want = bc.features(frozen_emb, data["episode"], data["proprio"], HISTORY)
  windows = jnp.asarray(bc.history_indices(data["episode"], HISTORY))
  embed = embedder_lib.of_encoder("tiny", encoder).fn
  got = finetune.features(embed, encoder.params, jnp.asarray(data["frames"]), windows,
                          jnp.asarray(data["proprio"]), jnp.arange(len(want)))
  # Not bit-exact: XLA's encoder numerics depend on the batch shape.
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_chunked_encoder_passes_give_the_same_embeddings_and_gradients(encoder, data):
  embed = lambda p, x: embedder_lib.of_encoder("tiny", encoder).fn(p, {"rgb": x})
  images = jnp.asarray(data["frames"][:20])      # Chunks of 8: 24 frames with the padding.

  @jax.jit
  def both(params):
    loss = lambda p, chunk: jnp.sum(jnp.sin(remat.apply_in_chunks(embed, p, images, chunk)))
    return [jax.value_and_grad(loss)(params, chunk) for chunk in (None, 8)]

  (whole, g_whole), (chunked, g_chunked) = both(encoder.params)
  np.testing.assert_allclose(chunked, whole, rtol=1e-5)
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5),
               g_chunked, g_whole)
  per_frame = jax.jit(lambda p: remat.apply_in_chunks(embed, p, images, 8))(encoder.params)
  np.testing.assert_allclose(per_frame, embed(encoder.params, images), rtol=1e-5, atol=1e-5)


POLICY_LR, ENCODER_LR, STEPS = 1e-2, 1e-4, 40


@pytest.fixture(scope="module")
def stepped(encoder, data):
  """Full-batch training (one step an epoch), one compiled epoch at a time: the state before,
  after one step, after STEPS steps, and the losses."""
  trainer = make(encoder, data, lr=POLICY_LR, encoder_lr=ENCODER_LR, batch_size=sum(LENGTHS))
  state = trainer.init(jax.random.key(0))
  before = jax.device_get((state.encoder, state.policy.params))
  after_one, losses = None, []
  for _ in range(STEPS):
    state, metrics = trainer.train_chunk(state, 1)
    losses.append(float(metrics["loss"][0]))
    after_one = after_one or jax.device_get((state.encoder, state.policy.params))
  return before, after_one, np.array(losses), int(state.step)


def test_gradients_reach_the_encoder_at_its_own_lr(stepped):
  # One Adam step moves every parameter by lr * g / (|g| + eps), i.e. by ~lr (bias-corrected
  # moments of a single gradient), so the update sizes show which lr each part got.
  before, after, _, _ = stepped
  for lr, new, old in zip((ENCODER_LR, POLICY_LR), after, before):
    step = np.concatenate([np.abs(a - b).ravel() for a, b in zip(leaves(new), leaves(old))])
    assert step.max() <= lr * 1.01, (lr, step.max())
    assert np.median(step[step > 0]) == pytest.approx(lr, rel=0.02)
    assert np.mean(step > 0) > 0.9      # Gradients reach (almost) every parameter.


def test_loss_falls(stepped):
  _, _, losses, steps = stepped
  assert steps == STEPS and np.all(np.isfinite(losses))
  assert losses[-5:].mean() < 0.3 * losses[:3].mean(), losses


def test_encoder_lr_zero_is_bc_on_frozen_embeddings(encoder, data, frozen_emb):
  trainer = make(encoder, data, encoder_lr=0.0)
  state, metrics = trainer.train_chunk(trainer.init(jax.random.key(0)), 3)
  losses = metrics["loss"]
  assert_trees_equal(state.encoder, encoder.params)
  x = bc.features(frozen_emb, data["episode"], data["proprio"], HISTORY)
  reference = bc.make_train(config(), x, data["actions"])
  want, want_metrics = reference.train_chunk(reference.init(jax.random.key(0)), 3)
  want_losses = want_metrics["loss"]
  # Same init, permutations and updates; the embeddings agree to XLA's batch-shape-dependent
  # rounding (on CPU at these shapes the runs are bit-identical).
  np.testing.assert_allclose(losses, want_losses, rtol=1e-5, atol=1e-6)
  for got, ref in zip(leaves((state.policy.params, state.policy.batch_stats)),
                      leaves((want.params, want.batch_stats))):
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
  assert int(state.step) == int(want.step)


def test_embedder_of_carries_the_params_not_in_its_fingerprint(encoder):
  moved = jax.tree.map(lambda x: x + 0.01, encoder.params)
  a, b = (finetune.embedder_of(encoder, "tiny", p) for p in (encoder.params, moved))
  assert a.fingerprint == b.fingerprint and a.dim == 32
  obs = {"rgb": np.random.default_rng(1).integers(0, 256, (2, SIZE, SIZE, 3), np.uint8)}
  fn = jax.jit(a.fn)     # One function: the weights are its argument, never closed over.
  np.testing.assert_array_equal(fn(b.params, obs), jax.jit(b.fn)(b.params, obs))
  assert not np.allclose(fn(a.params, obs), fn(b.params, obs))


def test_data_errors_are_clear(encoder, data):
  with pytest.raises(ValueError, match="num_samples = 48.*'frames': 5"):
    finetune.make_train(config(), encoder, jnp.asarray(data["frames"][:5]), data["episode"],
                        data["proprio"], data["actions"])
  with pytest.raises(ValueError, match="frames must be uint8"):
    finetune.make_train(config(), encoder, jnp.asarray(data["frames"], jnp.float32),
                        data["episode"], data["proprio"], data["actions"])


class ScriptedEvaluator:
  """Validation successes from a script; records what each validation was handed."""

  def __init__(self, rates):
    self.rates, self.seen = list(rates), []

  def episodes(self, embedder, act, policy, seeds):
    self.seen.append((embedder.fingerprint, jax.device_get(embedder.params),
                      jax.device_get(policy.params)))
    rate = self.rates[len(self.seen) - 1]
    n = len(seeds)
    return {"success": np.arange(n) < round(rate * n), "length": np.ones(n),
            "return": np.zeros(n)}


def test_fit_keeps_the_best_validation_epoch(encoder, data):
  demos = Demos(frames=data["frames"], actions=data["actions"], proprio=data["proprio"],
                state=data["proprio"], episode=data["episode"], meta={}, sha256="")
  protocol = bc_protocol.Protocol(epochs=3, eval_every=1, batch_size=16, hidden=(32, 32),
                                  history=HISTORY, val_episodes=2)
  evaluator = ScriptedEvaluator([0.5, 1.0, 1.0])
  fitted = bc_protocol.fit_finetuned(protocol, evaluator, encoder, "tiny", demos, seed=0,
                                     encoder_lr=1e-3, log=lambda _: None)
  assert fitted.best_epoch == 2 and fitted.val_score == 100.0    # The earliest of the ties.
  assert fitted.val_curve == [[1, 0.5], [2, 1.0], [3, 1.0]]
  assert len({fp for fp, _, _ in evaluator.seen}) == 1           # One compiled rollout.
  _, best_encoder, best_policy = evaluator.seen[1]
  assert_trees_equal(fitted.state.params, best_policy)
  assert_trees_equal(fitted.embedder.params, best_encoder)
  assert not all(np.array_equal(a, b) for a, b in zip(leaves(fitted.embedder.params),
                                                      leaves(encoder.params)))
