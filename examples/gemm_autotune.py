"""Autotuning the paper's GEMM the way TileLang programs do, in both forms: ``@autotune``
over ``@tilelang.jit``, and ``AutoTuner.from_kernel`` with configs from the carver's hints.
Only the import lines differ from a TileLang program. A second run (another process) finds
the winners in the tuning cache and times nothing.

Run: python examples/gemm_autotune.py [--with_roller]
"""

import argparse
import itertools

import numpy as np

import tile.lang as tilelang  # was: import tilelang
import tile.lang.language as T  # was: import tilelang.language as T
from tile.lang.autotuner import AutoTuner, autotune  # was: from tilelang.autotuner import ...
from tile.lang.carver.arch import auto_infer_current_arch  # was: from tilelang.carver.arch import ...
from tile.lang.carver.template import MatmulTemplate  # was: from tilelang.carver.template import ...


def ref_program(A, B):
    return A @ B


def get_configs(M, N, K, with_roller=False, topk=8):
    if with_roller:
        template = MatmulTemplate(
            M=M, N=N, K=K, in_dtype="float32", out_dtype="float32", accum_dtype="float32"
        )
        hints = template.with_arch(auto_infer_current_arch()).recommend_hints(topk=topk)
        return [
            {
                "block_M": hint.block[0],
                "block_N": hint.block[1],
                "block_K": hint.rstep[0],
                "num_stages": hint.pipeline_stage,
                "thread_num": hint.threads,
            }
            for hint in hints
        ]
    return [
        {"block_M": bm, "block_N": bn, "block_K": bk, "num_stages": 2, "thread_num": 128}
        for bm, bn, bk in itertools.product([64, 128], [64, 128], [32, 64])
    ]


def kernel(M, N, K, block_M=None, block_N=None, block_K=None, num_stages=None, thread_num=None):
    dtype = "float32"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=thread_num) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@autotune(configs=get_configs, warmup=10, rep=50, ref_prog=ref_program)
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, thread_num=128):
    return kernel(M, N, K, block_M, block_N, block_K, num_stages, thread_num)


def get_best_config(M, N, K, with_roller=False):
    autotuner = (
        AutoTuner.from_kernel(kernel=lambda **config: kernel(M, N, K, **config),
                              configs=get_configs(M, N, K, with_roller))
        .set_compile_args(out_idx=[-1], target="auto")
        .set_profile_args(supply_type=tilelang.TensorSupplyType.Auto, ref_prog=ref_program, skip_check=False)
    )
    return autotuner.run(warmup=10, rep=50)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=512)
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--k", type=int, default=512)
    parser.add_argument("--with_roller", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.m, args.k)).astype("float32")
    b = rng.standard_normal((args.k, args.n)).astype("float32")

    best = matmul(args.m, args.n, args.k)  # decorator form
    np.testing.assert_allclose(best(a, b), a @ b, rtol=1e-4, atol=1e-4)
    print(f"@autotune: {best.config}, {best.latency:.3f} ms (reference {best.ref_latency:.3f} ms)")

    result = get_best_config(args.m, args.n, args.k, args.with_roller)  # AutoTuner form
    np.testing.assert_allclose(result.kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    source = "tuning cache" if result.from_cache else f"{result.benchmarked} timed"
    print(f"AutoTuner: {result.config}, {result.latency:.3f} ms ({source})")
    print("gemm_autotune: OK")
