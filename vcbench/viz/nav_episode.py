"""One vcbench-nav episode as a PNG strip: what the agent sees and where it goes.

`look(task, split, episode, out)` runs episode `episode` of the split's episode set
(`nav.make(task, split, num_scenes=, num_episodes=)`, so the same arguments give the same
episode) with the shortest-path expert or a random policy (uniform over MOVE_AHEAD /
ROTATE_LEFT / ROTATE_RIGHT, never END, so it walks until the step limit), and writes one PNG:
`frames` evenly spaced views as rows of RGB, depth (viridis, 0 to 6 m) and semantics (the
`nav_views` palette, with its legend), the top-down map of the scene with the path, start,
goal and numbered heading arrows at the shown frames, and a title with the episode's geodesic
distance, success, SPL and steps. ObjectNav names the goal category, outlines its instances
and tints the region where END succeeds (there is no single goal point); ImageNav shows the
goal image in an extra column and the goal's heading. The views are rendered again at the
recorded poses by the env's own renderer, so depth is in metres whatever normalisation the
env's observation applies. `python -m launch.nav_look` is its command line.
"""
from __future__ import annotations

import functools
import os
import pathlib

import jax
import numpy as np

from vcbench import files
from vcbench.envs import nav
from vcbench.envs.nav import env as nav_env
from vcbench.envs.nav import expert
from vcbench.envs.nav import render
from vcbench.envs.nav import scene as sc
from vcbench.envs.nav import tasks
from vcbench.viz import nav_views

_SENSORS = ("rgb", "depth", "semantic")
_DPI = 100
_DEPTH_RANGE = 6.0     # metres at the top of the depth colormap: rooms are a few metres deep.
# Layout in pixels (the PNG's size is exact: see `strip_size`).
_GAP, _LABEL_W, _TITLE_H, _HEADER_H, _LEGEND_H = 8, 84, 60, 18, 48
_MAP_GAP, _MAP_LEGEND_W = 48, 170


@functools.partial(jax.jit, static_argnames=("policy",))
def _policy_step(env, state, key, policy: str):
  """One action of `policy` and the env's step on it (one env, no batch axis)."""
  if policy == "expert":
    action = expert.action(env, state)
  else:  # Moves and turns only: a random END would finish nearly every episode at once.
    action = jax.random.randint(key, (), 0, nav_env.END)
  return env.step(state, action)


@jax.jit
def _reset(env, index):
  return env.reset_to(index)


def run_episode(env: nav.NavEnv, index: int, policy: str = "expert", seed: int = 0) -> dict:
  """Runs episode `index` until it ends; returns its poses and metrics on the host.

  Returns a dict with `pos` [T+1, 2] and `heading` [T+1] (T = steps taken; entry 0 is the
  start pose) and `metrics` (the finished episode's, as floats).
  """
  state = _reset(env, index)
  key = jax.random.key(seed)
  poses = [jax.device_get((state.sim.pos, state.sim.heading))]
  while not bool(state.done):
    key, sub = jax.random.split(key)
    state = _policy_step(env, state, sub, policy)
    poses.append(jax.device_get((state.sim.pos, state.sim.heading)))
  return {"pos": np.stack([p for p, _ in poses]), "heading": np.stack([h for _, h in poses]),
          "metrics": {k: float(v) for k, v in jax.device_get(state.metrics).items()}}


@functools.partial(jax.jit, static_argnames=("camera",))
def _views(scene, atlas, pos, heading, camera):
  return jax.vmap(lambda p, h: render.render(scene, atlas, p, h, camera, _SENSORS))(pos, heading)


def render_views(env: nav.NavEnv, scene_index: int, pos, heading) -> dict:
  """RGB, depth (metres) and semantics at the given poses, by the renderer the env observes
  with (depth straight from it, whatever normalisation the env's observation applies)."""
  out = _views(env.scene(scene_index), env.atlas, np.asarray(pos, np.float32),
               np.asarray(heading, np.float32), env.camera)
  out = jax.device_get(out)
  return {"rgb": out["rgb"], "depth": out["depth"][..., 0], "semantic": out["semantic"]}


def frame_indices(num_obs: int, frames: int) -> np.ndarray:
  """`frames` evenly spaced indices into `num_obs` observations, first and last included
  (repeats when the episode is shorter than `frames`, so the strip's size never changes)."""
  return np.linspace(0, num_obs - 1, frames).round().astype(int)


def _panel(size: int) -> int:
  """A frame's side on the strip: small renders are enlarged (nearest) so labels fit."""
  return max(size, 128)


def strip_size(frames: int, size: int, task: str) -> tuple[int, int]:
  """(width, height) in pixels of the PNG `look` writes."""
  p = _panel(size)
  columns = frames + (task == "imagenav")
  map_side = 3 * p + 2 * _GAP
  width = _LABEL_W + columns * (p + _GAP) + _MAP_GAP + map_side + _MAP_LEGEND_W
  height = _TITLE_H + _HEADER_H + map_side + _LEGEND_H
  return width, height


