"""bf16 GEMMs built for an LLVM CPU without AVX-512 BF16 (``TILE_CPU_MCPU``), whatever the host has.

The dot-product path was chosen from the host's flags alone, so LLVM was asked to select
``vdpbf16ps`` for a Skylake target and aborted the whole process. Each case runs in a child
process: an abort there fails the test instead of killing the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tile.backends.cpu._src.host import cpu_flags, host_cpu, llvm_cpu_has

PROGRAM = textwrap.dedent(
    """
    import ml_dtypes, numpy as np
    import tile.lang as tilelang
    from tile.ops.gemm import matmul_kernel
    from tile.backends.cpu._src.gemm import has_bf16_dot

    assert not has_bf16_dot()  # the target CPU lacks it, whatever the host has
    kernel = tilelang.compile(matmul_kernel(40, 48, 24, dtype="bfloat16", accum_dtype="float32",
                                            block_M=16, block_N=32, block_K=8, num_stages=1),
                              out_idx=[-1], target="cpu")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 24)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((24, 48)).astype(ml_dtypes.bfloat16)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32)
    got = np.asarray(kernel(a, b)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
    print("ok")
    """
)


def test_generated_bf16_gemm_for_a_cpu_without_bf16_compiles_and_matches(tmp_path) -> None:
    # Generated code (no micro-kernel): the path that aborted. The target must be one the host
    # can run: Skylake's AVX-512 where the host has AVX-512 (a host without it, an AVX2 Zen 3,
    # died of SIGILL running Skylake code), else the host's own CPU, which then has no bf16 either.
    cpu = "skylake-avx512" if "avx512f" in cpu_flags() else host_cpu()
    assert not llvm_cpu_has("avx512bf16", cpu)
    env = {**os.environ, "TILE_CPU_MCPU": cpu, "TILE_CPU_BF16_UKERNEL": "0",
           "TILE_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_llvm_knows_which_cpus_have_bf16() -> None:
    assert llvm_cpu_has("avx512bf16", "sapphirerapids") and llvm_cpu_has("avx512bf16", "znver4")
    assert not llvm_cpu_has("avx512bf16", "rocketlake") and not llvm_cpu_has("avx512bf16", "generic")
