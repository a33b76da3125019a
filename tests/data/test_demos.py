"""Demo generation: deterministic, successful-only, checksummed, regenerated when corrupt;
and the embedding cache keyed by render config and PVR version."""
import dataclasses

import numpy as np
import pytest

pytest.importorskip("metaworld")

from vcbench import files  # noqa: E402
from vcbench.benchmarks import cortexbench  # noqa: E402
from vcbench.data import demos, embeddings  # noqa: E402
from vcbench.envs.mujoco import metaworld as mw  # noqa: E402
from vcbench.models import embedder as embedder_lib  # noqa: E402

CFG = demos.DemoConfig(task="button-press-topdown", num_demos=2,
                       render=mw.RenderConfig(size=32), hold_steps=3)


def source(cfg=CFG):
  return cortexbench.suite("metaworld").demo_source(cfg.task, cfg.render, cfg.max_steps)


@pytest.fixture(autouse=True)
def _egl(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "egl")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("demos"))
  return root, demos.load_or_generate(root, CFG, source())


def test_demos_are_deterministic_and_well_formed(made, tmp_path):
  _, d = made
  again = demos.load_or_generate(str(tmp_path), CFG, source())
  assert again.sha256 == d.sha256  # Same seeds -> byte-identical file.
  assert d.num_episodes == 2 and d.meta["seeds"] == [0, 1]
  assert d.meta["expert_success_rate"] == 1.0 and d.meta["attempts"] == 2
  assert base_of(made).startswith(f"{made[0]}/metaworld/button-press-topdown/demos-")
  n = len(d.actions)
  assert d.frames.shape == (n, 32, 32, 3) and d.frames.dtype == np.uint8
  assert d.proprio.shape == (n, 4) and d.state.shape == (n, 21)
  assert sum(d.meta["lengths"]) == n
  assert [s.stop - s.start for s in d.episodes()] == d.meta["lengths"]
  assert np.abs(d.actions).max() <= 1


def base_of(made):
  return demos.path_for(made[0], CFG, source())


def test_splits_use_disjoint_seeds():
  train, val, test = (set(demos.episode_seeds(s, 500)) for s in ("train", "val", "test"))
  assert not (train & val or train & test or val & test)
  with pytest.raises(ValueError, match="unknown split 'dev'"):
    demos.episode_seeds("dev", 3)


def test_corrupt_demo_file_is_regenerated_or_refused(made):
  root, d = made
  base = demos.path_for(root, CFG, source())
  data = open(base + ".npz", "rb").read()
  open(base + ".npz", "wb").write(data[:-100])
  with pytest.raises(files.CorruptFileError, match="checksum"):
    demos.load_or_generate(root, CFG, source(), regenerate=False)
  with pytest.warns(UserWarning, match="Regenerating"):
    fixed = demos.load_or_generate(root, CFG, source())
  assert fixed.sha256 == d.sha256


def test_other_render_config_gets_its_own_demos(made):
  root, d = made
  other = dataclasses.replace(CFG, render=mw.RenderConfig(size=40))
  assert other.key(mw.version()) != CFG.key(mw.version())
  assert demos.path_for(root, other, source(other)) != demos.path_for(root, CFG, source())


def test_embedding_cache_is_keyed_by_pvr_version_and_checked(made):
  root, d = made
  oracle = embedder_lib.make("state_oracle", state_dim=21)
  emb = embeddings.load_or_compute(root, CFG.task, oracle, d)
  np.testing.assert_array_equal(emb, d.state)
  vit_a = embedder_lib.make("random_vit_ti", state_dim=21, img_size=32, seed=0)
  vit_b = embedder_lib.make("random_vit_ti", state_dim=21, img_size=32, seed=1)
  assert vit_a.fingerprint != vit_b.fingerprint  # Other weights: another cache entry.
  assert embeddings.cache_key(vit_a, d) != embeddings.cache_key(vit_b, d)
  ea = embeddings.load_or_compute(root, CFG.task, vit_a, d)
  assert ea.shape == (len(d.frames), vit_a.dim)
  base = f"{root}/embeddings/{CFG.task}/{vit_a.name}-{embeddings.cache_key(vit_a, d)}"
  raw = bytearray(open(base + ".npz", "rb").read())
  raw[-20] ^= 0xFF
  open(base + ".npz", "wb").write(bytes(raw))
  with pytest.warns(UserWarning, match="Recomputing"):
    again = embeddings.load_or_compute(root, CFG.task, vit_a, d)
  np.testing.assert_allclose(again, ea, rtol=1e-6)


def test_unknown_pvr_lists_valid_names():
  with pytest.raises(ValueError, match="unknown PVR 'vc2'.*state_oracle.*in1k_mobilenetv2"):
    embedder_lib.make("vc2", state_dim=21)


def test_generation_stops_as_soon_as_the_demos_cannot_be_reached():
  from vcbench.envs import pointmass
  resets = []

  class Counted(pointmass.PointMass):
    def reset(self, seed):
      resets.append(seed)
      return super().reset(seed)

  away = lambda sim, obs: -pointmass.greedy_action(obs)   # noqa: E731 - never a success.
  cfg = demos.DemoConfig(task="reach", num_demos=5, max_attempts=10, max_steps=4, suite="pm")
  with pytest.raises(RuntimeError, match="only 0 of 6 episodes.*4 seeds left"):
    demos.generate(cfg, demos.Source(lambda: Counted(8), away, success_only=True, version="t"))
  assert len(resets) == 6   # 4 seeds left < 5 demos: no seventh episode is run.