def _title(task: str, split: str, index: int, policy: str, episode, metrics) -> str:
  goal = (f", goal: {sc.CATEGORIES[int(episode.category)]}" if task == "objectnav" else "")
  bins = tasks.get(task).bins
  return (f"vcbench-nav {task} ({split}) episode {index}{goal}, {policy} policy\n"
          f"scene {int(episode.scene)}, {bins[int(episode.difficulty)][0]}: geodesic "
          f"{float(episode.distance):.2f} m; success {metrics['success']:.0f}, "
          f"SPL {metrics['spl']:.2f}, {metrics['episode_length']:.0f} steps, "
          f"{metrics['failed_actions']:.0f} collisions")


def draw_strip(env: nav.NavEnv, index: int, run: dict, frames: int, title: str):
  """The figure: rows of RGB / depth / semantics at `frames` views, the map, the legends.

  `run` is `run_episode`'s result."""
  from matplotlib import figure as figure_lib  # pylint: disable=g-import-not-at-top
  episode = jax.tree.map(lambda a: np.asarray(a[index]), env.episodes)
  scene = jax.tree.map(np.asarray, env.scene(int(episode.scene)))
  size = env.camera.height
  width, height = strip_size(frames, size, env.task)
  fig = figure_lib.Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
  p = _panel(size)

  def axes(x, y, w, h):  # Pixel rectangle from the top-left corner -> figure fractions.
    return fig.add_axes((x / width, 1 - (y + h) / height, w / width, h / height))

  top = _TITLE_H + _HEADER_H
  shown = frame_indices(len(run["pos"]), frames)
  views = render_views(env, int(episode.scene), run["pos"][shown], run["heading"][shown])
  first = _LABEL_W
  if env.task == "imagenav":
    ax = axes(first, top, p, p)
    ax.imshow(np.asarray(env.goal_images[index]), interpolation="nearest")
    ax.set_title("goal image", fontsize=8)
    ax.set_axis_off()
    first += p + _GAP
  far = min(env.camera.max_depth, _DEPTH_RANGE)
  rows = (("RGB", lambda c: dict(X=views["rgb"][c])),
          (f"depth\n0–{far:g} m", lambda c: dict(X=views["depth"][c], cmap="viridis",
                                                   vmin=0.0, vmax=far)),
          ("semantic", lambda c: dict(X=nav_views.semantic_rgb(views["semantic"][c]))))
  for r, (label, image) in enumerate(rows):
    y = top + r * (p + _GAP)
    fig.text((_LABEL_W - 8) / width, 1 - (y + p / 2) / height, label, ha="right", va="center",
             fontsize=9)
    for c, i in enumerate(shown):
      ax = axes(first + c * (p + _GAP), y, p, p)
      ax.imshow(**image(c), interpolation="nearest")
      ax.set_xticks([])
      ax.set_yticks([])
      if r == 0:
        ax.set_title(f"{c + 1}: t = {i}", fontsize=8)
  map_side = 3 * p + 2 * _GAP
  ax = axes(first + frames * (p + _GAP) + _MAP_GAP, top, map_side, map_side)
  objectnav = env.task == "objectnav"
  # ObjectNav succeeds anywhere near any goal instance: tint that region instead of one point.
  nav_views.draw_topdown(
      ax, scene, np.asarray(env.atlas), path=run["pos"], headings=run["heading"][shown],
      marks=shown, start=episode.start, goal=None if objectnav else episode.goal,
      goal_heading=episode.goal_heading if env.task == "imagenav" else None,
      goal_category=int(episode.category), region=(episode.field <= 0.0) if objectnav else None)
  ax.set_title("top-down map" + (" (goal instances outlined)" if objectnav else ""), fontsize=9)
  fig.legend(handles=nav_views.semantic_legend_handles(), loc="lower left", ncol=sc.NUM_SEMANTIC,
             bbox_to_anchor=(_LABEL_W / width, 0.0), fontsize=8, frameon=False,
             title="semantic labels", title_fontsize=8)
  fig.suptitle(title, x=_LABEL_W / width, y=1 - 6 / height, ha="left", va="top", fontsize=10)
  return fig


def look(task: str, split: str, episode: int, out: str | os.PathLike[str], frames: int = 8,
         size: int = 128, policy: str = "expert", num_scenes: int = 8, num_episodes: int = 32,
         seed: int = 0) -> dict:
  """Runs one episode and writes its strip to `out`; returns {"path", "metrics", "steps"}."""
  if not 0 <= episode < num_episodes:
    raise ValueError(f"nav_look: --episode must be in [0, {num_episodes}) (the episode set "
                     f"has --num_episodes={num_episodes}), got {episode}.")
  if frames < 1:
    raise ValueError(f"nav_look: --frames must be >= 1, got {frames}.")
  env = nav.make(task, split, num_scenes=num_scenes, num_episodes=num_episodes, height=size,
                 width=size, sensors=("rgb",), auto_reset=False, seed=seed)
  run = run_episode(env, episode, policy, seed)
  ep = jax.tree.map(lambda a: np.asarray(a[episode]), env.episodes)
  fig = draw_strip(env, episode, run, frames,
                   _title(task, split, episode, policy, ep, run["metrics"]))
  _save_png(fig, out)
  return {"path": pathlib.Path(out), "metrics": run["metrics"], "steps": len(run["pos"]) - 1}


def _save_png(fig, path) -> None:
  """Written whole or not at all (a crash never leaves half a PNG); exact pixel size."""
  from matplotlib.backends import backend_agg  # pylint: disable=g-import-not-at-top
  backend_agg.FigureCanvasAgg(fig)
  files.atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=_DPI))

