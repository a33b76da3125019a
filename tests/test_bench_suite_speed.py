"""launch.bench.suite_speed: the protocol's frame counts and the env-rate loop."""
from launch.bench import suite_speed


def test_protocol_frames_follow_each_suites_numbers():
  # DMC: 100 demos x 500 decisions; (100 / 5) validations x 10 episodes + 10 test, x 500.
  assert suite_speed.protocol_frames("dmc") == (50_000, 210 * 500)
  # MetaWorld: 25 demos x 500; 20 x 10 + 25 test episodes, x 500.
  assert suite_speed.protocol_frames("metaworld") == (12_500, 225 * 500)


class _Sim:
  """Ends an episode every 3 steps; counts resets and steps."""
  action_dim = 2

  def __init__(self):
    self.resets = self.steps = self.closed = 0

  def reset(self, seed):
    self.resets += 1
    self.t = 0

  def step(self, action):
    assert action.shape == (2,) and abs(action).max() <= 1
    self.steps += 1
    self.t += 1
    return None, 0.0, self.t == 3, {}

  def close(self):
    self.closed += 1


def test_env_rate_steps_through_episode_ends_and_closes_the_sim():
  sim = _Sim()
  rate = suite_speed.env_rate(lambda: sim, steps=9, repeats=2)
  assert rate > 0 and sim.closed == 1
  assert sim.steps == 27                  # A warm-up call and 2 timed ones, 9 steps each.
  assert sim.resets == 3 * (1 + 3)        # Each call: its first reset and one per 3 steps.
