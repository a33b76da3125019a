"""The BC evaluator moving from task to task: compiled rollouts kept when the shapes match,
rebuilt when they do not (a suite whose tasks differ in observation or action shapes)."""
import functools

import jax.numpy as jnp
import numpy as np

from vcbench.benchmarks import bc_protocol
from vcbench.envs import pointmass
from vcbench.models import embedder as embedder_lib

PROTOCOL = bc_protocol.Protocol(horizon=5, eval_envs=2, history=1, use_proprio=False,
                                stop_on_success=False)
EMB = embedder_lib.make(embedder_lib.STATE_ORACLE, state_dim=pointmass.STATE_DIM)


def _act(policy, x):
  return jnp.tile(jnp.array([[0.3, -0.2]]), (x.shape[0], 1))


def _fresh(make_sim, seeds):
  evaluator = bc_protocol.Evaluator(make_sim, PROTOCOL)
  try:
    return evaluator.episodes(EMB, _act, {}, seeds)
  finally:
    evaluator.close()


def test_switch_keeps_compiled_rollouts_for_equal_shapes_and_rebuilds_for_others():
  small, large = (functools.partial(pointmass.PointMass, s) for s in (8, 12))
  evaluator = bc_protocol.Evaluator(small, PROTOCOL)
  try:
    evaluator.episodes(EMB, _act, {}, [0, 1])
    compiled = dict(evaluator._compiled)
    evaluator.switch(functools.partial(pointmass.PointMass, 8, 0.1))   # Same shapes.
    assert evaluator._compiled == compiled
    evaluator.switch(large)                                            # Another rgb shape.
    got = evaluator.episodes(EMB, _act, {}, [2, 3, 4])
  finally:
    evaluator.close()
  want = _fresh(large, [2, 3, 4])
  for key in ("return", "length", "success"):
    np.testing.assert_array_equal(got[key], want[key])
