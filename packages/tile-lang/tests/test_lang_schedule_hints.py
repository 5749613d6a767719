"""T.use_swizzle, T.annotate_layout and T.GemmWarpPolicy: accepted, recorded, results unchanged."""

import numpy as np
import pytest
import tvm_ffi
from tvm import ir

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.annotations import ANNOTATED_LAYOUTS
from tile.ir.ops import Gemm
from tile.ir.ops.layout_rules import decode_layout
from tile.lang.errors import TileScopeError, TileTypeError
from tile.lang.layout import make_swizzled_layout
from tile.layout import LayoutError


def gemm(M, N, K, policy, swizzle=None, annotate=False, bm=16, bn=16, bk=16):
    @T.prim_func
    def kernel(
        A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")
    ):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            if swizzle is not None:
                T.use_swizzle(swizzle)
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            if annotate:
                T.annotate_layout({A_s: make_swizzled_layout(A_s)})
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f, policy=policy)
            T.copy(C_f, C[by * bm, bx * bn])

    return kernel


def _gemm_policies(func):
    found = []

    def visit(call):
        if isinstance(call.op, ir.Op) and str(call.op.name) == "tile.gemm":
            found.append(Gemm.decode(call).policy)

    tvm_ffi.structural_walk(func.body, (ir.Call, visit))
    return found


@pytest.mark.parametrize(
    "policy", [T.GemmWarpPolicy.Square, T.GemmWarpPolicy.FullRow, T.GemmWarpPolicy.FullCol]
)
def test_gemm_warp_policy_is_recorded_and_results_match(policy):
    M, N, K = 40, 24, 32
    func = gemm(M, N, K, policy)
    assert _gemm_policies(func) == [int(policy)]
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    rng = np.random.default_rng(int(policy))
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, N)).astype("float16")
    np.testing.assert_allclose(kernel(a, b), a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)


def test_use_swizzle_and_annotate_layout_are_recorded_and_change_no_result():
    M, N, K = 48, 32, 32
    func = gemm(M, N, K, T.GemmWarpPolicy.Square, swizzle=4, annotate=True)
    assert dict(func.attrs["tile.block_swizzle"]) == {"panel_size": 4, "order": "row"}
    layouts = func.attrs[ANNOTATED_LAYOUTS]
    assert list(layouts) == ["A_s"]
    assert [int(d) for d in decode_layout(layouts["A_s"]).get_input_shape()] == [16, 16]
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    rng = np.random.default_rng(9)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((K, N)).astype("float16")
    np.testing.assert_allclose(kernel(a, b), a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)


def test_hint_mistakes_are_typed_errors():
    with pytest.raises(TileScopeError, match=r"T\.Kernel"):

        @T.prim_func
        def outside(A: T.Tensor((4,), "float32")):
            T.use_swizzle(8)

    with pytest.raises(TileTypeError, match="shape"):

        @T.prim_func
        def wrong_shape(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((16, 16), "float16")
                T.annotate_layout({S: make_swizzled_layout(T.alloc_shared((16, 32), "float16"))})


def _round_trip(fwd, name: str = "s"):
    @T.prim_func
    def main(A: T.Tensor((128,), "int32"), Out: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), "int32")
            T.annotate_layout({s: T.Layout((128,), fwd)})  # the line the error names
            for i in T.Parallel(128):
                s[i] = A[i]
            for i in T.Parallel(128):
                Out[i] = s[i]

    return main


@pytest.mark.parametrize(
    ("fwd", "first", "second", "place"),
    [
        (lambda i: i % 64, 0, 64, 0),  # two elements per place
        (lambda i: i * 0, 0, 1, 0),  # every element at one place
        (lambda i: (i % 64) * 4, 0, 64, 0),  # padded, and still two per place
    ],
)
def test_a_layout_that_stores_two_elements_at_one_place_is_refused(fwd, first, second, place):
    # the elements would overwrite each other in shared memory; TileLang's issue 2632
    with pytest.raises(LayoutError) as info:
        _round_trip(fwd)
    assert isinstance(info.value, ValueError)  # TileLang raises a ValueError
    message = str(info.value)
    assert "shared buffer `s`" in message and "must be injective" in message
    assert f"elements [{first}] and [{second}] both map to physical coordinates [{place}]" in message
    assert info.value.location is not None and "T.annotate_layout" in (info.value.location.source_line or "")


@pytest.mark.parametrize("fwd", [lambda i: i, lambda i: i ^ 1, lambda i: i * 2, lambda i: i + 10])
def test_injective_layouts_still_compile_and_run(fwd):
    kernel = tilelang.compile(_round_trip(fwd), out_idx=[1], target="cpu")
    a = np.arange(128, dtype=np.int32) * 3 - 7
    np.testing.assert_array_equal(np.asarray(kernel(a)), a)
