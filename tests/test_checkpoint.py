"""Tests for vcbench.checkpoint: exact round trips, kill-and-resume, retention, empty dirs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vcbench.checkpoint import Checkpointer
from vcbench.errors import CheckpointError


def _state(seed=0):
  return {
      "params": {"w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3),
                 "b": jnp.zeros((3,), jnp.bfloat16)},
      "key": jax.random.key(seed),           # typed PRNG key array
      "raw_key": jax.random.PRNGKey(seed),   # plain uint32[2] key
      "count": jnp.array(0, jnp.int32),
      "hist": (jnp.ones((2,)), np.arange(3, dtype=np.int64)),
  }


def _assert_trees_equal(a, b):
  la, ta = jax.tree_util.tree_flatten(a)
  lb, tb = jax.tree_util.tree_flatten(b)
  assert ta == tb, (ta, tb)
  for x, y in zip(la, lb):
    if jnp.issubdtype(jnp.asarray(x).dtype, jax.dtypes.prng_key):
      assert jnp.issubdtype(y.dtype, jax.dtypes.prng_key)
      assert jax.random.key_impl(x) == jax.random.key_impl(y)
      x, y = jax.random.key_data(x), jax.random.key_data(y)
    assert np.asarray(x).dtype == np.asarray(y).dtype, (x, y)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@jax.jit
def _update(state):
  """One deterministic 'training' step that consumes randomness from both kinds of key."""
  key, sub = jax.random.split(state["key"])
  raw_key, raw_sub = jax.random.split(state["raw_key"])
  noise = jax.random.normal(sub, state["params"]["w"].shape)
  noise = noise + jax.random.uniform(raw_sub, state["params"]["w"].shape)
  params = {"w": state["params"]["w"] * 0.9 + noise,
            "b": state["params"]["b"] + jnp.bfloat16(1)}
  return {**state, "params": params, "key": key, "raw_key": raw_key,
          "count": state["count"] + 1}


def test_round_trip_with_target_is_exact(tmp_path):
  state = _update(_state())
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    ckpt.save(1, state, metadata={"config_hash": "abc", "loss": 0.5})
    assert ckpt.latest_step() == 1
    restored = ckpt.restore(target=_state())
    _assert_trees_equal(restored, state)
    assert isinstance(restored["hist"], tuple)
    assert ckpt.metadata() == {"config_hash": "abc", "loss": 0.5}


def test_a_state_of_another_shape_is_refused_by_name(tmp_path):
  # A run resumed by code whose state gained a field (e.g. a new env-state leaf).
  state = _state()
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    ckpt.save(3, state)
    grown = {**state, "extra": jnp.zeros(2)}
    with pytest.raises(CheckpointError, match=r"ckpt/3: the saved state does not fit.*extra.*"
                       r"delete .*ckpt to start this run over"):
      ckpt.restore(target=grown)


def test_a_state_with_other_shapes_or_fewer_leaves_is_refused_with_the_diff(tmp_path):
  # Orbax itself raises its own ValueError for a leaf of another shape and names a missing
  # leaf only in its structure dump; the run's directory and the leaves are named here.
  state = _state()
  key = sorted(k for k in state if hasattr(state[k], "shape"))[0]
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    ckpt.save(1, state)
    wider = {**state, key: jnp.zeros(tuple(state[key].shape) + (2,))}
    with pytest.raises(CheckpointError, match=rf"shapes differ \(saved vs expected\): {key} "):
      ckpt.restore(target=wider)
    fewer = {k: v for k, v in state.items() if k != key}
    with pytest.raises(CheckpointError, match=rf"in the checkpoint but not in this code's state: "
                       rf"{key}"):
      ckpt.restore(target=fewer)
    _assert_trees_equal(ckpt.restore(target=state), state)


def test_round_trip_without_target_keeps_values_and_keys(tmp_path):
  state = _state(3)
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    ckpt.save(5, state)
    restored = ckpt.restore()
    assert ckpt.metadata() is None
  # Without a target, tuples come back as lists (documented); values and dtypes are exact.
  restored["hist"] = tuple(restored["hist"])
  _assert_trees_equal(restored, state)


def test_kill_and_resume_matches_uninterrupted_run(tmp_path):
  total = 6
  reference = _state()
  for _ in range(total):
    reference = _update(reference)

  # First run: checkpoints at steps 1, 2, 3, then "dies" (the object is simply dropped).
  ckpt = Checkpointer(tmp_path / "ckpt")
  step, state = ckpt.restore_or_init(_state)
  assert step == 0
  while step < 3:
    state = _update(state)
    step += 1
    ckpt.save(step, state)
  del ckpt, state

  # Second run: a fresh Checkpointer resumes at step 3 and finishes.
  ckpt = Checkpointer(tmp_path / "ckpt")
  step, state = ckpt.restore_or_init(_state)
  assert step == 3
  assert int(state["count"]) == 3
  while step < total:
    state = _update(state)
    step += 1
    ckpt.save(step, state)
  ckpt.close()
  _assert_trees_equal(state, reference)


def test_max_to_keep_is_honoured(tmp_path):
  with Checkpointer(tmp_path / "ckpt", max_to_keep=2) as ckpt:
    for step in range(1, 6):
      ckpt.save(step, {"x": jnp.full((2,), step)})
    assert ckpt.all_steps() == [4, 5]
  on_disk = sorted(int(p.name) for p in (tmp_path / "ckpt").iterdir() if p.name.isdigit())
  assert on_disk == [4, 5]
  with Checkpointer(tmp_path / "ckpt", max_to_keep=2) as ckpt:
    assert int(ckpt.restore(4)["x"][0]) == 4
    with pytest.raises(FileNotFoundError, match=r"step 1 .*available steps: \[4, 5\]"):
      ckpt.restore(1)


def test_empty_directory(tmp_path):
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    assert ckpt.latest_step() is None
    assert ckpt.all_steps() == []
    with pytest.raises(FileNotFoundError, match="no checkpoint in .*ckpt"):
      ckpt.restore()
    step, state = ckpt.restore_or_init(lambda: {"x": jnp.ones(2)})
    assert step == 0 and float(state["x"][0]) == 1.0


def test_incomplete_tmp_checkpoint_is_ignored(tmp_path):
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    ckpt.save(1, {"x": jnp.ones(2)})
  # What a crash in the middle of writing step 2 leaves behind: an unrenamed tmp directory.
  (tmp_path / "ckpt" / "2.orbax-checkpoint-tmp-1234567890").mkdir()
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    assert ckpt.latest_step() == 1


def test_save_rejects_bad_steps_and_metadata(tmp_path):
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    ckpt.save(2, {"x": jnp.ones(2)})
    with pytest.raises(ValueError, match="not after the latest saved step 2"):
      ckpt.save(2, {"x": jnp.ones(2)})
    with pytest.raises(TypeError, match="step must be an int"):
      ckpt.save(3.0, {"x": jnp.ones(2)})
    with pytest.raises(TypeError, match="metadata must be a dict"):
      ckpt.save(3, {"x": jnp.ones(2)}, metadata=[1])
  with pytest.raises(ValueError, match="max_to_keep"):
    Checkpointer(tmp_path / "other", max_to_keep=0)


def test_async_save_then_wait(tmp_path):
  with Checkpointer(tmp_path / "ckpt") as ckpt:
    ckpt.save(1, {"x": jnp.arange(4)}, wait=False)
    ckpt.wait()
    np.testing.assert_array_equal(ckpt.restore(1)["x"], np.arange(4))


# -- paths: URLs stay URLs ---------------------------------------------------------------------

def test_round_trip_at_a_file_url(tmp_path):
  url = f"file://{tmp_path}/run/ckpt"
  with Checkpointer(url) as ckpt:
    ckpt.save(3, _state(), metadata={"config": "c"})
  assert (tmp_path / "run" / "ckpt" / "3").is_dir()
  with Checkpointer(url) as ckpt:
    assert ckpt.latest_step() == 3 and ckpt.metadata() == {"config": "c"}
    _assert_trees_equal(ckpt.restore(target=_state()), _state())


def test_round_trip_at_an_epath(tmp_path):
  from etils import epath  # pylint: disable=import-outside-toplevel
  with Checkpointer(epath.Path(tmp_path) / "ckpt") as ckpt:
    ckpt.save(1, _state())
    _assert_trees_equal(ckpt.restore(1, target=_state()), _state())


def test_a_url_reaches_orbax_unchanged(monkeypatch):
  """A gs:// directory is handed to orbax as that URL, not made into a local path (as
  os.path.abspath or pathlib would: 'gs:/bucket' under the working directory)."""
  import orbax.checkpoint as ocp  # pylint: disable=import-outside-toplevel
  seen = []
  monkeypatch.setattr(ocp, "CheckpointManager", lambda directory, **kw: seen.append(directory))
  ckpt = Checkpointer("gs://bucket/runs/nav/train/checkpoints")
  assert str(seen[0]) == str(ckpt.directory) == "gs://bucket/runs/nav/train/checkpoints"
  assert str(ckpt.directory / "5" / "metadata") == "gs://bucket/runs/nav/train/checkpoints/5/metadata"


def test_runner_workdir_urls_stay_urls():
  from vcbench.algos import runner  # pylint: disable=import-outside-toplevel
  assert str(runner.checkpoints_dir("gs://bucket/run")) == "gs://bucket/run/checkpoints"
  assert str(runner.checkpoints_dir("rel/run")).startswith("/")
