"""Old stores stay valid: every job's default configs hash as they did before the jobs moved
into vcbench/jobs (the values below were computed by the earlier code), so cells already in a
store are still found done; and the demo cache keys are unchanged, so cached demos are reused.

A failing value here means stored results of that config will be recomputed: change it only
with a change that is meant to invalidate them, and say so. Changed on purpose so far: `quick`
became the four-suite main job (20 test episodes; its MetaWorld cells are new), and the
former MetaWorld-only `quick` is `metaworld_quick` (the same numbers under another protocol
name, so other hashes); vcbench-nav's objects became category sprites and its policy embeds the
goal vector (every nav variant: its runs are new), while `objects='boxes'` with
`policy.embed_vectors=False` still hashes as those variants did (`NAV_BEFORE_SPRITES`); the
Colosseum's definitions grew (three cameras, 126 textures, 70 distractors, Object_Position,
per-task horizons, the relative expert rule), so its cells are new. A several-suite config has
one hash per suite ("<variant>/<suite>"; MetaWorld's name no suite).
"""
import pytest

from configs import colosseum, cortexbench, nav, robustnav, zoo_demo
from vcbench.data import demos
from vcbench.envs.core import RenderConfig
from vcbench.jobs import colosseum as colosseum_job
from vcbench.jobs import cortexbench as cortexbench_job
from vcbench.jobs import grid
from vcbench.jobs import nav as nav_job
from vcbench.jobs import robustnav as robustnav_job

