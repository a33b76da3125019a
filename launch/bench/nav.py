"""Speed of vcbench-nav against MuJoCo's renderer, measured in one run.

  python -m launch.bench.nav [--batches 1,4,16,64,256,1024] [--sizes 64,128] [--repeats 3]
      [--steps 32] [--objects sprites|boxes] [--out results.json] [--markdown]

vcbench-nav: frames/s of `env.step` (the agent moves, then renders) at each image size, for
RGB and RGB-D, at each batch size. One timed call is a jitted `lax.scan` of --steps steps of
`vmap(env.step)` with uniformly random actions and auto-reset on (so finished episodes are
replaced inside the scan, as in training); frames/s = batch * steps / the median of --repeats
timed calls, after a warm-up call that compiles. The largest batch of each config runs in a
fresh subprocess, so that its peak resident memory (VmHWM) is its own; the report gives
its growth over the process after imports, and XLA's own estimate of the compiled scan's
buffers (`memory_analysis()`).

MuJoCo: `mujoco.Renderer` (MUJOCO_GL=egl; on these machines EGL is Mesa's llvmpipe, a CPU
rasteriser) on a room of comparable complexity (floor, ceiling, 4 walls, interior walls,
10 textured furniture boxes, a camera at 0.88 m with the same horizontal field of view),
one `mj_step` and one render per frame from one Python thread. RGB-D is two render passes
(RGB, then depth), which is how `mujoco.Renderer` gives both.
"""
from __future__ import annotations

import functools
import json
import math
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time

os.environ.setdefault("MUJOCO_GL", "egl")  # Before mujoco is imported: headless rendering.

import vcbench  # noqa: F401  pylint: disable=unused-import - XLA flags before JAX starts.

from launch.bench import timing

from absl import flags
from absl import logging
import numpy as np
from launch import cli

SENSORS = {"rgb": ("rgb",), "rgbd": ("rgb", "depth")}
HFOV = 79.0                # degrees, vcbench-nav's default (RoboTHOR's).
CAMERA_HEIGHT = 0.88       # metres, both simulators.


# -- vcbench-nav ---------------------------------------------------------------------------------

def _rss_mb() -> float:
  """Peak resident memory of this process so far, in MiB.

  Linux's VmHWM where there is one: `ru_maxrss` also counts the peak of the process that
  started this one (Linux folds the old address space's peak into it at exec), so in a child
  of a big benchmark process it would read the parent's size.
  """
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1]) / 1024.0  # kB
  except OSError:
    pass
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux.


def _rollout_fn():
  """The timed program: `steps` random-action env steps of a batch, as one jitted scan."""
  import jax  # pylint: disable=g-import-not-at-top

  @functools.partial(jax.jit, static_argnames=("steps",))
  def rollout(env, state, key, steps):
    batch = state.reward.shape[0]

    def body(carry, _):
      state, key = carry
      key, sub = jax.random.split(key)
      actions = jax.random.randint(sub, (batch,), 0, env.num_actions)
      return (jax.vmap(env.step)(state, actions), key), None

    (state, key), _ = jax.lax.scan(body, (state, key), None, length=steps)
    return state, key
  return rollout


def _xla_memory(compiled) -> dict:
  """XLA's buffer estimate of a compiled program in MiB (empty where the backend has none)."""
  try:
    m = compiled.memory_analysis()
  except Exception:  # pylint: disable=broad-except  # Not every backend implements it.
    return {}
  if m is None:
    return {}
  names = ("argument", "output", "temp", "alias", "generated_code")
  out = {n: getattr(m, f"{n}_size_in_bytes", None) for n in names}
  return {f"{n}_mb": v / 2 ** 20 for n, v in out.items() if v is not None}


@functools.lru_cache(maxsize=1)
def _nav_env(size: int, sensors: str, num_scenes: int, num_episodes: int, objects: str):
  """The benchmarked env (PointNav, train split); kept while one config runs all batches."""
  from vcbench.envs import nav  # pylint: disable=g-import-not-at-top
  return nav.make("pointnav", "train", num_scenes=num_scenes, num_episodes=num_episodes,
                  height=size, width=size, hfov=HFOV, sensors=SENSORS[sensors], auto_reset=True,
                  objects=objects)


