"""T.gemm on the CPU: the register-blocked rule against numpy, every operand form."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _cpu_gemm_support import gemm_tile_kernel, pinned_gemm_rule

import tile.lang as tilelang
from tile.backends.cpu._src import gemm as cpu_gemm

NP_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}


def run_gemm(M, N, K, trans_a=False, trans_b=False, scopes="ss", dtype="float32", clear_accum=False, seed=0):
    rng = np.random.default_rng(seed)
    np_dtype = NP_DTYPES[dtype]
    a = rng.uniform(-1, 1, (K, M) if trans_a else (M, K)).astype(np_dtype)
    b = rng.uniform(-1, 1, (N, K) if trans_b else (K, N)).astype(np_dtype)
    c = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    kernel = tilelang.compile(
        gemm_tile_kernel(M, N, K, trans_a, trans_b, scopes, dtype, clear_accum), target="cpu"
    )
    out = c.copy()
    kernel(a, b, out)
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    expected = (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)
    if not clear_accum:
        expected = expected + c
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * max(K, 1))
    return kernel


@pytest.mark.parametrize(("dtype", "trans_b"), [("float8_e4m3fn", False), ("float8_e5m2", True)])
def test_fp8_operands(dtype, trans_b):
    # the register kernel on fp8 tiles: legalize_fp8 decodes each operand exactly (the
    # reference decodes with ml_dtypes)
    run_gemm(24, 40, 32, False, trans_b, "ss", dtype)


@pytest.mark.parametrize("scopes", ["ss", "rs", "sr", "rr"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_every_transpose_and_operand_scope(trans_a, trans_b, scopes):
    run_gemm(40, 48, 33, trans_a, trans_b, scopes)


@pytest.mark.parametrize(
    "M,N,K", [(1, 1, 1), (7, 7, 7), (33, 33, 33), (1, 64, 96), (33, 40, 1), (130, 72, 16)]
)
def test_odd_and_non_multiple_sizes(M, N, K):
    run_gemm(M, N, K, trans_b=(M == 33))


def test_gemv_shape():
    run_gemm(1, 256, 512, scopes="rs")
    run_gemm(1, 96, 64, trans_b=True)


def test_clear_accum_discards_the_old_accumulator():
    run_gemm(32, 32, 24, clear_accum=True)
    run_gemm(9, 17, 5, trans_a=True, clear_accum=True)


@pytest.mark.parametrize("M,N,K,scopes", [(64, 64, 64, "ss"), (24, 48, 32, "rr"), (9, 32, 48, "sr")])
def test_transposed_b_packs_by_register_transposes(M, N, K, scopes):
    """A float32 transposed B whose K is a multiple of the vector width is packed in whole
    vector-width blocks transposed by shuffles (``transposed_panel``): same product as numpy."""
    kernel = run_gemm(M, N, K, trans_b=True, scopes=scopes, seed=M)
    assert "T.Shuffle" in kernel.get_kernel_source("tir")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_half_inputs_accumulate_in_float32(dtype, trans_a, trans_b):
    run_gemm(24, 40, 19, trans_a, trans_b, "rs" if trans_a else "ss", dtype)


@pytest.fixture
def force_bf16_dot(request, monkeypatch):
    """The CPU gemm rule with ``bf16_dot`` pinned (``_cpu_gemm_support.pinned_gemm_rule``)."""
    with pinned_gemm_rule(monkeypatch, bf16_dot=request.param):
        yield request.param


@pytest.mark.parametrize("force_bf16_dot", [False, True], indirect=True, ids=["portable", "avx512bf16"])
@pytest.mark.parametrize("M,N,K,trans_a,trans_b", [(16, 32, 64, False, False), (7, 40, 33, True, True)])
def test_bf16_dot_path_and_portable_fallback(force_bf16_dot, M, N, K, trans_a, trans_b):
    if force_bf16_dot and not cpu_gemm.has_bf16_dot():
        pytest.skip("the host CPU has no AVX-512 BF16 (vdpbf16ps)")
    kernel = run_gemm(M, N, K, trans_a, trans_b, "ss", "bfloat16")
    llvm = kernel.artifact.sources["llvm"]
    assert ("dpbf16ps" in llvm) is force_bf16_dot


def test_plan_keeps_accumulators_within_the_register_file():
    for m, n in [(128, 128), (64, 64), (1, 4096), (7, 33), (256, 16)]:
        plan = cpu_gemm.plan_schedule(m, n, "float32", "float32", 512)
        assert plan.lanes == 16 and plan.nr % plan.lanes == 0
        assert plan.mr * plan.nr // plan.lanes <= cpu_gemm.VECTOR_REGISTERS_AVX512 - 6
        assert 1 <= plan.mr <= m
    avx2 = cpu_gemm.plan_schedule(128, 128, "float32", "float32", 256)
    assert avx2.lanes == 8 and avx2.mr * avx2.nr // 8 <= cpu_gemm.VECTOR_REGISTERS_AVX2 - 6
