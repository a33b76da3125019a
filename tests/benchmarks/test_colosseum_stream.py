"""The Colosseum's evaluation path streamed (slots refilled as episodes end) and overlapped (two
halves of slots in worker processes) plays every episode exactly as fixed batches do: the same
actions, success and length, over test sets whose perturbations differ per episode."""
import numpy as np
import pytest

pytest.importorskip("metaworld")

import jax  # noqa: E402

import vcbench  # noqa: E402,F401 - before jax (XLA flags).
from vcbench.algos import bc  # noqa: E402
from vcbench.benchmarks import bc_protocol  # noqa: E402
from vcbench.benchmarks import colosseum as col  # noqa: E402
from vcbench.envs.mujoco import metaworld as mw  # noqa: E402
from vcbench.models import embedder as embedder_lib  # noqa: E402


def test_overlapped_stream_gives_the_fixed_batches_trajectories():
  embedder = embedder_lib.make("random_vit_ti", state_dim=mw.STATE_DIM, img_size=32)
  feat = embedder.dim * 3 + mw.PROPRIO_DIM
  train = bc.make_train(bc.default_config(), np.zeros((2, feat), np.float32),
                        np.zeros((2, 4), np.float32))
  policy = train.init(jax.random.key(0)).variables()
  make_sim = col.make_sim("button-press-topdown", mw.RenderConfig(size=32), 25)
  codes = [col.encode(t, s) for t in (col.NONE, "MO_Color", "Camera_Pose", "Distractor")
           for s in range(2)]
  out = {}
  # overlap None: decided by the backend (off on CPU, where the halves compete for the cores).
  modes = {"batches": (False, None, None), "stream": (True, None, (3,)),
           "overlap": (True, True, (3, 3))}
  for mode, (streamed, overlap, sizes) in modes.items():
    protocol = bc_protocol.Protocol(horizon=25, eval_envs=3, num_workers=2, stream=streamed,
                                    overlap=overlap)
    evaluator = bc_protocol.Evaluator(make_sim, protocol)
    try:
      if streamed:
        assert evaluator.runner.sizes == sizes
      out[mode] = evaluator.episodes(embedder, train.act, policy, codes, record_actions=True)
    finally:
      evaluator.close()
  for mode in ("stream", "overlap"):
    for key in ("success", "length", "return"):
      np.testing.assert_array_equal(out[mode][key], out["batches"][key], err_msg=key)
    for i, (a, b) in enumerate(zip(out[mode]["actions"], out["batches"]["actions"])):
      np.testing.assert_array_equal(a, b, err_msg=f"{mode}, episode {i}")
  # The random policy's actions differ per episode: the comparison has something to compare.
  assert len({float(a.sum()) for a in out["batches"]["actions"]}) == len(codes)