def measure_nav(size: int, sensors: str, batch: int, steps: int, repeats: int,
                num_scenes: int = 32, num_episodes: int = 512, objects: str = "sprites") -> dict:
  """frames/s of `steps` env steps (move + render) at `batch` envs and `size`² pixels.

  Returns a dict with the config, `fps` (frames/s, median), `times` (seconds per timed call),
  `compile_s` (compile + warm-up call), `xla_memory` (MiB, XLA's estimate) and `rss_mb` (this
  process's peak resident memory after imports, after building the env, and at the end).
  """
  import jax  # pylint: disable=g-import-not-at-top
  jax.numpy.zeros(()).block_until_ready()  # Start the backend: part of the import baseline.
  rss = {"imports": _rss_mb()}
  env = jax.block_until_ready(_nav_env(size, sensors, num_scenes, num_episodes, objects))
  rss["env"] = _rss_mb()
  # Jitted: an op-by-op reset of a big batch would hold every intermediate of its render.
  reset = jax.jit(lambda env, keys: jax.vmap(env.reset)(keys))
  state = reset(env, jax.random.split(jax.random.key(0), batch))
  key = jax.random.key(1)
  rollout = _rollout_fn()
  carry = [state, key]

  def call():
    carry[:] = rollout(env, *carry, steps)
    return carry

  t0 = time.perf_counter()
  xla_memory = _xla_memory(rollout.lower(env, state, key, steps).compile())
  compile_s = time.perf_counter() - t0 + timing.seconds(call)   # With the warm-up call.
  times = timing.repeat(call, repeats, warmup=False)
  rss["peak"] = _rss_mb()
  return {"size": size, "sensors": sensors, "batch": batch, "steps": steps,
          "fps": batch * steps / statistics.median(times), "times": times,
          "compile_s": compile_s, "xla_memory": xla_memory, "rss_mb": rss}


def measure_nav_isolated(config: dict) -> dict:
  """`measure_nav(**config)` in a fresh Python process, so its peak memory is its own."""
  cmd = [sys.executable, "-m", "launch.bench.nav", f"--child={json.dumps(config)}"]
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  done = subprocess.run(cmd, capture_output=True, text=True, cwd=root, check=False)
  lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
  if done.returncode or not lines:
    raise RuntimeError(f"bench_nav child {config} failed (exit {done.returncode}):\n"
                       f"{done.stderr[-3000:]}")
  result = json.loads(lines[-1])
  result["isolated"] = True
  return result


# -- MuJoCo --------------------------------------------------------------------------------------

# A room of about vcbench-nav's apartment's complexity: 8 x 8 m, 2.5 m high, two interior walls
# (with doorways), ten furniture boxes; every surface textured, one light, no shadows.
_FURNITURE = ((1.2, 1.0, 0.45, 0.25, 0.45), (2.5, 6.8, 1.0, 0.45, 0.30),
              (6.6, 1.4, 0.4, 0.4, 0.55), (6.2, 6.6, 0.9, 0.5, 0.40),
              (3.2, 3.0, 0.25, 0.25, 0.45), (4.8, 4.9, 0.25, 0.25, 0.45),
              (0.8, 4.2, 0.3, 0.3, 0.55), (7.2, 3.8, 0.2, 0.6, 0.65),
              (5.4, 2.4, 0.5, 0.3, 0.35), (2.0, 5.2, 0.35, 0.35, 0.38))
_WALLS = ((4.0, -0.05, 4.1, 0.05), (4.0, 8.05, 4.1, 0.05), (-0.05, 4.0, 0.05, 4.1),
          (8.05, 4.0, 0.05, 4.1), (4.0, 1.6, 0.05, 1.6), (4.0, 6.6, 0.05, 1.4),
          (1.5, 4.0, 1.5, 0.05))


