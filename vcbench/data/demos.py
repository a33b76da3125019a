"""Scripted-expert demonstrations for CortexBench's few-shot BC, generated from seeds.

On-disk format (one entry per task and demo config, `vcbench.data.files`):
  <root>/metaworld/<task>/demos-<key>.npz   arrays, all frame-aligned over the T steps of
                                             every kept episode, concatenated:
      frames   uint8   [T, S, S, 3]  RGB observed *before* the action (S = render size)
      actions  float32 [T, 4]        the expert's action, clipped to [-1, 1]
      proprio  float32 [T, 4]        hand xyz + gripper opening (eai-vc's MetaWorld proprio)
      state    float32 [T, 21]       hand, gripper, object poses, goal (state-oracle input)
      episode  int32   [T]           index of the episode each step belongs to
  <root>/metaworld/<task>/demos-<key>.json  sha256 of the npz, array shapes, the config
      (`key` = hash of it), per-episode seeds and lengths, attempts and the expert's success
      rate.
Episodes run the expert until success, then `hold_steps` more steps (so a policy also learns
to stay), at most `max_steps`; only successful episodes are kept. Train, validation and test
episodes use disjoint seed ranges (`episode_seeds`), so evaluation never replays a demo.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Iterator

import numpy as np

from vcbench.data import files
from vcbench.envs.mujoco import metaworld as mw
from vcbench.reports.provenance import config_hash

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
class DemoConfig:
  task: str
  num_demos: int = 25
  render: mw.RenderConfig = mw.RenderConfig()
  max_steps: int = 500
  hold_steps: int = 10
  max_attempts: int = 100   # Seeds tried before giving up on reaching num_demos successes.
  seed: int = 0

  def key(self) -> str:
    return config_hash({"format": FORMAT_VERSION, "metaworld": _metaworld_version(),
                        **dataclasses.asdict(self)})


@dataclasses.dataclass
class Demos:
  frames: np.ndarray
  actions: np.ndarray
  proprio: np.ndarray
  state: np.ndarray
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


def _metaworld_version() -> str:
  try:
    from importlib.metadata import version  # noqa: PLC0415
    return version("metaworld")
  except Exception:  # pylint: disable=broad-except
    return "unknown"


def generate(cfg: DemoConfig) -> tuple[dict[str, np.ndarray], dict]:
  """Runs the scripted expert on train seeds until `num_demos` successes; deterministic."""
  policy = mw.expert_policy(cfg.task)
  sim = mw.MetaWorldSim(cfg.task, cfg.render, max_path_length=cfg.max_steps)
  cols = {k: [] for k in ("frames", "actions", "proprio", "state", "episode")}
  kept_seeds, lengths, attempts = [], [], 0
  try:
    for seed in episode_seeds("train", cfg.max_attempts, cfg.seed):
      if len(kept_seeds) == cfg.num_demos:
        break
      attempts += 1
      episode = _run_expert(sim, policy, seed, cfg)
      if episode is None:
        continue
      for k, v in episode.items():
        cols[k].append(v)
      cols["episode"].append(np.full(len(episode["actions"]), len(kept_seeds), np.int32))
      kept_seeds.append(seed)
      lengths.append(len(episode["actions"]))
  finally:
    sim.close()
  if len(kept_seeds) < cfg.num_demos:
    raise RuntimeError(f"{cfg.task}: the scripted expert succeeded in only {len(kept_seeds)} of "
                       f"{attempts} episodes; {cfg.num_demos} demos were asked for.")
  arrays = {k: np.concatenate(v) for k, v in cols.items()}
  meta = {"config": dataclasses.asdict(cfg), "seeds": kept_seeds, "lengths": lengths,
          "attempts": attempts, "expert_success_rate": len(kept_seeds) / attempts}
  return arrays, meta


def _run_expert(sim, policy, seed: int, cfg: DemoConfig) -> dict | None:
  obs = sim.reset(seed)
  rows, hold = [], None
  for _ in range(cfg.max_steps):
    action = sim.expert_action(policy)
    rows.append((obs["rgb"], action, obs["proprio"], obs["state"]))
    obs, _, _, info = sim.step(action)
    if info["success"] and hold is None:
      hold = 0
    if hold is not None:
      hold += 1
      if hold > cfg.hold_steps:
        break
  if hold is None:
    return None
  frames, actions, proprio, state = (np.stack(c) for c in zip(*rows))
  return {"frames": frames, "actions": actions.astype(np.float32),
          "proprio": proprio.astype(np.float32), "state": state.astype(np.float32)}


def path_for(root: str, cfg: DemoConfig) -> str:
  return f"{root}/metaworld/{cfg.task}/demos-{cfg.key()}"


def load_or_generate(root: str, cfg: DemoConfig, regenerate: bool = True) -> Demos:
  """The demos for `cfg`, generated on first use. A corrupt or truncated entry is
  regenerated (with a warning) or, with `regenerate=False`, refused."""
  base, key = path_for(root, cfg), cfg.key()
  if files.exists(base):
    try:
      return _as_demos(*files.load(base, key))
    except files.CorruptFileError as e:
      if not regenerate:
        raise
      warnings.warn(f"{e} Regenerating.", stacklevel=2)
      files.remove(base)
  arrays, meta = generate(cfg)
  files.save(base, arrays, meta, key)
  return _as_demos(*files.load(base, key))


def _as_demos(arrays: dict, record: dict) -> Demos:
  return Demos(frames=arrays["frames"], actions=arrays["actions"], proprio=arrays["proprio"],
               state=arrays["state"], episode=arrays["episode"], meta=record["meta"],
               sha256=record["sha256"])
