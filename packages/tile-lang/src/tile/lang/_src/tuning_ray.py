"""Autotuning on a Ray cluster (``TILE_AUTOTUNE_EXECUTOR=ray`` or ``run(executor="ray")``).

Connects with ``ray.init()``, which joins the cluster at ``RAY_ADDRESS`` or starts a local
one when that is unset (and stays up for later tuning runs in this process). Two phases:

1. every candidate is compiled by a Ray task (one CPU each, in parallel across the
   cluster) into the kernel cache of the node it ran on;
2. every compiled candidate is checked and timed by a Ray task on a worker that owns the
   target device: a GPU (``num_gpus=1``, as many at once as the cluster has GPUs) or, for
   CPU kernels, a whole node's attention: one candidate at a time, so that two timings
   never share the cores.

The tuning process then picks the fastest and builds that kernel itself (a cache hit when
it shares a node and cache with the workers). A task whose worker dies is retried on
another (Ray's ``max_retries``); a candidate whose tasks all die is skipped as
``LOST``, and tuning goes on. The kernel factory, reference and supply programs travel
with cloudpickle: functions of an installed module by reference, the rest (``__main__``,
lambdas, closures, or modules registered with ``cloudpickle.register_pickle_by_value``)
by value.
"""

from __future__ import annotations

import logging
import math
import traceback
from typing import Any

from tile.ir.errors import TileError

from .tuning_measure import COMPILE_FAILED, LOST, OK, TIMED_OUT, Budget, CheckSpec, Inputs, Outcome, measure
from .tuning_progress import Progress

RETRIES = 3
"""Times a task whose worker died is run again elsewhere."""


class RayUnavailableError(TileError):
    """``TILE_AUTOTUNE_EXECUTOR=ray`` but Ray is not installed."""


def _compile_task(plan: Any, config: dict[str, Any]) -> str | None:
    try:
        plan.compile(config)
    except Exception as exc:
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()[:2000]
    return None


def _measure_task(
    plan: Any,
    config: dict[str, Any],
    spec: CheckSpec,
    budget: Budget,
    best: float,
    early_stop_factor: float | None,
) -> Outcome:
    try:
        kernel = plan.compile(config)
    except Exception as exc:
        return Outcome(COMPILE_FAILED, message=f"{type(exc).__name__}: {exc}"[:2000])
    return measure(kernel, spec, Inputs(spec), budget, best=best, early_stop_factor=early_stop_factor)


def _ray() -> Any:
    try:
        import ray  # type: ignore[import-not-found]
    except ImportError:
        raise RayUnavailableError(
            "autotuning on Ray needs the ray package, which is not installed",
            hint="pip install 'tile-lang[ray]', or use the local executor (TILE_AUTOTUNE_EXECUTOR=local)",
        ) from None
    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, include_dashboard=False, logging_level=logging.ERROR)
    return ray


def tune_on_ray(
    plan: Any,
    configs: list[dict[str, Any]],
    spec: CheckSpec,
    budget: Budget,
    *,
    early_stop_factor: float | None,
    gpu: bool,
) -> list[Outcome]:
    """One ``Outcome`` per config, measured on the cluster's workers."""
    ray = _ray()
    timeout_s = budget.timeout_s
    wait = None if math.isinf(timeout_s) else timeout_s
    compile_remote = ray.remote(num_cpus=1, max_retries=RETRIES)(_compile_task)
    measure_remote = ray.remote(num_cpus=1, num_gpus=1 if gpu else 0, max_retries=RETRIES)(_measure_task)
    progress = Progress(getattr(plan.factory, "__name__", "kernel"), len(configs))
    outcomes: list[Outcome | None] = [None] * len(configs)
    try:
        compiles = [compile_remote.remote(plan, config) for config in configs]
        for index, ref in enumerate(compiles):
            try:
                error = ray.get(ref, timeout=None if wait is None else wait * (len(configs) + 1))
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref, force=True)
                outcomes[index] = Outcome(TIMED_OUT, message=f"compiling took over {timeout_s:g} s")
            except ray.exceptions.RayError as exc:
                outcomes[index] = Outcome(LOST, message=f"{type(exc).__name__}: {str(exc)[:500]}")
            else:
                if error is not None:
                    outcomes[index] = Outcome(COMPILE_FAILED, message=error)
            if outcomes[index] is None:
                progress.compiled_one()
            else:
                progress.failed_one()
        best = math.inf
        pending = [i for i, o in enumerate(outcomes) if o is None]
        args = (spec, budget)
        if gpu:  # one candidate per GPU at a time, all GPUs busy
            refs = {
                i: measure_remote.remote(plan, configs[i], *args, best, early_stop_factor) for i in pending
            }
            for index, ref in refs.items():
                outcomes[index] = _get(ray, ref, wait)
        else:  # one at a time: CPU timings must not share the cores
            for index in pending:
                ref = measure_remote.remote(plan, configs[index], *args, best, early_stop_factor)
                outcomes[index] = _get(ray, ref, wait)
                latency = outcomes[index].latency  # type: ignore[union-attr]
                if latency is not None:
                    best = min(best, latency)
        for index in pending:
            outcome = outcomes[index]
            assert outcome is not None
            if outcome.status == OK:
                progress.benchmarked_one(outcome.latency)
            else:
                progress.failed_one()
    finally:
        progress.close()
    return [o if o is not None else Outcome(LOST) for o in outcomes]


def _get(ray: Any, ref: Any, wait: float | None) -> Outcome:
    """The task's outcome; a lost or stuck task is an outcome too, never an exception."""
    try:
        return ray.get(ref, timeout=None if wait is None else 2 * wait + 60)  # type: ignore[no-any-return]
    except ray.exceptions.GetTimeoutError:
        ray.cancel(ref, force=True)
        return Outcome(TIMED_OUT, message="checking and timing it ran past the timeout")
    except ray.exceptions.RayError as exc:
        return Outcome(LOST, message=f"{type(exc).__name__}: {str(exc)[:500]}")
