"""Frames for MAE pretraining: shards on disk, random-access sources, a resumable mixture.

On-disk format (one shard = two files side by side):
  <name>.npy   uint8 [N, S, S, 3] RGB frames, uncompressed so readers memory-map it
  <name>.json  {"format", "source", "size": S, "count": N, "sha256", ...the producer's config}
The JSON is removed before and written after the .npy (both atomically), so a shard with a
JSON is complete; producers skip a shard whose JSON matches their config (resume). The .npy's
sha256 is checked whenever a shard is opened: producers re-render a corrupt shard with a
warning, `ShardSource` refuses one (nothing is ever trained on a shard modified in place).

Producers: `metaworld_frames` (the scripted experts with action noise, on train seeds disjoint
from the demos'), `nav_frames` (vcbench-nav views at random poses in the training apartments);
any folder of images is read directly by `FolderSource`.

Reading: `dataset` mixes sources by weight into a grain `MapDataset` whose element `step` is
batch number `step`, a pure function of (seed, step): a resumed run asks for the steps it has
not trained on and sees exactly the data it would have seen, with no iterator state to save.
`batches` prefetches chunks of steps for a training loop that scans over several steps per
jitted call; `augment` is MAE's RandomResizedCrop + flip in JAX, to run on the accelerator.
"""
from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import pathlib
import zlib
from typing import Iterator, Sequence

import grain
import jax
import jax.numpy as jnp
import numpy as np

from vcbench import files
from vcbench.data.augment import augment  # noqa: F401  # Part of this module's API.
from vcbench.data.demos import episode_seeds
from vcbench.envs.nav import render as nav_render
from vcbench.envs.nav import scene as nav_scene

FORMAT = "vcbench-frames/1"
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
# Above the demos' seeds (0..max_attempts) and below the validation range (100_000).
METAWORLD_SEED_BASE = 50_000
METAWORLD_MAX_STEPS = 200
HOLD_STEPS = 10   # steps kept after MetaWorld reports success (the arm at rest near the goal).
MIN_SHUFFLE_SPAN = 1 << 16   # see `_shuffled_forever`.
# vcbench-nav frames keep the textured-box objects the shipped MAE weights were trained on.
NAV_OBJECTS = "boxes"


# ---------------------------------------------------------------------------------------------
# Shards.

def meta_path(path: str | os.PathLike[str]) -> str:
  return os.path.splitext(os.fspath(path))[0] + ".json"


def write_shard(path: str | os.PathLike[str], frames: np.ndarray, meta: dict) -> dict:
  """Writes uint8 `frames` [N, S, S, 3] to `path` (.npy) and its metadata beside it.

  Returns the JSON record: `meta` plus format, size and count.

  Raises:
    ValueError: the path does not end in .npy, frames are not uint8 [N, S, S, 3], or `meta`
      gives a size/count that contradicts the frames.
  """
  path = os.fspath(path)
  if not path.endswith(".npy"):
    raise ValueError(f"write_shard: {path}: the shard path must end in .npy.")
  frames = np.asarray(frames)
  _check_frames(frames, path)
  n, s = frames.shape[:2]
  for key, value in (("size", s), ("count", n)):
    if key in meta and meta[key] != value:
      raise ValueError(f"write_shard: {path}: meta {key}={meta[key]!r} but the frames have "
                       f"{key} {value} (shape {frames.shape}).")
  record = {"format": FORMAT, **meta, "size": int(s), "count": int(n)}
  json_path = meta_path(path)
  if os.path.exists(json_path):  # no JSON may ever describe a .npy it was not written for.
    os.unlink(json_path)
  files.atomic_write(path, lambda f: np.save(f, np.ascontiguousarray(frames), allow_pickle=False))
  record["sha256"] = files.sha256_file(path)
  files.atomic_write(json_path, lambda f: f.write(json.dumps(record, indent=1).encode()))
  return record


def shard_problem(path: str | os.PathLike[str]) -> str | None:
  """Why the shard at `path` cannot be trained on (no JSON, or the .npy is not the one its JSON
  describes: truncated, modified in place, replaced), or None when it is intact."""
  record = read_meta(path)
  if record is None or record.get("format") != FORMAT:
    return f"{path}: no readable {FORMAT} record beside it ({meta_path(path)})"
  if not os.path.exists(path):
    return f"{path}: missing (its record exists)"
  if "sha256" not in record:
    return f"{path}: its record has no checksum (written by an older vcbench)"
  digest = files.sha256_file(path)
  if digest != record["sha256"]:
    return (f"{path}: checksum {digest[:12]}... does not match the recorded "
            f"{record['sha256'][:12]}... (corrupt or modified)")
  return None


