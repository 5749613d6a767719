"""llvm_workarounds: guarded narrow stores in loops compile without LLVM 22's truncating
masked-store miscompilation (llvm/llvm-project#179489; found by the program fuzzer)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import tvm  # type: ignore[import-untyped]
from tvm import tirx  # type: ignore[import-untyped]

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu._src import llvm_workarounds


def ragged_copy(M: int, N: int, bm: int, bn: int, src: str, dst: str):
    """Copy X (M x N, ``src``) to Y (``dst``) in bm x bn tiles through a fragment, casting."""

    @T.prim_func
    def main(X: T.Tensor((M, N), src), Y: T.Tensor((M, N), dst)) -> None:  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=4) as (bx, by):
            W = T.alloc_fragment((bm, bn), src)
            T.copy(X[by * bm, bx * bn], W)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    Y[by * bm + i, bx * bn + j] = T.cast(W[i, j], dst)

    return main


CASES = [("bfloat16", "bfloat16"), ("int32", "int16"), ("int32", "int8"), ("float32", "bfloat16")]


@pytest.mark.parametrize(("src", "dst"), CASES)
def test_ragged_narrowing_stores_keep_the_next_element(monkeypatch, src: str, dst: str) -> None:
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = tilelang.compile(ragged_copy(8, 49, 4, 32, src, dst), target="cpu")
    rng = np.random.default_rng(0)
    x = rng.integers(-100, 100, size=(8, 49)).astype(np.float32)
    xs = x.astype(numpy_dtype(src))
    sentinel = np.full((8, 49), 7, dtype=np.float32).astype(numpy_dtype(dst))
    y = sentinel.copy()
    kernel(xs, y)
    np.testing.assert_array_equal(y.astype(np.float32), x)


def numpy_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def module(dtype: str, guarded: bool) -> tvm.IRModule:
    """``for i in range(64): [if i < 49:] X[i] = 1`` over a ``dtype`` buffer."""
    x = tirx.decl_buffer((64,), dtype, "X")
    i = tirx.Var("i", "int32")
    store = tirx.BufferStore(x, tirx.const(1, dtype), [i])
    body = tirx.IfThenElse(i < 49, store, None) if guarded else store
    loop = tirx.For(i, 0, 64, tirx.ForKind.SERIAL, body)
    return tvm.IRModule({"main": tirx.PrimFunc([x], loop)})


def test_the_option_is_given_only_to_kernels_with_a_guarded_narrow_store() -> None:
    assert llvm_workarounds.cl_options(module("bfloat16", True)) == [llvm_workarounds.NO_IF_CONVERSION]
    assert llvm_workarounds.cl_options(module("int8", True)) == [llvm_workarounds.NO_IF_CONVERSION]
    assert llvm_workarounds.cl_options(module("bfloat16", False)) == []
    assert llvm_workarounds.cl_options(module("float16", True)) == []
    assert llvm_workarounds.cl_options(module("float32", True)) == []
