"""Drawing pieces for vcbench-nav: a top-down map of a scene, a palette for the semantic sensor.

Used by `launch/nav_look.py` (the episode strip) and meant for notebooks too:

    image = nav_views.topdown_image(env.scene(0), env.atlas)         # uint8 [G*s, G*s, 3]
    nav_views.draw_topdown(ax, env.scene(0), env.atlas, path=xy, headings=h, goal=g)
    ax.imshow(nav_views.semantic_rgb(obs["semantic"]))

The map is drawn in world metres with y pointing down (matplotlib's image orientation), which is
the simulator's own top-down convention: heading 0 looks along +x, positive turns are clockwise.
Everything takes numpy or JAX arrays of one scene (no batch axis).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from vcbench.envs.nav import scene as sc

# Wall cells on the map: near-black, so they never look like any floor material.
WALL_COLOR = (38, 38, 42)
# Free floor the agent cannot stand on (too close to a wall or an object) is the floor
# material's colour darkened by this factor; navigable cells keep the full colour.
NOT_NAVIGABLE_SHADE = 0.55

# One colour per object category (CATEGORIES[1:]), shared by the map and the semantic sensor.
CATEGORY_COLORS = ((230, 130, 20),    # chair
                   (170, 80, 200),    # bed
                   (40, 170, 60),     # plant
                   (30, 200, 220),    # toilet
                   (220, 30, 40),     # tv
                   (40, 80, 220))     # sofa
# Semantic labels in SEM_* order: wall, floor, ceiling, then the categories.
SEMANTIC_NAMES = ("wall", "floor", "ceiling") + sc.CATEGORIES[1:]
SEMANTIC_COLORS = ((150, 150, 150), (120, 90, 60), (235, 235, 250)) + CATEGORY_COLORS
assert len(SEMANTIC_COLORS) == sc.NUM_SEMANTIC == len(SEMANTIC_NAMES)


def semantic_rgb(labels) -> np.ndarray:
  """uint8 [H, W, 3]: the semantic sensor's labels (int [H, W]) in SEMANTIC_COLORS."""
  labels = np.clip(np.asarray(labels), 0, sc.NUM_SEMANTIC - 1)
  return np.asarray(SEMANTIC_COLORS, np.uint8)[labels]


def material_colors(atlas) -> np.ndarray:
  """float [M, 3]: each material's mean colour, how a texture looks from far away."""
  return np.asarray(atlas, np.float64)[..., :3].mean(axis=(1, 2))


def topdown_image(scene: sc.Scene, atlas, px_per_cell: int = 8) -> np.ndarray:
  """The scene seen from above, uint8 [G*s, G*s, 3] with s = px_per_cell (row = grid row).

  Floors take their material's mean colour (darker where not navigable), walls WALL_COLOR,
  objects their category's colour.
  """
  wall = np.asarray(scene.wall)
  floor = np.asarray(scene.floor)
  inst = np.asarray(scene.obj_inst)
  inst_cat = np.asarray(scene.inst_cat)
  navigable = np.asarray(scene.navigable, bool)
  img = material_colors(atlas)[floor]
  img = np.where(navigable[..., None], img, img * NOT_NAVIGABLE_SHADE)
  cats = np.where(inst >= 0, inst_cat[np.maximum(inst, 0)], 0)
  palette = np.asarray(((0, 0, 0),) + CATEGORY_COLORS, np.float64)
  img = np.where((cats > 0)[..., None], palette[cats], img)
  img = np.where((wall > 0)[..., None], np.asarray(WALL_COLOR, np.float64), img)
  img = np.clip(np.round(img), 0, 255).astype(np.uint8)
  return np.repeat(np.repeat(img, px_per_cell, axis=0), px_per_cell, axis=1)


def _extent(scene: sc.Scene) -> tuple[float, float, float, float]:
  """imshow extent in metres with y pointing down (left, right, bottom, top)."""
  side = scene.wall.shape[-1] * sc.CELL
  return (0.0, side, side, 0.0)


