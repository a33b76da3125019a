"""MAE pre-training and MAE adaptation of zoo ViTs, jitted, data-parallel and resumable.

    from vcbench.algos import mae
    config = mae.default_config()            # facebookresearch/mae's pre-training defaults
    ds = frames.dataset([frames.ShardSource(paths)], [1.0], config.batch_size, config.seed)
    result = mae.train(config, ds, workdir)  # resumes if a run in workdir was killed
    zoo.load(config.encoder, checkpoint=result.encoder_path)   # the trained encoder

`make_train(config, ds)` is the `runner` contract (one update = one SGD step, the frames fed
from the host per chunk); `train` runs it with checkpoints, logging and the encoder export.

The optimiser is MAE's: AdamW (0.9, 0.95), weight decay 0.05 on weights but not on biases and
norms, lr = base_lr (1.5e-4) x batch / 256, linear warm-up then half-cosine decay to min_lr;
the encoder's position embedding stays fixed (MAE's sin-cos). Augmentation (random resized
crop 0.2-1, horizontal flip) and masking run on device inside the step, keyed by
fold_in(seed key, step), so a step's randomness does not depend on where a run was resumed.
`chunk` steps are one jitted `lax.scan`; the batch axis is split over a 1-D device mesh and the
parameters are replicated, so the gradient mean is an all-reduce (GSPMD). Checkpoints (orbax,
atomic, under <workdir>/checkpoints) hold the whole train state plus the loss curve, so a killed run
resumes to the same curve (tested bit for bit).

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
from vcbench import distributed
from vcbench import files
from vcbench import metrics as metrics_lib
from vcbench import parallel
from vcbench.algos import runner
from vcbench.data import frames
from vcbench.models import convert
from vcbench.models import mae as mae_model
from vcbench.models import zoo
from vcbench.models.vit import ViT

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
  """The jitted, sharded pieces of one MAE run; the `runner` contract. `train_chunk(state, n,
  batches)` takes uint8 batches [n, B, S, S, 3] (n steps of B frames) -> (state, {'loss': [n]});
  `inputs` feeds them from `ds` (ds[step] = a batch), prefetched in threads."""

  not_hashed = _NOT_HASHED

  def __init__(self, config, ds=None, mesh=None, encoder: Optional[ViT] = None,
               prefetch_threads: int = 2):
    validate(config)
    # The run's identity: its config, and a custom encoder module if one was given.
    self.config = config if encoder is None else ml_collections.ConfigDict(
        {**config.to_dict(), "custom_encoder": repr(encoder)})
    self.num_updates = int(config.total_steps)
    self.model = build_model(config, encoder)
    self.preprocess = zoo.entry(config.encoder).preprocess
    self.tx = make_optimizer(config)
    self.mesh = mesh if mesh is not None else parallel.data_mesh()
    self.ds, self.prefetch_threads = ds, prefetch_threads
    parallel.check_divisible(config.batch_size, self.mesh, "config.batch_size")
    rep = parallel.replicated(self.mesh)
    # (state, batches sharded over the mesh) -> (state, {'loss'}): `train_chunk` without the
    # host-side sharding (the speed benchmark compiles it ahead of time).
    self.chunk_fn = jax.jit(self._chunk, donate_argnums=0,
                            in_shardings=(rep, parallel.batch_sharding(self.mesh, 1)),
                            out_shardings=(rep, rep))

  @property
  def patch(self) -> int:
    return self.model.encoder.patch

  def init(self, key) -> TrainState:
    c = self.config
    params, k_run = self._fresh_params(key)
    if c.init == "zoo":
      encoder = zoo.load(c.encoder, c.checkpoint or None, img_size=c.img_size, seed=c.seed)
      params = {**params, "encoder": encoder.params["params"]}
    return parallel.replicate(self._state(params, k_run), self.mesh)

  def _fresh_params(self, key):
    k_init, k_run = jax.random.split(key)
    return mae_model.init(self.model, k_init, self.config.img_size)["params"], k_run

  def _state(self, params, k_run) -> TrainState:
    return TrainState(params=params, opt_state=self.tx.init(params),
                      step=jnp.zeros((), jnp.int32), key=jax.random.key_data(k_run))

  def train_chunk(self, state: TrainState, n: int, batches) -> tuple[TrainState, dict]:
    if len(batches) != n:
      raise ValueError(f"MAE: {len(batches)} batches for a chunk of {n} steps")
    return self.chunk_fn(state, parallel.shard_batch(np.asarray(batches), self.mesh, axis=1))

  def inputs(self, start: int, end: int, chunk: int):
    """(n, (batches [n, B, S, S, 3],)) for the steps from `start` to `end`."""
    if self.ds is None:
      raise ValueError("MAE: this trainer has no dataset (make_train(config, ds))")
    for batches in frames.batches(self.ds, start, end, chunk, num_threads=self.prefetch_threads):
      yield len(batches), (batches,)

  def abstract_state(self) -> TrainState:
    """The state's shapes, replicated (a zoo start has the same shapes: no weights read)."""
    rep = parallel.replicated(self.mesh)
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=rep),
                        jax.eval_shape(lambda k: self._state(*self._fresh_params(k)),
                                       jax.random.key(0)))

  def abstract_metrics(self, n: int) -> dict:
    return {"loss": jax.ShapeDtypeStruct((n,), jnp.float32)}

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
    state, losses = jax.lax.scan(self._step, state, batches)
    return state, {"loss": losses}