def _check_frames(frames: np.ndarray, where: str) -> None:
  if frames.dtype != np.uint8:
    raise ValueError(f"{where}: frames must be uint8, got {frames.dtype}.")
  if frames.ndim != 4 or frames.shape[1] != frames.shape[2] or frames.shape[3] != 3:
    raise ValueError(f"{where}: frames must have shape [N, S, S, 3], got {frames.shape}.")


def read_meta(path: str | os.PathLike[str]) -> dict | None:
  """The shard's JSON record, or None when it has none (never finished) or it is unreadable."""
  try:
    with open(meta_path(path)) as f:
      return json.load(f)
  except (OSError, json.JSONDecodeError):
    return None


def shard_is_current(path: str, config: dict) -> bool:
  """Whether `path` holds a complete shard made under `config` (every key equal)."""
  record = read_meta(path)
  if record is None or any(record.get(k) != v for k, v in config.items()):
    return False
  problem = shard_problem(path)
  if problem:
    files.rebuild_or_refuse(f"frame shard {problem}", "Rebuilding it.")
  return problem is None


def _open_shard(path: str) -> np.memmap:
  problem = shard_problem(path)
  if problem:
    raise files.CorruptFileError(f"refusing to train on frame shard {problem}; delete it (and "
                                 "its .json) to have it rendered again")
  try:
    frames = np.load(path, mmap_mode="r")
  except (OSError, ValueError) as e:
    raise ValueError(f"{path}: not a readable .npy shard ({e}).") from e
  _check_frames(frames, path)
  return frames


class ShardSource:
  """Random access over the frames of several shards, memory-mapped (never read whole).

  A grain data source: `len(src)` frames, `src[i]` uint8 [S, S, 3] (a copy of one frame),
  indexed across the shards in the order given. Picklable (reopens the maps), so it can also
  go to grain's worker processes.
  """

  def __init__(self, paths: Sequence[str | os.PathLike[str]]):
    self.paths = [os.fspath(p) for p in paths]
    if not self.paths:
      raise ValueError("ShardSource: no shard paths given.")
    self.arrays = [_open_shard(p) for p in self.paths]
    first = self.arrays[0].shape[1]
    for p, a in zip(self.paths, self.arrays):
      if a.shape[1] != first:
        raise ValueError(f"ShardSource: {p} has frames of size {a.shape[1]}, but "
                         f"{self.paths[0]} has {first}; all shards must share one size.")
    self._ends = np.cumsum([len(a) for a in self.arrays])

  @property
  def size(self) -> int:
    return int(self.arrays[0].shape[1])

  def __len__(self) -> int:
    return int(self._ends[-1])

  def __getitem__(self, index: int) -> np.ndarray:
    index = _check_index(index, len(self), "ShardSource")
    k = int(np.searchsorted(self._ends, index, side="right"))
    start = int(self._ends[k - 1]) if k else 0
    return np.array(self.arrays[k][index - start])

  def __getstate__(self):
    return {"paths": self.paths}

  def __setstate__(self, state):
    self.__init__(state["paths"])


def _check_index(index, length: int, name: str) -> int:
  index = int(index)
  if not 0 <= index < length:
    raise IndexError(f"{name}: index {index} out of range [0, {length}).")
  return index


# ---------------------------------------------------------------------------------------------
# A folder of images.

class FolderSource:
  """Every image under `root` (recursive, sorted), decoded on access with PIL: RGB, shorter
  side resized to `size` (bicubic), centre-cropped to uint8 [size, size, 3]."""

  def __init__(self, root: str | os.PathLike[str], size: int):
    if size < 1:
      raise ValueError(f"FolderSource: size must be >= 1 pixel, got {size}.")
    self.root, self._size = os.fspath(root), int(size)
    if not os.path.isdir(self.root):
      raise FileNotFoundError(f"FolderSource: {self.root} is not a folder.")
    self.paths = sorted(str(p) for p in pathlib.Path(self.root).rglob("*")
                        if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file())
    if not self.paths:
      raise FileNotFoundError(f"FolderSource: no images ({', '.join(IMAGE_EXTENSIONS)}) under "
                              f"{self.root}.")

  @property
  def size(self) -> int:
    return self._size

  def __len__(self) -> int:
    return len(self.paths)

  def __getitem__(self, index: int) -> np.ndarray:
    from PIL import Image  # noqa: PLC0415 - only folder sources need PIL.
    path = self.paths[_check_index(index, len(self), "FolderSource")]
    with Image.open(path) as image:
      image = image.convert("RGB")
    w, h = image.size
    scale = self._size / min(w, h)
    nw, nh = max(self._size, round(w * scale)), max(self._size, round(h * scale))
    image = image.resize((nw, nh), Image.Resampling.BICUBIC)
    left, top = (nw - self._size) // 2, (nh - self._size) // 2
    image = image.crop((left, top, left + self._size, top + self._size))
    return np.asarray(image, np.uint8)


