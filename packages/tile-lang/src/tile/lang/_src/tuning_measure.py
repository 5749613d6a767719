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
from typing import Any, NamedTuple

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
TWO_CALLS_FLOOR_MS = 10.0
"""Calls shorter than this are timed at least three times even past ``rep``: they are cheap,
and a cold first call weighs on a mean of two."""
EARLY_STOP_FACTOR = 1.5
"""Default ``early_stop_factor``: a candidate whose two calls both take 1.5x the best median
cannot win on a machine quiet enough for the tuning to mean anything."""


class Budget(NamedTuple):
    """How long timing one candidate may take: ``warmup`` then ``rep`` milliseconds of calls
    (see ``timed``), and at most ``timeout_s`` seconds for any one call."""

    warmup: float
    rep: float
    timeout_s: float


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
    """Inputs and reference outputs, made once per input signature and shared by the candidates
    that have it. The built-in supply is seeded, so sharing changes no value; a ``supply_prog``
    is asked again for every candidate unless ``cache_input_tensors`` (TileLang's rule)."""

    def __init__(self, spec: CheckSpec) -> None:
        self.spec = spec
        self._inputs: dict[Any, list[Any]] = {}
        self._refs: dict[Any, Any] = {}

    def _key(self, kernel: Any) -> Any:
        fresh = (
            self.spec.supply_prog is not None
            and not self.spec.cache_input_tensors
            and self.spec.inputs is None
        )
        return ("kernel", id(kernel)) if fresh else _signature(kernel)

    def for_kernel(self, kernel: Any) -> list[Any]:
        key = self._key(kernel)
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
        key = self._key(kernel)
        if key not in self._refs:
            assert self.spec.ref_prog is not None
            self._refs[key] = self.spec.ref_prog(*[_copy(x) for x in inputs])
        return self._refs[key]


class _TimedKernel:
    """The kernel, with the time of each call recorded (the check's call is then the first
    timed sample, and a slow candidate costs one call less)."""

    def __init__(self, kernel: Any) -> None:
        self._kernel = kernel
        self._timer = _timer(kernel.device)
        self.times: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)

    def __call__(self, *args: Any) -> Any:
        result: list[Any] = []
        self.times.append(self._timer(lambda: result.append(self._kernel(*args))))
        return result[0]


def check(kernel: Any, spec: CheckSpec, inputs: Inputs) -> float | None:
    """Raise ``AssertionError`` unless the kernel agrees with the reference program; the time in
    ms of the kernel's call, when the check made one."""
    if spec.skip_check or spec.ref_prog is None:
        return None
    args = inputs.for_kernel(kernel)
    expected = inputs.reference(kernel, args)
    timed_kernel = _TimedKernel(kernel)
    if spec.manual_check_prog is not None:
        got = timed_kernel(*[_copy(x) for x in args])
        got_list = list(got) if isinstance(got, tuple | list) else [got]
        want = (
            list(expected) if isinstance(expected, tuple | list) else ([] if expected is None else [expected])
        )
        spec.manual_check_prog(got_list, want)
        return timed_kernel.times[0]
    if isinstance(expected, bool | np.bool_):  # a reference that checks instead of computing
        if not expected:
            raise AssertionError("the reference program returned False")
        return None
    profiler = Profiler(timed_kernel, spec.supply_type)
    profiler.assert_allclose(
        lambda *_: expected,
        input_tensors=args,
        atol=spec.atol,
        rtol=spec.rtol,
        max_mismatched_ratio=spec.max_mismatched_ratio,
    )
    return timed_kernel.times[0] if timed_kernel.times else None


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


def time_ms(fn: Callable[[], Any], device: str, budget: Budget) -> float:
    """Median time of ``fn`` in ms (see ``timed``), for a function known to be valid."""
    outcome = timed(fn, device, budget)
    if outcome.latency is None:
        raise TimeoutError(outcome.message)
    return outcome.latency


