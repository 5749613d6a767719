"""Pass round_bf16_casts: every conversion to bfloat16 rounds on the CPU, stored or not."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import tvm_ffi
from tvm import tirx

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu._src.round_bf16 import round_bf16_casts


def _bf16_casts(func) -> int:
    found = []

    def on_cast(cast):
        if str(cast.ty).startswith("bfloat16"):
            found.append(cast)

    tvm_ffi.structural_walk(func.body, (tirx.Cast, on_cast))
    return len(found)


def _func():
    x = tirx.Var("x", "float32")
    a = tirx.decl_buffer((4,), "float32", name="A")
    b = tirx.decl_buffer((4,), "bfloat16", name="B")
    i = tirx.Var("i", "int32")
    body = tirx.For(i, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([
        tirx.BufferStore(a, tirx.Cast("float32", tirx.Cast("bfloat16", tirx.BufferLoad(a, [i]))), [i]),
        tirx.BufferStore(b, tirx.Cast("bfloat16", tirx.BufferLoad(a, [i]) + x), [i]),
        tirx.BufferStore(b, tirx.Cast("bfloat16", tirx.BufferLoad(b, [i])), [i]),  # bf16 -> bf16: kept
    ]))
    return tirx.PrimFunc([x], body)


def test_before_and_after_every_cast_to_bf16_becomes_bit_rounding() -> None:
    before = _func()
    assert _bf16_casts(before) == 3
    after = round_bf16_casts(before)
    assert _bf16_casts(after) == 1  # the bf16 -> bf16 cast rounds nothing
    text = after.script()
    assert text.count("T.reinterpret(\"bfloat16\"") == 2 and "32767" in text
    assert round_bf16_casts(after).same_as(after)  # idempotent


def test_a_round_trip_feeding_arithmetic_rounds_on_the_cpu() -> None:
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.Parallel(64):
                B[i] = T.cast(T.cast(A[i], "bfloat16"), "float32") * 2.0 + 1.0

    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    x[:3] = [0.49999997, 1 + 2**-8, 1 + 3 * 2**-8]
    got = tilelang.compile(main, out_idx=[1], target="cpu")(x)
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32) * 2.0 + 1.0
    np.testing.assert_array_equal(got, want)
    assert list(got[:3]) == [2.0, 3.0, 3 + 2**-5]
