"""The MAE frame pipeline: shards (atomic, memory-mapped), image folders, the deterministic
mixture stream and its prefetching reader, the JAX RandomResizedCrop, and the MetaWorld and
vcbench-nav frame producers (resumable)."""
import functools
import os
import pickle
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

from vcbench.data import frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _frames(n, size=8, value=None, seed=0):
  if value is not None:
    return np.full((n, size, size, 3), value, np.uint8)
  return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def _shard(tmp_path, name, array):
  path = str(tmp_path / f"{name}.npy")
  frames.write_shard(path, array, {"source": "test"})
  return path


def _indexed(tmp_path, name, n, size=4, tag=0):
  """A shard whose frame i names itself: channel 0 = `tag`, channels 1, 2 = i in base 256."""
  i = np.arange(n)
  pixel = np.stack([np.full(n, tag), i // 256, i % 256], -1).astype(np.uint8)
  return frames.ShardSource([_shard(tmp_path, name, np.broadcast_to(
      pixel[:, None, None, :], (n, size, size, 3)).copy())])


def _ids(batch):
  """(tag, index) of every frame of a batch made of `_indexed` frames."""
  pixel = batch[:, 0, 0].astype(int)
  return pixel[:, 0], pixel[:, 1] * 256 + pixel[:, 2]


# ---------------------------------------------------------------------------------------------
# Shards.

def test_shard_round_trip_and_meta(tmp_path):
  data = _frames(5)
  path = str(tmp_path / "sub" / "a.npy")
  frames.write_shard(path, data, {"source": "unit", "note": [1, 2]})
  np.testing.assert_array_equal(np.load(path), data)
  meta = frames.read_meta(path)
  assert meta["source"] == "unit" and meta["note"] == [1, 2]
  assert meta["size"] == 8 and meta["count"] == 5 and meta["format"] == frames.FORMAT
  assert frames.shard_is_current(path, {"source": "unit", "count": 5})
  assert not frames.shard_is_current(path, {"source": "other"})
  assert sorted(os.listdir(tmp_path / "sub")) == ["a.json", "a.npy"]  # no temporaries left.


def test_failed_write_leaves_the_old_frames_and_no_temporaries(tmp_path, monkeypatch):
  path = _shard(tmp_path, "a", _frames(3))

  def broken_save(f, array, allow_pickle):
    f.write(b"\x93NUMPY half a file")
    raise OSError("disk full")
  monkeypatch.setattr(np, "save", broken_save)
  with pytest.raises(OSError, match="disk full"):
    frames.write_shard(path, _frames(4, seed=1), {"source": "test"})
  monkeypatch.undo()
  np.testing.assert_array_equal(np.load(path), _frames(3))
  # Its JSON is gone, so producers see an unfinished shard and write it again.
  assert frames.read_meta(path) is None and not frames.shard_is_current(path, {})
  assert os.listdir(tmp_path) == ["a.npy"]


@pytest.mark.parametrize("bad, match", [
    (np.zeros((2, 8, 8, 3), np.float32), "must be uint8, got float32"),
    (np.zeros((2, 8, 9, 3), np.uint8), r"\[N, S, S, 3\], got \(2, 8, 9, 3\)"),
    (np.zeros((8, 8, 3), np.uint8), r"\[N, S, S, 3\], got \(8, 8, 3\)"),
    (np.zeros((2, 8, 8, 4), np.uint8), r"\[N, S, S, 3\], got \(2, 8, 8, 4\)")])
def test_write_shard_refuses_bad_frames(tmp_path, bad, match):
  with pytest.raises(ValueError, match=match):
    frames.write_shard(str(tmp_path / "x.npy"), bad, {})
  assert not os.listdir(tmp_path)


def test_write_shard_refuses_bad_path_and_contradicting_meta(tmp_path):
  with pytest.raises(ValueError, match="must end in .npy"):
    frames.write_shard(str(tmp_path / "x.npz"), _frames(2), {})
  with pytest.raises(ValueError, match="meta size=16 but the frames have size 8"):
    frames.write_shard(str(tmp_path / "x.npy"), _frames(2), {"size": 16})


def test_shard_source_indexes_across_shards_memory_mapped(tmp_path):
  a, b, c = _frames(3, seed=1), _frames(1, seed=2), _frames(4, seed=3)
  src = frames.ShardSource([_shard(tmp_path, n, x) for n, x in (("a", a), ("b", b), ("c", c))])
  assert len(src) == 8 and src.size == 8
  assert all(isinstance(x, np.memmap) for x in src.arrays)
  expected = np.concatenate([a, b, c])
  for i in range(8):
    got = src[i]
    assert type(got) is np.ndarray and got.dtype == np.uint8 and got.shape == (8, 8, 3)
    np.testing.assert_array_equal(got, expected[i])
  with pytest.raises(IndexError, match=r"index 8 out of range \[0, 8\)"):
    src[8]
  again = pickle.loads(pickle.dumps(src))  # for grain's worker processes: reopens the maps.
  np.testing.assert_array_equal(again[3], b[0])


def test_shard_source_refuses_mixed_sizes_and_non_shards(tmp_path):
  small, big = _shard(tmp_path, "small", _frames(2, 8)), _shard(tmp_path, "big", _frames(2, 16))
  with pytest.raises(ValueError, match=r"big.npy has frames of size 16, but .*small.npy has 8"):
    frames.ShardSource([small, big])
  np.save(tmp_path / "depth.npy", np.zeros((2, 8, 8, 1), np.uint8))
  with pytest.raises(ValueError, match=r"depth.npy: no readable .* record"):
    frames.ShardSource([str(tmp_path / "depth.npy")])
  with pytest.raises(ValueError, match="no shard paths"):
    frames.ShardSource([])


# ---------------------------------------------------------------------------------------------
# Image folders.

def test_folder_source_reads_resizes_and_crops(tmp_path):
  (tmp_path / "b").mkdir()
  Image.new("RGB", (40, 20), (200, 10, 30)).save(tmp_path / "a.png")          # landscape
  Image.new("L", (20, 30), 90).save(tmp_path / "b" / "c.JPG", quality=95)     # grey, portrait
  stripes = np.zeros((24, 48, 3), np.uint8)
  stripes[:, 12:36] = 255  # white centre band: the centre crop keeps only it.
  Image.fromarray(stripes).save(tmp_path / "b" / "d.jpeg", quality=95)
  (tmp_path / "notes.txt").write_text("not an image")
  src = frames.FolderSource(tmp_path, 12)
  assert len(src) == 3 and src.size == 12
  assert [os.path.relpath(p, tmp_path) for p in src.paths] == ["a.png", "b/c.JPG", "b/d.jpeg"]
  for i in range(3):
    assert src[i].shape == (12, 12, 3) and src[i].dtype == np.uint8
  assert (src[0] == [200, 10, 30]).all()
  assert np.abs(src[1].astype(int) - 90).max() <= 3   # grey decoded as RGB
  assert src[2].min() > 230                            # only the centre band survives


def test_folder_source_refuses_an_empty_folder(tmp_path):
  (tmp_path / "notes.txt").write_text("x")
  with pytest.raises(FileNotFoundError, match=f"no images .* under {tmp_path}"):
    frames.FolderSource(tmp_path, 16)


# ---------------------------------------------------------------------------------------------
# The stream.

def test_epochs_are_fresh_permutations(tmp_path):
  n = frames.MIN_SHUFFLE_SPAN   # 1x1 frames: an epoch of 65536 frames is 192 KiB.
  ds = frames.dataset([_indexed(tmp_path, "a", n, size=1)], [1.0], batch_size=64, seed=0)
  first, second = _ids(ds[0])[1], _ids(ds[n // 64])[1]   # the start of epochs 0 and 1
  assert len(set(first)) == 64 and len(set(second)) == 64
  assert list(first) != list(second) and list(first) != list(range(64))
  epoch = np.concatenate([_ids(ds[k])[1] for k in range(40)])
  assert len(set(epoch)) == len(epoch)   # no frame twice within an epoch


def test_small_sources_are_shuffled_evenly(tmp_path):
  ds = frames.dataset([_indexed(tmp_path, "a", 10)], [1.0], batch_size=50, seed=0)
  ids = np.concatenate([_ids(ds[k])[1] for k in range(20)])
  counts = np.bincount(ids, minlength=10)
  assert counts.min() > 60 and list(ids[:10]) != list(range(10)), counts
  np_source = frames.dataset([np.zeros((3, 5, 5, 3), np.uint8)], [1.0], 2, 0)  # arrays too
  assert np_source[0].shape == (2, 5, 5, 3)


def test_mixture_follows_the_weights(tmp_path):
  a, b = _indexed(tmp_path, "a", 1000, tag=0), _indexed(tmp_path, "b", 1500, tag=1)
  ds = frames.dataset([a, b], [3.0, 1.0], batch_size=16, seed=0)
  tags, ids = map(np.concatenate, zip(*(_ids(ds[k]) for k in range(50))))
  assert abs(np.mean(tags == 0) - 0.75) < 0.02, np.mean(tags == 0)
  assert len(set(ids[tags == 0])) > 400 and len(set(ids[tags == 1])) > 150   # spread out
  assert ids[tags == 0].max() < 1000 and ids[tags == 1].max() < 1500


def test_stream_is_a_function_of_seed_and_step(tmp_path):
  make = lambda seed: frames.dataset([_indexed(tmp_path, "a", 1000),
                                      _indexed(tmp_path, "b", 1000, tag=1)],
                                     [1.0, 2.0], batch_size=6, seed=seed)
  one, two, other = make(0), make(0), make(1)
  for step in (0, 7, 123_456_789):
    batch = one[step]
    assert batch.shape == (6, 4, 4, 3) and batch.dtype == np.uint8
    np.testing.assert_array_equal(batch, two[step])
  assert any(not np.array_equal(one[k], other[k]) for k in range(5))


def test_dataset_refuses_bad_arguments(tmp_path):
  a = _indexed(tmp_path, "a", 4, size=4)
  b = frames.ShardSource([_shard(tmp_path, "b", _frames(2, 8))])
  with pytest.raises(ValueError, match=r"one frame size; sizes by source: \{0: 4, 1: 8\}"):
    frames.dataset([a, b], [1, 1], 2, 0)
  with pytest.raises(ValueError, match="one weight per source"):
    frames.dataset([a, a], [1], 2, 0)
  with pytest.raises(ValueError, match=r"frames of shape \(4, 4\), expected \[S, S, 3\]"):
    frames.dataset([np.zeros((2, 4, 4), np.uint8)], [1], 2, 0)
  with pytest.raises(ValueError, match="weights must be > 0"):
    frames.dataset([a, a], [1, 0], 2, 0)


def test_batches_yields_the_requested_steps_in_order(tmp_path):
  ds = frames.dataset([_indexed(tmp_path, "a", 1000)], [1.0], batch_size=4, seed=3)
  chunks = list(frames.batches(ds, start=5, stop=12, chunk=3))
  assert [c.shape for c in chunks] == [(3, 4, 4, 4, 3), (3, 4, 4, 4, 3), (1, 4, 4, 4, 3)]
  np.testing.assert_array_equal(np.concatenate(chunks), np.stack([ds[s] for s in range(5, 12)]))
  assert not list(frames.batches(ds, 7, 7, 3))
  early = frames.batches(ds, 0, 100, 2)  # a loop that stops early releases the readers.
  np.testing.assert_array_equal(next(early)[1], ds[1])
  early.close()
  with pytest.raises(ValueError, match="start <= stop"):
    list(frames.batches(ds, 5, 2, 1))


# ---------------------------------------------------------------------------------------------
# Augmentation (each static configuration compiles once, ~5 s on 2 cores).

def _jitted(**kwargs):
  return jax.jit(functools.partial(frames.augment, **kwargs))


def _halves(n, size):
  """Images black on the left half, white on the right: a flip is unmistakable."""
  image = np.zeros((size, size, 3), np.uint8)
  image[:, size // 2:] = 255
  return np.broadcast_to(image, (n, size, size, 3)).copy()


def test_augment_shape_range_and_determinism():
  aug = _jitted(out_size=8)
  images = jnp.asarray(_frames(16, 24, seed=4))
  out = aug(jax.random.key(0), images)
  assert out.shape == (16, 8, 8, 3) and out.dtype == jnp.float32
  assert float(out.min()) >= 0.0 and float(out.max()) <= 255.0
  np.testing.assert_array_equal(out, aug(jax.random.key(0), images))
  assert not np.allclose(out, aug(jax.random.key(1), images))
  # Independent draws per image: the same image gives different crops within one batch.
  same = aug(jax.random.key(2), jnp.broadcast_to(images[:1], images.shape))
  assert len({np.asarray(x).tobytes() for x in same}) == 16


def test_augment_flips_about_half():
  aug = _jitted(out_size=8, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip=True)
  out = np.asarray(aug(jax.random.key(0), jnp.asarray(_halves(400, 16))))
  flipped = out[:, :, 0].mean(axis=(1, 2)) > out[:, :, -1].mean(axis=(1, 2))
  assert abs(flipped.mean() - 0.5) < 0.1, flipped.mean()
  np.testing.assert_allclose(out[flipped], out[~flipped][:1, :, ::-1].repeat(flipped.sum(), 0))


def test_augment_full_scale_crop_is_the_resized_image():
  aug = _jitted(out_size=16, scale=(1.0, 1.0), ratio=(1.0, 1.0), flip=False)
  yy, xx = np.mgrid[0:32, 0:32]
  image = np.stack([yy * 8, xx * 8, (yy + xx) * 4], -1).astype(np.uint8)   # smooth ramps
  out = np.asarray(aug(jax.random.key(0), jnp.asarray(image[None].repeat(3, 0))))
  pil = np.asarray(Image.fromarray(image).resize((16, 16), Image.Resampling.BICUBIC), float)
  assert np.abs(out - pil).max() < 2.5   # PIL rounds to integers and treats edges as above.
  np.testing.assert_array_equal(out[0], out[2])


def test_augment_falls_back_to_the_centre_crop():
  # No crop of 2-3x the image's area fits, so torchvision takes the centre crop clamped to
  # the ratio range: a 24x32 image with ratio <= 1 -> the centre 24x24.
  aug = _jitted(out_size=24, scale=(2.0, 3.0), ratio=(0.5, 1.0), flip=False)
  images = np.random.default_rng(5).integers(0, 256, (2, 24, 32, 3), dtype=np.uint8)
  out = np.asarray(aug(jax.random.key(0), jnp.asarray(images)))
  # Same size: the cubic kernel samples pixel centres exactly.
  np.testing.assert_allclose(out, images[:, :, 4:28].astype(np.float32), atol=1e-3)


def test_augment_refuses_non_images():
  with pytest.raises(ValueError, match=r"\[B, H, W, 3\], got \(4, 4, 3\)"):
    frames.augment(jax.random.key(0), jnp.zeros((4, 4, 3)), 4)


# ---------------------------------------------------------------------------------------------
# Producers.

def test_metaworld_frames_render_noisy_experts_and_resume(tmp_path, monkeypatch):
  pytest.importorskip("metaworld")
  monkeypatch.setenv("MUJOCO_GL", "egl")
  from vcbench.envs.mujoco import metaworld as mw  # noqa: PLC0415
  task = "button-press-topdown"
  [path] = frames.metaworld_frames(str(tmp_path), [task], 1, size=32, max_steps=60)
  assert path == str(tmp_path / "metaworld" / f"{task}.npy")
  shard = np.load(path)
  meta = frames.read_meta(path)
  assert shard.shape == (30, 32, 32, 3) and shard.dtype == np.uint8   # 60 steps, stride 2
  assert meta["count"] == 30 and meta["task"] == task and meta["noise"] == 0.3
  # Frame 0 is what the CortexBench job's sim shows on the first non-demo train seed.
  sim = mw.MetaWorldSim(task, mw.RenderConfig(size=32), max_path_length=60)
  try:
    np.testing.assert_array_equal(shard[0], sim.reset(frames.METAWORLD_SEED_BASE)["rgb"])
  finally:
    sim.close()
  assert np.abs(np.diff(shard.astype(int), axis=0)).mean() > 0.1   # the arm moves.
  monkeypatch.setattr(frames, "_task_frames", lambda *a: pytest.fail("not resumed"))
  assert frames.metaworld_frames(str(tmp_path), [task], 1, size=32, max_steps=60) == [path]
  monkeypatch.undo()
  monkeypatch.setenv("MUJOCO_GL", "egl")
  frames.metaworld_frames(str(tmp_path), [task], 1, size=32, max_steps=9, stride=3)
  assert np.load(path).shape == (3, 32, 32, 3)   # another config: written again.
  with pytest.raises(ValueError, match="unknown MetaWorld task 'drawer-opn'"):
    frames.metaworld_frames(str(tmp_path), ["drawer-opn"], 1)


def test_nav_frames_render_random_poses_and_resume(tmp_path, monkeypatch):
  [path] = frames.nav_frames(str(tmp_path), 6, size=16, seed=0, num_scenes=1, batch=4)
  assert path == str(tmp_path / "nav" / "frames.npy")
  shard = np.load(path)
  assert shard.shape == (6, 16, 16, 3) and shard.dtype == np.uint8
  assert len({x.tobytes() for x in shard}) == 6 and shard.std() > 10   # distinct, not blank
  assert frames.read_meta(path)["source"] == "nav"
  monkeypatch.setattr(frames, "_random_poses", lambda *a: pytest.fail("not resumed"))
  assert frames.nav_frames(str(tmp_path), 6, size=16, seed=0, num_scenes=1, batch=4) == [path]


@pytest.mark.slow
def test_launch_frames_writes_and_resumes(tmp_path):
  cmd = [sys.executable, "-m", "launch.frames", f"--out={tmp_path}", "--episodes=1",
         "--metaworld_tasks=button-press-topdown", "--size=16", "--max_steps=10", "--nav=3",
         "--nav_scenes=1"]
  env = {**os.environ, "MUJOCO_GL": "egl"}
  first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert first.returncode == 0, first.stderr
  assert "button-press-topdown.npy: 5 frames of 16²" in first.stdout
  assert "8 frames in 2 shards" in first.stdout
  second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert second.returncode == 0 and "8 frames in 2 shards" in second.stdout