# ---------------------------------------------------------------------------------------------
# MetaWorld frames.

def metaworld_tasks(spec: str) -> list[str]:
  """Tasks named by a spec: 'all' (every task MetaWorld has a scripted expert for), 'none', or
  a comma-separated list (unknown names are refused with the valid ones)."""
  from vcbench.envs.mujoco import metaworld as mw  # noqa: PLC0415 - optional dependency.
  if spec == "none":
    return []
  if spec != "all":
    return [mw.check_task(t.strip()) for t in spec.split(",") if t.strip()]
  tasks = []
  for task in mw.task_names():
    try:
      mw.expert_policy(task)
    except ValueError:
      continue  # no scripted expert: no frames for it.
    tasks.append(task)
  return tasks


def metaworld_frames(out_dir: str, tasks: Sequence[str], episodes_per_task: int,
                     size: int = 128, stride: int = 2, max_steps: int = METAWORLD_MAX_STEPS,
                     noise: float = 0.3, seed: int = 0, camera: str = "top_cap2") -> list[str]:
  """Renders the noisy scripted experts: one shard per task, `<out_dir>/metaworld/<task>.npy`.

  Each episode (train seeds from METAWORLD_SEED_BASE, so never a demo's) runs the expert with
  Gaussian action noise of std `noise` (so the frames cover more than the perfect path) until
  HOLD_STEPS after success or `max_steps`, keeping every `stride`-th frame, rendered as the
  CortexBench job renders (`RenderConfig(size, camera)`). A task whose shard exists with the
  same config is skipped. Returns the shard paths, in the order of `tasks`.
  """
  from vcbench.envs.mujoco import metaworld as mw  # noqa: PLC0415 - optional dependency.
  if episodes_per_task < 1 or stride < 1 or max_steps < 1 or noise < 0:
    raise ValueError(f"metaworld_frames: need episodes_per_task, stride, max_steps >= 1 and "
                     f"noise >= 0, got {episodes_per_task}, {stride}, {max_steps}, {noise}.")
  if episodes_per_task > 100_000 - METAWORLD_SEED_BASE:
    raise ValueError(f"metaworld_frames: at most {100_000 - METAWORLD_SEED_BASE} episodes per "
                     f"task stay in the train seed range, got {episodes_per_task}.")
  for task in tasks:
    mw.check_task(task)
  paths = []
  for task in tasks:
    path = metaworld_shard(out_dir, task)
    config = {"source": "metaworld", "task": task, "episodes": int(episodes_per_task),
              "size": int(size), "camera": camera, "stride": int(stride),
              "max_steps": int(max_steps), "noise": float(noise), "seed": int(seed),
              "seed_base": METAWORLD_SEED_BASE, "hold_steps": HOLD_STEPS,
              "metaworld": _metaworld_version()}
    if not shard_is_current(path, config):
      write_shard(path, _task_frames(mw, config), config)
    paths.append(path)
  return paths


def metaworld_shard(out_dir: str, task: str) -> str:
  return os.path.join(out_dir, "metaworld", f"{task}.npy")


def nav_shard(out_dir: str) -> str:
  return os.path.join(out_dir, "nav", "frames.npy")


def _metaworld_version() -> str:
  try:
    return importlib.metadata.version("metaworld")
  except importlib.metadata.PackageNotFoundError:
    return "unknown"


def _task_frames(mw, config: dict) -> np.ndarray:
  # Pixels come from a renderer of our own so that only the kept frames are rendered; it is
  # made by the same `make_renderer` as MetaWorldSim's, so frames are identical.
  sim = mw.MetaWorldSim(config["task"], None, max_path_length=config["max_steps"])
  render_config = mw.RenderConfig(size=config["size"], camera=config["camera"])
  renderer, camera, flip = mw.make_renderer(sim.env.model, render_config)

  def render() -> np.ndarray:
    renderer.update_scene(sim.env.data, camera=camera)
    image = renderer.render()
    return np.ascontiguousarray(image[::-1]) if flip else image.copy()

  policy = mw.expert_policy(config["task"])
  frames = []
  try:
    for env_seed in episode_seeds("train", config["episodes"], base=config["seed_base"]):
      # Per-episode noise stream: the frames of an episode do not depend on the other tasks.
      rng = np.random.default_rng([config["seed"], env_seed, zlib.crc32(config["task"].encode())])
      frames += _noisy_episode(sim, policy, render, rng, env_seed, config)
  finally:
    renderer.close()
    sim.close()
  return np.stack(frames)