def draw_topdown(ax, scene: sc.Scene, atlas, *, path=None, headings=None, marks=None,
                 start=None, goal=None, goal_heading=None, goal_category: int = 0,
                 region=None, legend: bool = True, px_per_cell: int = 8) -> None:
  """Draws the map on a matplotlib Axes, with an episode's path on top.

  Args:
    ax: the Axes.
    scene, atlas: one Scene and the env's material atlas.
    path: float [T, 2] agent positions (metres) to draw as a line.
    headings: float [K] headings (radians) drawn as arrows at `marks` (indices into `path`),
      numbered 1..K; both default to none.
    marks: int [K] indices into `path` where `headings` apply.
    start, goal: float [2] positions (metres) marked with a circle and a star.
    goal_heading: radians; an arrow at `goal` (ImageNav's goal view direction).
    goal_category: ObjectNav's goal category (1..6); its instances get a bright outline.
    region: bool [G, G] cells to tint (e.g. where END succeeds: the episode field's zeros).
    legend: add a legend of the markers and categories.
    px_per_cell: raster resolution of the map image.
  """
  from matplotlib import patches  # pylint: disable=g-import-not-at-top
  ax.imshow(topdown_image(scene, atlas, px_per_cell), extent=_extent(scene),
            interpolation="nearest")
  if region is not None:
    tint = np.zeros(np.shape(region) + (4,))
    tint[np.asarray(region, bool)] = (1.0, 1.0, 0.0, 0.35)
    ax.imshow(tint, extent=_extent(scene), interpolation="nearest")
  if goal_category:
    _outline_category(ax, scene, goal_category)
  if path is not None and len(path):
    path = np.asarray(path)
    ax.plot(path[:, 0], path[:, 1], color="white", linewidth=3.0, alpha=0.8)
    ax.plot(path[:, 0], path[:, 1], color="black", linewidth=1.2, label="path")
  if headings is not None and marks is not None:
    _heading_arrows(ax, np.asarray(path)[np.asarray(marks)], np.asarray(headings))
  if start is not None:
    ax.plot(*np.asarray(start), "o", color="lime", markeredgecolor="black", markersize=9,
            label="start")
  if goal is not None:
    ax.plot(*np.asarray(goal), "*", color="red", markeredgecolor="black", markersize=15,
            label="goal")
    if goal_heading is not None:
      _arrow(ax, np.asarray(goal), float(goal_heading), "red")
  ax.set_xlabel("x (m)")
  ax.set_ylabel("y (m)")
  if legend:
    handles, _ = ax.get_legend_handles_labels()
    inst = np.asarray(scene.obj_inst)
    present = set(np.asarray(scene.inst_cat)[np.unique(inst[inst >= 0])].tolist())
    handles += [patches.Patch(color=np.asarray(CATEGORY_COLORS[k - 1]) / 255,
                              label=sc.CATEGORIES[k]) for k in sorted(present) if k > 0]
    if region is not None:
      handles.append(patches.Patch(color=(1.0, 1.0, 0.0, 0.35), label="success region"))
    handles += [patches.Patch(color=np.asarray(WALL_COLOR) / 255, label="wall"),
                patches.Patch(facecolor="0.5", edgecolor="0.2",
                              label=f"floor ×{NOT_NAVIGABLE_SHADE}: not navigable")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
              frameon=False)


def _heading_arrows(ax, xy: np.ndarray, headings: np.ndarray) -> None:
  """Numbered arrows (0.4 m) showing where the agent looks at each marked pose."""
  for i, ((x, y), h) in enumerate(zip(xy, headings)):
    _arrow(ax, (x, y), h, "yellow")
    ax.text(x - 0.35 * np.cos(h), y - 0.35 * np.sin(h), str(i + 1), color="yellow",
            fontsize=7, ha="center", va="center", fontweight="bold")


def _arrow(ax, xy, heading: float, color: str, length: float = 0.4) -> None:
  x, y = xy
  ax.annotate("", xy=(x + length * np.cos(heading), y + length * np.sin(heading)), xytext=(x, y),
              arrowprops=dict(arrowstyle="-|>", color=color, lw=1.6, shrinkA=0, shrinkB=0))


def _outline_category(ax, scene: sc.Scene, category: int) -> None:
  """A bright frame around every cell of an instance of `category` (ObjectNav's goals)."""
  from matplotlib import patches  # pylint: disable=g-import-not-at-top
  inst = np.asarray(scene.obj_inst)
  inst_cat = np.asarray(scene.inst_cat)
  mask = (inst >= 0) & (inst_cat[np.maximum(inst, 0)] == category)
  for r, c in np.argwhere(mask):
    ax.add_patch(patches.Rectangle((c * sc.CELL, r * sc.CELL), sc.CELL, sc.CELL, fill=False,
                                   edgecolor="yellow", linewidth=1.5))


def semantic_legend_handles(labels: Sequence[int] | None = None) -> list:
  """Legend patches for the semantic palette (all labels, or just `labels`)."""
  from matplotlib import patches  # pylint: disable=g-import-not-at-top
  labels = range(sc.NUM_SEMANTIC) if labels is None else labels
  return [patches.Patch(color=np.asarray(SEMANTIC_COLORS[k]) / 255, label=SEMANTIC_NAMES[k])
          for k in labels]
