"""Expert demonstrations for CortexBench's few-shot BC, generated from seeds, for any suite.

A suite gives a `Source`: its simulator factory, its expert, whether episodes end on success
and its simulator's version. On-disk format (one entry per suite, task and demo config,
`vcbench.files`):
  <root>/<suite>/<task>/demos-<key>.npz   arrays, all frame-aligned over the T steps of every
                                           kept episode, concatenated:
      frames   uint8   [T, S, S, 3]  RGB observed *before* the action (S = render size)
      actions  float32 [T, A]        the expert's action
      proprio  float32 [T, P]        proprioception (MetaWorld: hand xyz + gripper opening,
                                     eai-vc's), when the simulator observes it
      state    float32 [T, D]        simulator state (MetaWorld: hand, gripper, object poses,
                                     goal): the state oracle's input, when observed
      episode  int32   [T]           index of the episode each step belongs to
  <root>/<suite>/<task>/demos-<key>.json  sha256 of the npz, array shapes, the config (`key` =
      hash of it and of the simulator's version), per-episode seeds, lengths and returns,
      attempts and the expert's success rate.
In a suite scored by success, episodes run the expert until success, then `hold_steps` more
steps (so a policy also learns to stay), at most `max_steps`, and only successful episodes are
kept; in a return-scored suite every episode runs `max_steps` (or to a terminal state) and is
kept. Train, validation and test episodes use disjoint seed ranges (`episode_seeds`), so
evaluation never replays a demo.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Optional

import numpy as np

from vcbench import files
from vcbench.envs.core import RenderConfig
from vcbench.provenance import config_hash

# Disjoint seed ranges per split: seeds are base + offset + i, i < 100_000.
SPLIT_OFFSETS = {"train": 0, "val": 100_000, "test": 200_000}
FORMAT_VERSION = 1


def episode_seeds(split: str, n: int, base: int = 0) -> list[int]:
  if split not in SPLIT_OFFSETS:
    raise ValueError(f"unknown split {split!r}; valid: {sorted(SPLIT_OFFSETS)}")
  if not 0 <= n <= 100_000:
    raise ValueError(f"episode_seeds: n must be in [0, 100000], got {n}.")
  return [base + SPLIT_OFFSETS[split] + i for i in range(n)]


@dataclasses.dataclass(frozen=True)
class Source:
  """Where a suite's demos come from.

  make_sim: () -> a `host.HostSim` of the task rendering at the demo config's render config.
  expert: (sim, obs) -> action, the expert acting in `sim` on its last observation `obs`.
  success_only: episodes end `hold_steps` after success and only successful ones are kept
    (success-scored suites); otherwise every episode runs to `max_steps` and is kept.
  version: the simulator's version, part of the cache key.
  """
  make_sim: Callable[[], Any]
  expert: Callable[[Any, dict], np.ndarray]
  success_only: bool = True
  version: str = "unknown"


@dataclasses.dataclass(frozen=True)
class DemoConfig:
  task: str
  num_demos: int = 25
  render: RenderConfig = RenderConfig()
  max_steps: int = 500
  hold_steps: int = 10
  max_attempts: int = 100   # Seeds tried before giving up on reaching num_demos successes.
  seed: int = 0
  suite: str = "metaworld"

  def key(self, version: str) -> str:
    """The hash of the config and the simulator's version (the suite names the version's key,
    so MetaWorld's keys are those of the MetaWorld-only format)."""
    fields = dataclasses.asdict(self)
    del fields["suite"]
    return config_hash({"format": FORMAT_VERSION, self.suite: version, **fields})


@dataclasses.dataclass
class Demos:
  frames: np.ndarray
  actions: np.ndarray
  proprio: Optional[np.ndarray]
  state: Optional[np.ndarray]
  episode: np.ndarray
  meta: dict
  sha256: str

  @property
  def num_episodes(self) -> int:
    return int(self.episode.max()) + 1 if len(self.episode) else 0

  def episodes(self) -> Iterator[slice]:
    bounds = np.r_[0, np.flatnonzero(np.diff(self.episode)) + 1, len(self.episode)]
    for a, b in zip(bounds[:-1], bounds[1:]):
      yield slice(int(a), int(b))


