"""Look at one vcbench-nav episode: a PNG strip of what the agent sees and where it goes.

  python -m launch.nav_look --task pointnav --split val --episode 3 --out nav_episode.png
      [--frames 8] [--size 128] [--policy expert|random] [--num_scenes 8] [--num_episodes 32]

Runs episode --episode of the split's episode set with the shortest-path expert or a random
policy and writes the strip `vcbench.viz.nav_episode.look` draws (RGB, depth and semantic
views, the top-down map with the path, the episode's metrics in the title).
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
from absl import logging
from launch import cli

from vcbench.envs.nav import tasks
from vcbench.viz import nav_episode


def define_flags() -> None:
  """The command line's flags; defined only when run as a program, so that importing this
  module (tests, notebooks) never clashes with another launch module's --out."""
  flags.DEFINE_enum("task", "pointnav", list(tasks.TASKS), "navigation task")
  flags.DEFINE_enum("split", "val", ["train", "val", "test"], "scene / episode split")
  flags.DEFINE_integer("episode", 0, "index into the split's episode set")
  flags.DEFINE_string("out", "nav_episode.png", "the PNG to write")
  flags.DEFINE_integer("frames", 8, "views shown, evenly spaced over the episode")
  flags.DEFINE_integer("size", 128, "rendered image size in pixels (square)")
  flags.DEFINE_enum("policy", "expert", ["expert", "random"], "who drives")
  flags.DEFINE_integer("num_scenes", 8, "apartments in the env's scene pool")
  flags.DEFINE_integer("num_episodes", 32, "episodes in the env's set")
  flags.DEFINE_integer("seed", 0, "episode-set seed offset, and the random policy's seed")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
  f = flags.FLAGS
  try:
    result = nav_episode.look(f.task, f.split, f.episode, f.out, f.frames, f.size, f.policy,
                  f.num_scenes, f.num_episodes, f.seed)
  except ValueError as e:  # A bad flag value: say which, without a traceback.
    raise app.UsageError(str(e)) from e
  m = result["metrics"]
  print(f"wrote {result['path']} ({result['steps']} steps, success {m['success']:.0f}, "
        f"SPL {m['spl']:.2f})")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
