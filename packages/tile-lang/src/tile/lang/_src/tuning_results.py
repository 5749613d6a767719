"""What a tuning run reports: its result, the candidates it skipped, its errors, and the
inputs a caller hands it (``set_autotune_inputs``)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tile.ir.errors import TileError

if TYPE_CHECKING:
    from .jit import JITKernel


class AutotuneError(TileError):
    """Autotuning could not be done as asked."""


class AutotuneConfigError(AutotuneError, ValueError):
    """A config names a parameter the kernel factory does not have, or there are no configs."""


class AutotuneInputError(AutotuneError, ValueError):
    """Tuning inputs cannot be generated for the kernel (a scalar or symbolic-shape input)."""


class NoValidConfigError(AutotuneError, RuntimeError):
    """Every candidate failed to compile, timed out or disagreed with the reference."""


class EmulatedTimingError(AutotuneError):
    """Kernels run on the CPU emulator (``TILE_DEVICE=emu``): their timings mean nothing."""


@dataclasses.dataclass
class SkippedConfig:
    """A candidate that was not chosen because it failed, and why."""

    index: int
    config: dict[str, Any]
    reason: str
    message: str = ""


@dataclasses.dataclass
class AutotuneResult:
    """The outcome of a tuning run (TileLang's fields, and what tile adds).

    Attributes:
        latency: median time of the best kernel in ms (``None`` when nothing was timed:
            ``TILE_AUTOTUNE=off`` without a cached result, or functional tuning).
        config: the winning config.
        ref_latency: median time of ``ref_prog`` on the same inputs in ms, if given.
        libcode: the best kernel's source (``kernel.get_kernel_source()``).
        func: the best kernel's ``PrimFunc``.
        kernel: the best kernel, a ``JITKernel``.
        skipped: the candidates that failed, with the reason.
        from_cache: whether the result came from the tuning cache (nothing benchmarked).
        benchmarked: how many candidates were timed in this run.
        latencies: the median time in ms of every timed candidate, by its index in the configs.
    """

    latency: float | None = None
    config: dict[str, Any] | None = None
    ref_latency: float | None = None
    libcode: str | None = None
    func: Any = None
    kernel: JITKernel | None = None
    skipped: list[SkippedConfig] = dataclasses.field(default_factory=list)
    from_cache: bool = False
    benchmarked: int = 0
    latencies: dict[int, float] = dataclasses.field(default_factory=dict)


_captured = threading.local()


@contextlib.contextmanager
def set_autotune_inputs(*tensors: Any) -> Iterator[None]:
    """Tune on these inputs instead of generated ones (TileLang's context manager).

    Pass the kernel's inputs, or all its parameters (outputs are then left out).
    """
    stack = _captured.__dict__.setdefault("stack", [])
    stack.append(
        list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], list | tuple) else list(tensors)
    )
    try:
        yield
    finally:
        stack.pop()


def _captured_inputs() -> list[Any] | None:
    stack = getattr(_captured, "stack", [])
    return stack[-1] if stack else None
