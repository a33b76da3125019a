"""Tests for vcbench.progress: a bar on a terminal, silence in logs."""

import io
import os
import subprocess
import sys

import pytest
import tqdm

from vcbench import progress as progress_lib
from vcbench.progress import progress


class _Tty(io.StringIO):

  def isatty(self):
    return True


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
  monkeypatch.delenv(progress_lib.ENV_VAR, raising=False)
  for name in [n for n in os.environ if n.startswith("TQDM_")]:
    monkeypatch.delenv(name)


def test_shows_bar_on_tty():
  out = _Tty()
  assert list(progress(range(5), "eval tasks", file=out)) == [0, 1, 2, 3, 4]
  text = out.getvalue()
  assert "eval tasks" in text and "5/5" in text


def test_total_for_generators():
  out = _Tty()
  assert list(progress((i for i in range(3)), "gen", total=3, file=out)) == [0, 1, 2]
  assert "3/3" in out.getvalue()


def test_silent_when_not_a_tty():
  out = io.StringIO()
  assert list(progress(range(5), "eval", file=out)) == list(range(5))
  assert out.getvalue() == ""


def test_silent_with_env_var_even_on_tty(monkeypatch):
  monkeypatch.setenv(progress_lib.ENV_VAR, "1")
  out = _Tty()
  assert list(progress(range(5), "eval", file=out)) == list(range(5))
  assert out.getvalue() == ""
  assert not progress_lib.enabled(out)


def test_default_stream_is_stderr(monkeypatch):
  err = _Tty()
  monkeypatch.setattr("sys.stderr", err)
  assert progress_lib.enabled()
  list(progress(range(2), "on stderr"))
  assert "on stderr" in err.getvalue()
  monkeypatch.setattr("sys.stderr", io.StringIO())
  assert not progress_lib.enabled()


# -- tqdm's own switches -----------------------------------------------------------------------

def test_tqdm_disable_silences_bars_on_a_tty(monkeypatch):
  monkeypatch.setenv("TQDM_DISABLE", "1")
  out = _Tty()
  assert list(progress(range(5), "eval", file=out)) == list(range(5))
  assert out.getvalue() == ""
  assert not progress_lib.enabled(out)


def _tqdm_arguments(monkeypatch) -> dict:
  seen = {}
  monkeypatch.setattr(tqdm, "tqdm", lambda iterable, **kw: (seen.update(kw), iterable)[1])
  list(progress(range(2), "eval", file=_Tty()))
  return seen


def test_no_explicit_argument_overrides_a_tqdm_switch(monkeypatch):
  assert _tqdm_arguments(monkeypatch)["disable"] is None   # tqdm's own: off when not a tty
  monkeypatch.setenv("TQDM_NCOLS", "40")
  assert "dynamic_ncols" not in _tqdm_arguments(monkeypatch)
  monkeypatch.setenv(progress_lib.ENV_VAR, "1")
  assert _tqdm_arguments(monkeypatch)["disable"] is True    # vcbench's switch wins


_CHILD = """
import io, sys
from vcbench.progress import progress
class Tty(io.StringIO):
  def isatty(self):
    return True
out = Tty()
list(progress(range(3), "child", file=out, mininterval=0))
sys.stdout.write(out.getvalue())
"""


@pytest.mark.parametrize("env,shown", [({}, True), ({"TQDM_DISABLE": "1"}, False)])
def test_tqdm_switches_set_before_the_process_starts(env, shown):
  """tqdm reads TQDM_* when imported: a process started with TQDM_DISABLE=1 shows no bar."""
  base = {k: v for k, v in os.environ.items()
          if not k.startswith("TQDM_") and k != progress_lib.ENV_VAR}
  out = subprocess.run([sys.executable, "-c", _CHILD], env={**base, **env}, check=True,
                       capture_output=True, text=True, timeout=120).stdout
  assert ("child" in out and "3/3" in out) == shown, out


def test_tqdm_ncols_set_before_the_process_starts_sets_the_width():
  base = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
  out = subprocess.run([sys.executable, "-c", _CHILD], env={**base, "TQDM_NCOLS": "30"},
                       check=True, capture_output=True, text=True, timeout=120).stdout
  lines = [line for line in out.replace("\r", "\n").splitlines() if "child" in line]
  assert lines and max(len(line) for line in lines) <= 30, out
