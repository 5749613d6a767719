"""``T.fma2`` (a fused multiply-add, lane by lane) on every backend.

TVM's CUDA and HIP code generators left ``tirx.fma`` unresolved, so TileLang's
cuda/f32x2_intrinsics kernels stopped in code generation there. GPU targets now call C's
``fmaf``/``fma`` per lane (16-bit lanes through float32). References: exact
rationals rounded once (float64); numpy in float64 rounded to float32 (the product of two
float32 values is exact in float64); float16/bfloat16 in float32 (their product is exact
there), on scalars and on two-lane vectors.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import tvm

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import ArgumentValueError
from tile.testsupport.markers import needs_backend

TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="sm_80", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
    pytest.param({"kind": "rocm", "arch": "gfx90a"}, id="gfx90a", marks=needs_backend("rocm")),
]
NUMPY = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def fma_kernel(dtype: str, lanes: int):
    @T.prim_func
    def main(A: T.Tensor((128,), dtype), B: T.Tensor((128,), dtype), C: T.Tensor((128,), dtype),
             D: T.Tensor((128,), dtype)):  # fmt: skip
        with T.Kernel(1, threads=128 // lanes):
            for t in T.Parallel(128 // lanes):
                if lanes == 1:
                    D[t] = T.fma2(A[t], B[t], C[t])
                else:
                    idx = T.Ramp(t * lanes, 1, lanes)
                    D[idx] = T.fma2(A[idx], B[idx], C[idx])

    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_fma2_rounds_once(target, lanes, dtype, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    rng = np.random.default_rng(lanes)
    a, b, c = (rng.standard_normal(128).astype(NUMPY[dtype]) for _ in range(3))
    d = np.zeros(128, NUMPY[dtype])
    tilelang.compile(fma_kernel(dtype, lanes), target=target)(a, b, c, d)
    if dtype == "float64":  # exact rationals, rounded once by float()
        want64 = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c, strict=True)]
        np.testing.assert_array_equal(d, want64)
        return
    wide = np.float64 if dtype == "float32" else np.float32
    want = (a.astype(wide) * b.astype(wide) + c.astype(wide)).astype(NUMPY[dtype])
    np.testing.assert_array_equal(d.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("op", ["add2", "sub2", "mul2", "max2", "min2", "fma2"])
def test_packed_operands_of_different_dtypes_are_refused(op):
    x, y = tvm.tirx.Var("x", "float16x2"), tvm.tirx.Var("y", "bfloat16x2")
    args = (x, y, x) if op == "fma2" else (x, y)
    with pytest.raises(ArgumentValueError, match="same dtype"):
        getattr(T, op)(*args)
    same = (x, x, x) if op == "fma2" else (x, x)
    assert str(getattr(T, op)(*same).ty) == "float16x2"
