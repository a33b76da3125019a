"""The leaderboard job: refusals before any work, an outside PVR (a plugin's own Flax module
with its own weights file) run through a benchmark into the one store and the page, a re-run
that computes nothing; the four benchmarks end to end (slow)."""
import hashlib
import json
import pathlib
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from configs import leaderboard as leaderboard_config
from vcbench import config as config_lib
from vcbench import jobs
from vcbench import registry
from vcbench.models import convert
from vcbench.models import zoo
from vcbench.store import ResultStore

MODULE = """
import flax.linen as nn
import jax.numpy as jnp
from vcbench.models import zoo
from vcbench.models.preprocess import Preprocess


class {cls}(nn.Module):
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    f = nn.Conv(8, (8, 8), strides=(8, 8), dtype=self.dtype)(x)
    tokens = f.reshape(f.shape[0], -1, 8)
    return {outputs}, {{}}


zoo.register("{name}", lambda img_size, dtype: {cls}(dtype=dtype),
             Preprocess(32, 32, "bilinear"), "a test's own module")
"""
GOOD = '{"cls": tokens.mean(1), "tokens": tokens, "pyramid": [f]}'


@pytest.fixture
def plugin(tmp_path):
  """Writes a plugin registering PVR `name`; unregisters it afterwards."""
  made = []

  def make(name, outputs=GOOD):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(MODULE.format(cls=name.title().replace("_", ""),
                                                  outputs=outputs, name=name)))
    made.append((name, f"vcbench_plugin_{name}"))
    return str(path)
  yield make
  for name, module in made:
    if name in zoo.names():
      zoo.ZOO.unregister(name)
    sys.modules.pop(module, None)


def _tiny(tmp_path, **overrides):
  c = leaderboard_config.get_config("tiny")
  c.workdir = str(tmp_path / "board")
  for key, value in overrides.items():
    c[key] = value
  return c


@pytest.mark.parametrize("overrides, message", [
    ({"pvrs": ("no_such_pvr",)}, "pvrs"),
    ({"benchmarks": ("cortexbench", "imagenet")}, "benchmarks"),
    ({"plugins": ("missing_plugin.py",)}, "config.plugins: plugin missing_plugin.py: no such"),
    ({"checkpoints": "vcbench_vit_ti=/x.npz"}, "not one of"),
])
def test_refusals_name_the_key(tmp_path, overrides, message):
  with pytest.raises(config_lib.ConfigError, match=message):
    jobs.resolve(_tiny(tmp_path, **overrides))


def test_a_section_the_benchmark_refuses_is_named_with_its_section(tmp_path):
  c = _tiny(tmp_path)
  c.colosseum.test_sets = ("no_such_factor",)
  with pytest.raises(config_lib.ConfigError, match=r"config.colosseum \(colosseum job\)"):
    jobs.resolve(c)


def test_an_outside_module_breaking_the_encoder_contract_is_refused(tmp_path, plugin):
  path = plugin("no_tokens", outputs='{"cls": tokens.mean(1)}')
  c = _tiny(tmp_path, plugins=(path,), pvrs=("no_tokens",))
  with pytest.raises(zoo.ContractError, match="no_tokens: outputs\\['tokens'\\]"):
    jobs.resolve(c)


def _weights(path, name):
  """The module's variables from seed 7, saved as the user would ship them."""
  encoder = zoo.load(name, seed=7)
  convert.save_variables(str(path), jax.tree.map(jnp.asarray, encoder.params))
  return str(path) + ("" if str(path).endswith(".npz") else ".npz")


def test_an_outside_pvr_gets_a_row_with_provenance_and_a_rerun_computes_nothing(
    tmp_path, plugin):
  path = plugin("outside_tiny")
  c = _tiny(tmp_path, plugins=(path,), pvrs=("outside_tiny",), benchmarks=("cortexbench",))
  registry.load_plugins(c.plugins)
  weights = _weights(tmp_path / "outside_tiny.npz", "outside_tiny")
  c.checkpoints = f"outside_tiny={weights}"
  jobs.resolve(c).run(c)
  board = pathlib.Path(c.workdir)
  records = ResultStore(board / "results.jsonl").records()
  assert records and {r["cell"]["pvr"] for r in records} == {"outside_tiny"}
  page = board / "leaderboard"
  data = json.loads((page / "data.js").read_text().removeprefix("window.LEADERBOARD = ")
                    .rstrip().rstrip(";"))
  (row,) = data["rows"]
  assert row["values"]["cortexbench.mean_success"] is not None
  prov = row["provenance"]
  assert prov["checkpoint_sha256"] == hashlib.sha256(pathlib.Path(weights).read_bytes()
                                                     ).hexdigest()
  assert prov["config_hash"]["cortexbench"] == records[0]["config_hash"][:12]
  links = row["links"]["cortexbench"]
  stored = [json.loads(line) for line in (page / links["records"]).read_text().splitlines()]
  assert stored == records
  assert json.loads((page / links["config"]).read_text())["pvrs"] == ["outside_tiny"]
  # Its own weights were used: the cortexbench run's config carries the checkpoint.
  assert json.loads((page / links["config"]).read_text())["checkpoints"] == c.checkpoints
  jobs.resolve(c).run(c)
  assert len(ResultStore(board / "results.jsonl").records()) == len(records)
  timings = json.loads((board / "timings.json").read_text())
  assert timings["cortexbench"]["new_records"] == len(records)   # the run that computed


@pytest.mark.slow   # every benchmark's tiny variant, one random PVR: minutes
def test_tiny_leaderboard_runs_every_benchmark_into_one_store(tmp_path):
  c = _tiny(tmp_path)
  jobs.resolve(c).run(c)
  board = pathlib.Path(c.workdir)
  benchmarks = {r["cell"]["benchmark"] for r in ResultStore(board / "results.jsonl").records()}
  assert {"cortexbench", "gvue", "robustnav", "colosseum"} <= benchmarks
  text = (board / "leaderboard" / "leaderboard.md").read_text()
  assert "| random_vit_ti | 1.00 |" in text
  for name in ("cortexbench", "gvue", "robustnav", "colosseum"):
    assert (board / "leaderboard" / "records" / "random_vit_ti" / f"{name}.jsonl").stat().st_size
