"""The one timing helper of the speed benchmarks: wall-clock seconds of calls, and their
medians over repeats (a shared machine's load comes and goes; a median of several repeats, and
ratios of things timed in one run, are what the READMEs report)."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable


def _ready(x: Any) -> Any:
  import jax  # pylint: disable=g-import-not-at-top - some scripts set up XLA before JAX loads.
  return jax.block_until_ready(x)


def seconds(fn: Callable[[], Any]) -> float:
  """Seconds of one call of `fn`, until its (JAX) results are ready."""
  start = time.perf_counter()
  _ready(fn())
  return time.perf_counter() - start


def repeat(fn: Callable[[], Any], repeats: int, warmup: bool = True) -> list[float]:
  """`seconds` of `repeats` calls, after one untimed call (compilation, first allocations)."""
  if warmup:
    _ready(fn())
  return [seconds(fn) for _ in range(repeats)]


def median(fn: Callable[[], Any], repeats: int, warmup: bool = True) -> float:
  """The median of `repeat`."""
  return statistics.median(repeat(fn, repeats, warmup))


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int,
                pause: float = 0.5) -> dict[str, list[float]]:
  """`seconds` of each function, timed round-robin (one call of each per round, after a
  warm-up of each), so that load from other tenants of a shared machine falls on all of them
  alike and their ratios stay meaningful; `pause` lets another framework's worker threads go
  idle between calls."""
  for fn in fns.values():
    _ready(fn())
  times: dict[str, list[float]] = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      time.sleep(pause)
      times[name].append(seconds(fn))
  return times


def main_of(fn: Callable[[], Any]) -> Callable[[list[str]], None]:
  """An absl `main` that runs `fn()` (its options are absl flags) and refuses stray arguments."""
  def main(argv: list[str]) -> None:
    from absl import app, logging  # pylint: disable=g-import-not-at-top
    logging.set_verbosity(logging.WARNING)  # JAX's backend probing is INFO noise.
    if len(argv) > 1:
      raise app.UsageError(f"unexpected arguments {argv[1:]}")
    fn()
  return main
