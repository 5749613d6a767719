"""Compiling autotuning candidates in parallel on this machine.

Worker processes are forked from the tuning process, so they inherit the kernel factory
(any function, a closure or a lambda included: nothing is pickled but an index), and
compile candidates into the on-disk kernel cache, which is safe to share between
processes (an ``fcntl`` lock per key, entries published with one ``rename``). The tuning
process then loads each compiled candidate from the cache (milliseconds). Where that
cannot work (no ``fork``, the kernel cache disabled, a backend that cannot save its
kernels, one worker) candidates are compiled one after another in the tuning process.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .. import env

_JOBS: list[Callable[[], Any]] = []
_JOBS_LOCK = threading.Lock()


def _run_job(index: int) -> str | None:
    """In a worker: compile candidate ``index``; ``None`` on success, else the error as text."""
    try:
        _JOBS[index]()
    except BaseException as exc:  # whatever a candidate raises is its failure, reported
        lines = traceback.format_exception_only(type(exc), exc)
        return "".join(lines).strip()[:2000]
    return None


def worker_count(candidates: int) -> int:
    """Processes for ``candidates`` compiles: ``TILE_AUTOTUNE_WORKERS``, else the cores this
    process may run on."""
    configured = env.AUTOTUNE_WORKERS.get()
    if configured > 0:
        cores = configured
    else:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return max(1, min(cores, candidates))


TIMEOUT = object()
"""A job's result when it ran past its deadline (its worker is killed)."""


def compile_in_pool(
    jobs: Sequence[Callable[[], Any]],
    workers: int,
    timeout_s: float,
    on_done: Callable[[int, str | object | None], None],
) -> dict[int, str | object | None]:
    """Run every job in ``workers`` forked processes; ``{index: None | error text | TIMEOUT}``.

    A job still running ``timeout_s`` after it could have started is given up; when the
    pool breaks (a worker killed by the OS), the jobs it lost are reported as errors.
    """
    context = multiprocessing.get_context("fork")
    results: dict[int, str | object | None] = {}
    with _JOBS_LOCK:
        _JOBS[:] = list(jobs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context)
        try:
            futures = {pool.submit(_run_job, i): i for i in range(len(jobs))}
            started = time.monotonic()
            # jobs start ``workers`` at a time: the k-th may wait for k // workers earlier rounds
            deadline = started + timeout_s * (len(jobs) // workers + 1)
            pending = set(futures)
            while pending:
                done, pending = concurrent.futures.wait(
                    pending,
                    timeout=max(0.0, deadline - time.monotonic()),
                    return_when=concurrent.futures.FIRST_COMPLETED,
                )
                for future in done:
                    index = futures[future]
                    try:
                        results[index] = future.result()
                    except Exception as exc:  # BrokenProcessPool: the worker died
                        results[index] = f"the compiling process died: {type(exc).__name__}: {exc}"
                    on_done(index, results[index])
                if not done and time.monotonic() >= deadline:
                    for future in pending:
                        results[futures[future]] = TIMEOUT
                        on_done(futures[future], TIMEOUT)
                    break
        finally:
            unfinished = len(results) < len(jobs) or any(r is TIMEOUT for r in results.values())
            # the pool keeps its processes in ``_processes``; only ours, and only when stuck
            stuck = (
                [p for p in getattr(pool, "_processes", {}).values() if p.is_alive()] if unfinished else []
            )
            pool.shutdown(wait=not stuck, cancel_futures=True)
            for process in stuck:  # our own workers, still compiling a timed-out candidate
                process.kill()
            _JOBS.clear()
    return results