GOLDEN = {
    "colosseum:full":
        "4791827969777dd348ee823945458e1024238bd91cdc14778af9c176db8a2c0b",
    "colosseum:tiny":
        "89e4b5c1fb1e84d43a2a101f423395c907562107845a1d64fa7a3cb458954f34",
    "cortexbench:full":
        "d7ae490988537d9e6364a52c72efcabd3436f5a40617f9515e001604f345f443",
    "cortexbench:full:finetune":
        "929e3c2c3b93cb4e7214cce9ec667bd8ee73cfa855924c535d09ecf5ccc0d094",
    "cortexbench:full:mae":
        "f1bc191675b8b381d50446d135f7995db8b55a42d41bd76f19a4c2318768ab03",
    "cortexbench:full:mae_scratch":
        "33b7c5a5298882535e1b2c0145f412146dfc76fa28d5cb9e6ea7ff28a692d769",
    "cortexbench:metaworld_quick":
        "602b102d704a4445f71cae1b414319c668d0390b6bd8cab8f100332e91569160",
    "cortexbench:metaworld_quick:finetune":
        "3bf443fc995c7c28a12a5f0c60797dc56e0cbd9b9fbc88fd19f28f5cff23ed07",
    "cortexbench:metaworld_quick:mae":
        "d652cbd87e279815b8cf97d82230da6aad2709ca814dbf0c29fb475bc4e246f7",
    "cortexbench:metaworld_quick:mae_scratch":
        "a08b6adef4181f5a9916e3b1f4f64a7564f459e54f789b73b22bdaf46ab63a6c",
    "cortexbench:quick":
        "0b1ea359cea603d2b477559327439ed862ba74f14d686d65225efabddfba2eb6",
    "cortexbench:quick/adroit":
        "8bcbd9079acd207c732724776ec6f30c70c38d89a3f5377bceb8b5fae8fde734",
    "cortexbench:quick/dmc":
        "0300cbdf6dfa4196a9e10888e75e4ad99663debe629d627ebf40b5f000678a55",
    "cortexbench:quick/trifinger":
        "7fb0f66d40eaf58b542e9e1977ab2cda3aa33cc08c7fe005ca06a1f20819f2b4",
    "cortexbench:quick:finetune":
        "51de45701c790f1f80406dbecaeaf302be64c48a6f2b3065bdf34b602a46d966",
    "cortexbench:quick:finetune/adroit":
        "0bc11d522a63f64c171ece12f609abb9dc1feb387f882bf0e6dd44291ba882ec",
    "cortexbench:quick:finetune/dmc":
        "eff34e618a42f123133c636d9f016b8800a8fd0f7313a2bdbc641f11c15a98ff",
    "cortexbench:quick:finetune/trifinger":
        "42e783c2cc5d5c30321783c470500d41c8519d5a775d89bc7db05b1c66403ddb",
    "cortexbench:quick:mae":
        "a94458dd120cf2071cebfc54728d1939053df83cdc2d7ff256264c75d0b08dd8",
    "cortexbench:quick:mae/adroit":
        "a876c256433552af03d6bd9786ffd44130d56187613ae2134a00325b44d3d7a6",
    "cortexbench:quick:mae/dmc":
        "3d3be0a1d15299d594e9af4e33aa5592d7840d3397821e078b2fb2f7144e24ca",
    "cortexbench:quick:mae/trifinger":
        "918473c730856a5726025fd756a8fbd424e329a37a02dca8a10c2209d45da905",
    "cortexbench:quick:mae_scratch":
        "78127043b7e6508281c5a34be4d00dd1b8067c0ff07e3f2300dd6cfb0193adc3",
    "cortexbench:quick:mae_scratch/adroit":
        "47e0ab8610dcc097b070d3dd22c7b25cd31ab23a7479825cb6a79489201b8af0",
    "cortexbench:quick:mae_scratch/dmc":
        "cb621c7a274319c9059518410df40a7c1e034b8f432b6248cebe41438a5baf9a",
    "cortexbench:quick:mae_scratch/trifinger":
        "ef860f0b03583054a85e602cd8ad71b253517908168e61bae9d66a33eff260b2",
    "cortexbench:tiny":
        "92bce4c0829e2e2ef0d05e7b105588a68e83654bf2b9632c4fd7b26f917ef022",
    "cortexbench:tiny:finetune":
        "cced0ad1d9a4c504fdde617937c3378efc77cc9a4d25370fd0009ce4e4d17f8c",
    "cortexbench:tiny:mae":
        "1122eb9b88bfe2ba2d3fc93ce36a12557858693c5fd55034b5f315111a070a9a",
    "cortexbench:tiny:mae_scratch":
        "c1fc61333c4a54394f06440e929906775c2e54054d24b71991e9df47578fb71b",
    "demos:assembly:128":
        "d7cbb82233c65fb17ffe11e469c5c0620d0499a5d30c82e332730a75dc0d0d2d",
    "demos:assembly:64":
        "7fb00dd4f05bf570ca6de3703af6d0a15bfb13dd6593f187de51cf0d0bc8d6bc",
    "demos:colosseum:hammer":
        "934513a828c19c1cd6dd9f42535c5e18f61129214c3243f667951c3a2d11adbf",
    "demos:drawer-open:128":
        "35a4676b274f6f0ccab523877fc059980cd6dea602f7e0be9bb4b8587ee8140f",
    "demos:drawer-open:64":
        "d8146f10df895d7f328fea4a6dcd941e6150d073e0a24c588e04e2b82852ef39",
    "nav:imagenav":
        "73eb358ff5ed5c85f1f5c086c77860a846f294c1bffc2235dd21b3854a542487",
    "nav:objectnav_bc":
        "491018ccff97dc168e480805d5f93f7b147ca231da63650f75a6ea026fc770b8",
    "nav:objectnav_il":
        "d096b15a51ae7cdb9306bc2ce4ca28275899d6053f348289807336688b2b42ae",
    "nav:objectnav":
        "72b09a3a92603bb7e49b78211f46dd3aea47a35ece8233634e45ffcdb1c5370d",
    "nav:imagenav_il":
        "bc712edd93bff14c8380bdd5ade0e9a642705367ebbb6f1949c473292ca14259",
    "nav:pointnav_depth":
        "c6201d03f5ca83309cf2b07afe763c0b015776b3c5e557cd6ca42581b3fd27e7",
    "nav:pointnav_rgb":
        "6318663b1d815267757fb20609dea20157b4428b9a04ae5c659c0bbac91ea3ce",
    "nav:pointnav_rgbd":
        "bc1dc7dc5efa5bdeb9afe7f9fe8fe5e79e3ccccb4de96da62505b51a491d379f",
    "nav:pointnav_rgb_il":
        "a5ba52a9482904cdd9ccbf85cc756013b31faef90dc99f10f3d9e4ba920f979f",
    "nav:pointnav_rgbd_il":
        "a83da413e63568327a357e058424e25d72d6f24a68dea57776cb8603851b8376",
    "nav:pointnav_rgb_ppo32":
        "925f4badb34a76a33b59ee5db8a318be47ac87a6c0f23cec2cb38cd408c58c51",
    "nav:pointnav_rgbd_ppo32":
        "7bfc2e2b22712e940346e4d669db2fe63c31cc82955da1fa405e56cedf0f6c73",
    "nav:tiny":
        "3ee2556bb7f70591f367d84a16229bd90e815e746b3c4807353498731a3daf10",
    "nav:tiny_rgbd":
        "7321c5002585e86bb306cf71ce8cd485d79be87f4be4519875182129cad48ea3",
    "robustnav:full":
        "4b2a91de609f7f2a8cc386a124e47d1cc2c0e7cd6026303216c0c9fb79e8d790",
    "robustnav:table2":
        "4b2a91de609f7f2a8cc386a124e47d1cc2c0e7cd6026303216c0c9fb79e8d790",
    "robustnav:tiny":
        "fd54204c40860b2ed487cb8cccdcf85ffb8ce27f9e3bef10405e750ae531962c",
    "zoo_demo:default":
        "33926dc55e2f4aa7fadb22a82ab0e1e5df99a7bf7eafad50349844003ad8029b",
    "zoo_demo:quick":
        "6fc7424c5fb7d00f57de062c85e3d27ec9c28abeb3288d0304026bf9d4e60098",
}

