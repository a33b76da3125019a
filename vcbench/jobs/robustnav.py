"""The RobustNav job: clean agents -> every corruption condition -> result store; then Table 3's
ways to resist corruptions on the RGB agent (configs/robustnav.py has the variants).

Each evaluated cell is a store record (benchmark 'robustnav', task = the agent's nav variant,
adaptation = 'none' | 'pad_ap' | 'pad_rp' | 'finetune' | 'augment', corruption = the
condition's name, severity); cells already stored for this config are skipped. Adapted params
are checkpointed under <workdir>/adapt/<agent>/<config hash>/<method>/<condition>, so a killed run
resumes without redoing an adaptation. Adaptation interacts with the *training* apartments under the
corruption (the calibration phase); evaluation uses fixed episodes of the `split` apartments
(test by default). The agents are the shipped ones (`benchmarks/nav_agents`) or, with
`agents_from='train'`, configs/nav.py runs under `nav_workdir` (trained first if absent).

With `pvr` (a zoo PVR; `agents_from='train'`), each agent is its nav variant with that PVR as
its frozen visual encoder (`policy.encoder`, and `policy.checkpoint` = `pvr_checkpoint` when
given), trained under `<nav_workdir>/<pvr>` (`<pvr>@<digest of the checkpoint's path>` with a
checkpoint of one's own), so agents of two PVRs, or of two weights files of one PVR, never
share a run; its cells carry the PVR as their `pvr` (the SimpleCNN agents' say 'scratch_cnn').
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import time

import ml_collections

from vcbench import config as config_lib
from vcbench.algos import pad as pad_lib
from vcbench.benchmarks import nav_agents
from vcbench.benchmarks import robustnav as rn
from vcbench.errors import UserError
from vcbench.jobs import grid as grid_lib
from vcbench.jobs import nav as nav_job
from vcbench.models import zoo
from vcbench.store import Cell, ResultStore

# What decides a cell's numbers is the rest of the config and the agent; not which other cells
# a launch computes, nor where.
DIRS = ("workdir", "nav_workdir")
NOT_HASHED = ("workdir", "eval_batch", "agents", "sweep", "only", "extra", "variant",
              "nav_config", "adapt.methods", "adapt.corruptions")


def default_config() -> ml_collections.ConfigDict:
  """RobustNav's Table 2 (+ the severity sweep) and Table 3 on vcbench-nav's PointNav agents."""
  c = ml_collections.ConfigDict()
  c.job = "robustnav"
  c.variant = "full"
  c.workdir = "runs/robustnav"
  c.nav_config = "configs/nav.py"   # The agents' config file: agents are its variants.
  c.nav_workdir = "runs/nav"
  c.agents = ("pointnav_rgb", "pointnav_rgbd")
  c.agents_from = "shipped"     # 'shipped': vcbench/benchmarks/nav_agents/<agent>.npz;
                                # 'train': the nav runs under nav_workdir (trained if absent).
  c.nav_updates = 0             # 'train': 0 = the nav variant's own num_updates
  c.pvr = ""                    # 'train': a zoo PVR, the agents' frozen visual encoder (each
                                # agent trained under nav_workdir/<pvr>); '': the nav variant's
                                # own encoder.
  c.pvr_checkpoint = ""         # its weights file; '': the zoo entry's own.
  c.split = "test"              # apartments of the episodes: 'test' (not the val apartments
                                # that chose the agents' checkpoints) or 'val'.
  c.val_scenes = 15             # apartments (RobustNav: RoboTHOR's 15 val scenes)
  c.episodes = 500              # per condition, balanced over the difficulty bins (RobustNav
                                # uses 1100; CPU budget): SR +- 2.7-4.4 at 95%
  c.eval_batch = 250
  c.seed = 0
  c.sweep = True                # also severities 1-4 of the graded visual corruptions
  c.only = ()                   # Table 2/sweep condition names to keep (e.g.
                                # 'spatter+motion_drift'); (): all
  c.extra = ()                  # more conditions, always run, "name[:severity]" (severity 5 by
                                # default), of any registered corruption, e.g. "camera_crack:3"
  c.adapt = a = ml_collections.ConfigDict()
  a.agent = "pointnav_rgb"      # Table 3 is about the RGB agent
  a.methods = rn.METHODS
  # At severity 5; adaptation runs in each. Spatter, the most damaging, costs ~8 min per 166k
  # adaptation steps on this CPU (its liquid layer is drawn at 224 px whatever the frame size).
  a.corruptions = ("defocus_blur", "lower_fov", "speckle_noise")
  a.budget = 166_000            # calibration budget, env steps (RobustNav)
  a.augment_steps = 409_600     # PPO steps with augmented frames, from the clean agent
  a.finetune_lr = 2.5e-4
  a.pad = pad_lib.default_config()
  return c


def _parse(spec: str) -> rn.Condition:
  name, _, severity = spec.partition(":")
  return rn.Condition.parse(name, int(severity) if severity else 5)


def conditions(config) -> list[rn.Condition]:
  """Table 2 (+ the sweep), kept to `only` when it names any, + `extra` (asked for by name, so
  never filtered)."""
  base = rn.table2() + (rn.sweep() if config.sweep else [])
  kept = [c for c in base if c.name in set(config.only)] if config.only else base
  return kept + [c for c in map(_parse, config.extra) if c not in kept]


def validate(config) -> None:
  if config.agents or not config.adapt.methods:   # Table 3 alone needs no Table 2 agents.
    config_lib.require_grid(config, ("agents",))
  config_lib.require_choice(config, "agents_from", ("shipped", "train"))
  config_lib.require_choice(config, "split", ("val", "test"))
  _check_pvr(config)
  table3 = [config.adapt.agent] if config.adapt.methods else []
  for variant in list(config.agents) + table3:
    if config.agents_from == "train":
      nav = nav_config(config, variant)
      if config.pvr:
        _check_pvr_agent(config, variant, nav)
    elif variant not in nav_agents.names():
      raise config_lib.ConfigError(
          f"agents: no shipped agent {variant!r} (shipped: {nav_agents.names()}); "
          "--config.agents_from=train trains configs/nav.py variants instead")
  config_lib.require_choice(config, "adapt.methods", rn.METHODS)
  try:
    conditions(config)
    for name in list(config.adapt.corruptions) + list(config.only):
      rn.Condition.parse(name, 5)
  except ValueError as e:
    raise config_lib.ConfigError(f"config: {e}") from None
  pad_lib.check_config(config.adapt.pad)


def _check_pvr(config) -> None:
  """`pvr` only with trained agents, a zoo name; `pvr_checkpoint` only with it, a readable
  file."""
  if not config.pvr:
    if config.pvr_checkpoint:
      raise config_lib.ConfigError(
          f"config.pvr_checkpoint = {config.pvr_checkpoint!r} is the weights of config.pvr, "
          "which is not set")
    return
  if config.agents_from != "train":
    raise config_lib.ConfigError(
        f"config.pvr = {config.pvr!r} makes agents with that PVR as their encoder, which "
        f"must be trained: set --config.agents_from=train (the {config.agents_from} agents "
        "have their own encoders)")
  config_lib.require_choice(config, "pvr", zoo.names())
  if config.pvr_checkpoint and not os.path.isfile(config.pvr_checkpoint):
    raise config_lib.ConfigError(
        f"config.pvr_checkpoint = {config.pvr_checkpoint!r}: no such file")


def _check_pvr_agent(config, variant: str, nav) -> None:
  """What training `variant` with the PVR would refuse, or Table 3 with it."""
  if nav.init_from:
    raise config_lib.ConfigError(
        f"config.pvr = {config.pvr!r}: agent {variant!r} starts from the params of "
        f"{nav.init_from!r}, a network with another encoder; choose a one-stage variant (e.g. "
        f"{variant}_il or pointnav_rgb_quick)")
  if "rgb" not in nav.sensors:   # The PVR would see nothing: a cnn agent under its name.
    raise config_lib.ConfigError(
        f"config.pvr = {config.pvr!r} encodes RGB frames, but agent {variant!r} observes "
        f"{tuple(nav.sensors)}; choose an RGB variant (e.g. pointnav_rgb_quick, tiny_rgb)")
  pad = [m for m in config.adapt.methods if m.startswith("pad_")]
  if pad and variant == config.adapt.agent:
    raise config_lib.ConfigError(
        f"config.adapt.methods: {', '.join(pad)} adapt the agent's own SimpleCNN, which an "
        f"agent with config.pvr = {config.pvr!r} (frozen) does not have; leave them out")
  try:   # A pretrained entry's weights, a ViT's input size (a multiple of its patch).
    zoo.check_inputs(config.pvr, nav.policy.checkpoint, nav.policy.img_size or None)
  except UserError as e:
    raise config_lib.ConfigError(
        f"config.pvr = {config.pvr!r} in agent {variant!r} (its policy.img_size = "
        f"{nav.policy.img_size}): {e}") from None


def agents_workdir(config) -> str:
  """Where the trained agents' nav runs are: `nav_workdir`, or with a PVR its subdirectory
  named by the PVR (and, for weights of one's own, a digest of their path)."""
  if not config.pvr:
    return config.nav_workdir
  name = config.pvr
  if config.pvr_checkpoint:
    path = os.path.abspath(config.pvr_checkpoint)
    name += "@" + hashlib.sha256(path.encode()).hexdigest()[:12]
  return os.path.join(config.nav_workdir, name)


def nav_config(config, variant: str) -> ml_collections.ConfigDict:
  """The nav job config of agent `variant` (a variant of `config.nav_config`, with `pvr` as its
  frozen encoder when set), under `agents_workdir`."""
  try:
    nav = config_lib.load_file(f"{config.nav_config}:{variant}")
  except ValueError as e:   # An unknown variant.
    raise config_lib.ConfigError(f"agents: {e}") from None
  nav.workdir = agents_workdir(config)
  if config.nav_updates:
    nav[nav.algo].num_updates = config.nav_updates
  if config.pvr:
    nav.policy.encoder, nav.policy.finetune_encoder = config.pvr, False
    if config.pvr_checkpoint:
      nav.policy.checkpoint = config.pvr_checkpoint
  return nav


def agent(config, variant: str) -> rn.Agent:
  """The clean-trained agent `variant`: shipped, or trained first if `nav_workdir` has none."""
  if config.agents_from == "shipped":
    return rn.Agent.shipped(variant, config.nav_workdir)
  nav = nav_config(config, variant)
  nav_job.trained(nav)
  earlier = nav_job.stages(nav)[:-1]
  return rn.Agent(nav, steps_before=sum(st["selected_env_steps"] for st in earlier))


# Fields added after cells were stored, with the value that reproduces them. `pvr` and
# `pvr_checkpoint` are hashed when set: they make another agent, whose `info` (its selected
# update and val SR) could happen to equal the SimpleCNN agent's.
ADDED_LATER = {"agents_from": "train", "split": "val", "pvr": "", "pvr_checkpoint": ""}


def config_hash(config, a: rn.Agent) -> str:
  return grid_lib.config_hash(config, NOT_HASHED, ADDED_LATER, agent=a.variant, **a.info)


def run(config) -> dict:
  conds = conditions(config)
  for variant in config.agents:
    a = agent(config, variant)
    env = a.env(config.split, config.episodes, config.val_scenes)
    evaluate_cells(config, a, "none", lambda: a.params, conds, env)
  m = config.adapt
  if m.methods:
    a = agent(config, m.agent)
    env = a.env(config.split, config.episodes, config.val_scenes)
    targets = [rn.Condition.parse(name, 5) for name in m.corruptions]
    root = pathlib.Path(config.workdir) / "adapt" / a.variant / config_hash(config, a)[:12]
    for method in m.methods:
      # Augmentation trains once, on clean frames, and is evaluated clean and corrupted.
      for cond in ([rn.Condition()] if method == "augment" else targets):
        adapted = lambda: rn.adapt(a, method, cond, root / method, m, config.seed)  # noqa: E731
        evaluate_cells(config, a, method, adapted,
                       [rn.Condition()] + targets if method == "augment" else [cond], env)
  rows = ResultStore(pathlib.Path(config.workdir) / "results.jsonl").to_rows(
      benchmark=rn.BENCHMARK, latest_only=True)
  return {"records": float(len(rows))}


def _cell(config, a: rn.Agent, adaptation: str, cond: rn.Condition) -> Cell:
  # The agent's encoder as the nav job names it ('scratch_cnn' for the SimpleCNN).
  return Cell(benchmark=rn.BENCHMARK, task=a.variant, pvr=nav_job.cell(a.nav).pvr,
              adaptation=adaptation, seed=int(config.seed), corruption=cond.name,
              severity=cond.severity)


def _label(config, variant: str) -> str:
  """The agent in logs: its variant, and its PVR when it has one."""
  return f"{variant} {config.pvr}" if config.pvr else variant


def plan(config) -> list[grid_lib.Slice]:
  """The sweep's pieces: one per agent and corruption of Table 2 and the severity sweep (every
  severity of it, and its `extra` conditions), and one per Table 3 adaptation (one for
  augmentation, which trains once and is evaluated clean and under every corruption). The
  agents are resolved first (with `agents_from='train'`, trained here if `agents_workdir`
  lacks them); with a `pvr`, the pieces' keys name it."""
  out = []
  by_name: dict[str, list[rn.Condition]] = {}
  for cond in conditions(config):
    by_name.setdefault(cond.name, []).append(cond)
  pvr = (config.pvr,) if config.pvr else ()   # Pieces of two PVRs' plans never share a name.
  for variant in config.agents:
    a = agent(config, variant)
    for name, conds in by_name.items():
      extra = tuple(e for e in config.extra if _parse(e).name == name)
      out.append(grid_lib.Slice((variant, *pvr, name), {
          "agents": (variant,), "only": (name,), "extra": extra, "adapt.methods": ()},
          tuple(_cell(config, a, "none", c) for c in conds), config_hash(config, a)))
  m = config.adapt
  if m.methods:
    a = agent(config, m.agent)
    targets = [rn.Condition.parse(name, 5) for name in m.corruptions]
    for method in m.methods:
      for corruption in ((None,) if method == "augment" else m.corruptions):
        conds = ([rn.Condition()] + targets if corruption is None
                 else [rn.Condition.parse(corruption, 5)])
        out.append(grid_lib.Slice((m.agent, *pvr, method) + ((corruption,) if corruption else ()), {
            "agents": (), "adapt.methods": (method,),
            "adapt.corruptions": tuple(m.corruptions) if corruption is None else (corruption,)},
            tuple(_cell(config, a, method, c) for c in conds), config_hash(config, a)))
  return out


def evaluate_cells(config, a: rn.Agent, adaptation: str, get_params, conds, env) -> None:
  """Evaluates the pending cells of `conds`; `get_params()` (an adaptation, when it has not
  been run yet) is called only when there is one."""
  label = f"robustnav {_label(config, a.variant)} [{adaptation}]"
  grid = grid_lib.Grid(label, config.workdir, config_hash(config, a))
  units = [grid_lib.Unit((cond,), (_cell(config, a, adaptation, cond),)) for cond in conds]
  todo = grid.todo(units)
  params = get_params() if todo else None
  for unit in grid.pending(todo):
    (cond,) = unit.key
    t0 = time.time()
    s = rn.evaluate(a.trainer, params, rn.corrupted(env, cond, config.seed),
                    task=a.nav.task, batch=config.eval_batch, seed=config.seed)
    grid.record(unit.cells[0], s, extra={"kind": cond.kind, "split": config.split,
                                         "seconds": round(time.time() - t0, 1), **a.info},
                allow_nonfinite=True)
    print(f"{label} {cond.name} sev {cond.severity}: "
          f"SR {s['success']:.1f} SPL {s['spl']:.1f} ({time.time() - t0:.0f} s)", flush=True)