def mujoco_room_xml(hfov: float = HFOV, aspect: float = 1.0) -> str:
  """The MuJoCo room as MJCF; the camera's vertical fov gives `hfov` at width/height `aspect`."""
  fovy = math.degrees(2 * math.atan(math.tan(math.radians(hfov) / 2) / aspect))
  walls = "\n".join(
      f'<geom type="box" pos="{x} {y} 1.25" size="{sx} {sy} 1.25" material="wall{i % 3}"/>'
      for i, (x, y, sx, sy) in enumerate(_WALLS))
  furniture = "\n".join(
      f'<geom type="box" pos="{x} {y} {h}" size="{sx} {sy} {h}" material="obj{i % 4}"/>'
      for i, (x, y, sx, sy, h) in enumerate(_FURNITURE))
  return f"""<mujoco model="room">
  <visual>
    <quality offsamples="0"/><global offwidth="1024" offheight="1024"/>
    <headlight ambient=".35 .35 .35" diffuse=".55 .55 .55"/>
  </visual>
  <asset>
    <texture name="floor" type="2d" builtin="checker" rgb1=".6 .45 .3" rgb2=".5 .35 .25"
             width="256" height="256"/>
    <texture name="wall" type="2d" builtin="flat" rgb1=".9 .88 .8" mark="random"
             random="0.05" markrgb=".7 .7 .7" width="256" height="256"/>
    <texture name="obj" type="2d" builtin="gradient" rgb1=".9 .7 .5" rgb2=".5 .35 .2"
             width="128" height="128"/>
    <material name="floor" texture="floor" texrepeat="8 8"/>
    <material name="ceiling" texture="wall" texrepeat="4 4"/>
    <material name="wall0" texture="wall" texrepeat="2 2"/>
    <material name="wall1" texture="wall" texrepeat="2 2" rgba=".8 .9 .8 1"/>
    <material name="wall2" texture="wall" texrepeat="2 2" rgba=".9 .8 .7 1"/>
    <material name="obj0" texture="obj"/>
    <material name="obj1" texture="obj" rgba=".5 .5 1 1"/>
    <material name="obj2" texture="obj" rgba=".5 1 .5 1"/>
    <material name="obj3" texture="obj" rgba="1 .6 .6 1"/>
  </asset>
  <worldbody>
    <light directional="true" pos="4 4 2.4" dir="0 0 -1" castshadow="false"/>
    <geom type="plane" pos="4 4 0" size="4 4 .1" material="floor"/>
    <geom type="box" pos="4 4 2.55" size="4 4 .05" material="ceiling"/>
    {walls}
    {furniture}
    <body name="agent" pos="0 0 0">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="y" type="slide" axis="0 1 0"/>
      <joint name="yaw" type="hinge" axis="0 0 1"/>
      <geom type="cylinder" size="0.18 0.2" pos="0 0 0.2" contype="0" conaffinity="0"
            rgba=".2 .2 .2 1"/>
      <camera name="eye" pos="0 0 {CAMERA_HEIGHT}" xyaxes="0 -1 0 0 0 1" fovy="{fovy:.4f}"/>
    </body>
  </worldbody>
  <option gravity="0 0 0"/>
</mujoco>"""


def _fast_renderer(model, size: int):
  """`mujoco.Renderer` with the repo's fast settings (see envs/mujoco/metaworld.py)."""
  import mujoco  # pylint: disable=g-import-not-at-top
  model.vis.quality.offsamples = 0
  renderer = mujoco.Renderer(model, size, size)
  for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION,
               mujoco.mjtRndFlag.mjRND_SKYBOX):
    renderer.scene.flags[flag] = 0
  return renderer


def measure_mujoco(size: int, depth: bool, frames: int, repeats: int) -> dict:
  """frames/s of MuJoCo stepping and rendering one camera at `size`² (RGB or RGB-D)."""
  import mujoco  # pylint: disable=g-import-not-at-top
  model = mujoco.MjModel.from_xml_string(mujoco_room_xml())
  data = mujoco.MjData(model)
  renderer = _fast_renderer(model, size)
  rng = np.random.default_rng(0)
  rgb = np.empty((size, size, 3), np.uint8)
  dep = np.empty((size, size), np.float32)

  def run():
    for _ in range(frames):
      # The agent wanders the room (a random walk of poses), so every frame sees anew.
      data.qpos[:] = (rng.uniform(0.4, 7.6), rng.uniform(0.4, 7.6), rng.uniform(-np.pi, np.pi))
      mujoco.mj_step(model, data)
      renderer.update_scene(data, camera="eye")
      renderer.render(out=rgb)
      if depth:
        renderer.enable_depth_rendering()
        renderer.render(out=dep)
        renderer.disable_depth_rendering()

  try:
    # The warm-up call starts the GL context, compiles the shaders, uploads the textures.
    times = timing.repeat(run, repeats)
    gl_renderer = _gl_renderer_name()
  finally:
    renderer.close()
  return {"size": size, "sensors": "rgbd" if depth else "rgb", "frames": frames,
          "fps": frames / statistics.median(times), "times": times, "gl": gl_renderer}


