"""vcbench-nav agent, tasks and renderer on the hand-made scene: hand-computed SPL, collisions,
auto-reset, determinism, jit/vmap, known depths and labels, bad input."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import vcbench  # noqa: F401
from handscene import hand_atlas, hand_scene
from vcbench.envs.nav import env as E
from vcbench.envs.nav import episodes as ep
from vcbench.envs.nav import expert
from vcbench.envs.nav import geodesic
from vcbench.envs.nav import render as R
from vcbench.envs.nav import scene as sc

MOVE, LEFT, RIGHT, END = E.MOVE_AHEAD, E.ROTATE_LEFT, E.ROTATE_RIGHT, E.END


def one_episode(start, heading, goal, task="pointnav", category=0):
  s = hand_scene()
  nav = jnp.asarray(s.navigable)
  goal = jnp.asarray(goal, jnp.float32)
  src = (ep.category_source(jax.tree.map(jnp.asarray, s), category, 1.0) if task == "objectnav"
         else geodesic.point_source(nav, goal))
  f = geodesic.field(nav, src)
  start = jnp.asarray(start, jnp.float32)
  d = geodesic.distance_at(f, nav, start)
  arr = lambda x, dt=jnp.float32: jnp.asarray(x, dt)[None]
  return ep.Episodes(scene=arr(0, jnp.int32), start=start[None], start_heading=arr(heading),
                     goal=goal[None], goal_heading=arr(0.0), category=arr(category, jnp.int32),
                     distance=d[None], difficulty=arr(0, jnp.int32), field=f[None])


def make_env(episodes, task="pointnav", auto_reset=False, **kw):
  scenes = jax.tree.map(lambda a: jnp.asarray(a)[None], hand_scene())
  return E.NavEnv(scenes=scenes, episodes=episodes, atlas=jnp.asarray(hand_atlas()),
                  goal_images=jnp.zeros((len(episodes), 0, 0, 3), jnp.uint8), task=task,
                  camera=R.Camera(24, 32), auto_reset=auto_reset, **kw)


@jax.jit
def _step(env, state, action):   # the env is an argument: one compile serves every test
  return env.step(state, action)


def run(env, actions, state=None):
  state = env.reset_to(0) if state is None else state
  for a in actions:
    state = _step(env, state, a)
  return state


def test_spl_straight_path_is_one():
  env = make_env(one_episode((1.125, 1.875), 0.0, (1.625, 1.875)))
  s = run(env, [MOVE, MOVE, END])
  assert bool(s.done)
  assert float(s.metrics["success"]) == 1.0
  assert float(s.metrics["spl"]) == pytest.approx(1.0, abs=1e-5)
  assert float(s.metrics["episode_length"]) == 3


def test_spl_detour_halves():
  # 0.5 m shortest path; walk 0.25 away and back first: path 1.0 m -> SPL 0.5.
  env = make_env(one_episode((1.125, 1.875), 0.0, (1.625, 1.875)))
  s = run(env, [LEFT] * 6 + [MOVE] + [RIGHT] * 6 + [MOVE] * 3 + [END])
  assert float(s.metrics["success"]) == 1.0
  assert float(s.metrics["spl"]) == pytest.approx(0.5, abs=1e-4)


def test_end_away_from_goal_fails_with_zero_spl_and_a_stop_failure():
  env = make_env(one_episode((1.125, 1.875), 0.0, (1.625, 1.875)))
  s = run(env, [MOVE, END])
  assert bool(s.done) and float(s.metrics["success"]) == 0.0
  assert float(s.metrics["spl"]) == 0.0 and float(s.metrics["stop_failure"]) == 1.0
  assert float(s.metrics["final_distance"]) == pytest.approx(0.25, abs=1e-5)


def test_reward_is_progress_plus_success_minus_slack():
  env = make_env(one_episode((1.125, 1.875), 0.0, (1.625, 1.875)))
  s1 = run(env, [MOVE])
  assert float(s1.reward) == pytest.approx(0.25 - 0.01, abs=1e-5)
  s3 = run(env, [MOVE, END], s1)
  assert float(s3.reward) == pytest.approx(10.0 - 0.01, abs=1e-5)


def test_moving_into_a_wall_or_object_fails_and_is_counted():
  # Facing -x next to the outer wall (x < 0.25): the disc would cross x = 0.43.
  env = make_env(one_episode((0.5, 1.875), math.pi, (1.625, 1.875)))
  s = run(env, [MOVE])
  np.testing.assert_allclose(np.asarray(s.sim.pos), (0.5, 1.875), atol=1e-6)
  assert int(s.sim.failed_actions) == 1
  # Facing -y below the chair (its cells end at y = 1.0): 1.25 -> 1.0 would overlap it.
  env = make_env(one_episode((1.0, 1.375), -math.pi / 2, (1.625, 1.875)))
  s = run(env, [MOVE])
  assert int(s.sim.failed_actions) == 1
  s = run(env, [RIGHT] * 6 + [MOVE])           # turned to +y: free
  assert int(s.sim.failed_actions) == 0
  np.testing.assert_allclose(np.asarray(s.sim.pos), (1.0, 1.625), atol=1e-5)


def test_collides_agrees_with_brute_force_disc_test():
  s = jax.tree.map(jnp.asarray, hand_scene())
  solid = (np.asarray(s.wall) > 0) | (np.asarray(s.obj_inst) >= 0)
  rng = np.random.default_rng(0)
  pts = rng.uniform(0.3, 3.7, (300, 2)).astype(np.float32)
  got = np.asarray(jax.vmap(lambda p: E.collides(s, p))(jnp.asarray(pts)))
  # Brute force: exact distance from the centre to every solid cell's square, all cells.
  r, c = np.nonzero(solid)
  lo = np.stack([c, r], -1) * sc.CELL
  for p, g in zip(pts, got):
    gap = np.maximum(np.maximum(lo - p, p - (lo + sc.CELL)), 0.0)
    assert g == (np.hypot(gap[:, 0], gap[:, 1]).min() < sc.AGENT_RADIUS), p
  assert 50 < got.sum() < 250      # both outcomes are exercised


def test_episode_ends_at_the_step_limit_and_latches():
  env = make_env(one_episode((1.125, 1.875), 0.0, (3.125, 1.875)), max_steps=4)
  s = run(env, [LEFT] * 4)
  assert bool(s.done) and float(s.metrics["success"]) == 0.0
  again = run(env, [MOVE, MOVE], s)
  assert bool(again.done) and float(again.reward) == 0.0
  np.testing.assert_array_equal(np.asarray(again.sim.pos), np.asarray(s.sim.pos))
  assert int(again.sim.steps) == 4


def test_auto_reset_starts_a_new_episode_and_reports_the_old_one():
  env = make_env(one_episode((1.125, 1.875), 0.0, (1.625, 1.875)), auto_reset=True)
  s = env.reset(jax.random.key(0))
  s = run(env, [MOVE, MOVE, END], s)
  assert bool(s.done) and float(s.metrics["success"]) == 1.0
  assert int(s.sim.steps) == 0 and float(s.sim.ep_return) == 0.0
  np.testing.assert_allclose(np.asarray(s.sim.pos), (1.125, 1.875))


def test_reset_and_step_are_deterministic_jittable_and_vmappable():
  env = make_env(one_episode((1.125, 1.875), 0.0, (3.125, 1.875)), auto_reset=True)
  keys = jax.random.split(jax.random.key(3), 5)
  actions = jnp.array([MOVE, LEFT, RIGHT, MOVE, END])
  batched = jax.jit(jax.vmap(env.step))(jax.jit(jax.vmap(env.reset))(keys), actions)
  for i in range(5):
    single = _step(env, jax.jit(type(env).reset)(env, keys[i]), actions[i])
    for a, b in zip(jax.tree.leaves(single.obs), jax.tree.leaves(batched.obs)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b)[i], atol=1e-5)
  again = jax.jit(jax.vmap(env.step))(jax.jit(jax.vmap(env.reset))(keys), actions)
  for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(again)):
    if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_depth_of_a_facing_wall_is_its_perpendicular_distance():
  scene = jax.tree.map(jnp.asarray, hand_scene())
  cam = R.Camera(24, 32)
  # Facing -x at x = 1.125 (left room, row 7 = door height band): outer wall face at x = 0.25.
  out = R.render(scene, hand_atlas(), jnp.array([1.125, 1.875]), jnp.array(math.pi), cam)
  wall = np.asarray(out["semantic"]) == sc.SEM_WALL
  depth = np.asarray(out["depth"])[..., 0]
  assert wall.sum() > 200
  np.testing.assert_allclose(depth[wall], 0.875, atol=1e-4)
  # Above the horizon the ceiling, below it the floor, none of it in the wrong half.
  sem = np.asarray(out["semantic"])
  assert (sem[:12] != sc.SEM_FLOOR).all() and (sem[12:] != sc.SEM_CEILING).all()


def test_objects_are_labelled_with_their_category_and_are_nearer_than_the_wall():
  scene = jax.tree.map(jnp.asarray, hand_scene())
  # Below the chair (x 0.75-1.25, y 0.5-1.0) looking -y at it.
  out = R.render(scene, hand_atlas(), jnp.array([1.0, 1.9]), jnp.array(-math.pi / 2),
                 R.Camera(32, 32))
  sem, inst = np.asarray(out["semantic"]), np.asarray(out["instance"])
  chair = sem == sc.SEM_OBJECT0 + sc.CATEGORIES.index("chair") - 1
  assert chair.sum() > 20 and (inst[chair] == 0).all() and (inst[~chair] == -1).all()
  depth = np.asarray(out["depth"])[..., 0]
  np.testing.assert_allclose(depth[chair & (sem == sem)][:4], 0.9, atol=1e-4)  # front face
  cols = chair.any(0)
  behind = (sem == sc.SEM_WALL) & cols[None, :]       # the outer wall above the chair
  np.testing.assert_allclose(depth[behind], 1.65, atol=1e-4)


def test_rgb_comes_from_the_atlas():
  scene = jax.tree.map(jnp.asarray, hand_scene())
  atlas = hand_atlas()
  out = R.render(scene, atlas, jnp.array([1.125, 1.875]), jnp.array(math.pi), R.Camera(24, 32))
  rgb = np.asarray(out["rgb"]).astype(int)
  wall = np.asarray(out["semantic"]) == sc.SEM_WALL
  # The outer wall is material 1, blue channel 30 before shading (shade <= 1).
  assert rgb[wall][:, 2].max() <= 30 and rgb[wall][:, 2].min() >= 15


@pytest.mark.parametrize("task", ["pointnav", "objectnav"])
def test_expert_succeeds_on_the_hand_scene(task):
  scene = hand_scene()
  scenes = jax.tree.map(lambda a: np.asarray(a)[None], scene)
  eps = jax.tree.map(jnp.asarray, ep.generate(scenes, task, 16, seed=0))
  env = make_env(eps, task=task, sensors=("rgb",))
  state = jax.vmap(env.reset_to)(jnp.arange(16))

  @jax.jit
  def roll(env, state):
    def body(s, _):
      return jax.vmap(env.step)(s, jax.vmap(expert.action, in_axes=(None, 0))(env, s)), None
    return jax.lax.scan(body, state, None, length=120)[0]

  m = roll(env, state).metrics
  assert float(m["success"].mean()) == 1.0
  assert float(m["spl"].mean()) > 0.9


def test_bad_inputs_say_what_is_wrong():
  with pytest.raises(ValueError, match="hfov"):
    R.Camera(hfov=180)
  with pytest.raises(ValueError, match="height"):
    R.Camera(height=2)
  with pytest.raises(ValueError, match="unknown sensors"):
    R.render(jax.tree.map(jnp.asarray, hand_scene()), hand_atlas(), jnp.zeros(2), 0.0,
             R.Camera(), ("lidar",))
  scenes = jax.tree.map(lambda a: np.asarray(a)[None], hand_scene())
  with pytest.raises(ValueError, match="unknown nav task 'pointgoal'"):
    ep.generate(scenes, "pointgoal", 4, seed=0)
  with pytest.raises(ValueError, match="hard: 0"):   # 4 m x 4 m cannot hold 4.4 m paths
    ep.generate(scenes, "pointnav", 30, seed=0, balanced=True, max_batches=3)


def test_generated_episodes_are_solvable_and_in_their_bins():
  scenes = jax.tree.map(lambda a: np.asarray(a)[None], hand_scene())
  eps = ep.generate(scenes, "pointnav", 40, seed=1)
  assert (eps.distance < geodesic.UNREACHABLE).all() and (eps.distance >= 0.5).all()
  lo = np.array([b[1] for b in ep.tk.get("pointnav").bins])[eps.difficulty]
  hi = np.array([b[2] for b in ep.tk.get("pointnav").bins])[eps.difficulty]
  assert ((eps.distance >= lo) & (eps.distance < hi)).all()
  again = ep.generate(scenes, "pointnav", 40, seed=1)
  np.testing.assert_array_equal(eps.start, again.start)


def test_near_a_point_goal_success_distance_is_the_observed_one():
  # PointNav's success rule reads the geodesic field; within 0.45 m of the goal (a cell centre)
  # it must equal the Euclidean distance the agent sees in gps_compass, or END there would be
  # a guess.
  from vcbench.envs import nav  # pylint: disable=import-outside-toplevel
  env = nav.make("pointnav", "test", num_scenes=4, num_episodes=20, height=8, width=8,
                 sensors=("depth",), auto_reset=False)
  rng, checked = np.random.default_rng(0), 0
  for i in range(20):
    e = jax.tree.map(lambda x, i=i: x[i], env.episodes)
    scene = env.scene(e.scene)
    for r, a in zip(rng.uniform(0, 0.45, 20), rng.uniform(-np.pi, np.pi, 20)):
      xy = e.goal + r * jnp.array([np.cos(a), np.sin(a)], jnp.float32)
      if bool(E.collides(scene, xy)):
        continue
      assert float(geodesic.distance_at(e.field, scene.navigable, xy)) == pytest.approx(
          float(E.gps_compass(xy, 0.0, e.goal)[0]), abs=1e-5)
      checked += 1
  assert checked > 300


def test_odometry_is_the_pose_in_the_start_frame():
  # Start facing +y (heading 90 degrees) in the open left room; the goal is irrelevant.
  env = make_env(one_episode((1.0, 1.5), math.pi / 2, (1.5, 3.0)), odometry=True)
  state = env.reset_to(0)
  np.testing.assert_allclose(state.obs["odometry"], [0.0, 0.0, 1.0, 0.0], atol=1e-6)
  state = run(env, [MOVE], state)                  # 0.25 m straight ahead
  np.testing.assert_allclose(state.obs["odometry"], [0.25, 0.0, 1.0, 0.0], atol=1e-6)
  state = run(env, [RIGHT, RIGHT, RIGHT, MOVE], state)   # turn 90 degrees right, 0.25 m on
  t = math.pi / 2
  np.testing.assert_allclose(state.obs["odometry"], [0.25, 0.25, math.cos(t), math.sin(t)],
                             atol=1e-5)
  assert "odometry" not in make_env(one_episode((1.0, 1.5), 0.0, (1.5, 3.0))).reset_to(0).obs


@pytest.mark.parametrize("heading", [-math.pi / 2, math.pi / 2])
def test_the_categories_in_view_are_those_of_the_semantic_frame(heading):
  chair = sc.CATEGORIES.index("chair")
  env = make_env(one_episode([1.0, 1.9], heading, [0.0, 0.0], "objectnav", chair),
                 task="objectnav", sensors=("rgb",))
  sim = env.reset_to(0).sim
  sem = np.asarray(R.render(jax.tree.map(jnp.asarray, hand_scene()), hand_atlas(), sim.pos,
                            sim.heading, env.camera)["semantic"])
  brute = [bool((sem == sc.SEM_OBJECT0 + k).any()) for k in range(E.NUM_CATEGORIES)]
  assert list(np.asarray(sim.categories_visible)) == brute
  assert bool(sim.goal_visible) == brute[chair - 1] == (heading < 0)   # facing the chair or not
  pointnav = make_env(one_episode([1.0, 1.9], heading, [2.5, 2.5]), sensors=("rgb",))
  assert not np.asarray(pointnav.reset_to(0).sim.categories_visible).any()   # no labels there


def test_the_coarse_depth_label_is_the_depth_observation_averaged_over_blocks():
  # Facing the wall of the depth test: every block of the upper rows sees the 0.875 m wall.
  episode = one_episode([1.125, 1.875], math.pi, [2.5, 2.5])
  rgb_only, rgbd = make_env(episode, sensors=("rgb",)), make_env(episode, sensors=("rgb", "depth"))
  depth = np.asarray(rgbd.reset_to(0).obs["depth"])[..., 0]   # [24, 32], in [0, 1]
  label = np.asarray(rgb_only.coarse_depth(rgb_only.reset_to(0).sim, 4)).reshape(4, 4)
  brute = depth.reshape(4, 6, 4, 8).mean((1, 3))
  np.testing.assert_allclose(label, brute, atol=1e-6)
  assert 0.0 < label.min() and label.max() <= 1.0
  with pytest.raises(ValueError, match="24x32 frame does not split into 5x5 blocks"):
    rgb_only.coarse_depth(rgb_only.reset_to(0).sim, 5)