_OBS = {"rgb": "frames", "proprio": "proprio", "state": "state"}   # obs key -> array name


def generate(cfg: DemoConfig, source: Source) -> tuple[dict[str, np.ndarray], dict]:
  """Runs the expert on train seeds until `num_demos` are kept; deterministic."""
  sim = source.make_sim()
  cols: dict[str, list] = {"actions": [], "episode": []}
  kept_seeds, lengths, returns, attempts = [], [], [], 0
  try:
    for seed in episode_seeds("train", cfg.max_attempts, cfg.seed):
      if len(kept_seeds) == cfg.num_demos:
        break
      attempts += 1
      episode = _run_expert(sim, source, seed, cfg)
      if episode is None:
        if len(kept_seeds) + cfg.max_attempts - attempts < cfg.num_demos:
          break   # The seeds left cannot make up the demos: fail now, not after all of them.
        continue
      episode_return = episode.pop("return")
      for k, v in episode.items():
        cols.setdefault(k, []).append(v)
      cols["episode"].append(np.full(len(episode["actions"]), len(kept_seeds), np.int32))
      kept_seeds.append(seed)
      lengths.append(len(episode["actions"]))
      returns.append(episode_return)
  finally:
    sim.close()
  if len(kept_seeds) < cfg.num_demos:
    raise RuntimeError(f"{cfg.task}: the expert succeeded in only {len(kept_seeds)} of "
                       f"{attempts} episodes; {cfg.num_demos} demos were asked for within "
                       f"{cfg.max_attempts} seeds, and the {cfg.max_attempts - attempts} seeds "
                       "left could not make them up.")
  arrays = {k: np.concatenate(v) for k, v in cols.items()}
  meta = {"config": dataclasses.asdict(cfg), "seeds": kept_seeds, "lengths": lengths,
          "returns": returns, "attempts": attempts,
          "expert_success_rate": len(kept_seeds) / attempts}
  return arrays, meta


def _run_expert(sim, source: Source, seed: int, cfg: DemoConfig) -> dict | None:
  """One expert episode: its observed arrays, actions and return; None if it must succeed and
  did not."""
  obs = sim.reset(seed)
  rows, hold, total = [], None, 0.0
  for _ in range(cfg.max_steps):
    action = np.asarray(source.expert(sim, obs), np.float32)
    rows.append(({_OBS[k]: v for k, v in obs.items() if k in _OBS}, action))
    obs, reward, terminal, info = sim.step(action)
    total += float(reward)
    if source.success_only and info["success"] and hold is None:
      hold = 0
    if hold is not None:
      hold += 1
      if hold > cfg.hold_steps:
        break
    if terminal:
      break
  if source.success_only and hold is None:
    return None
  out = {name: np.stack([r[0][name] for r in rows]) for name in rows[0][0]}
  out = {k: v if k == "frames" else v.astype(np.float32) for k, v in out.items()}
  return {**out, "actions": np.stack([r[1] for r in rows]), "return": total}


def path_for(root: str, cfg: DemoConfig, source: Source) -> str:
  return f"{root}/{cfg.suite}/{cfg.task}/demos-{cfg.key(source.version)}"


def load_or_generate(root: str, cfg: DemoConfig, source: Source,
                     regenerate: bool = True) -> Demos:
  """The demos for `cfg`, generated on first use. A corrupt or truncated entry is
  regenerated (with a warning) or, with `regenerate=False`, refused."""
  base, key = path_for(root, cfg, source), cfg.key(source.version)
  if files.exists(base):
    try:
      return _as_demos(*files.load(base, key))
    except files.CorruptFileError as e:
      if not regenerate:
        raise
      files.rebuild_or_refuse(str(e), "Regenerating.")
      files.remove(base)
  arrays, meta = generate(cfg, source)
  files.save(base, arrays, meta, key)
  return _as_demos(*files.load(base, key))


def _as_demos(arrays: dict, record: dict) -> Demos:
  return Demos(frames=arrays["frames"], actions=arrays["actions"],
               proprio=arrays.get("proprio"), state=arrays.get("state"),
               episode=arrays["episode"], meta=record["meta"], sha256=record["sha256"])
