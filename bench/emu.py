"""GPU emulation speed: sm_80 CUDA kernels run on this CPU by tile.backends.cpu.simt.

    python bench/emu.py [--repeat N]

Times the paper GEMM (fp16 256x256x256, 128x128x32 tiles, 3-stage cp.async ring, 128
threads) under ``TILE_DEVICE=emu``: the host C++ compile of its generated CUDA source
(cold, cache bypassed) and each emulated launch, next to numpy's fp32 matmul of the same
operands measured in the same run (ratio = numpy_time / emulated_time). The CUDA-emulation
issue's target is under 5 s for the emulated GEMM on this machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

TARGET_S = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ["TILE_DEVICE"] = "emu"

    import tile.lang as tilelang
    from tile.backends.cpu.simt import SimtKernel, default_workers, kernel_library
    from tile.ops.gemm import matmul_kernel

    m = n = k = 256
    func = matmul_kernel(m, n, k, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    start = time.perf_counter()
    kernel = tilelang.compile(func, out_idx=[-1], target={"kind": "cuda", "arch": "sm_80"})
    first_compile = time.perf_counter() - start
    binary = kernel.artifact.payload

    with tempfile.TemporaryDirectory() as cache:  # a cold host compile of the same source
        previous = os.environ.get("TILE_CACHE_DIR")
        os.environ["TILE_CACHE_DIR"] = cache
        from tile.backends.cpu.simt import runtime_library

        runtime_library()  # the runtime is built once per machine; not part of a kernel's compile
        start = time.perf_counter()
        SimtKernel(kernel_library(binary.source, binary.recipe.kernel_name))
        cold_cxx = time.perf_counter() - start
        if previous is None:
            del os.environ["TILE_CACHE_DIR"]
        else:
            os.environ["TILE_CACHE_DIR"] = previous

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    emu, ref = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        c = kernel(a, b)
        emu.append(time.perf_counter() - start)
        start = time.perf_counter()
        want = a32 @ b32
        ref.append(time.perf_counter() - start)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-3, atol=2e-2)
    best_emu, best_ref = min(emu), min(ref)
    print("| case | emulated (s) | numpy fp32 (s) | ratio | target |")
    print("|---|---|---|---|---|")
    status = "OK" if best_emu < TARGET_S else "MISSED"
    print(f"| GEMM fp16 256^3 sm_80 (128x128x32, 3 stages, 128 thr), {default_workers()} workers "
          f"| {best_emu:.4f} | {best_ref:.6f} | {best_ref / best_emu:.2e} | < {TARGET_S:.0f} s: {status} |")
    print(f"tilelang.compile (TVM lowering + nvcc, or the kernel cache): {first_compile:.2f} s; "
          f"cold host C++ compile of the CUDA source: {cold_cxx:.2f} s; "
          f"compile + first run under {cold_cxx + best_emu:.2f} s")


if __name__ == "__main__":
    main()
