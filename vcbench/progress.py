"""Progress bars that stay out of logs.

tqdm redraws its bar with carriage returns; in a CI log or a batch job's log file every redraw
becomes a line of noise. `progress` shows a bar only on an interactive terminal, and never when
the environment sets VCBENCH_NO_PROGRESS=1.

tqdm's own environment switches work too: tqdm (>= 4.66) reads `TQDM_<ARGUMENT>` (e.g.
`TQDM_DISABLE=1`, `TQDM_MININTERVAL=5`, `TQDM_NCOLS=80`) as its arguments' defaults, which an
argument given explicitly overrides. So `progress` passes its own defaults only where the
environment sets no such switch: `dynamic_ncols` not under TQDM_DYNAMIC_NCOLS or TQDM_NCOLS,
and `disable` as `None` (tqdm's "off when not a terminal"), as TQDM_DISABLE says (read here
at each call, as tqdm reads it when imported: any non-empty value turns bars off), or `True`
under VCBENCH_NO_PROGRESS=1, which wins.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, TypeVar

import tqdm

T = TypeVar("T")

ENV_VAR = "VCBENCH_NO_PROGRESS"
TQDM_ENV_PREFIX = "TQDM_"


def _vcbench_disabled() -> bool:
  return os.environ.get(ENV_VAR, "").strip() == "1"


def _tqdm_env_disabled() -> bool:
  """Whether TQDM_DISABLE turns bars off, read as tqdm reads it (`bool` of the string)."""
  return bool(os.environ.get(TQDM_ENV_PREFIX + "DISABLE", ""))


def enabled(stream: Any = None) -> bool:
  """Whether a bar would be shown on `stream` (default: sys.stderr, where tqdm writes)."""
  if _vcbench_disabled() or _tqdm_env_disabled():
    return False
  stream = sys.stderr if stream is None else stream
  isatty = getattr(stream, "isatty", None)
  try:
    return bool(isatty and isatty())
  except (ValueError, OSError):  # A closed or detached stream.
    return False


def progress(iterable: Iterable[T], desc: str, total: int | None = None,
             **tqdm_kwargs: Any) -> Iterable[T]:
  """Iterates over `iterable`, with a tqdm bar labelled `desc` when `enabled()`.

  Args:
    iterable: what to iterate over.
    desc: the bar's label, e.g. "eval metaworld/assembly".
    total: number of items, for iterables without `len()` (e.g. generators).
    **tqdm_kwargs: passed to tqdm (e.g. `leave=False`, `unit="ep"`, `file=`).

  Returns:
    A tqdm iterator, disabled (a thin pass-through that prints nothing) when not enabled.
  """
  stream = tqdm_kwargs.pop("file", None) or sys.stderr
  return tqdm.tqdm(iterable, desc=desc, total=total, file=stream,
                   **{**_defaults(), **tqdm_kwargs})


def _defaults() -> dict[str, Any]:
  """vcbench's tqdm arguments, minus those the user's environment sets: passed explicitly,
  ours would override the user's TQDM_* switches."""
  if _vcbench_disabled():
    disable = True
  elif TQDM_ENV_PREFIX + "DISABLE" in os.environ:
    # tqdm reads its switches once, when imported; read here, a switch set later counts too.
    disable = _tqdm_env_disabled()
  else:
    disable = None
  out = {"disable": disable}
  if not any(TQDM_ENV_PREFIX + k in os.environ for k in ("DYNAMIC_NCOLS", "NCOLS")):
    out["dynamic_ncols"] = True
  return out