def timed(
    fn: Callable[[], Any],
    device: str,
    budget: Budget,
    *,
    best: float = math.inf,
    early_stop_factor: float | None = None,
    first: float | None = None,
) -> Outcome:
    """Time ``fn`` on ``device`` within ``budget``: warm-up calls until ``warmup`` ms are spent,
    then timed calls for ``rep`` ms, at least three (a warm-up that was one call longer than the
    budget counts as the first of them: the median shrugs off one cold call); the median, in ms.
    Where one call takes longer than all of ``rep`` (and ``TWO_CALLS_FLOOR_MS``), two calls are
    enough (their mean): a third would spend a whole budget more on a figure the first two bound.

    A call longer than ``timeout_s`` ends it (``TIMED_OUT``). With ``early_stop_factor``, a
    candidate whose fastest of two calls already takes that factor times ``best`` (and over
    ``EARLY_STOP_FLOOR_MS``: shorter kernels cost little to time, and their calls are noisy)
    cannot win and is not timed further (``HOPELESS``). ``first`` is the time of a call just
    made (the check's), counted as the first warm-up call but never as a probe or a sample:
    it was the kernel's first call ever (first touch of its inputs, its library loaded, the
    worker threads started), which took a 0.05 ms kernel to 12 ms; as the probe it made two
    calls enough, and the mean of it and one real call ranked the kernel behind a 5 ms one.
    """
    warmup, rep, timeout_s = budget
    timer = _timer(device)
    limit = timeout_s * 1e3
    threshold = (
        max(early_stop_factor * best, EARLY_STOP_FLOOR_MS) if early_stop_factor is not None else math.inf
    )
    warm: list[float] = []
    fresh: list[float] = []  # the calls made here
    while True:
        if first is not None and not warm:
            warm.append(first)
        else:
            fresh.append(timer(fn))
            warm.append(fresh[-1])
        if warm[-1] > limit:
            return Outcome(
                TIMED_OUT, message=f"one call took {warm[-1] / 1e3:.3g} s (timeout {timeout_s:g} s)"
            )
        if min(warm) > threshold:
            if len(warm) >= 2:
                return Outcome(
                    HOPELESS,
                    message=f"its calls took {min(warm):.4g} ms or more, over "
                    f"{early_stop_factor:g}x the best {best:.4g} ms",
                )
            continue  # one slow call on a busy machine is no verdict: ask again
        if sum(warm) >= warmup and fresh:
            break
    probe = min(fresh)
    least = 2 if probe > max(rep, TWO_CALLS_FLOOR_MS) else 3
    repeats = max(least, min(10_000, int(rep / max(probe, 1e-4)), int(limit / max(probe, 1e-4))))
    samples = fresh[:1] if len(fresh) == 1 else []
    samples += [timer(fn) for _ in range(repeats - len(samples))]
    return Outcome(OK, latency=float(statistics.median(samples)))


def checked(kernel: Any, spec: CheckSpec, inputs: Inputs) -> Outcome:
    """``check`` as an ``Outcome``: ``OK`` (``latency``: the time of the check's call in ms, or
    ``None`` when it made none), else ``MISMATCH`` or ``ERROR``; never raises."""
    try:
        return Outcome(OK, latency=check(kernel, spec, inputs))
    except AssertionError as exc:
        return Outcome(MISMATCH, message=str(exc).strip()[:500])
    except Exception as exc:
        return Outcome(ERROR, message=f"{type(exc).__name__}: {str(exc).strip()[:500]}")


def measure(
    kernel: Any,
    spec: CheckSpec,
    inputs: Inputs,
    budget: Budget,
    *,
    best: float = math.inf,
    early_stop_factor: float | None = EARLY_STOP_FACTOR,
    check_outcome: Outcome | None = None,
) -> Outcome:
    """Check ``kernel`` against the reference (unless ``check_outcome``, a ``checked`` result,
    says how that went), then time it (``timed``); never raises for the candidate's faults:
    they come back as the ``Outcome``."""
    verdict = check_outcome or checked(kernel, spec, inputs)
    if verdict.status != OK:
        return verdict
    check_ms = verdict.latency
    try:
        args = inputs.for_kernel(kernel)
        return timed(
            lambda: kernel(*args),
            kernel.device,
            budget,
            best=best,
            early_stop_factor=early_stop_factor,
            first=check_ms,
        )
    except Exception as exc:
        return Outcome(ERROR, message=f"{type(exc).__name__}: {str(exc).strip()[:500]}")


def reference_latency(kernel: Any, spec: CheckSpec, inputs: Inputs, budget: Budget) -> float | None:
    """Median time of the reference program on the best kernel's inputs (ms), or ``None``."""
    if spec.ref_prog is None:
        return None
    args = inputs.for_kernel(kernel)
    ref = spec.ref_prog
    try:
        return time_ms(lambda: ref(*args), kernel.device, budget)
    except Exception:  # a reference that cannot be timed leaves the figure out
        return None
