"""Evaluate a shipped (or exported) vcbench-nav agent: SR and SPL with 95% intervals.

  python -m launch.nav_eval --agent pointnav_rgbd_il [--split test] [--episodes 1000]
      [--scenes 15] [--batch 200] [--greedy] [--seed 0] [--end_profile]

--agent is a name from `vcbench/benchmarks/nav_agents/` or an .npz the nav job exported
(`--config.export_to`). The env is the one the agent's config trained for (task, sensors, frame
size, objects) on the split's held-out apartments; the table also shows the numbers measured
when the agent was exported, which this command reproduces with the export's episode count.
"""
from __future__ import annotations

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import app
from absl import flags
from launch import cli


def define_flags() -> None:
  flags.DEFINE_string("agent", "pointnav_rgbd_il", "shipped agent name or exported .npz")
  flags.DEFINE_enum("split", "test", ["val", "test"], "held-out apartments")
  flags.DEFINE_integer("episodes", 1000, "episodes (balanced over the difficulty bins)")
  flags.DEFINE_integer("scenes", 0, "apartments (0: the agent config's val_scenes)")
  flags.DEFINE_integer("batch", 200, "episodes per jitted batch")
  flags.DEFINE_boolean("greedy", None, "argmax actions (default: the agent config's)")
  flags.DEFINE_integer("seed", 0, "action-sampling seed")
  flags.DEFINE_boolean("end_profile", False, "also print the mean probability of END by "
                       "distance to the goal over the steps of the evaluated episodes (PointNav)")


def evaluate(agent, split: str, episodes: int, scenes: int, batch: int, greedy: bool,
             seed: int) -> tuple[dict, dict]:
  """(`nav.summarize`d metrics, per-episode results) of a `nav_agents.ShippedAgent` on
  `episodes` of `split`."""
  from vcbench.benchmarks import nav as nav_bench  # pylint: disable=g-import-not-at-top
  env = nav_bench.make_env(agent.config, split, episodes, scenes)
  results = nav_bench.evaluate_episodes(agent.trainer, agent.params, env, batch=batch,
                                        seed=seed, greedy=greedy)
  return nav_bench.summarize(results, agent.config.task), results


def end_profile(results: dict) -> list[tuple]:
  """(lo, hi, live steps, mean P(END)) per goal-distance bin (`nav.END_BINS`) over the episodes
  of PointNav `results`: how sharply the policy's END follows the success radius."""
  from vcbench.benchmarks import nav as nav_bench  # pylint: disable=g-import-not-at-top
  steps, p_sum = (results[k].sum(axis=0) for k in nav_bench.END_PROFILE)
  bins = nav_bench.END_BINS
  return [(lo, hi, int(n), float(p / n) if n else float("nan"))
          for lo, hi, n, p in zip(bins[:-1], bins[1:], steps, p_sum)]


def failures(results: dict) -> str:
  """Where the failed episodes ended: END called out of range (with the quartiles of its
  distance to the goal) or the step limit."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  failed = results["success"] == 0
  early = failed & (results["stop_failure"] > 0)
  text = (f"{int(failed.sum())} of {len(failed)} episodes failed: {int(early.sum())} called END "
          f"out of range")
  if early.any():
    q = np.percentile(results["final_distance"][early], [25, 50, 75])
    text += f" (distance to the goal: quartiles {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f} m)"
  return text + f", {int((failed & ~early).sum())} ran out of steps or never called END"


def table(rows: dict[str, dict], bins) -> str:
  """Markdown: one row per named summary."""
  head = (["", "episodes", "SR", "SPL"] + [f"SR {b}" for b in bins]
          + ["stop failure +", "stop failure -", "failed actions"])
  out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for name, s in rows.items():
    ci = lambda k: (f"{s[k]:.1f} ± {s[k + '_ci95']:.1f}" if k + "_ci95" in s
                    else f"{s.get(k, float('nan')):.1f}")
    vals = ([name, f"{int(s['episodes'])}", ci("success"), ci("spl")]
            + [f"{s.get('success_' + b, float('nan')):.1f}" for b in bins]
            + [f"{s.get('stop_failure_pos', float('nan')):.1f}",
               f"{s.get('stop_failure_neg', float('nan')):.1f}",
               f"{s.get('failed_actions', float('nan')):.1f}"])
    out.append("| " + " | ".join(vals) + " |")
  return "\n".join(out)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  from vcbench.benchmarks import nav_agents  # pylint: disable=g-import-not-at-top
  from vcbench.envs.nav import tasks  # pylint: disable=g-import-not-at-top
  f = flags.FLAGS
  agent = nav_agents.load(f.agent)
  greedy = agent.config.eval_greedy if f.greedy is None else f.greedy
  scenes = f.scenes or agent.config.val_scenes
  now, results = evaluate(agent, f.split, f.episodes, scenes, f.batch, greedy, f.seed)
  rows = {f"now ({f.split}, {scenes} apartments)": now}
  if "test" in agent.meta:
    rows["at export (test)"] = agent.meta["test"]
  print(f"{f.agent}: {agent.config.task}, sensors {tuple(agent.config.sensors)}, "
        f"{agent.config.height}x{agent.config.width}, {'greedy' if greedy else 'sampled'} "
        f"actions; trained {' -> '.join(st['variant'] for st in agent.meta.get('stages', []))}")
  print(table(rows, [b[0] for b in tasks.get(agent.config.task).bins]))
  print(failures(results), flush=True)
  if f.end_profile:
    print("| distance to goal (m) | steps | mean P(END) |\n|---|---|---|")
    for lo, hi, n, p in end_profile(results):
      print(f"| {lo:g}-{hi:g} | {n} | {p:.3f} |", flush=True)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
