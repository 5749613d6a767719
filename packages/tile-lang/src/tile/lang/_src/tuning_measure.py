"""Checking and timing one autotuning candidate on the device its kernel runs on.

The same code runs in the tuning process (local executor) and on a Ray worker: it gets a
compiled kernel and a ``CheckSpec`` and returns an ``Outcome``. Timing uses the host's
clock for CPU kernels and the device's events for GPU kernels (torch's ``cuda`` events,
which are HIP events under torch's ROCm build), after a warm-up; the latency is the median
of the timed calls, in milliseconds.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .profiler import Profiler, TensorSupplyType, _copy

OK = "ok"
COMPILE_FAILED = "compile failed"
TIMED_OUT = "timed out"
MISMATCH = "mismatch"
ERROR = "error"
HOPELESS = "hopeless"
LOST = "lost worker"

EARLY_STOP_FLOOR_MS = 1.0
"""Candidates faster than this are always timed in full (their probes are too noisy to judge)."""


@dataclasses.dataclass
class Outcome:
    """What happened to one candidate: ``status`` is ``OK`` (with ``latency`` in ms) or why it
    was skipped (``COMPILE_FAILED``, ``TIMED_OUT``, ``MISMATCH``, ``ERROR``, ``HOPELESS``, ``LOST``)."""

    status: str
    latency: float | None = None
    message: str = ""


@dataclasses.dataclass
class CheckSpec:
    """How candidates are fed, checked and timed (TileLang's profile arguments)."""

    supply_type: Any = TensorSupplyType.Auto
    ref_prog: Callable[..., Any] | None = None
    supply_prog: Callable[..., Any] | None = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Callable[..., Any] | None = None
    cache_input_tensors: bool = False
    inputs: Sequence[Any] | None = None
    """Fixed inputs (``set_autotune_inputs``): every candidate runs on these."""


def _signature(kernel: Any) -> tuple[Any, ...]:
    return tuple((p.name, p.dtype, tuple(str(d) for d in p.shape or ())) for p in kernel.input_params)


class Inputs:
    """Inputs and reference outputs per input signature. The built-in supply is seeded, so
    candidates with the same signature get equal inputs whether or not they are reused."""

    def __init__(self, spec: CheckSpec) -> None:
        self.spec = spec
        self._inputs: dict[Any, list[Any]] = {}
        self._refs: dict[Any, Any] = {}

    def for_kernel(self, kernel: Any) -> list[Any]:
        key = _signature(kernel)
        if key in self._inputs:
            return self._inputs[key]
        if self.spec.inputs is not None:
            given = list(self.spec.inputs)
            if len(given) == len(kernel.params) and kernel.out_idx:  # outputs passed too: drop them
                given = [v for i, v in enumerate(given) if i not in kernel.out_idx]
            inputs = given
        elif self.spec.supply_prog is not None:
            inputs = list(self.spec.supply_prog(kernel.input_params))
        else:
            inputs = Profiler(kernel, self.spec.supply_type).supply_inputs()
        self._inputs[key] = inputs
        return inputs

    def reference(self, kernel: Any, inputs: list[Any]) -> Any:
        key = _signature(kernel)
        if key not in self._refs:
            assert self.spec.ref_prog is not None
            self._refs[key] = self.spec.ref_prog(*[_copy(x) for x in inputs])
        return self._refs[key]


def check(kernel: Any, spec: CheckSpec, inputs: Inputs) -> None:
    """Raise ``AssertionError`` unless the kernel agrees with the reference program."""
    if spec.skip_check or spec.ref_prog is None:
        return
    args = inputs.for_kernel(kernel)
    expected = inputs.reference(kernel, args)
    if spec.manual_check_prog is not None:
        got = kernel(*[_copy(x) for x in args])
        got_list = list(got) if isinstance(got, tuple | list) else [got]
        want = (
            list(expected) if isinstance(expected, tuple | list) else ([] if expected is None else [expected])
        )
        spec.manual_check_prog(got_list, want)
        return
    if isinstance(expected, bool | np.bool_):  # a reference that checks instead of computing
        if not expected:
            raise AssertionError("the reference program returned False")
        return
    profiler = Profiler(kernel, spec.supply_type)
    profiler.assert_allclose(
        lambda *_: expected,
        input_tensors=args,
        atol=spec.atol,
        rtol=spec.rtol,
        max_mismatched_ratio=spec.max_mismatched_ratio,
    )


def _timer(device: str) -> Callable[[Callable[[], Any]], float]:
    """A function that runs ``fn`` once and returns its time in ms on ``device``."""
    if device == "cpu":

        def host(fn: Callable[[], Any]) -> float:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e3

        return host
    import torch

    torch.cuda.synchronize()

    def events(fn: Callable[[], Any]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))

    return events


