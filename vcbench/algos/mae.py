"""MAE pre-training and MAE adaptation of zoo ViTs, jitted, data-parallel and resumable.

    from vcbench.algos import mae
    config = mae.default_config()            # facebookresearch/mae's pre-training defaults
    ds = frames.dataset([frames.ShardSource(paths)], [1.0], config.batch_size, config.seed)
    result = mae.train(config, ds, workdir)  # resumes from workdir/ckpt if a run was killed
    zoo.load(config.encoder, checkpoint=result.encoder_path)   # the trained encoder

The optimiser is MAE's: AdamW (0.9, 0.95), weight decay 0.05 on weights but not on biases and
norms, lr = base_lr (1.5e-4) x batch / 256, linear warm-up then half-cosine decay to min_lr;
the encoder's position embedding stays fixed (MAE's sin-cos). Augmentation (random resized
crop 0.2-1, horizontal flip) and masking run on device inside the step, keyed by
fold_in(seed key, step), so a step's randomness does not depend on where a run was resumed.
`chunk` steps are one jitted `lax.scan`; the batch axis is split over a 1-D device mesh and the
parameters are replicated, so the gradient mean is an all-reduce (GSPMD). Checkpoints (orbax,
atomic) hold the whole train state plus the loss curve, so a killed run resumes to the same
curve (tested bit for bit).

`init='zoo'` continues MAE from a zoo entry's weights (the paper's MAE adaptation: VC-1 ships
no decoder, so the decoder starts fresh); `init='mae'` trains from scratch.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import struct

from vcbench import config as config_lib
from vcbench import parallel
from vcbench.checkpoint import Checkpointer
from vcbench.data import frames
from vcbench.models import convert
from vcbench.models import mae as mae_model
from vcbench.models import zoo
from vcbench.models.vit import ViT
from vcbench.reports.provenance import config_hash

INITS = ("mae", "zoo")
# Keys that change how a run executes, not what it computes: a resumed run may change them.
_NOT_HASHED = ("checkpoint_every", "log_every")


def default_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.encoder = "vcbench_vit_ti"   # The zoo entry whose architecture (and weights) is trained.
  c.checkpoint = ""              # Its checkpoint, for init='zoo' with a pretrained entry.
  c.init = "mae"                 # 'mae': from scratch; 'zoo': continue from the zoo weights.
  c.img_size = 224
  c.mask_ratio = 0.75
  c.decoder_width = 512
  c.decoder_depth = 8
  c.decoder_heads = 16
  c.norm_pix_loss = True
  c.batch_size = 64
  c.base_lr = 1.5e-4             # lr = base_lr * batch_size / 256 (MAE's scaling rule).
  c.min_lr = 0.0
  c.weight_decay = 0.05
  c.b1 = 0.9
  c.b2 = 0.95
  c.warmup_steps = 100
  c.total_steps = 1000
  c.crop_scale = (0.2, 1.0)
  c.flip = True
  c.chunk = 10                   # Steps per jitted call (one lax.scan).
  c.checkpoint_every = 100       # Steps; rounded up to whole chunks.
  c.log_every = 100
  c.seed = 0
  return c


def validate(config) -> None:
  config_lib.check_keys(config, default_config())
  config_lib.require_choice(config, "encoder", zoo.names())
  config_lib.require_choice(config, "init", INITS)
  for key in ("img_size", "batch_size", "total_steps", "chunk", "checkpoint_every",
              "decoder_width", "decoder_depth", "decoder_heads"):
    config_lib.require(config, key, lambda v: isinstance(v, int) and v > 0, "a positive int")
  config_lib.require(config, "warmup_steps", lambda v: isinstance(v, int) and v >= 0,
                     "an int >= 0")
  config_lib.require(config, "mask_ratio", lambda v: 0.0 <= v < 1.0, "a ratio in [0, 1)")
  config_lib.require(config, "crop_scale", lambda v: len(v) == 2 and 0 < v[0] <= v[1] <= 1,
                     "(lo, hi) with 0 < lo <= hi <= 1")


def build_model(config, encoder: Optional[ViT] = None) -> mae_model.MAE:
  """The MAE of config.encoder's architecture (or of `encoder`, a ViT module given directly:
  a custom or test-sized one; config.encoder still names the preprocessing)."""
  if encoder is None:
    encoder = zoo.entry(config.encoder).build(img_size=config.img_size, dtype=jnp.float32)
  if not isinstance(encoder, ViT):
    raise config_lib.ConfigError(f"config.encoder={config.encoder!r} is a "
                                 f"{type(encoder).__name__}; MAE trains ViT entries only")
  if config.img_size % encoder.patch:
    raise config_lib.ConfigError(f"config.img_size={config.img_size} is not a multiple of the "
                                 f"patch size {encoder.patch} of {config.encoder}")
  return mae_model.MAE(encoder, mask_ratio=config.mask_ratio,
                       decoder_width=config.decoder_width, decoder_depth=config.decoder_depth,
                       decoder_heads=config.decoder_heads)


def peak_lr(config) -> float:
  return config.base_lr * config.batch_size / 256


def schedule(config) -> optax.Schedule:
  """MAE's per-step schedule: linear warm-up from 0, then half-cosine to min_lr."""
  lr, warm = peak_lr(config), config.warmup_steps
  decay = max(config.total_steps - warm, 1)

  def fn(step):
    step = jnp.asarray(step, jnp.float32)
    cosine = config.min_lr + (lr - config.min_lr) * 0.5 * (
        1 + jnp.cos(jnp.pi * (step - warm) / decay))
    return jnp.where(step < warm, lr * step / max(warm, 1), cosine)
  return fn


