"""Tests for vcbench.progress: a bar on a terminal, silence in logs."""

import io

import pytest

from vcbench import progress as progress_lib
from vcbench.progress import progress


class _Tty(io.StringIO):

  def isatty(self):
    return True


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
  monkeypatch.delenv(progress_lib.ENV_VAR, raising=False)


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