def make_train(config, ds=None, *, mesh=None, encoder: Optional[ViT] = None,
               prefetch_threads: int = 2) -> Trainer:
  """An MAE trainer (`default_config`) on the frame dataset `ds`."""
  return Trainer(config, ds, mesh, encoder, prefetch_threads)


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


class _Progress:
  """The `train` log: loss and images/s (from the end of the first chunk this process trains,
  which compiles) every `log_every` steps and at the end."""

  def __init__(self, config, log: Callable[[str], Any], end: int):
    self.config, self.log, self.end = config, log, end
    self.start, self.t0, self.seen = time.time(), None, 0

  def __call__(self, p: runner.Progress) -> None:
    if not p.trained:
      return
    if self.t0 is None:
      self.t0 = time.time()
    else:
      self.seen += p.trained * self.config.batch_size
    prev, every = p.done - p.trained, self.config.log_every
    if p.done // every != prev // every or p.done == self.end:
      self.log(f"mae step {p.done}/{self.config.total_steps}  loss "
               f"{np.mean(p.metrics['loss'][prev:]):.4f}  {self.rate:.1f} img/s  "
               f"({time.time() - self.start:.0f} s)")

  @property
  def rate(self) -> float:
    return self.seen / max(time.time() - self.t0, 1e-9) if self.seen else 0.0


def train(config, ds, workdir: str, *, mesh=None, encoder: Optional[ViT] = None,
          log: Callable[[str], Any] = print, stop_at: Optional[int] = None,
          prefetch_threads: int = 2, tensorboard: bool = False) -> Result:
  """Runs (or resumes) MAE training over `ds` (ds[step] = uint8 batch) to config.total_steps.

  Checkpoints every `checkpoint_every` steps (rounded up to whole chunks) and at the end;
  `stop_at` ends early after that step's checkpoint (what a kill between checkpoints leaves).
  Writes the encoder to <workdir>/encoder.npz and, with `tensorboard`, the loss curve to
  TensorBoard event files under <workdir>/tb (`train/loss` per step).
  """
  trainer = make_train(config, ds, mesh=mesh, encoder=encoder,
                       prefetch_threads=prefetch_threads)
  end = min(config.total_steps, stop_at or config.total_steps)
  main = distributed.is_main()   # Of several processes, the first logs and writes.
  progress = _Progress(config, log if main else lambda _: None, end)
  with metrics_lib.tensorboard_or_noop(tensorboard and main,
                                       files.as_path(workdir) / "tb") as writer:
    state, metrics = runner.run(trainer, workdir, config.chunk,
                                stop_at=stop_at, checkpoint_every=config.checkpoint_every,
                                callbacks=[progress, runner.WriteMetrics(writer)])
  path = os.path.join(workdir, "encoder.npz")
  if main:
    convert.save_variables(path, encoder_variables(state))
  return Result(state=state, losses=[float(v) for v in metrics.get("loss", [])],
                encoder_path=path, seconds=time.time() - progress.start,
                images_per_second=progress.rate)
