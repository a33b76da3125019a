"""Generates (or checks) the scripted-expert demos: one command, deterministic.

  MUJOCO_GL=egl python -m launch.demos --out=runs/cortexbench/data \
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

from vcbench.data import demos as demos_lib
from vcbench.envs.mujoco import metaworld as mw

_OUT = flags.DEFINE_string("out", None, "data directory (demos go under metaworld/<task>/)",
                           required=True)
_TASKS = flags.DEFINE_list("tasks", list(mw.CORTEXBENCH_TASKS), "MetaWorld v3 task names")
_NUM = flags.DEFINE_integer("num_demos", 25, "successful demos per task")
_SIZE = flags.DEFINE_integer("render_size", 256, "rendered frame size (pixels)")
_CAMERA = flags.DEFINE_string("camera", "top_cap2", "camera name")
_SEED = flags.DEFINE_integer("seed", 0, "base of the train episode seeds")


def main(argv):
  del argv
  for task in _TASKS.value:
    mw.check_task(task)
  for task in _TASKS.value:
    cfg = demos_lib.DemoConfig(task=task, num_demos=_NUM.value, seed=_SEED.value,
                               render=mw.RenderConfig(size=_SIZE.value, camera=_CAMERA.value))
    d = demos_lib.load_or_generate(_OUT.value, cfg)
    print(f"{task}: {d.num_episodes} demos, {len(d.actions)} steps, expert success "
          f"{100 * d.meta['expert_success_rate']:.0f}% ({d.meta['attempts']} attempts) -> "
          f"{demos_lib.path_for(_OUT.value, cfg)}.npz")


if __name__ == "__main__":
  app.run(main)
