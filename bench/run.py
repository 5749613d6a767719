"""``nox -s bench``: tile kernels against numpy/torch, timed interleaved in one run.

    python bench/run.py [--json out.json] [--quick]

Prints a markdown table (ratio = reference_time / tile_time; >1 means tile is faster)
plus compile and call-overhead figures, and writes the same data as JSON.
The kernels are ordinary tile programs from tile.ops, not special-cased code.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harness import Case, machine, measure, table, write_json

import tile.lang as tilelang
import tile.lang.language as T
from tile.ops.elementwise import add_kernel
from tile.ops.gemm import matmul_kernel


def gemm_case(n: int) -> Case:
    # The paper's GEMM program exactly as written for a GPU: 128x128x32 blocks, 128 threads, 3 stages.
    kern = tilelang.compile(matmul_kernel(n, n, n, dtype="float32", accum_dtype="float32",
                                          block_M=128, block_N=128, block_K=32, num_stages=3),
                            out_idx=[-1], target="cpu")
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)

    def check() -> None:
        np.testing.assert_allclose(kern(a, b), a @ b, rtol=1e-3)

    return Case(f"fp32 GEMM {n}^3", lambda: kern(a, b), lambda: a @ b, "numpy matmul",
                flops=2.0 * n**3, check=check)


def add_case(m: int, n: int) -> Case:
    kern = tilelang.compile(add_kernel(m, n, "float32"), target="cpu")
    rng = np.random.default_rng(1)
    a, b = rng.random((m, n), dtype=np.float32), rng.random((m, n), dtype=np.float32)
    c, ref_out = np.empty_like(a), np.empty_like(a)

    def check() -> None:
        kern(a, b, c)
        np.testing.assert_array_equal(c, a + b)

    mib = a.nbytes / 2**20
    return Case(f"elementwise add {m}x{n} fp32 ({mib:.0f} MiB/array)", lambda: kern(a, b, c),
                lambda: np.add(a, b, out=ref_out), "numpy add", bytes_moved=3.0 * a.nbytes, check=check)


def copy_bandwidth(nbytes: int) -> float:
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(5))
    return 2.0 * nbytes / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


GEMM_PROGRAM = """
import sys, time
import tile.lang as tilelang
from tile.ops.gemm import matmul_kernel
program = matmul_kernel(1024, 1024, 1024, dtype="float32", accum_dtype="float32",
                        block_M=128, block_N=128, block_K=32, num_stages=3)
start = time.perf_counter()
tilelang.compile(program, out_idx=[-1], target="cpu")
print(time.perf_counter() - start)
"""


def compile_seconds_in_fresh_process(cache_dir: str) -> float:
    """Time one ``tilelang.compile`` of the paper GEMM in a new process (imports excluded)."""
    env = {**os.environ, "TILE_CACHE": "1", "TILE_CACHE_DIR": cache_dir}
    done = subprocess.run([sys.executable, "-c", GEMM_PROGRAM], env=env, capture_output=True,
                          text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def compile_and_cache_hit_seconds() -> tuple[float, float]:
    """Cold compile into an empty cache, then a cache hit from another process."""
    with tempfile.TemporaryDirectory() as cache_dir:
        cold = compile_seconds_in_fresh_process(cache_dir)
        hit = compile_seconds_in_fresh_process(cache_dir)
    return cold, hit


def call_overhead_us() -> float:
    @T.prim_func
    def trivial(A: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            frag = T.alloc_fragment((1,), "float32")
            T.copy(A[bx], frag)
            T.copy(frag, A[bx])

    kern = tilelang.compile(trivial, target="cpu")
    a = np.zeros(1, np.float32)
    for _ in range(100):
        kern(a)
    n = 5000
    start = time.perf_counter()
    for _ in range(n):
        kern(a)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default=os.path.join(tempfile.gettempdir(), "tile-bench.json"))
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    gemm_n = 256 if args.quick else 512
    add_shape = (1024, 1024) if args.quick else (4096, 4096)
    cases = [gemm_case(gemm_n), add_case(*add_shape)]
    results = [measure(c) for c in cases]
    copy_gbps = copy_bandwidth(add_shape[0] * add_shape[1] * 4)
    cold, hit = compile_and_cache_hit_seconds()
    extra = {
        **machine(),
        "copy bandwidth (numpy copyto, same size)": f"{copy_gbps:.1f} GB/s",
        "elementwise add, share of copy bandwidth": f"{results[1].tile_gbps / copy_gbps:.0%}",
        "cold compile, paper GEMM 1024^3 (parse + passes + LLVM + cache store, new process)":
            f"{cold:.3f} s",
        "cache hit, same program (new process, imports excluded)": f"{hit * 1e3:.1f} ms",
        "per-call overhead, trivial kernel": f"{call_overhead_us():.1f} us",
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
    }
    print(table(results, extra))
    write_json(args.json, results, extra)
    print(f"\nJSON written to {args.json}")


if __name__ == "__main__":
    main()