def param_labels(params) -> Any:
  """'frozen' for the encoder's position embedding (MAE's fixed sin-cos), 'no_decay' for
  biases and 1-D parameters (timm's param_groups_weight_decay), 'decay' for the rest."""
  def label(path, leaf):
    names = [getattr(p, "key", str(p)) for p in path]
    if names[-1] == "pos_embed":
      return "frozen"
    return "no_decay" if leaf.ndim <= 1 or names[-1] == "bias" else "decay"
  return jax.tree_util.tree_map_with_path(label, params)


def make_optimizer(config) -> optax.GradientTransformation:
  lr = schedule(config)
  adamw = lambda wd: optax.adamw(lr, b1=config.b1, b2=config.b2, weight_decay=wd)
  return optax.multi_transform({"decay": adamw(config.weight_decay), "no_decay": adamw(0.0),
                                "frozen": optax.set_to_zero()}, param_labels)


@struct.dataclass
class TrainState:
  params: Any
  opt_state: Any
  step: jax.Array
  key: jax.Array     # The run's base key; step keys are fold_in(key, step).


class Trainer:
  """The jitted, sharded pieces of one MAE run: `init(key)` and `train_chunk(state, batches)`
  with batches uint8 [K, B, S, S, 3] (K steps of B frames) -> (state, losses [K])."""

  def __init__(self, config, mesh=None, encoder: Optional[ViT] = None):
    validate(config)
    self.config = config
    self.model = build_model(config, encoder)
    self.preprocess = zoo.entry(config.encoder).preprocess
    self.tx = make_optimizer(config)
    self.mesh = mesh if mesh is not None else parallel.data_mesh()
    parallel.check_divisible(config.batch_size, self.mesh, "config.batch_size")
    rep = parallel.replicated(self.mesh)
    self.train_chunk = jax.jit(self._chunk, donate_argnums=0,
                               in_shardings=(rep, parallel.batch_sharding(self.mesh, 1)),
                               out_shardings=(rep, rep))

  @property
  def patch(self) -> int:
    return self.model.encoder.patch

  def init(self, key) -> TrainState:
    c = self.config
    k_init, k_run = jax.random.split(key)
    variables = mae_model.init(self.model, k_init, c.img_size)
    params = variables["params"]
    if c.init == "zoo":
      encoder = zoo.load(c.encoder, c.checkpoint or None, img_size=c.img_size, seed=c.seed)
      params = {**params, "encoder": encoder.params["params"]}
    return TrainState(params=params, opt_state=self.tx.init(params),
                      step=jnp.zeros((), jnp.int32), key=jax.random.key_data(k_run))

  def normalise(self, pixels):
    """float [0, 255] -> the encoder entry's normalisation."""
    p = self.preprocess
    mean = jnp.asarray(p.mean, jnp.float32) / p.scale
    std = jnp.asarray(p.std, jnp.float32) / p.scale
    return (pixels - mean) / std

  def loss(self, params, images, key):
    c = self.config
    k_aug, k_mask = jax.random.split(key)
    x = self.normalise(frames.augment(k_aug, images, c.img_size, scale=tuple(c.crop_scale),
                                      flip=c.flip))
    num = (c.img_size // self.patch) ** 2
    noise = jax.random.uniform(k_mask, (images.shape[0], num))
    out, _ = self.model.apply({"params": params}, x, noise)
    return mae_model.reconstruction_loss(out["pred"], x, out["mask"], self.patch,
                                         c.norm_pix_loss)

  def _step(self, state: TrainState, images):
    key = jax.random.fold_in(jax.random.wrap_key_data(state.key), state.step)
    images = parallel.constrain_batch(images, self.mesh)
    loss, grads = jax.value_and_grad(self.loss)(state.params, images, key)
    updates, opt_state = self.tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return state.replace(params=params, opt_state=opt_state, step=state.step + 1), loss

  def _chunk(self, state, batches):
    return jax.lax.scan(self._step, state, batches)


def encoder_variables(state: TrainState) -> dict:
  """The trained encoder as zoo variables: loads into the entry's ViT unchanged."""
  return {"params": jax.device_get(state.params["encoder"])}


@dataclasses.dataclass
class Result:
  state: TrainState
  losses: list
  encoder_path: str
  seconds: float
  images_per_second: float


def run_hash(config, encoder: Optional[ViT] = None) -> str:
  d = {k: v for k, v in config.to_dict().items() if k not in _NOT_HASHED}
  return config_hash({**d, "custom_encoder": repr(encoder)} if encoder is not None else d)


def train(config, ds, workdir: str, *, mesh=None, encoder: Optional[ViT] = None,
          log: Callable[[str], Any] = print, stop_at: Optional[int] = None,
          prefetch_threads: int = 2) -> Result:
  """Runs (or resumes) MAE training over `ds` (ds[step] = uint8 batch) to config.total_steps.

  Checkpoints every `checkpoint_every` steps and at the end; `stop_at` ends early after that
  step's checkpoint (what a kill between checkpoints leaves). Writes the encoder to
  <workdir>/encoder.npz.
  """
  trainer = Trainer(config, mesh, encoder)
  chash = run_hash(config, encoder)
  every = -(-config.checkpoint_every // config.chunk) * config.chunk
  end = min(config.total_steps, stop_at or config.total_steps)
  with Checkpointer(os.path.join(workdir, "ckpt"), max_to_keep=2) as ckpt:
    step, state = ckpt.restore_or_init(lambda: trainer.init(jax.random.key(config.seed)))
    losses = _resumed_losses(ckpt, step, chash)
    state = parallel.replicate(state, trainer.mesh)
    t_start = time.time()
    t0, seen = None, 0   # Throughput counts from the end of the first (compiling) chunk.
    for chunk in frames.batches(ds, step, end, config.chunk, num_threads=prefetch_threads):
      state, chunk_losses = trainer.train_chunk(state, parallel.shard_batch(
          np.asarray(chunk), trainer.mesh, axis=1))
      chunk_losses = [float(v) for v in np.asarray(chunk_losses)]
      losses += chunk_losses
      prev, step = step, step + len(chunk_losses)
      if t0 is None:
        t0 = time.time()
      else:
        seen += len(chunk_losses) * config.batch_size
      if step // config.log_every != prev // config.log_every or step == end:
        rate = seen / max(time.time() - t0, 1e-9)
        log(f"mae step {step}/{config.total_steps}  loss {np.mean(chunk_losses):.4f}  "
            f"{rate:.1f} img/s  ({time.time() - t_start:.0f} s)")
      if step % every == 0 or step == end:
        ckpt.save(step, state, metadata={"config_hash": chash, "losses": losses})
  seconds = time.time() - t_start
  rate_seconds = time.time() - t0 if t0 is not None else 0.0
  path = os.path.join(workdir, "encoder.npz")
  convert.save_variables(path, encoder_variables(state))
  return Result(state=state, losses=losses, encoder_path=path, seconds=seconds,
                images_per_second=seen / rate_seconds if seen else 0.0)


def _resumed_losses(ckpt: Checkpointer, step: int, chash: str) -> list:
  if step == 0:
    return []
  meta = ckpt.metadata(step) or {}
  if meta.get("config_hash") != chash:
    raise config_lib.ConfigError(
        f"{ckpt.directory}: the checkpoint at step {step} was written by another MAE config "
        f"(hash {meta.get('config_hash')} != {chash}); use a fresh workdir or the same config")
  return list(meta["losses"])
