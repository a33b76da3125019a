"""Progress bars that stay out of logs.

tqdm redraws its bar with carriage returns; in a CI log or a batch job's log file every redraw
becomes a line of noise. `progress` shows a bar only on an interactive terminal, and never when
the environment sets VCBENCH_NO_PROGRESS=1.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, TypeVar

import tqdm

T = TypeVar("T")

ENV_VAR = "VCBENCH_NO_PROGRESS"


def enabled(stream: Any = None) -> bool:
  """Whether a bar would be shown on `stream` (default: sys.stderr, where tqdm writes)."""
  if os.environ.get(ENV_VAR, "").strip() == "1":
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
                   disable=not enabled(stream), dynamic_ncols=True, **tqdm_kwargs)
