"""Generates (or checks) the expert demos of a CortexBench suite: one command, deterministic.

  MUJOCO_GL=egl python -m launch.demos --out=runs/cortexbench/data [--suite=metaworld] \
      [--tasks=assembly,bin-picking,button-press-topdown,drawer-open,hammer] \
      [--num_demos=25] [--render_size=256] [--camera=top_cap2]

Existing, intact entries are reused (a corrupt one is regenerated); prints, per task, the
file, the number of steps and the expert's success rate. The format is documented in
`vcbench/data/demos.py`; the cortexbench job calls the same `load_or_generate`.
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
from launch import cli

from vcbench.benchmarks import cortexbench
from vcbench.data import demos as demos_lib
from vcbench.envs.core import RenderConfig

_OUT = flags.DEFINE_string("out", None, "data directory (demos go under <suite>/<task>/)",
                           required=True)
_SUITE = flags.DEFINE_string("suite", "metaworld", "CortexBench suite")
_TASKS = flags.DEFINE_list("tasks", None, "task names (default: the suite's CortexBench tasks)")
_NUM = flags.DEFINE_integer("num_demos", 25, "successful demos per task")
_SIZE = flags.DEFINE_integer("render_size", 256, "rendered frame size (pixels)")
_CAMERA = flags.DEFINE_string("camera", "top_cap2", "camera name")
_SEED = flags.DEFINE_integer("seed", 0, "base of the train episode seeds")


def main(argv):
  del argv
  try:
    suite = cortexbench.suite(_SUITE.value)
  except KeyError as e:
    raise app.UsageError(str(e)) from None
  if not suite.available:
    raise app.UsageError(f"suite {suite.name} cannot run here: {suite.reason}")
  tasks = _TASKS.value or list(suite.tasks)
  unknown = sorted(set(tasks) - set(suite.all_tasks()))
  if unknown:
    raise app.UsageError(f"unknown {suite.name} tasks {unknown}; valid: {suite.all_tasks()}")
  render = RenderConfig(size=_SIZE.value, camera=_CAMERA.value)
  for task in tasks:
    cfg = demos_lib.DemoConfig(suite=suite.name, task=task, num_demos=_NUM.value,
                               seed=_SEED.value, render=render)
    source = suite.demo_source(task, render, cfg.max_steps)
    d = demos_lib.load_or_generate(_OUT.value, cfg, source)
    print(f"{task}: {d.num_episodes} demos, {len(d.actions)} steps, expert success "
          f"{100 * d.meta['expert_success_rate']:.0f}% ({d.meta['attempts']} attempts) -> "
          f"{demos_lib.path_for(_OUT.value, cfg, source)}.npz")


if __name__ == "__main__":
  cli.run(main)