def _noisy_episode(sim, policy, render, rng, env_seed: int, config: dict) -> list[np.ndarray]:
  sim.reset(env_seed)
  frames, since_success = [], None
  for t in range(config["max_steps"]):
    if t % config["stride"] == 0:
      frames.append(render())
    action = sim.expert_action(policy) + rng.normal(0.0, config["noise"], sim.action_dim)
    _, _, _, info = sim.step(np.clip(action, -1.0, 1.0))
    if info["success"] and since_success is None:
      since_success = 0
    if since_success is not None:
      since_success += 1
      if since_success > config["hold_steps"]:
        break
  return frames


# ---------------------------------------------------------------------------------------------
# vcbench-nav frames.

def nav_frames(out_dir: str, count: int, size: int = 128, seed: int = 0, *,
               num_scenes: int = 100, grid_size: int = 32, hfov: float = 79.0,
               batch: int = 256) -> list[str]:
  """`count` RGB views at random poses (navigable position, uniform heading) in the first
  `num_scenes` training apartments of vcbench-nav, rendered natively at `size`², as one shard
  `<out_dir>/nav/frames.npy` (skipped when it exists with the same config). Returns [path]."""
  from vcbench.envs import nav  # noqa: PLC0415 - the scene generator pulls in scipy.
  from vcbench.envs.nav import textures  # noqa: PLC0415
  if count < 1:
    raise ValueError(f"nav_frames: count must be >= 1, got {count}.")
  path = nav_shard(out_dir)
  config = {"source": "nav", "split": "train", "count": int(count), "size": int(size),
            "seed": int(seed), "num_scenes": int(num_scenes), "grid_size": int(grid_size),
            "hfov": float(hfov)}
  if shard_is_current(path, config):
    return [path]
  scenes = nav.scene_pool("train", num_scenes, grid_size, NAV_OBJECTS)
  scenes = jax.tree.map(jnp.asarray, scenes)
  scene_idx, pos, heading = _random_poses(scenes, count, np.random.default_rng(seed))
  camera = nav_render.Camera(height=int(size), width=int(size), hfov=float(hfov))
  atlas = jnp.asarray(textures.atlas())
  frames = []
  for lo in range(0, count, batch):
    # A fixed batch shape (the tail padded by wrapping) compiles the renderer once.
    idx = np.arange(lo, lo + batch) % count
    views = _render_views(scenes, atlas, scene_idx[idx], pos[idx], heading[idx], camera)
    frames.append(np.asarray(views)[:min(batch, count - lo)])
  write_shard(path, np.concatenate(frames), config)
  return [path]


def _random_poses(scenes, count: int, rng: np.random.Generator):
  """(scene, xy, heading) per frame: a navigable cell, a point jittered within it (back to the
  cell centre where the agent's disc would touch a wall there), a uniform heading."""
  navigable = np.asarray(scenes.navigable)
  scene_idx = rng.integers(0, len(navigable), count).astype(np.int32)
  cells = [np.argwhere(n) for n in navigable]
  rc = np.stack([cells[s][rng.integers(len(cells[s]))] for s in scene_idx])
  centre = ((rc[:, ::-1] + 0.5) * nav_scene.CELL).astype(np.float32)
  half = nav_scene.CELL / 2
  jittered = centre + rng.uniform(-half, half, centre.shape).astype(np.float32)
  hits = np.asarray(_collisions(scenes, scene_idx, jittered))
  pos = np.where(hits[:, None], centre, jittered)
  heading = rng.uniform(-np.pi, np.pi, count).astype(np.float32)
  return scene_idx, pos, heading


@jax.jit
def _collisions(scenes, scene_idx, xy):
  from vcbench.envs.nav import env as nav_env  # noqa: PLC0415 - pulls in the whole env.
  return jax.vmap(lambda i, p: nav_env.collides(_one_scene(scenes, i), p))(scene_idx, xy)


def _one_scene(scenes, i):
  return jax.tree.map(lambda a: a[i], scenes)


@functools.partial(jax.jit, static_argnames=("camera",))
def _render_views(scenes, atlas, scene_idx, pos, heading, camera):
  def one(i, xy, h):
    return nav_render.render(_one_scene(scenes, i), atlas, xy, h, camera, ("rgb",))["rgb"]
  return jax.vmap(one)(scene_idx, pos, heading)


# ---------------------------------------------------------------------------------------------
# The training stream.

