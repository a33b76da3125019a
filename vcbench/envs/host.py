"""The host-callback bridge: CPU simulators behind the functional Env contract.

A CPU simulator (MuJoCo through metaworld/dm_control, pybullet, ...) is stateful Python. JAX
may drop or repeat a `pure_callback`, which would silently skip or replay physics, so every
call here is an *ordered* `io_callback`: executed exactly once per traced call, in program
order, also inside `lax.scan` and `lax.cond`. The env state also carries each env's host slot
(`handle`) and the host checks it, so a state from another bridge cannot be stepped by mistake.

Layers:
- `HostSim`: one simulator instance (reset from an integer seed, step, close).
- `SimBatch`: `num_envs` instances stepped together, in this process or split over worker
  processes (spawned, so they never inherit JAX or EGL state); owns the episode bookkeeping
  (success latch, horizon, done envs not stepped, the latest continuous score).
- `HostEnv`: the jittable face: `reset(seeds)` / `step(state, action)` on `EnvState`s.

A simulator may report a continuous task score in `info['score']` (TriFinger's scaled
distances): the bookkeeping keeps each env's latest, NaN for simulators that report none, and
`HostEnv` carries it in `EnvState.metrics['score']`.
"""
from __future__ import annotations

import multiprocessing
import traceback
from typing import Callable, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from vcbench.envs.core import EnvState

Spec = dict[str, tuple[tuple[int, ...], np.dtype]]


class HostSim(Protocol):
  """One CPU simulator instance."""
  action_dim: int

  def observation_spec(self) -> Spec:
    """Per-env observation shapes and dtypes."""

  def reset(self, seed: int) -> dict[str, np.ndarray]:
    """Starts an episode; the same seed gives the same episode."""

  def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, dict]:
    """Returns (obs, reward, terminal, info); info['success'] is the task's success flag and
    the optional info['score'] a continuous task score (the episode's is its last step's)."""

  def close(self) -> None: ...


class _Group:
  """A list of simulators with the episode bookkeeping, stepped in the calling process."""

  def __init__(self, make_sim: Callable[[], HostSim], n: int, horizon: int,
               stop_on_success: bool):
    self.sims = [make_sim() for _ in range(n)]
    self.horizon, self.stop_on_success = horizon, stop_on_success
    self.spec = self.sims[0].observation_spec()
    self.action_dim = int(self.sims[0].action_dim)
    self._last_obs = [{k: np.zeros(shape, dt) for k, (shape, dt) in self.spec.items()}] * n
    self.steps = np.zeros(n, np.int32)
    self.success = np.zeros(n, bool)
    self.score = np.full(n, np.nan, np.float32)
    self.done = np.ones(n, bool)

  def reset(self, seeds: np.ndarray):
    for i, seed in enumerate(seeds):
      self._last_obs[i] = self.sims[i].reset(max(int(seed), 0))
    self.steps[:] = 0
    self.success[:] = False
    self.score[:] = np.nan
    # A negative seed leaves its slot idle (done from the start, never stepped or rendered
    # again): it pads a batch to its fixed size at the cost of one reset.
    self.done[:] = (self.horizon <= 0) | (np.asarray(seeds) < 0)
    return self._stack(), np.zeros(len(self.sims), np.float32), self.done.copy(), \
        self.success.copy(), self.steps.copy(), self.score.copy()

  def refill(self, seeds: np.ndarray):
    """Starts an episode in each slot whose seed is >= 0, leaves those at -1 as they are
    and makes those below -1 idle (an episode stream's refill of the slots that finished)."""
    for i, seed in enumerate(seeds):
      if seed >= 0:
        self._last_obs[i] = self.sims[i].reset(int(seed))
        self.steps[i], self.success[i], self.score[i] = 0, False, np.nan
        self.done[i] = self.horizon <= 0
      elif seed < -1:
        self.done[i] = True
    return self._stack(), np.zeros(len(self.sims), np.float32), self.done.copy(), \
        self.success.copy(), self.steps.copy(), self.score.copy()

  def step(self, actions: np.ndarray):
    reward = np.zeros(len(self.sims), np.float32)
    for i, sim in enumerate(self.sims):
      if self.done[i]:
        continue  # Finished episodes keep their last observation and are not simulated.
      obs, r, terminal, info = sim.step(np.asarray(actions[i], np.float64))
      self._last_obs[i] = obs
      reward[i] = r
      self.steps[i] += 1
      self.success[i] |= bool(info.get("success", False))
      self.score[i] = info.get("score", np.nan)
      self.done[i] = (terminal or self.steps[i] >= self.horizon
                      or (self.stop_on_success and self.success[i]))
    return (self._stack(), reward, self.done.copy(), self.success.copy(), self.steps.copy(),
            self.score.copy())

  def _stack(self) -> dict[str, np.ndarray]:
    return {k: np.stack([np.asarray(o[k], dt) for o in self._last_obs])
            for k, (_, dt) in self.spec.items()}

  def close(self):
    for sim in self.sims:
      sim.close()


