"""``tile.lang.profiler.do_bench``: time a Python callable (TileLang's/Triton's signature).

Timing is wall clock around each call. Where torch has initialised a GPU, the device is
synchronised before the clock starts and after each call, so the time covers the
kernels the call launched. CUDA events, CUPTI and CUDA graphs are not used: the
``backend`` and ``fast_flush`` arguments are accepted for TileLang programs and ignored.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from tile.ir.errors import TileError

RETURN_MODES = ("min", "max", "mean", "median")


class BenchError(TileError):
    """``do_bench`` was asked for something it cannot measure."""


def _synchronize() -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except (AttributeError, RuntimeError):  # a CPU build of torch
        return


def _timed_call(fn: Callable[[], Any]) -> float:
    _synchronize()
    start = time.perf_counter()
    fn()
    _synchronize()
    return (time.perf_counter() - start) * 1e3


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    _n_warmup: int = 0,
    _n_repeat: int = 0,
    quantiles: Sequence[float] | None = None,
    fast_flush: bool = True,
    backend: str = "event",
    return_mode: str = "mean",
    **_unused: Any,
) -> float | list[float]:
    """Milliseconds one call of ``fn()`` takes.

    ``warmup`` and ``rep`` are time budgets in ms; the counts follow from a first timed
    call (``_n_warmup``/``_n_repeat``, when positive, fix them). The result is the
    ``return_mode`` ("mean", "median", "min", "max") of the timed calls, or the list of
    ``quantiles`` of them when given.

    Example::

        >>> from tile.lang.profiler import do_bench
        >>> do_bench(lambda: sum(range(1000)), rep=5) > 0
        True
    """
    if return_mode not in RETURN_MODES:
        raise BenchError(
            f"return_mode {return_mode!r} is not one of {', '.join(RETURN_MODES)}",
            hint='pass return_mode="mean" (the default), "median", "min" or "max"',
        )
    estimate = max(_timed_call(fn), 1e-4)
    warmups = _n_warmup if _n_warmup > 0 else max(1, min(10_000, int(warmup / estimate)))
    repeats = _n_repeat if _n_repeat > 0 else max(1, min(10_000, int(rep / estimate)))
    for _ in range(warmups):
        fn()
    times = [_timed_call(fn) for _ in range(repeats)]
    if quantiles is not None:
        ordered = sorted(times)
        return [_quantile(ordered, q) for q in quantiles]
    summary: dict[str, Callable[[list[float]], float]] = {
        "min": min,
        "max": max,
        "mean": statistics.fmean,
        "median": statistics.median,
    }
    return float(summary[return_mode](times))


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default "linear" method)."""
    if not 0.0 <= q <= 1.0:
        raise BenchError(f"quantile {q} is outside [0, 1]", hint="pass quantiles like [0.5, 0.2, 0.8]")
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
