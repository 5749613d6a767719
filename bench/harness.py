"""Interleaved timing of a tile kernel against its reference, measured in the same run.

Each case is checked against its reference, warmed up, then tile and reference alternate
for ``repeats`` rounds, and the medians are compared: ``ratio = reference_time /
tile_time`` (>1 means tile is faster). A case may carry the issue's targets (a minimum
ratio, a minimum share of the copy bandwidth); the table says whether each was met.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import json
import os
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
    target: float | None = None            # minimum ratio reference/tile
    bandwidth_target: float | None = None  # minimum share of the copy bandwidth


@dataclasses.dataclass
class Result:
    name: str
    reference_name: str
    tile_s: float
    reference_s: float
    ratio: float
    tile_gflops: float | None
    tile_gbps: float | None
    share_of_copy: float | None
    target: float | None
    bandwidth_target: float | None

    @property
    def verdict(self) -> str:
        missed = []
        if self.target is not None and self.ratio < self.target:
            missed.append(f"ratio < {self.target}x")
        if self.bandwidth_target is not None and (self.share_of_copy or 0.0) < self.bandwidth_target:
            missed.append(f"< {self.bandwidth_target:.0%} of copy")
        if self.target is None and self.bandwidth_target is None:
            return ""
        return "met" if not missed else "MISSED (" + ", ".join(missed) + ")"


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


SETTLE_S = 0.15
"""Pause after every timed call. Thread pools spin for a while after their work before they
sleep (OpenBLAS for 2^28 cycles by default, TVM's and OpenMP's for less): without a pause,
one side's spinning workers hold the cores while the other side is being timed. Measured
here on the 2048^3 GEMM: tile 104 ms alone, 158 ms right after each numpy call."""


def measure(case: Case, *, warmup: int = 2, repeats: int = 7, copy_gbps: float | None = None) -> Result:
    if case.check is not None:
        case.check()
    for _ in range(warmup):
        case.tile()
        case.reference()
    tile_times, ref_times = [], []
    for _ in range(repeats):
        time.sleep(SETTLE_S)
        tile_times.append(_timed(case.tile))
        time.sleep(SETTLE_S)
        ref_times.append(_timed(case.reference))
    t, r = statistics.median(tile_times), statistics.median(ref_times)
    gbps = case.bytes_moved / t / 1e9 if case.bytes_moved else None
    return Result(
        case.name, case.reference_name, t, r, r / t,
        case.flops / t / 1e9 if case.flops else None,
        gbps,
        gbps / copy_gbps if gbps and copy_gbps else None,
        case.target, case.bandwidth_target,
    )


def table(results: list[Result], extra: dict[str, str]) -> str:
    lines = [
        "| case | reference | tile | reference time | ratio (ref/tile) | tile GFLOP/s | tile GB/s "
        "(share of copy) | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        gf = f"{r.tile_gflops:.1f}" if r.tile_gflops else ""
        gb = f"{r.tile_gbps:.1f}" if r.tile_gbps else ""
        if r.share_of_copy is not None:
            gb += f" ({r.share_of_copy:.0%})"
        want = []
        if r.target is not None:
            want.append(f">= {r.target}x")
        if r.bandwidth_target is not None:
            want.append(f">= {r.bandwidth_target:.0%} of copy")
        target = f"{', '.join(want)}: {r.verdict}" if want else ""
        lines.append(f"| {r.name} | {r.reference_name} | {r.tile_s * 1e3:.2f} ms | "
                     f"{r.reference_s * 1e3:.2f} ms | {r.ratio:.2f}x | {gf} | {gb} | {target} |")
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
    import numpy
    out = {"cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version(),
           "numpy": numpy.__version__, "date": time.strftime("%Y-%m-%d")}
    try:
        import torch
        out["torch"] = f"{torch.__version__} ({torch.get_num_threads()} threads)"
    except ImportError:
        pass
    return out


def openblas_info() -> dict[str, str]:
    """Which OpenBLAS numpy loaded, the kernel ("core") it chose for this CPU, its threads."""
    import numpy
    here = os.path.dirname(numpy.__file__)
    libs = glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*")) + glob.glob(
        os.path.join(here, ".libs", "*openblas*"))
    for path in libs:
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""), ("openblas_", "")):
            corename = getattr(lib, f"{prefix}get_corename{suffix}", None)
            threads = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            if corename is None:
                continue
            corename.restype = ctypes.c_char_p
            info = {"OpenBLAS kernel (core) numpy runs": corename().decode()}
            if threads is not None:
                info["OpenBLAS threads"] = str(threads())
            info["OpenBLAS library"] = os.path.basename(path)
            return info
    return {"OpenBLAS kernel (core) numpy runs": "unknown (no OpenBLAS found beside numpy)"}


def write_json(path: str, results: list[Result], extra: dict[str, str]) -> None:
    with open(path, "w") as f:
        json.dump({"machine": machine(), "results": [dataclasses.asdict(r) for r in results],
                   "extra": extra}, f, indent=2)


def compare(old_path: str, results: list[Result]) -> str:
    """Each case's ratio now against the ratio in an earlier JSON run."""
    with open(old_path) as f:
        old = {r["name"]: r for r in json.load(f)["results"]}
    lines = ["| case | ratio before | ratio now |", "|---|---|---|"]
    for r in results:
        before = old.get(r.name)
        lines.append(f"| {r.name} | {before['ratio']:.2f}x | {r.ratio:.2f}x |" if before
                     else f"| {r.name} | (new) | {r.ratio:.2f}x |")
    return "\n".join(lines)