def _worker(conn, make_sim, n, horizon, stop_on_success):
  try:
    group = _Group(make_sim, n, horizon, stop_on_success)
    conn.send(("ok", (group.spec, group.action_dim)))
  except Exception:  # Reported to the parent, which raises it with the worker's traceback.
    conn.send(("error", traceback.format_exc()))
    return
  while True:
    cmd, arg = conn.recv()
    try:
      if cmd == "close":
        group.close()
        conn.send(("ok", None))
        return
      conn.send(("ok", getattr(group, cmd)(arg)))
    except Exception:
      conn.send(("error", traceback.format_exc()))


class SimBatch:
  """`num_envs` simulators stepped per call; `num_workers > 0` splits them over processes.

  Episode rules: an env is done when its simulator reports a terminal state, after `horizon`
  steps, or (with `stop_on_success`) once it has succeeded; done envs are not stepped until
  the next `reset`. `score` holds each env's latest `info['score']` after a call (NaN: none
  reported since the reset). `make_sim` must be picklable when workers are used (a
  module-level class or a `functools.partial` of one), and, as with any spawn-based
  multiprocessing, a script that starts workers must guard its entry point with
  `if __name__ == "__main__":`.
  """

  def __init__(self, make_sim: Callable[[], HostSim], num_envs: int, *, horizon: int,
               stop_on_success: bool = True, num_workers: int = 0):
    if num_envs < 1:
      raise ValueError(f"SimBatch: num_envs must be >= 1, got {num_envs}.")
    self.num_envs = num_envs
    self.score = np.full(num_envs, np.nan, np.float32)
    workers = min(num_workers, num_envs)
    self._local, self._conns, self._procs = None, [], []
    self._pending, self._result = None, None
    if workers <= 0:
      self._local = _Group(make_sim, num_envs, horizon, stop_on_success)
      self.spec, self.action_dim = self._local.spec, self._local.action_dim
      self._chunks = [num_envs]
      return
    self._chunks = [len(c) for c in np.array_split(np.arange(num_envs), workers)]
    ctx = multiprocessing.get_context("spawn")
    for n in self._chunks:
      parent, child = ctx.Pipe()
      proc = ctx.Process(target=_worker, args=(child, make_sim, n, horizon, stop_on_success),
                         daemon=True)
      proc.start()
      self._conns.append(parent)
      self._procs.append(proc)
    self.spec, self.action_dim = [self._receive(c) for c in self._conns][0]

  @staticmethod
  def _receive(conn):
    status, payload = conn.recv()
    if status != "ok":
      raise RuntimeError(f"SimBatch worker failed:\n{payload}")
    return payload

  def send(self, cmd: str, arg: np.ndarray) -> None:
    """Starts `cmd` ('reset', 'refill' or 'step') on every env and returns at once when the
    envs live in worker processes (they work while the caller does something else); in this
    process it runs now. `receive` collects the result; one request is in flight at a time."""
    if self._pending is not None:
      raise RuntimeError(f"SimBatch.send({cmd!r}): the previous {self._pending!r} was not "
                         f"received yet.")
    if self._local is not None:
      self._result = getattr(self._local, cmd)(arg)
    else:
      for conn, part in zip(self._conns, np.split(arg, np.cumsum(self._chunks)[:-1])):
        conn.send((cmd, part))
    self._pending = cmd

  def receive(self):
    """The result of the request in flight: (obs, reward, done, success, steps); keeps the
    score."""
    if self._pending is None:
      raise RuntimeError("SimBatch.receive: no request in flight.")
    self._pending = None
    if self._local is not None:
      out, self._result = self._result, None
    else:
      outs = [self._receive(c) for c in self._conns]
      obs = {k: np.concatenate([o[0][k] for o in outs]) for k in self.spec}
      out = (obs, *(np.concatenate([o[i] for o in outs]) for i in range(1, 6)))
    self.score = out[5]
    return out[:5]

  @property
  def in_flight(self) -> bool:
    return self._pending is not None

  def _call(self, cmd: str, arg: np.ndarray):
    self.send(cmd, arg)
    return self.receive()

  def _seeds(self, seeds, name: str) -> np.ndarray:
    seeds = np.asarray(seeds, np.int64).reshape(-1)
    if seeds.shape != (self.num_envs,):
      raise ValueError(f"SimBatch.{name}: expected {self.num_envs} seeds, got {seeds.shape}.")
    return seeds

  def reset(self, seeds: np.ndarray):
    """-> (obs, reward, done, success, steps), each batched over envs. A negative seed leaves
    that env idle for the episode (done from the start): padding for a partial batch."""
    return self._call("reset", self._seeds(seeds, "reset"))

  def refill(self, seeds: np.ndarray):
    """Starts an episode in each env whose seed is >= 0, leaves those at -1 as they are and
    makes those below -1 idle; -> (obs, reward, done, success, steps) as `reset`."""
    return self._call("refill", self._seeds(seeds, "refill"))

  def step(self, actions: np.ndarray):
    """-> (obs, reward, done, success, steps); done envs are left as they are."""
    actions = np.asarray(actions, np.float32)
    if actions.shape != (self.num_envs, self.action_dim):
      raise ValueError(f"SimBatch.step: expected actions of shape "
                       f"{(self.num_envs, self.action_dim)}, got {actions.shape}.")
    return self._call("step", actions)

  def close(self):
    if self._local is not None:
      self._local.close()
      self._local = None
    for conn, proc in zip(self._conns, self._procs):
      try:
        if self._pending is not None:
          conn.recv()   # The reply to the request in flight, e.g. after an error mid-stream.
        conn.send(("close", None))
        conn.recv()
      except (EOFError, OSError, BrokenPipeError):
        pass
      proc.join(timeout=10)
      if proc.is_alive():
        proc.kill()
    self._conns, self._procs, self._pending = [], [], None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


