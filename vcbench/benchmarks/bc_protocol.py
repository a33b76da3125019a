"""CortexBench's few-shot BC protocol for one cell (task x PVR x seed), on any host-bridged suite.

Train BC on cached frozen embeddings of the demos (or with the encoder fine-tuned); every
`eval_every` epochs roll the policy out on the validation episodes (simulator on host;
preprocessing, encoder and policy on device; one jitted `lax.scan` per batch of episodes); score
the best validation epoch on the test episodes with the suite's metric (`cortexbench.Suite`).
eai-vc picks the best epoch on the test rollouts themselves; vcbench selects on held-out
validation seeds and reports test (docs/design.md).

In a success-scored suite (MetaWorld) success is the simulator's `success` flag reached at any
step within the horizon, and an episode stops there (MetaWorld's own evaluation convention;
eai-vc reads the flag at the last of 500 steps, which also counts policies that succeed and
then undo it as failures); validation selects by success rate. A return-scored suite (DMC's
return/10) runs every episode to its horizon and selects by the same score, as does a suite
scored by the simulator's own continuous score (TriFinger: its last step's `info['score']`).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vcbench import config as config_lib
from vcbench import metrics as metrics_lib
from vcbench.algos import bc, finetune, runner
from vcbench.data.demos import Demos, episode_seeds
from vcbench.envs import host, rollout, stream
from vcbench.models import zoo
from vcbench.models import embedder as embedder_lib
from vcbench.models.embedder import Embedder

OVERLAP = {"auto": None, "on": True, "off": False}   # config.eval_overlap -> Protocol.overlap
# Config keys of the BC track (configs/cortexbench.py) that must be positive ints.
POSITIVE = ("num_demos", "render_size", "embed_batch", "epochs", "val_episodes",
            "test_episodes", "horizon", "history", "batch_size", "eval_envs")
Score = Callable[[dict], float]   # per-episode arrays -> the suite's score (0-100)


def success_score(episodes: dict) -> float:
  return 100.0 * float(np.mean(episodes["success"]))


@dataclasses.dataclass(frozen=True)
class Protocol:
  epochs: int = 100
  eval_every: int = 5
  val_episodes: int = 10
  test_episodes: int = 25
  horizon: int = 500
  history: int = 3
  use_proprio: bool = True
  batch_size: int = 256
  lr: float = 1e-3
  hidden: tuple[int, ...] = (256, 256, 256)
  eval_envs: int = 10       # Episodes simulated side by side in one rollout.
  num_workers: int = 0      # Simulator worker processes (0: in the main process).
  stop_on_success: bool = True   # An episode ends at success (success-scored suites).
  stream: bool = True       # Episodes streamed through the env slots (`envs.stream`);
                            # False: fixed batches of eval_envs.
  # Streams: two halves of eval_envs slots, one simulated while the device acts for the other
  # (needs num_workers >= 2). None: where the policy runs on an accelerator (`stream.overlap_pays`).
  overlap: Optional[bool] = None

  @classmethod
  def from_config(cls, config, proprio: bool = True, stop_on_success: bool = True
                  ) -> "Protocol":
    """The protocol of a BC-track config (configs/cortexbench.py's keys); `proprio`: whether
    the suite observes proprioception at all."""
    return cls(epochs=config.epochs, eval_every=config.eval_every,
               val_episodes=config.val_episodes, test_episodes=config.test_episodes,
               horizon=config.horizon, history=config.history,
               use_proprio=bool(config.use_proprio and proprio), batch_size=config.batch_size,
               lr=config.lr, hidden=tuple(config.hidden), eval_envs=config.eval_envs,
               num_workers=config.num_workers, stop_on_success=stop_on_success,
               stream=bool(config.get("eval_stream", True)),
               overlap=OVERLAP[config.get("eval_overlap", "auto")])

  def bc_config(self, seed: int):
    """The `bc.default_config` of this protocol's learner."""
    c = bc.default_config()
    c.hidden, c.lr, c.batch_size = tuple(self.hidden), self.lr, self.batch_size
    c.epochs, c.seed = self.epochs, int(seed)
    return c

  @property
  def chunk(self) -> int:
    """Epochs between validations (the last chunk may be shorter: the last epoch is always
    validated)."""
    return self.eval_every if self.eval_every > 0 else self.epochs


def validate_config(config, pvrs) -> dict[str, str]:
  """Checks the BC-track keys of a job config; returns its PVR checkpoints (pvr -> path)."""
  config_lib.require_ints(config, POSITIVE)
  config_lib.require_ints(config, ("img_size", "eval_every", "num_workers"), minimum=0)
  if "eval_overlap" in config:
    config_lib.require_choice(config, "eval_overlap", tuple(OVERLAP))
  config_lib.require(config, "seeds", lambda v: len(v) > 0, "at least one seed")
  config_lib.require(config, "camera", lambda v: isinstance(v, str) and v, "a camera name")
  checkpoints = config_lib.parse_mapping(config, "checkpoints", pvrs)
  for pvr in pvrs:   # Files and sizes now, not after the demos are generated.
    if pvr != embedder_lib.STATE_ORACLE:
      zoo.check_inputs(pvr, checkpoints.get(pvr), config.img_size or None)
  return checkpoints


class Evaluator:
  """Rollouts of BC policies on one task at a time (`switch` moves on), one compiled program
  per embedder (policy params are arguments, so every evaluation epoch, seed and task reuses
  it). With `protocol.stream` (the default) episodes stream through the env slots and the host
  simulators overlap the device (`envs.stream`); otherwise they run in fixed batches of
  `eval_envs` (`envs.rollout`), the reference the stream is tested against."""

  def __init__(self, make_sim: Callable[[], host.HostSim], protocol: Protocol):
    self.protocol = protocol
    self._compiled: dict[str, Callable] = {}
    self.runner = self._runner(self._batches(make_sim))

  def _runner(self, batches: list[host.SimBatch]):
    return (stream.EpisodeStream(batches) if self.protocol.stream
            else host.HostEnv(self._bound(batches)))

  def _bound(self, batches: list[host.SimBatch]):
    """What the runner binds: a stream its halves, a fixed-batch env its one batch."""
    return batches if self.protocol.stream else batches[0]

  def _batches(self, make_sim) -> list[host.SimBatch]:
    p = self.protocol
    if p.stream:
      return stream.make_batches(make_sim, p.eval_envs, horizon=p.horizon,
                                 stop_on_success=p.stop_on_success, num_workers=p.num_workers,
                                 overlap=stream.overlap_pays() if p.overlap is None
                                 else p.overlap)
    return [host.SimBatch(make_sim, p.eval_envs, horizon=p.horizon, num_workers=p.num_workers,
                          stop_on_success=p.stop_on_success)]

  def switch(self, make_sim: Callable[[], host.HostSim], horizon: Optional[int] = None) -> None:
    """Moves to another task (with its own `horizon`, if given). With the same observation and
    action shapes the compiled programs are kept (fixed batches: and the same horizon, their
    scan length); otherwise (e.g. DMC's walker after its reacher) they are rebuilt."""
    if horizon is not None and horizon != self.protocol.horizon:
      self.protocol = dataclasses.replace(self.protocol, horizon=int(horizon))
      if not self.protocol.stream:
        self._compiled = {}
    batches = self._batches(make_sim)
    if self.runner.can_rebind(self._bound(batches)):
      old = self.runner.rebind(self._bound(batches))
      for b in old if isinstance(old, list) else [old]:
        b.close()
    else:
      self.runner.close()
      self.runner, self._compiled = self._runner(batches), {}

  def _program(self, embedder: Embedder, act):
    if embedder.fingerprint not in self._compiled:
      p = self.protocol
      step = bc.make_policy_step(embedder.fn, act, p.history, p.use_proprio)
      if p.stream:
        fn = self.runner.program(step, bc.restart)
      else:
        def fn(carry, seeds):
          state, traj = rollout.rollout(self.runner, step, carry, seeds, p.horizon)
          # Done envs are not stepped again: the final state holds each episode's last score.
          return traj, state.metrics["score"]
      self._compiled[embedder.fingerprint] = jax.jit(fn)
    return self._compiled[embedder.fingerprint]

  def episodes(self, embedder: Embedder, act, policy, seeds: list[int],
               record_actions: bool = False) -> dict:
    """Per-episode `success` (bool), `length`, `return` and `score` (the simulator's last
    `info['score']`, NaN if it reports none) over `seeds`, in order; with `record_actions`
    also `actions`, each episode's [length, action_dim] actions."""
    fn = self._program(embedder, act)
    carry = lambda n: bc.initial_carry(embedder.params, policy, n, embedder.dim,
                                       self.protocol.history)
    if self.protocol.stream:
      return self.runner.run(fn, [carry(n) for n in self.runner.sizes], seeds, record_actions)
    return self._batched(fn, carry, seeds, record_actions)

  def _batched(self, fn, carry, seeds: list[int], record_actions: bool) -> dict:
    n = self.runner.num_envs
    out = {"success": [], "length": [], "return": [], "score": [], "actions": []}
    for start in range(0, len(seeds), n):
      chunk = list(seeds[start:start + n])
      chunk += [-1] * (n - len(chunk))  # Idle slots: never stepped or rendered.
      traj, score = fn(carry(n), jnp.asarray(chunk, jnp.int32))
      keep = min(n, len(seeds) - start)
      active = np.asarray(traj.active)
      out["success"].append(np.asarray(traj.success[-1])[:keep])
      out["length"].append(active.sum(0)[:keep])
      # Idle and finished steps carry no reward: the sum is each episode's return.
      out["return"].append(np.asarray(traj.reward, np.float64).sum(0)[:keep])
      out["score"].append(np.asarray(score, np.float64)[:keep])
      out["actions"] += [np.asarray(traj.action)[active[:, i], i] for i in range(keep)]
    actions = out.pop("actions")
    out = {k: np.concatenate(v) for k, v in out.items()}
    return {**out, "actions": actions} if record_actions else out

  def close(self):
    self.runner.close()


def episode_scores(episodes: dict, score: Score = success_score) -> list[float]:
  """Each episode's score on the suite's 0-100 scale: `score` of that episode alone (every
  suite score is a mean over episodes, so these average to the cell's score). The store keeps
  them so that reports can put confidence intervals on a table by resampling episodes."""
  n = len(episodes["success"])
  return [float(score({k: np.asarray(v)[i:i + 1] for k, v in episodes.items()}))
          for i in range(n)]


def summary(episodes: dict, score: Score = success_score) -> dict:
  """A cell's score, its episodes' scores and the episode means the store keeps."""
  return {"score": float(score(episodes)), "episode_scores": episode_scores(episodes, score),
          "success_rate": float(np.mean(episodes["success"])),
          "mean_length": float(np.mean(episodes["length"])),
          "mean_return": float(np.mean(episodes["return"]))}


@dataclasses.dataclass
class Fitted:
  """A BC policy trained on one cell's demos, at its best validation epoch."""
  act: Callable
  state: Any                 # What `act` acts with (`bc.Variables`).
  embedder: Embedder         # The embedder it evaluates with (fine-tuned weights, if any).
  val_score: float
  best_epoch: int
  train_loss: float
  val_curve: list
  num_samples: int


def _select(protocol: Protocol, trainer, evaluate: Callable[[Any], dict],
            keep: Callable[[Any], Any], log: Callable[[str], Any],
            writer: Optional[metrics_lib.MetricWriter] = None
            ) -> tuple[runner.SelectBest, float]:
  """Trains `trainer` for the protocol's epochs, validating every `eval_every` (`evaluate`:
  state -> `summary`). Returns the selection (`best_state()`: what `keep` kept of the best
  epoch by score, the earliest on ties) and the last epoch's training loss. `writer` gets the
  loss of every epoch (`train/loss`) and every validation's score (`val/score`)."""
  writer = metrics_lib.NoOpWriter() if writer is None else writer

  def report(entry, progress):
    writer.write_scalars(entry["update"], {"val/score": entry["score"]})
    val = (f"val success {entry['score']:5.1f}%" if protocol.stop_on_success
           else f"val score {entry['score']:.2f}")
    log(f"  epoch {progress.done:3d}  loss {float(progress.metrics['loss'][-1]):.4f}  {val}")
  select = runner.SelectBest(evaluate, lambda e: e["score"], keep=keep, log=report)
  _, metrics = runner.run(trainer, None, protocol.chunk,
                          callbacks=[runner.WriteMetrics(writer), select])
  writer.flush()
  return select, float(metrics["loss"][-1])


def _fitted(protocol: Protocol, selected: tuple[runner.SelectBest, float], act, policy,
            embedder, num_samples: int) -> Fitted:
  # The curve: validation success rate per evaluation (success-scored suites), else the score.
  curve_key = "success_rate" if protocol.stop_on_success else "score"
  select, train_loss = selected
  return Fitted(act=act, state=policy, embedder=embedder, val_score=select.best["score"],
                best_epoch=select.best["update"], train_loss=train_loss,
                val_curve=[[h["update"], h[curve_key]] for h in select.record["history"]],
                num_samples=num_samples)


def fit(protocol: Protocol, evaluator: Evaluator, embedder: Embedder, demos: Demos,
        emb: np.ndarray, seed: int, log: Callable[[str], Any] = print,
        score: Score = success_score,
        writer: Optional[metrics_lib.MetricWriter] = None) -> Fitted:
  """Trains BC on the demos' embeddings; keeps the policy of the best validation epoch.
  `writer`: where the training loss and validation scores go (default: nowhere)."""
  p = protocol
  proprio = demos.proprio if p.use_proprio else None
  x = bc.features(emb, demos.episode, proprio, p.history).astype(np.float32)
  trainer = bc.make_train(p.bc_config(seed), x, demos.actions.astype(np.float32))
  val_seeds = episode_seeds("val", p.val_episodes)
  evaluate = lambda state: summary(evaluator.episodes(embedder, trainer.act, state.variables(),
                                                      val_seeds), score)
  selected = _select(p, trainer, evaluate, lambda state: state.variables(), log, writer)
  return _fitted(p, selected, trainer.act, selected[0].best_state(), embedder, len(x))


def fit_finetuned(protocol: Protocol, evaluator: Evaluator, encoder: zoo.Encoder, name: str,
                  demos: Demos, seed: int, encoder_lr: float = 1e-5,
                  log: Callable[[str], Any] = print, encoder_chunk: int = 64,
                  score: Score = success_score,
                  writer: Optional[metrics_lib.MetricWriter] = None) -> Fitted:
  """`fit` with the encoder fine-tuned end to end (`algos.finetune`; policy lr: protocol.lr).
  The fitted embedder holds the best validation epoch's encoder; `writer` as in `fit`."""
  p = protocol
  c = finetune.default_config()
  c.update(p.bc_config(seed))
  c.history, c.encoder_lr, c.encoder_chunk = p.history, encoder_lr, encoder_chunk
  proprio = jnp.asarray(demos.proprio, jnp.float32) if p.use_proprio else None
  trainer = finetune.make_train(c, encoder, jnp.asarray(demos.frames), demos.episode, proprio,
                                demos.actions)
  val_seeds = episode_seeds("val", p.val_episodes)
  evaluate = lambda state: summary(evaluator.episodes(trainer.embedder(state.encoder, name),
                                                      trainer.act, state.policy, val_seeds),
                                   score)
  selected = _select(p, trainer, evaluate, lambda state: (state.policy, state.encoder), log,
                     writer)
  policy, params = selected[0].best_state()
  return _fitted(p, selected, trainer.act, policy, trainer.embedder(params, name),
                 len(demos.actions))


def test(protocol: Protocol, evaluator: Evaluator, fitted: Fitted, demos: Demos,
         t0: float, score: Score = success_score, seeds: Optional[list[int]] = None) -> dict:
  """A fitted cell's metrics for the store: its test score, fit summary and the seconds since
  `t0`."""
  p = protocol
  seeds = episode_seeds("test", p.test_episodes) if seeds is None else seeds
  out = summary(evaluator.episodes(fitted.embedder, fitted.act, fitted.state, seeds), score)
  return {**out, "val_score": fitted.val_score, "best_epoch": fitted.best_epoch,
          "episodes": len(seeds), "train_loss": fitted.train_loss,
          "val_curve": fitted.val_curve, "num_demos": demos.num_episodes,
          "num_samples": fitted.num_samples,
          "expert_success_rate": demos.meta["expert_success_rate"],
          "seconds": time.time() - t0}
