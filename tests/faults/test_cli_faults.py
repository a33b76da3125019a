"""Command-line mistakes end in one line on stderr naming the key or file, exit status 2, and no
traceback unless --verbose; nothing is computed first."""
import pytest

import launching
from vcbench import store as store_lib


def _errors(out):
  lines = [line for line in out.stderr.splitlines() if line.strip()]
  return lines


@pytest.mark.parametrize("args, expected", [
    (["--config", "configs/zoo_demo.py", "--config.num_trian=3"],
     "--config.num_trian: config has no key 'num_trian' (did you mean num_train?)"),
    (["--config", "configs/zoo_demo.py", "--config.num_train=lots"], "--config.num_train=lots"),
    (["--config", "configs/nope.py"], "config file 'configs/nope.py' not found"),
    (["--config", "configs/zoo_demo.py:huge"], "unknown variant 'huge'"),
    (["--config", "configs/zoo_demo.py", "--config.encoders=()"],
     "config.encoders: expected a non-empty tuple"),
    (["--config", "configs/cortexbench.py:tiny", "--config.checkpoints=random_vit_ti=/nope.npz",
      "--config.pvrs=('random_vit_ti',)"], "/nope.npz: no such file"),
])
def test_user_error_is_one_line_with_status_2(tmp_path, args, expected):
  out = launching.main(*args, f"--config.workdir={tmp_path / 'run'}", tmp_path=tmp_path,
                       timeout=300)
  assert out.returncode == 2, out.stderr[-2000:]
  lines = _errors(out)
  assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr[-2000:]
  assert expected in lines[0]
  assert "Traceback" not in out.stderr
  assert not (tmp_path / "run" / "data").exists()   # Refused before any work.


def test_verbose_shows_the_traceback(tmp_path):
  out = launching.main("--config", "configs/zoo_demo.py:huge", "--verbose", tmp_path=tmp_path,
                       timeout=300)
  assert out.returncode == 2 and "Traceback" in out.stderr
  assert out.stderr.strip().splitlines()[-1].startswith("error: ")


def test_convert_errors_are_one_line(tmp_path):
  bad = tmp_path / "weights.pth"
  bad.write_bytes(b"not a checkpoint")
  out = launching.run("launch.convert", "--model=in1k_mobilenetv2", f"--checkpoint={bad}",
                      f"--out={tmp_path / 'out.npz'}", tmp_path=tmp_path, timeout=300)
  assert out.returncode == 2, out.stderr[-2000:]
  assert len(_errors(out)) == 1 and str(bad) in out.stderr


def test_a_corrupt_store_is_one_line_naming_file_and_line(tmp_path):
  store = tmp_path / "results.jsonl"
  s = store_lib.ResultStore(store)
  for seed in (0, 1):
    s.append(store_lib.Cell(benchmark="cortexbench", task="assembly", pvr="x", seed=seed),
             "0" * 64, {"success": 50.0})
  first, second = store.read_bytes().split(b"\n")[:2]
  store.write_bytes(first + b"\n" + second[:30] + b"\n" + second + b"\n")  # A torn middle line.
  out = launching.run("launch.report", f"--store={store}", f"--out={tmp_path / 'report'}",
                      tmp_path=tmp_path, timeout=300)
  assert out.returncode == 2, out.stderr[-2000:]
  assert len(_errors(out)) == 1 and "results.jsonl:2: corrupt record" in out.stderr
  assert not (tmp_path / "report").exists()