def _gl_renderer_name() -> str:
  """The OpenGL implementation in use (llvmpipe = Mesa's CPU rasteriser)."""
  try:
    from OpenGL import GL  # pylint: disable=g-import-not-at-top
    name = GL.glGetString(GL.GL_RENDERER)
    return name.decode() if isinstance(name, bytes) else str(name)
  except Exception:  # pylint: disable=broad-except  # Informational only.
    return "unknown"


# -- the run -------------------------------------------------------------------------------------

def run_benchmark(batches, sizes, steps: int, repeats: int, mujoco_frames: int,
                  isolate: bool = True, num_scenes: int = 32, num_episodes: int = 512,
                  log=print, objects: str = "sprites") -> dict:
  """All figures: {"nav": [rows], "mujoco": [rows], "ratio": {...}, "memory": {...}, ...}.

  With `isolate`, the largest batch of each config runs in a fresh subprocess (see
  `measure_nav_isolated`) and its memory figures go to "memory".
  """
  batches, sizes = sorted(int(b) for b in batches), [int(s) for s in sizes]
  largest = batches[-1]
  nav_rows, memory = [], {}
  for size in sizes:
    for sensors in SENSORS:
      for batch in batches:
        config = dict(size=size, sensors=sensors, batch=batch, steps=steps, repeats=repeats,
                      num_scenes=num_scenes, num_episodes=num_episodes, objects=objects)
        in_child = isolate and batch == largest
        row = measure_nav_isolated(config) if in_child else measure_nav(**config)
        nav_rows.append(row)
        if in_child:
          memory[f"{size}_{sensors}"] = _memory_summary(row)
        log(f"vcbench-nav {size}² {sensors:4s} batch {batch:5d}: {row['fps']:10.0f} frames/s "
            f"(compile {row['compile_s']:.1f} s)")
  mj_rows = []
  for size in sizes:
    for sensors in SENSORS:
      mj_rows.append(measure_mujoco(size, sensors == "rgbd", mujoco_frames, repeats))
      log(f"MuJoCo      {size}² {sensors:4s}:            {mj_rows[-1]['fps']:10.0f} frames/s")
  return {"nav": nav_rows, "mujoco": mj_rows, "ratio": _ratios(nav_rows, mj_rows),
          "memory": memory, "memory_batch": largest if isolate else None,
          "settings": dict(batches=batches, sizes=sizes, steps=steps, repeats=repeats,
                           mujoco_frames=mujoco_frames, num_scenes=num_scenes,
                           num_episodes=num_episodes, hfov=HFOV, cpus=os.cpu_count(),
                           llvmpipe_threads=os.environ.get("LP_NUM_THREADS",
                                                           "unset: one per core"))}


def _memory_summary(row: dict) -> dict:
  rss = row["rss_mb"]
  return {"batch": row["batch"], "rss_peak_mb": rss["peak"],
          "rss_growth_mb": rss["peak"] - rss["imports"],
          "rss_env_mb": rss["env"] - rss["imports"], "xla": row["xla_memory"]}


def _ratios(nav_rows, mj_rows) -> dict:
  """vcbench-nav's best batch over MuJoCo, per size and sensors."""
  out = {}
  for mj in mj_rows:
    best = max((r for r in nav_rows if r["size"] == mj["size"] and r["sensors"] == mj["sensors"]),
               key=lambda r: r["fps"])
    out[f"{mj['size']}_{mj['sensors']}"] = {"nav_fps": best["fps"], "nav_batch": best["batch"],
                                            "mujoco_fps": mj["fps"],
                                            "ratio": best["fps"] / mj["fps"]}
  return out