# pointnav_rgb(d) before they became the 64x64 imitation agents: now the *_ppo32 variants.
NAV_PPO32_AS_BEFORE = {
    "nav:pointnav_rgb":
        "5f8407474ceb576a0bed4787e4ffdd9ba6ce677bf539d2e81caf9d4727257fc9",
    "nav:pointnav_rgbd":
        "0c0df5930d88d4cdc6761343bf6e30f880f0989968015b1e7e1e262cf5ebc290",
}

# The nav variants' hashes before sprites and the embedded goal vector. ObjectNav's are gone:
# its goal cells (viewpoints) now need a line of sight, which changes its episodes, so its old
# records must not match (`test_objectnav_viewpoints_enter_the_hash`).
NAV_BEFORE_SPRITES = {
    "nav:imagenav":
        "ba61d35099a779b14ca44280e74c875e0ce27d1e62575ce05c2461944a09c7d7",
    "nav:pointnav_depth":
        "ad2212173f6ae001911577d75d1322f52aead44172bb6616d0b76f63b5f13c0e",
    "nav:pointnav_rgb":
        "97a014246f5458a11d8172ff6d633a18a0833bf3b8e48be20fb376aca819955a",
    "nav:pointnav_rgbd":
        "808fd5ac41c7bb2f67ec4624903d36cd22383ebdc75488873f904cd91dbed86e",
    "nav:tiny":
        "a03091aac29c5ec88b21aa86d5082f3a327a23b62337faa3d27bf1ab568c4a7f",
    "nav:tiny_rgbd":
        "d9a1a544620db02511108942040947310e5699de9aad33afafe00b4937883f22",
}


class _Agent:
  variant = "pointnav_rgb"
  info = {"agent_update": 500, "agent_val_success": 56.0, "agent_steps": 2048000}


