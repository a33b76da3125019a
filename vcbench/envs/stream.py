"""Episode streams: a queue of episodes through a fixed set of env slots, with the host
simulators overlapped with the device policy.

`rollout.rollout` plays one episode per env and waits for the slowest: where episodes end at
success, most slots sit idle by the end of a batch while the policy still runs on every row,
and the device waits for the simulators while they wait for the device. A stream keeps both
sides busy:
- **refill**: when a slot's episode ends (success under `stop_on_success`, a terminal state or
  the horizon) the next seed of the queue starts in it, and the policy's memory of that slot is
  restarted (`restart(carry, first)`), so each episode sees exactly what it sees in a batch;
- **double buffering**: the slots are split in halves, each a `host.SimBatch` with its own
  worker processes. One `lax.while_loop` under jit does, for each half in turn: receive its
  observations (blocks until its workers are done), compute its actions, send them (returns at
  once). While the device computes one half's actions, the other half's workers step and render.

Every host call is an ordered `io_callback` (run once, in program order, as in `host.HostEnv`)
and the queue is popped in that order, so which slot plays which episode is deterministic. An
episode's trajectory does not depend on it: simulators are reset from the episode seed and
policy rows are independent (tests check streams against fixed batches).

Results are per episode, in queue order: success, length, return, the simulator's last
`info['score']` and, with `record_actions`, every action the episode took.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from vcbench.envs import host

PolicyStep = Callable[[Any, dict], tuple[Any, jax.Array]]
Restart = Callable[[Any, jax.Array], Any]   # (carry, first [n] bool) -> carry
_TOKEN = jax.ShapeDtypeStruct((), np.int32)


def overlap_pays() -> bool:
  """Whether overlapping halves pays on this machine: where the policy runs on an accelerator.
  On CPU the simulators (rendering: ~8 ms a 128² MetaWorld frame, 80% of it the robot's 70k
  triangles) and the policy share the cores, which fixed batches already keep busy: measured
  on 2 cores, two halves ran at 0.86-1.09x the env steps/s of fixed batches (README: The
  Colosseum, Evaluation speed)."""
  return jax.default_backend() != "cpu"


def make_batches(make_sim: Callable[[], host.HostSim], num_envs: int, *, horizon: int,
                 stop_on_success: bool = True, num_workers: int = 0,
                 overlap: bool = True) -> list[host.SimBatch]:
  """The halves of a stream: with `overlap` and at least two workers (the overlap needs
  simulators outside this process), two batches of `num_envs` slots, each with half the
  workers; else one batch of `num_envs` slots. Each half is as large as a fixed batch of
  `num_envs`, so the policy runs on the same shapes and gives the same numbers (XLA's CPU
  results for a row can differ in the last bits between batch sizes, which a simulator then
  amplifies)."""
  halves = 2 if overlap and num_workers >= 2 else 1
  workers = [len(c) for c in np.array_split(np.arange(num_workers), halves)]
  return [host.SimBatch(make_sim, num_envs, horizon=horizon, stop_on_success=stop_on_success,
                        num_workers=w) for w in workers]


class _Half:
  """A batch's slots: which queued episode each plays (-1: none) and its running return."""

  def __init__(self, batch: host.SimBatch):
    n = batch.num_envs
    self.batch = batch
    self.episode = np.full(n, -1, np.int64)
    self.live = np.zeros(n, bool)
    self.first = np.zeros(n, bool)    # Slots whose request in flight starts an episode.
    self.ret = np.zeros(n, np.float64)