def markdown(results: dict, command: str) -> str:
  """The README table: frames/s per config and batch, MuJoCo, the ratio and peak memory."""
  s = results["settings"]
  batches = s["batches"]
  head = " | ".join(f"batch {b}" for b in batches)
  lines = [f"| frames/s ({s['cpus']} CPU cores, median of {s['repeats']}) | {head} | "
           "MuJoCo EGL | best / MuJoCo |",
           "| --- | " + " | ".join("---:" for _ in batches) + " | ---: | ---: |"]
  for key, ratio in results["ratio"].items():
    size, sensors = key.split("_")
    fps = {r["batch"]: r["fps"] for r in results["nav"]
           if r["size"] == int(size) and r["sensors"] == sensors}
    cells = " | ".join(f"{fps[b]:,.0f}" for b in batches)
    label = f"{size}² {'RGB-D' if sensors == 'rgbd' else 'RGB'}"
    lines.append(f"| {label} | {cells} | {ratio['mujoco_fps']:,.0f} | {ratio['ratio']:.1f}x |")
  if results["memory"]:
    lines.append("")
    lines.append(f"Peak memory at batch {results['memory_batch']}, each config in a fresh "
                 "process: peak resident set over the process after its imports, split into "
                 "building the env (scene pool, atlas, episodes and their compilation) and "
                 "what stepping adds on top; and XLA's estimate of the compiled scan's buffers.")
    lines.append("")
    lines.append("| config | peak RSS growth | env build | stepping | XLA args + temp + output |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for key, m in results["memory"].items():
      size, sensors = key.split("_")
      xla = m["xla"]
      est = (f"{xla['temp_mb'] + xla['argument_mb'] + xla['output_mb']:,.0f} MiB"
             if {"temp_mb", "argument_mb", "output_mb"} <= xla.keys() else "n/a")
      label = f"{size}² {'RGB-D' if sensors == 'rgbd' else 'RGB'}"
      lines.append(f"| {label} | {m['rss_growth_mb']:,.0f} MiB | {m['rss_env_mb']:,.0f} MiB | "
                   f"{m['rss_growth_mb'] - m['rss_env_mb']:,.0f} MiB | {est} |")
  gl = results["mujoco"][0]["gl"] if results["mujoco"] else "?"
  threads = s.get("llvmpipe_threads", "unset: one per core")
  lines.append("")
  lines.append(f"vcbench-nav: PointNav `env.step` (move + render) in a jitted scan of "
               f"{s['steps']} random-action steps, auto-reset on, {s['num_scenes']} apartments. "
               f"MuJoCo: `mujoco.Renderer` ({gl}, LP_NUM_THREADS {threads}), "
               "one mj_step + render per frame, RGB-D as two passes, shadows/reflections/"
               "skybox/MSAA off.")
  lines.append("")
  lines.append(f"    {command}")
  return "\n".join(lines)


def define_flags() -> None:
  """The command line's flags; defined only when run as a program, so that importing this
  module (tests, notebooks) never clashes with another launch module's --out."""
  flags.DEFINE_list("batches", ["1", "4", "16", "64", "256", "1024"],
                    "envs stepped together (vmap)")
  flags.DEFINE_list("sizes", ["64", "128"], "square image sizes in pixels")
  flags.DEFINE_integer("repeats", 3, "timed calls per figure (median)")
  flags.DEFINE_integer("steps", 32, "env steps per timed call (the scan's length)")
  flags.DEFINE_integer("mujoco_frames", 200, "MuJoCo frames per timed call")
  flags.DEFINE_integer("num_scenes", 32, "apartments in the env's scene pool")
  flags.DEFINE_integer("num_episodes", 512, "episodes in the env's set")
  flags.DEFINE_enum("objects", "sprites", ["sprites", "boxes"], "how objects are drawn")
  flags.DEFINE_bool("isolate", True, "run the largest batch of each config in a fresh "
                    "subprocess and report its peak memory")
  flags.DEFINE_string("out", None, "also write the figures as JSON here")
  flags.DEFINE_bool("markdown", True, "print the README's markdown table at the end")
  flags.DEFINE_string("child", None, "internal: one measurement as JSON (subprocess)")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
  f = flags.FLAGS
  if f.child:  # A subprocess of `measure_nav_isolated`: one figure, as JSON on stdout.
    print(json.dumps(measure_nav(**json.loads(f.child))), flush=True)
    return
  command = "python -m " + " ".join(["launch.bench.nav"] + [shlex.quote(a) for a in sys.argv[1:]])
  results = run_benchmark(f.batches, f.sizes, f.steps, f.repeats, f.mujoco_frames,
                          isolate=f.isolate, num_scenes=f.num_scenes,
                          num_episodes=f.num_episodes, objects=f.objects)
  text = markdown(results, command)
  results["markdown"], results["command"] = text, command
  if f.markdown:
    print(text)
  if f.out:
    from vcbench import files  # pylint: disable=g-import-not-at-top
    files.atomic_write(f.out, lambda fh: fh.write(json.dumps(results, indent=1).encode()))


if __name__ == "__main__":
  define_flags()
  cli.run(main)