def _hashes():
  out = {}
  for v in cortexbench.VARIANTS:
    for a in ("frozen", "mae", "mae_scratch", "finetune"):
      c = cortexbench.get_config(v)
      c.adaptation = a
      for suite in cortexbench_job.suite_names(c):   # MetaWorld's keys name no suite.
        key = f"cortexbench:{v}" + ("" if a == "frozen" else f":{a}")
        key += "" if suite == "metaworld" else f"/{suite}"
        out[key] = cortexbench_job.config_hash(c, suite)
  for v in colosseum.VARIANTS:
    out[f"colosseum:{v}"] = colosseum_job.config_hash(colosseum.get_config(v))
  for v in nav.VARIANTS:
    out[f"nav:{v}"] = nav_job.config_hash(nav.get_config(v))
  for v in robustnav.VARIANTS:
    out[f"robustnav:{v}"] = robustnav_job.config_hash(robustnav.get_config(v), _Agent())
  for v in zoo_demo.VARIANTS:
    out[f"zoo_demo:{v}"] = grid.config_hash(zoo_demo.get_config(v))
  return out


@pytest.mark.parametrize("name", [k for k in GOLDEN if not k.startswith("demos:")])
def test_default_configs_hash_as_before(name):
  assert _hashes()[name] == GOLDEN[name]


def test_demo_cache_keys_as_before():
  pytest.importorskip("metaworld")
  from vcbench.envs.mujoco import metaworld as mw  # pylint: disable=import-outside-toplevel
  if mw.version() != "3.1.1":
    pytest.skip(f"the keys were recorded with metaworld 3.1.1, this is {mw.version()}")
  for task in ("assembly", "drawer-open"):
    for size in (128, 64):
      cfg = demos.DemoConfig(task=task, num_demos=10, render=RenderConfig(size=size))
      assert cfg.key(mw.version()) == GOLDEN[f"demos:{task}:{size}"]
  cfg = demos.DemoConfig(task="hammer", num_demos=100, render=RenderConfig(size=128),
                         max_steps=200, max_attempts=200)
  assert cfg.key(mw.version()) == GOLDEN["demos:colosseum:hammer"]


def test_a_changed_colosseum_definition_changes_the_hash(monkeypatch):
  from vcbench.benchmarks import colosseum as col  # pylint: disable=import-outside-toplevel
  config = colosseum.get_config("tiny")
  before = colosseum_job.config_hash(config)
  defs = col.definitions()
  defs["factors"]["Mass"]["id"] = 99
  monkeypatch.setattr(col, "definitions", lambda: defs)
  assert colosseum_job.config_hash(config) != before


def _earlier_nav_config(key: str):
  """The config a nav variant of before the imitation agents had."""
  name = key.split(":")[1]
  if name in ("pointnav_rgb", "pointnav_rgbd"):
    c = nav.get_config(f"{name}_ppo32")
    c.variant = name
    return c
  return nav.get_config(name)


def test_the_32px_ppo_agents_keep_their_hashes():
  for key, value in NAV_PPO32_AS_BEFORE.items():
    assert nav_job.config_hash(_earlier_nav_config(key)) == value, key


def test_nav_configs_of_the_earlier_look_keep_their_hashes():
  for key, value in NAV_BEFORE_SPRITES.items():
    c = _earlier_nav_config(key)
    c.objects, c.policy.embed_vectors = "boxes", False
    assert nav_job.config_hash(c) == value, key


def test_objectnav_viewpoints_enter_the_hash(monkeypatch):
  from vcbench.envs.nav import episodes  # pylint: disable=import-outside-toplevel
  config = nav.get_config("objectnav_bc")
  before = nav_job.config_hash(config)
  monkeypatch.setattr(episodes, "VIEWPOINTS", "within success distance")
  assert nav_job.config_hash(config) != before
