"""Where PPO's time goes on vcbench-nav: env steps/s of a whole update, split into the env
(move + render), the policy's acting pass and the learning (GAE + SGD epochs).

  python -m launch.bench.ppo_speed [--sizes 32,64] [--sensors rgb,rgbd] [--repeats 5]
      [--num_envs 64] [--rollout_len 64] [--update_epochs 2] [--num_minibatches 2] [--markdown]
      [--encoder cnn|<zoo PVR, frozen>] [--token_cache on|off|both]

For each frame size and sensor set, three jitted programs over the same batch of
`num_envs` x `rollout_len` env steps, timed round-robin (`timing.interleaved`, so a shared
machine's load falls on all three alike) after one compiling call each:

  env      `rollout_len` steps of `vmap(env.step)` with random actions (auto-reset on)
  rollout  `ppo.PPO.collect`: the same steps with the policy choosing the actions
  update   one whole PPO update (`Trainer.train_chunk(state, 1)`: rollout, GAE, SGD)

The table gives env steps/s of a whole update (what training runs at) and the share of its
time in the env (env / update), the policy's acting pass ((rollout - env) / update) and the
learning ((update - rollout) / update), from the medians of `--repeats` calls. The policy and
PPO settings are configs/nav.py's (SimpleCNN + LSTM(256), 2 epochs x 2 minibatches). With a
frozen zoo PVR (`--encoder in1k_mobilenetv2`, at the frame size), `--token_cache off` times
the trainer as it was before it recorded the PVR's tokens in the rollout (every SGD epoch
encoding the frames again); `both` gives the two rows.
"""
from __future__ import annotations

import statistics

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from absl import flags
from launch import cli
from launch.bench import timing

_SIZES = flags.DEFINE_list("sizes", ["32", "64"], "Square frame sizes in pixels.")
_SENSORS = flags.DEFINE_list("sensors", ["rgb", "rgbd"], "Sensor sets: rgb, rgbd, depth.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed calls of each program (median).")
_NUM_ENVS = flags.DEFINE_integer("num_envs", 64, "Parallel envs.")
_ROLLOUT = flags.DEFINE_integer("rollout_len", 64, "Env steps per env per update.")
_EPOCHS = flags.DEFINE_integer("update_epochs", 2, "SGD passes over each rollout.")
_MINIBATCHES = flags.DEFINE_integer("num_minibatches", 2, "Minibatches per pass.")
_MARKDOWN = flags.DEFINE_boolean("markdown", False, "Print the table as markdown.")
_ENCODER = flags.DEFINE_string("encoder", "cnn", "'cnn' or a zoo PVR (frozen, at frame size).")
_CACHE = flags.DEFINE_enum("token_cache", "on", ["on", "off", "both"],
                           "A frozen PVR's tokens recorded in the rollout (on) or recomputed.")

SENSORS = {"rgb": ("rgb",), "rgbd": ("rgb", "depth"), "depth": ("depth",)}


def programs(size: int, sensors: str, num_envs: int, rollout_len: int,
             num_scenes: int = 64, sgd: tuple[int, int] = (2, 2), encoder: str = "cnn",
             token_cache: bool = True) -> dict:
  """name -> a no-argument call of each timed program (state carried between calls)."""
  import jax  # pylint: disable=g-import-not-at-top
  from vcbench.algos import ppo  # pylint: disable=g-import-not-at-top
  from vcbench.benchmarks import nav as nav_bench  # pylint: disable=g-import-not-at-top
  from vcbench.jobs import nav as nav_job  # pylint: disable=g-import-not-at-top

  config = nav_job.default_config()   # configs/nav.py's PointNav settings
  config.sensors, config.height, config.width = SENSORS[sensors], size, size
  config.train_scenes, config.train_episodes = num_scenes, 16 * num_scenes
  config.ppo.num_envs, config.ppo.rollout_len, config.ppo.log_every = num_envs, rollout_len, 0
  config.ppo.update_epochs, config.ppo.num_minibatches = sgd
  config.policy.encoder, config.policy.img_size = encoder, size if encoder != "cnn" else 0
  trainer = nav_bench.make_trainer(config, log_fn=False)
  if not token_cache:   # the images reach the SGD epochs, which encode them again
    uncached = type(trainer).obs
    trainer.obs = lambda obs, frozen=None: uncached(trainer, obs)
  env, keys = trainer.env, jax.random.split(jax.random.key(0), 3)
  state = [trainer.init(keys[0])]
  env_state = [state[0].env_state]

  @jax.jit
  def env_only(env, env_state, key):
    def body(s, key):
      actions = jax.random.randint(key, (num_envs,), 0, env.num_actions)
      return jax.vmap(env.step)(s, actions), None
    return jax.lax.scan(body, env_state, jax.random.split(key, rollout_len))[0]

  collect = jax.jit(lambda s, key: ppo.PPO.collect(trainer, s, env, trainer.frozen, key)[0])

  def run_env():
    env_state[0] = env_only(env, env_state[0], keys[1])
    return env_state[0]

  def run_update():
    state[0] = trainer.train_chunk(state[0], 1)[0]
    return state[0].params
  return {"env": run_env, "rollout": lambda: collect(state[0], keys[2]), "update": run_update}


def measure(size: int, sensors: str, num_envs: int, rollout_len: int, repeats: int,
            num_scenes: int = 64, sgd: tuple[int, int] = (2, 2), encoder: str = "cnn",
            token_cache: bool = True) -> dict:
  """One row of the table: env steps/s of an update and the shares of its time; `sgd` is
  (update_epochs, num_minibatches)."""
  times = timing.interleaved(programs(size, sensors, num_envs, rollout_len, num_scenes, sgd,
                                      encoder, token_cache), repeats)
  med = {k: statistics.median(v) for k, v in times.items()}
  u = med["update"]
  name = sensors if encoder == "cnn" else (
      f"{sensors}, {encoder}" + ("" if token_cache else ", tokens recomputed"))
  return {"size": size, "sensors": name, "steps_per_s": num_envs * rollout_len / u,
          "env_share": med["env"] / u, "policy_share": (med["rollout"] - med["env"]) / u,
          "learn_share": (u - med["rollout"]) / u, "times": times}


def table(rows: list[dict], markdown: bool) -> str:
  head = ["frames", "sensors", "PPO env steps/s", "env (render)", "policy acting",
          "learning (SGD)"]
  lines = [[f"{r['size']}²", r["sensors"], f"{r['steps_per_s']:,.0f}",
            f"{100 * r['env_share']:.0f}%", f"{100 * r['policy_share']:.0f}%",
            f"{100 * r['learn_share']:.0f}%"] for r in rows]
  if markdown:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
                     + ["| " + " | ".join(l) + " |" for l in lines])
  return "\n".join("  ".join(f"{c:>16}" for c in l) for l in [head] + lines)


def main() -> None:
  rows = []
  caches = {"on": (True,), "off": (False,), "both": (True, False)}[_CACHE.value]
  for size in map(int, _SIZES.value):
    for sensors in _SENSORS.value:
      for cache in caches if _ENCODER.value != "cnn" else (True,):
        rows.append(measure(size, sensors, _NUM_ENVS.value, _ROLLOUT.value, _REPEATS.value,
                            sgd=(_EPOCHS.value, _MINIBATCHES.value), encoder=_ENCODER.value,
                            token_cache=cache))
        print(f"{size}² {rows[-1]['sensors']}: {rows[-1]['steps_per_s']:,.0f} env steps/s",
              flush=True)
  print(table(rows, _MARKDOWN.value))


if __name__ == "__main__":
  cli.run(timing.main_of(main))
