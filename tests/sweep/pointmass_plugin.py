"""A sweep plugin for the tests: registers the point-mass suite (`vcbench/envs/pointmass.py`,
scored by return) as CortexBench suite 'pointmass', in the driver and in every worker."""
from vcbench.benchmarks import cortexbench
from vcbench.envs import pointmass

if "pointmass" not in cortexbench.SUITES:
  cortexbench.SUITES.register("pointmass")(cortexbench.Suite(
      "pointmass", "Point mass", ("reach",), num_demos=4, eval_episodes=3, horizon=12,
      metric="return/10", available=True, make_sim=pointmass.make_sim, expert=pointmass.expert,
      state_dim=pointmass.STATE_DIM))