class HostEnv:
  """A `SimBatch` as a jittable functional env: every call is an ordered `io_callback`."""

  def __init__(self, batch: SimBatch):
    self.batch = batch
    self._handles = np.arange(batch.num_envs, dtype=np.int32)

  @staticmethod
  def _shapes(batch: SimBatch) -> tuple:
    return (batch.num_envs, batch.action_dim, batch.spec)

  def can_rebind(self, batch: SimBatch) -> bool:
    """Whether `batch` has this env's shapes, so that `rebind` keeps compiled rollouts."""
    return self._shapes(batch) == self._shapes(self.batch)

  def rebind(self, batch: SimBatch) -> SimBatch:
    """Swaps in another batch with the same shapes (e.g. the next task) and returns the old
    one, unclosed. Rollouts already compiled against this env keep working, without a
    recompile: the callbacks read `self.batch` when they run."""
    if not self.can_rebind(batch):
      raise ValueError(f"HostEnv.rebind: the new batch has (num_envs, action_dim, spec) "
                       f"{self._shapes(batch)}, expected {self._shapes(self.batch)}.")
    old, self.batch = self.batch, batch
    return old

  @property
  def num_envs(self) -> int:
    return self.batch.num_envs

  @property
  def action_dim(self) -> int:
    return self.batch.action_dim

  def observation_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
    return {k: jax.ShapeDtypeStruct(shape, dt) for k, (shape, dt) in self.batch.spec.items()}

  def _result_shapes(self):
    n = self.num_envs
    obs = {k: jax.ShapeDtypeStruct((n, *s.shape), s.dtype)
           for k, s in self.observation_spec().items()}
    return (obs, jax.ShapeDtypeStruct((n,), np.float32), jax.ShapeDtypeStruct((n,), np.bool_),
            jax.ShapeDtypeStruct((n,), np.bool_), jax.ShapeDtypeStruct((n,), np.int32),
            jax.ShapeDtypeStruct((n,), np.float32))

  def _state(self, out, handle) -> EnvState:
    obs, reward, done, success, steps, score = out
    return EnvState(obs=obs, reward=reward, done=done,
                    metrics={"success": success, "steps": steps, "score": score},
                    handle=handle)

  def _check_handles(self, handle: np.ndarray):
    if not np.array_equal(np.asarray(handle), self._handles):
      raise ValueError(f"HostEnv: the state's handles {np.asarray(handle)} do not belong to "
                       f"this bridge (expected {self._handles}); was it made by another env?")

  def _host_reset(self, seeds):
    return self._cast(self.batch.reset(np.asarray(seeds)))

  def _host_step(self, handle, action):
    self._check_handles(handle)
    return self._cast(self.batch.step(np.asarray(action)))

  def _cast(self, out):
    obs, reward, done, success, steps = out
    obs = {k: np.asarray(obs[k], dt) for k, (_, dt) in self.batch.spec.items()}
    return (obs, np.asarray(reward, np.float32), np.asarray(done, np.bool_),
            np.asarray(success, np.bool_), np.asarray(steps, np.int32),
            np.asarray(self.batch.score, np.float32))

  def reset(self, seeds: jax.Array) -> EnvState:
    seeds = jnp.asarray(seeds, jnp.int32)
    out = io_callback(self._host_reset, self._result_shapes(), seeds, ordered=True)
    return self._state(out, jnp.asarray(self._handles))

  def step(self, state: EnvState, action: jax.Array) -> EnvState:
    action = jnp.asarray(action, jnp.float32)
    out = io_callback(self._host_step, self._result_shapes(), state.handle, action,
                      ordered=True)
    return self._state(out, state.handle)

  def close(self):
    self.batch.close()