def dataset(sources: Sequence, weights: Sequence[float], batch_size: int,
            seed: int, shard: tuple[int, int] = (0, 1)) -> grain.MapDataset:
  """An endless, deterministic stream of batches: `ds[step]` is uint8 [batch_size, S, S, 3].

  shard: (index, count): this process's rows of every batch, [batch_size // count] from row
  index * batch_size // count (a multi-process run; `distributed.process_share`). Only those
  frames are read, and the shards of a step, in index order, are the unsharded batch.

  Each source is shuffled (a new permutation every epoch) and repeated forever; the mixture
  draws from source k a fraction weights[k] / sum(weights) of every batch, by grain's fixed
  interleaving (not by sampling, so each batch holds the proportions up to rounding). A source
  is anything with `len` and `[i]` -> uint8 [S, S, 3]: ShardSource, FolderSource, an array.

  Raises:
    ValueError: no sources, a weight count that differs, a weight <= 0, an empty source, or
      sources of different frame sizes (named by position).
  """
  sources, weights = list(sources), [float(w) for w in weights]
  if not sources or len(sources) != len(weights):
    raise ValueError(f"dataset: need one weight per source, got {len(sources)} sources and "
                     f"{len(weights)} weights.")
  if min(weights) <= 0 or batch_size < 1:
    raise ValueError(f"dataset: weights must be > 0 and batch_size >= 1, got {weights} and "
                     f"{batch_size}.")
  sizes = [_source_size(s, k) for k, s in enumerate(sources)]
  if len(set(sizes)) > 1:
    raise ValueError(f"dataset: all sources must share one frame size; sizes by source: "
                     f"{dict(enumerate(sizes))}.")
  index, count = shard
  if not 0 <= index < count or batch_size % count:
    raise ValueError(f"dataset: shard {shard} of batches of {batch_size}: need 0 <= index < "
                     "count and count dividing the batch size.")
  parts = [_shuffled_forever(s, _sub_seed(seed, k)) for k, s in enumerate(sources)]
  mixed = parts[0] if len(parts) == 1 else grain.MapDataset.mix(parts, weights)
  # Global batch k is rows [k B, (k + 1) B) of the mixture: sub-batches k count .. k count +
  # count - 1 of size B / count, of which this shard takes the index-th.
  return mixed.batch(batch_size // count, drop_remainder=True)[index::count]


def _shuffled_forever(source, seed: int) -> grain.MapDataset:
  ds = grain.MapDataset.source(source)
  # grain's index_shuffle is slow on short ranges (measured per call: 6 ms over 10 indices,
  # 50 us over 1e3, 4 us from 1e5 up), so a small source is shuffled as several copies at once
  # (an "epoch" then holds every frame `copies` times).
  copies = -(-MIN_SHUFFLE_SPAN // len(source))
  if copies > 1:
    ds = ds.repeat(copies)
  return ds.shuffle(seed=seed).repeat()


def _source_size(source, position: int) -> int:
  """S of a source's [S, S, 3] frames (read off its first frame: a plain array of frames is
  a source too, and an ndarray's `size` is its element count)."""
  if len(source) == 0:
    raise ValueError(f"dataset: source {position} ({type(source).__name__}) is empty.")
  shape = np.shape(source[0])
  if len(shape) != 3 or shape[0] != shape[1] or shape[2] != 3:
    raise ValueError(f"dataset: source {position} ({type(source).__name__}) gives frames of "
                     f"shape {shape}, expected [S, S, 3].")
  return int(shape[0])


def _sub_seed(seed: int, k: int) -> int:
  """A 32-bit seed per source (grain's shuffle wants one in [0, 2**32))."""
  return int(np.random.SeedSequence([int(seed), k]).generate_state(1)[0])


def batches(ds: grain.MapDataset, start: int, stop: int, chunk: int, num_threads: int = 2,
            prefetch: int = 2) -> Iterator[np.ndarray]:
  """Steps start..stop-1 of `ds` as uint8 [chunk, B, S, S, 3] arrays, in order (the last chunk
  has the remaining steps), read by `num_threads` threads up to `prefetch` chunks ahead."""
  if not 0 <= start <= stop or chunk < 1:
    raise ValueError(f"batches: need 0 <= start <= stop and chunk >= 1, got start={start}, "
                     f"stop={stop}, chunk={chunk}.")
  if start == stop:
    return
  chunks = ds[start:stop].batch(chunk)
  it = iter(chunks.to_iter_dataset(grain.ReadOptions(num_threads=num_threads,
                                                     prefetch_buffer_size=prefetch)))
  try:
    yield from it
  finally:
    it.close()  # stops the reader threads when the caller stops early.
