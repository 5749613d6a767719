"""``python -m tile.lang.demo``: compile the paper's tiled GEMM (Figure 1) and check it.

Compiles the kernel for the default target ("auto", i.e. the CPU here unless
``TILE_DEFAULT_TARGET`` says otherwise), runs it on random fp16 inputs whose sizes are
not multiples of the tile, compares with numpy in fp32 and prints a short report.
Exit status 1 means the result did not match.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

import tile.lang as tilelang
import tile.lang.language as T


def matmul(
    M: Any,
    N: int,
    K: int,
    block_M: int,
    block_N: int,
    block_K: int,
    dtype: str,
    accum_dtype: str,
    *,
    out_dtype: str | None = None,
    num_stages: int = 3,
    threads: int = 128,
    panel: int = 0,
) -> Any:
    """The paper's tiled GEMM ``C = A @ B`` (Figure 1): A (M, K), B (K, N), C (M, N).

    Accumulates in ``accum_dtype`` and stores C in ``out_dtype`` (default: ``dtype``). ``M``
    may be a ``T.dynamic`` dim. ``panel > 0`` visits the blocks in panels of that many block
    rows (``T.use_swizzle``). The tests of every package that need this kernel, and
    ``tile.ops.gemm``, build it here.
    """
    c_dtype = dtype if out_dtype is None else out_dtype

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), c_dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            T.use_swizzle(max(panel, 1), enable=panel > 0)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=500)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--k", type=int, default=260)
    parser.add_argument("--target", default="auto")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    block = (64, 64, 32)
    t0 = time.perf_counter()
    func = matmul(args.m, args.n, args.k, *block, "float16", "float32")
    kernel = tilelang.compile(func, out_idx=[-1], target=args.target)
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.m, args.k)).astype("float16")
    b = rng.standard_normal((args.k, args.n)).astype("float16")
    c = kernel(a, b)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        kernel(a, b)
        times.append(time.perf_counter() - start)
    ref = a.astype("float32") @ b.astype("float32")
    err = float(np.abs(c.astype("float32") - ref).max())
    tol = 2e-3 * float(np.abs(ref).max()) + 1e-2  # fp16 output rounding
    best = min(times)
    gflops = 2 * args.m * args.n * args.k / best / 1e9
    print("tile demo: tiled GEMM from the TileLang paper (Figure 1)")
    print(
        f"  kernel   C[{args.m}, {args.n}] = A[{args.m}, {args.k}] @ B[{args.k}, {args.n}], "
        "fp16 in, fp32 accumulate"
    )
    print(f"  tiles    block_M={block[0]} block_N={block[1]} block_K={block[2]}, T.Pipelined(num_stages=3)")
    print(f"  target   {kernel.target}")
    print(f"  compile  {compile_s * 1e3:.0f} ms")
    print(f"  run      {best * 1e3:.2f} ms (best of {args.repeat}), {gflops:.2f} GFLOP/s")
    print(
        f"  check    max |C - numpy| = {err:.3g} (tolerance {tol:.3g}): {'OK' if err <= tol else 'MISMATCH'}"
    )
    return 0 if err <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
