"""Exported nav agents: the nav job writes one, `nav_agents.load` reads it back exactly and
`launch.nav_eval` reproduces the numbers measured at export; bad files are named; every shipped
agent fits the policy its config builds."""
import jax
import numpy as np
import pytest

import launching
import vcbench  # noqa: F401
from configs import nav as nav_config
from launch import nav_eval
from vcbench.benchmarks import nav as nav_bench
from vcbench.benchmarks import nav_agents
from vcbench.jobs import nav as nav_job


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("agent")
  config = nav_config.get_config("tiny")
  config.workdir, config.export_to = str(tmp), str(tmp / "tiny.npz")
  summary = nav_job.run(config)
  return config, summary


def test_the_export_holds_the_best_params_config_and_test_numbers(exported):
  config, summary = exported
  agent = nav_agents.load(config.export_to)
  params, best = nav_bench.best_params(config)
  for a, b in zip(jax.tree.leaves(agent.params), jax.tree.leaves(params)):
    np.testing.assert_array_equal(a, b)
  assert agent.config.to_dict() == config.to_dict()
  assert agent.meta["selected_update"] == best["update"]
  assert agent.meta["test"]["success"] == summary["success"]
  assert [s["variant"] for s in agent.meta["stages"]] == ["tiny"]
  assert agent.meta["stages"][0]["env_steps"] == 4 * 4 * 8
  assert agent.meta["stages"][0]["wall_seconds"] > 0


def test_nav_eval_reproduces_the_numbers_at_export(exported):
  config, summary = exported
  agent = nav_agents.load(config.export_to)
  now, results = nav_eval.evaluate(agent, "test", config.test_episodes, config.val_scenes,
                                   config.eval_batch, config.eval_greedy, config.seed)
  for k in ("success", "spl", "episode_length", "success_ci95"):
    assert now[k] == pytest.approx(summary[k], nan_ok=True), k
  text = nav_eval.table({"now": now, "at export": agent.meta["test"]}, ["easy", "medium", "hard"])
  assert text.count("\n") == 3 and f"{now['success']:.1f} ± " in text
  failed = int(round(6 * (1 - now["success"] / 100)))
  assert nav_eval.failures(results).startswith(f"{failed} of 6 episodes failed: ")


def test_a_file_that_does_not_fit_its_policy_is_named(exported, tmp_path):
  config, _ = exported
  agent = nav_agents.load(config.export_to)
  config = nav_config.get_config("tiny")
  config.policy.hidden = 16   # another network than the params'
  nav_agents.export(tmp_path / "bad.npz", config, agent.params, {})
  with pytest.raises(ValueError, match=r"bad.npz: params do not fit.*rnn.*\(32"):
    nav_agents.load(str(tmp_path / "bad.npz"))
  with pytest.raises(FileNotFoundError, match="no nav agent 'pointnav_nope'.*shipped"):
    nav_agents.load("pointnav_nope")


@pytest.mark.parametrize("name", nav_agents.names())
def test_every_shipped_agent_loads(name):
  agent = nav_agents.load(name)
  assert agent.meta["test"]["success"] > 0 and agent.meta["stages"]


def test_failures_name_the_early_ends_and_their_distances():
  r = {"success": np.array([1.0, 0.0, 0.0, 0.0]), "stop_failure": np.array([0.0, 1.0, 1.0, 0.0]),
       "final_distance": np.array([0.1, 0.2, 0.4, 3.0])}
  assert nav_eval.failures(r) == (
      "3 of 4 episodes failed: 2 called END out of range (distance to the goal: quartiles "
      "0.25 / 0.30 / 0.35 m), 1 ran out of steps or never called END")


@pytest.mark.skipif(not nav_agents.names(), reason="no agent shipped")
def test_the_readme_command_evaluates_a_shipped_agent(tmp_path):
  name = nav_agents.names()[0]
  out = launching.run("launch.nav_eval", "--agent", name, "--episodes", 4, "--batch", 4,
                      "--split", "val", tmp_path=tmp_path, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "| now (val, 15 apartments) | 4 | " in out.stdout and "episodes failed" in out.stdout


def test_end_profile_bins_the_live_steps(exported):
  config, _ = exported
  agent = nav_agents.load(config.export_to)
  _, results = nav_eval.evaluate(agent, "test", config.test_episodes, config.val_scenes, 4,
                                 False, 0)
  rows = nav_eval.end_profile(results)
  assert [(lo, hi) for lo, hi, _, _ in rows] == list(zip(nav_bench.END_BINS[:-1],
                                                         nav_bench.END_BINS[1:]))
  # Every step of every episode falls in exactly one bin.
  assert sum(n for _, _, n, _ in rows) == int(results["episode_length"].sum())
  assert all(0.0 <= p <= 1.0 for _, _, n, p in rows if n)
