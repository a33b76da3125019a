"""The sweep tests' grid: CortexBench's tiny protocol on the point-mass suite (registered by
`sweep/pointmass_plugin.py`, in the driver and in every worker), two PVRs, seconds a cell."""
import pathlib

from configs import cortexbench as cortexbench_config
from vcbench import registry

PLUGIN = str(pathlib.Path(__file__).parent / "sweep" / "pointmass_plugin.py")


def pointmass_args(workdir, pvrs=("state_oracle", "random_vit_ti"), seeds=(0, 1)) -> list[str]:
  """The grid as `launch.sweep` flags."""
  return ["--config", "configs/cortexbench.py:tiny", "--config.suite=pointmass",
          "--config.tasks=('reach',)", "--config.horizon=12", f"--config.pvrs={tuple(pvrs)!r}",
          f"--config.seeds={tuple(seeds)!r}", "--config.render_size=16", "--config.img_size=32",
          f"--config.workdir={workdir}", f"--plugin={PLUGIN}"]


def pointmass_config(workdir, pvrs=("state_oracle", "random_vit_ti"), seeds=(0, 1)):
  """The grid as a config (the plugin loaded in this process)."""
  registry.load_plugins([PLUGIN])
  c = cortexbench_config.get_config("tiny")
  c.suite, c.tasks, c.horizon = "pointmass", ("reach",), 12
  c.pvrs, c.seeds = pvrs, seeds
  c.render_size, c.img_size = 16, 32
  c.workdir = str(workdir)
  return c
