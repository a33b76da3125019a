"""How every vcbench command line ends: one clear line for the user's mistakes.

`cli.run(main)` replaces `absl.app.run(main)`. It parses the flags itself, so a bad
`--config=...` or `--config.key=value` is reported as one line naming the file or the key
(ml_collections' own error is a long traceback with the key in an escaped string), and it turns
what reaches the top into an exit status:

  0    done
  1    an internal error (a bug in vcbench): the full traceback
  2    a user error (`vcbench.errors.UserError`, a file that is missing, unreadable or a
       directory): one line, "error: ...", the traceback only with --verbose
  130  interrupted (Ctrl-C, SIGTERM): one line saying a re-run of the same command resumes
"""
from __future__ import annotations

import contextlib
import difflib
import os
import signal
import sys
import traceback
from typing import Any, Callable, Iterator, Sequence

from absl import app
from absl import flags
from absl import logging

from vcbench import config as config_lib
from vcbench import errors

USER_ERROR, INTERRUPTED = 2, 130


class InputError(errors.UserError, ValueError):
  """Input a command was given that it cannot use (e.g. a result store a report cannot read)."""

_VERBOSE = flags.DEFINE_bool("verbose", False, "print the full traceback of a user error")


def _config_spec(argv: Sequence[str]) -> str | None:
  """The value of `--config=...` or `--config ...`."""
  for i, arg in enumerate(argv):
    if arg.startswith("--config="):
      return arg.split("=", 1)[1]
    if arg == "--config" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def _missing_config_file(argv: Sequence[str]) -> str | None:
  spec = _config_spec(argv)
  path = spec.partition(":")[0] if spec else None
  if path and not os.path.isfile(path):
    return f"--config: config file {path!r} not found (working directory {os.getcwd()})"
  return None


def _config_override_problem(argv: Sequence[str]) -> str | None:
  """Names the first `--config.a.b=...` override whose key the config file lacks."""
  spec = _config_spec(argv)
  if spec is None:
    return None
  try:
    config = config_lib.load_file(spec)
  except Exception as e:  # pylint: disable=broad-except  # Reported by the caller's message.
    return f"--config={spec}: {_one_line(e)}"
  for arg in argv:
    if not arg.startswith("--config."):
      continue
    path = arg[len("--config."):].split("=", 1)[0]
    node, walked = config, "config"
    for part in path.split("."):
      keys = list(node.keys()) if hasattr(node, "keys") else []
      if part not in keys:
        close = difflib.get_close_matches(part, keys, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return (f"--config.{path}: {walked} has no key {part!r}{hint}; its keys: "
                f"{', '.join(sorted(keys))}")
      node, walked = node[part], f"{walked}.{part}"
  return None


def _parse(argv: list[str]) -> list[str]:
  missing = _missing_config_file(argv[1:])
  if missing:
    raise config_lib.ConfigError(missing)
  try:
    return flags.FLAGS(argv)
  except Exception as e:  # pylint: disable=broad-except  # ml_collections' parse errors.
    problem = _config_override_problem(argv[1:])
    raise config_lib.ConfigError(problem or f"bad command line: {_one_line(e)}") from e


def _one_line(e: BaseException) -> str:
  text = " ".join(str(e).split()) or type(e).__name__
  if isinstance(e, OSError) and e.filename and str(e.filename) not in text:
    text = f"{e.filename}: {text}"
  return text


def _sigterm(signum: int, frame: Any) -> None:
  del signum, frame
  raise KeyboardInterrupt


def _verbose(argv: Sequence[str]) -> bool:
  # The flag may be unparsed when the error came from parsing: read the raw arguments too.
  return (flags.FLAGS.is_parsed() and _VERBOSE.value) or "--verbose" in argv


@contextlib.contextmanager
def exit_statuses(argv: Sequence[str] | None = None) -> Iterator[None]:
  """Maps what escapes the block to the exit statuses of the module docstring (for command
  lines that parse their own arguments, e.g. with argparse)."""
  argv = list(sys.argv if argv is None else argv)
  signal.signal(signal.SIGTERM, _sigterm)
  try:
    yield
  except KeyboardInterrupt:
    print("\ninterrupted: what was finished is saved; re-run the same command to resume.",
          file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: finalisers of half-torn-down renderers (EGL contexts) would print
    # tracebacks at shutdown. Records and checkpoints are durable when written (fsync, rename).
    os._exit(INTERRUPTED)  # pylint: disable=protected-access
  except (errors.UserError, *errors.USER_OS_ERRORS) as e:
    if _verbose(argv):
      traceback.print_exc()
    print(f"error: {_one_line(e)}", file=sys.stderr)
    sys.exit(USER_ERROR)


def run(main: Callable[[list[str]], Any], argv: Sequence[str] | None = None) -> None:
  """`absl.app.run(main)` with the exit statuses and one-line errors of the module docstring."""
  argv = list(sys.argv if argv is None else argv)
  with exit_statuses(argv):
    app.run(main, argv=argv, flags_parser=_parse)


def quiet_jax_logs() -> None:
  """JAX's backend probing logs at INFO; commands show warnings and up."""
  logging.set_verbosity(logging.WARNING)
