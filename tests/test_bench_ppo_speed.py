"""The PPO time-breakdown benchmark runs a tiny config and its shares add up."""
import pytest

from launch.bench import ppo_speed


def test_breakdown_of_a_tiny_config():
  row = ppo_speed.measure(16, "depth", num_envs=4, rollout_len=4, repeats=1, num_scenes=2)
  assert row["steps_per_s"] > 0 and set(row["times"]) == {"env", "rollout", "update"}
  # The shares are differences of noisy timings (at this size, mostly overhead): they add up.
  assert row["env_share"] + row["policy_share"] + row["learn_share"] == pytest.approx(1.0)
  text = ppo_speed.table([row], markdown=True)
  assert text.splitlines()[2].startswith("| 16² | depth |")


@pytest.mark.parametrize("cache", [True, False])
def test_a_frozen_pvr_runs_with_and_without_the_token_cache(cache):
  row = ppo_speed.measure(32, "rgb", num_envs=4, rollout_len=4, repeats=1, num_scenes=2,
                          encoder="random_vit_ti", token_cache=cache)
  assert row["steps_per_s"] > 0
  assert row["sensors"] == "rgb, random_vit_ti" + ("" if cache else ", tokens recomputed")