class EpisodeStream:
  """Plays queues of episode seeds through `batches` (see the module docstring)."""

  def __init__(self, batches: Sequence[host.SimBatch]):
    self._halves = [_Half(b) for b in batches]
    self._check_same_spec(batches)
    self._queue: list[int] = []
    self._next = 0
    self._results: dict[str, np.ndarray] = {}
    self._actions: list[list[np.ndarray]] | None = None

  @staticmethod
  def _check_same_spec(batches):
    shapes = {(b.action_dim, tuple(sorted(b.spec.items()))) for b in batches}
    if len(shapes) != 1:
      raise ValueError(f"EpisodeStream: the batches differ in action or observation spec: "
                       f"{shapes}")

  @property
  def sizes(self) -> tuple[int, ...]:
    """Slots per half (the policy carries' batch sizes, in order)."""
    return tuple(h.batch.num_envs for h in self._halves)

  @property
  def action_dim(self) -> int:
    return self._halves[0].batch.action_dim

  @property
  def spec(self):
    return self._halves[0].batch.spec

  def can_rebind(self, batches: Sequence[host.SimBatch]) -> bool:
    """Whether `batches` have this stream's slots and shapes, so compiled programs keep
    working after `rebind` (their callbacks read the halves when they run)."""
    return (tuple(b.num_envs for b in batches) == self.sizes
            and all(b.action_dim == self.action_dim and b.spec == self.spec for b in batches))

  def rebind(self, batches: Sequence[host.SimBatch]) -> list[host.SimBatch]:
    """Swaps in other batches with the same shapes (the next task); returns the old ones,
    unclosed."""
    if not self.can_rebind(batches):
      raise ValueError(f"EpisodeStream.rebind: the new batches do not have slots {self.sizes} "
                       f"and this stream's action and observation spec.")
    old = [h.batch for h in self._halves]
    self._halves = [_Half(b) for b in batches]
    return old

  # -- The program ------------------------------------------------------------------------

  def program(self, policy_step: PolicyStep, restart: Restart) -> Callable:
    """A jittable `carries -> carries` (one policy carry per half, batch `sizes[i]`) that
    plays the queue set by `run`; call it through `run`."""

    def play(carries):
      for h in range(len(self._halves)):
        io_callback(functools.partial(self._host_begin, h), _TOKEN, ordered=True)

      def body(state):
        carries, _ = state
        new = []
        for h, carry in enumerate(carries):
          obs, first, finished = io_callback(functools.partial(self._host_receive, h),
                                             self._receive_shapes(h), ordered=True)
          carry, action = policy_step(restart(carry, first), obs)
          io_callback(functools.partial(self._host_send, h), _TOKEN,
                      jnp.asarray(action, jnp.float32), ordered=True)
          new.append(carry)
        return tuple(new), finished

      carries, _ = jax.lax.while_loop(lambda s: ~s[1], body,
                                      (tuple(carries), jnp.zeros((), bool)))
      io_callback(self._host_drain, _TOKEN, ordered=True)
      return carries

    return play

  def run(self, program: Callable, carries: Sequence[Any], seeds: Sequence[int],
          record_actions: bool = False) -> dict:
    """Plays `seeds` with a jitted `program`; -> per-episode `success` (bool), `length`,
    `return`, `score` (NaN where the simulator reports none) and, with `record_actions`,
    `actions` (a list of [length, action_dim] arrays), in the order of `seeds`."""
    n = len(seeds)
    self._queue, self._next = [int(s) for s in seeds], 0
    if any(s < 0 for s in self._queue):
      raise ValueError(f"EpisodeStream.run: episode seeds must be >= 0, got {list(seeds)}")
    self._results = {"success": np.zeros(n, bool), "length": np.zeros(n, np.int64),
                     "return": np.zeros(n, np.float64), "score": np.full(n, np.nan)}
    self._actions = [[] for _ in range(n)] if record_actions else None
    try:
      jax.block_until_ready(program(tuple(carries)))
    finally:
      self._host_drain()   # After an error mid-stream: no request left in flight.
    out = dict(self._results)
    if self._actions is not None:
      out["actions"] = [np.asarray(a, np.float32).reshape(-1, self.action_dim)
                        for a in self._actions]
    return out

  # -- Host side --------------------------------------------------------------------------

  def _receive_shapes(self, h: int):
    n = self._halves[h].batch.num_envs
    obs = {k: jax.ShapeDtypeStruct((n, *shape), dt) for k, (shape, dt) in self.spec.items()}
    return obs, jax.ShapeDtypeStruct((n,), np.bool_), jax.ShapeDtypeStruct((), np.bool_)

  def _assign(self, half: _Half, free: np.ndarray) -> np.ndarray:
    """Seeds for `free` slots from the queue (-1 where it has run dry)."""
    seeds = np.full(len(free), -1, np.int64)
    for i in np.flatnonzero(free):
      if self._next >= len(self._queue):
        break
      seeds[i], half.episode[i] = self._queue[self._next], self._next
      self._next += 1
    return seeds

  def _host_begin(self, h: int):
    half = self._halves[h]
    half.episode[:] = -1
    # The queue is dealt evenly over the halves first, so that a short queue (validation)
    # still keeps both halves working.
    share = -(-(len(self._queue) - self._next) // (len(self._halves) - h))
    seeds = self._assign(half, np.arange(len(half.episode)) < share)
    half.first = seeds >= 0
    seeds[~half.first] = -2   # Idle: a slot the queue is too short for is never stepped.
    half.live, half.ret[:] = half.first.copy(), 0.0
    half.batch.send("refill", seeds)
    return np.int32(0)

  def _host_receive(self, h: int):
    half = self._halves[h]
    obs, reward, done, success, steps = half.batch.receive()
    first, half.first = half.first, np.zeros_like(half.first)
    half.ret += np.where(half.live, reward, 0.0)
    ended = half.live & done
    for i in np.flatnonzero(ended):
      e = half.episode[i]
      self._results["success"][e], self._results["length"][e] = success[i], steps[i]
      self._results["return"][e], self._results["score"][e] = half.ret[i], half.batch.score[i]
      half.episode[i] = -1
    half.live &= ~ended
    seeds = self._assign(half, ~half.live)
    if (seeds >= 0).any():
      obs = half.batch.refill(seeds)[0]
      started = seeds >= 0
      half.live |= started
      half.ret[started] = 0.0
      first = first | started
    finished = self._next >= len(self._queue) and not any(x.live.any() for x in self._halves)
    obs = {k: np.asarray(obs[k], dt) for k, (_, dt) in self.spec.items()}
    return obs, first, np.bool_(finished)

  def _host_send(self, h: int, action):
    half = self._halves[h]
    action = np.asarray(action, np.float32)
    if self._actions is not None:
      for i in np.flatnonzero(half.live):
        self._actions[half.episode[i]].append(action[i].copy())
    half.batch.send("step", action)
    return np.int32(0)

  def _host_drain(self):
    for half in self._halves:
      if half.batch.in_flight:
        half.batch.receive()
    return np.int32(0)

  def close(self):
    for half in self._halves:
      half.batch.close()