def time_ms(
    fn: Callable[[], Any], device: str, warmup: float, rep: float, timeout_s: float, estimate: float
) -> float:
    """Median time of ``fn`` in ms: ``warmup`` and ``rep`` are budgets in ms (at least 1 warm-up
    and 3 timed calls), capped so the whole measurement stays within ``timeout_s``."""
    timer = _timer(device)
    estimate = max(estimate, 1e-4)
    warmups = max(1, min(10_000, int(warmup / estimate)))
    repeats = max(3, min(10_000, int(rep / estimate), int(timeout_s * 1e3 / estimate) - warmups))
    for _ in range(warmups):
        fn()
    return float(statistics.median(timer(fn) for _ in range(repeats)))


def measure(
    kernel: Any,
    spec: CheckSpec,
    inputs: Inputs,
    *,
    warmup: float,
    rep: float,
    timeout_s: float,
    best: float = math.inf,
    early_stop_factor: float | None = 2.0,
) -> Outcome:
    """Check ``kernel`` against the reference, then time it; never raises for the candidate's faults.

    A candidate whose fastest of three probe calls already takes ``early_stop_factor`` times
    the best median so far (and over ``EARLY_STOP_FLOOR_MS``: shorter kernels cost little to
    time, and their probes are noisy) cannot win and is not timed further (``HOPELESS``); one
    whose probe takes longer than ``timeout_s`` is ``TIMED_OUT``.
    """
    try:
        check(kernel, spec, inputs)
    except AssertionError as exc:
        return Outcome(MISMATCH, message=str(exc).strip()[:500])
    except Exception as exc:
        return Outcome(ERROR, message=f"{type(exc).__name__}: {str(exc).strip()[:500]}")
    try:
        args = inputs.for_kernel(kernel)
        timer = _timer(kernel.device)

        def call() -> Any:
            return kernel(*args)

        probe = timer(call)
        for _ in range(2):  # the fastest of three calls: one slow call on a busy machine is no verdict
            if probe > timeout_s * 1e3:
                break
            probe = min(probe, timer(call))
        if probe > timeout_s * 1e3:
            return Outcome(TIMED_OUT, message=f"one call took {probe / 1e3:.3g} s (timeout {timeout_s:g} s)")
        if early_stop_factor is not None and probe > max(early_stop_factor * best, EARLY_STOP_FLOOR_MS):
            return Outcome(
                HOPELESS,
                message=f"one call took {probe:.4g} ms, over {early_stop_factor:g}x the best {best:.4g} ms",
            )
        return Outcome(OK, latency=time_ms(call, kernel.device, warmup, rep, timeout_s, probe))
    except Exception as exc:
        return Outcome(ERROR, message=f"{type(exc).__name__}: {str(exc).strip()[:500]}")


def reference_latency(
    kernel: Any, spec: CheckSpec, inputs: Inputs, warmup: float, rep: float, timeout_s: float
) -> float | None:
    """Median time of the reference program on the best kernel's inputs (ms), or ``None``."""
    if spec.ref_prog is None:
        return None
    args = inputs.for_kernel(kernel)
    ref = spec.ref_prog
    try:
        device = kernel.device
        timer = _timer(device)
        probe = timer(lambda: ref(*args))
        return time_ms(lambda: ref(*args), device, warmup, rep, timeout_s, probe)
    except Exception:
        return None
