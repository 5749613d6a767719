"""Interleaved timing of a tile kernel against its reference, measured in the same run.

Each case is warmed up, then tile and reference alternate for ``repeats`` rounds, and
the medians are compared: ``ratio = reference_time / tile_time`` (>1 means tile is faster).
"""

from __future__ import annotations

import dataclasses
import json
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass
class Case:
    """One benchmark: a tile callable, its reference, and the work it does."""

    name: str
    tile: Callable[[], Any]
    reference: Callable[[], Any]
    reference_name: str
    flops: float = 0.0          # floating-point operations per call (GFLOP/s column)
    bytes_moved: float = 0.0    # bytes read + written per call (GB/s column)
    check: Callable[[], None] | None = None


@dataclasses.dataclass
class Result:
    name: str
    reference_name: str
    tile_s: float
    reference_s: float
    ratio: float
    tile_gflops: float | None
    tile_gbps: float | None


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(case: Case, *, warmup: int = 2, repeats: int = 7) -> Result:
    if case.check is not None:
        case.check()
    for _ in range(warmup):
        case.tile()
        case.reference()
    tile_times, ref_times = [], []
    for _ in range(repeats):
        tile_times.append(_timed(case.tile))
        ref_times.append(_timed(case.reference))
    t, r = statistics.median(tile_times), statistics.median(ref_times)
    return Result(
        case.name, case.reference_name, t, r, r / t,
        case.flops / t / 1e9 if case.flops else None,
        case.bytes_moved / t / 1e9 if case.bytes_moved else None,
    )


def table(results: list[Result], extra: dict[str, str]) -> str:
    lines = [
        "| case | reference | tile | reference time | ratio (ref/tile) | tile GFLOP/s | tile GB/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        gf = f"{r.tile_gflops:.1f}" if r.tile_gflops else ""
        gb = f"{r.tile_gbps:.1f}" if r.tile_gbps else ""
        lines.append(f"| {r.name} | {r.reference_name} | {r.tile_s * 1e3:.2f} ms | "
                     f"{r.reference_s * 1e3:.2f} ms | {r.ratio:.2f}x | {gf} | {gb} |")
    lines.append("")
    lines.extend(f"- {k}: {v}" for k, v in extra.items())
    return "\n".join(lines)


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import os
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version()}


def write_json(path: str, results: list[Result], extra: dict[str, str]) -> None:
    with open(path, "w") as f:
        json.dump({"machine": machine(), "results": [dataclasses.asdict(r) for r in results],
                   "extra": extra}, f, indent=2)
