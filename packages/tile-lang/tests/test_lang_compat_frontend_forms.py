"""TileLang spellings of the ``T.*`` namespace: vectors, negative indices, launch axes, bit scans,
votes as expressions and the Python exception types TileLang's checks raise. Each result is
checked against numpy or a hand-computed value."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import tirx

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import TileScopeError, TileTypeError
from tile.testsupport.markers import needs_backend

EMU = {"kind": "cuda", "arch": "sm_90a"}


@T.prim_func
def _negative_indices(
    A: T.Tensor((16,), "float32"), B: T.Tensor((4, 4), "float32"), C: T.Tensor((4,), "float32")
):
    with T.Kernel(1, threads=1):
        C[0] = A[-1]
        for i in T.serial(3):
            C[i + 1] = A[-i - 1] + A[i - 1]  # always negative / negative at i == 0 only
        for t in T.serial(4):
            B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]  # lanes below 0 wrap one by one


def test_negative_indices_count_from_the_end_of_their_dimension():
    a = np.arange(16, dtype="float32") * 3
    b, c = tilelang.compile(_negative_indices, out_idx=[1, 2], target="cpu")(a)
    np.testing.assert_array_equal(c, [a[-1], a[-1] + a[-1], a[-2] + a[0], a[-3] + a[1]])
    np.testing.assert_array_equal(b, [[a[(t - 2 + k) % 16] for k in range(4)] for t in range(4)])


@T.prim_func
def _negative_store(B: T.Tensor((4, 4), "float32"), A: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=1):
        for i in T.serial(16):
            A[i] = T.float32(-1)
        for t in T.serial(2):
            A[T.Ramp(t - 2, 1, 4)] = B[t, T.Ramp(0, 1, 4)] + T.Broadcast(T.float32(0.5), 4)


def test_ramp_stores_with_negative_lanes_and_broadcast_values():
    b = np.arange(16, dtype="float32").reshape(4, 4)
    a = tilelang.compile(_negative_store, out_idx=[1], target="cpu")(b)
    ref = np.full(16, -1, "float32")
    for t in range(2):
        for k in range(4):
            ref[(t - 2 + k) % 16] = b[t, k] + 0.5
    np.testing.assert_array_equal(a, ref)


def test_a_symbolic_index_of_unknown_sign_is_left_alone():
    @T.prim_func
    def shifted(shift: T.int32, A: T.Tensor((16,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = A[shift + i]

    assert "Select" not in str(shifted.body) and "select" not in shifted.script()


@T.prim_func
def _launch_and_bits(
    A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "int32")
):
    T.func_attr({"tir.noalias": True})
    with T.Kernel(1, threads=64):
        tx = T.launch_thread("threadIdx.x", 64)
        B[tx] = T.__ldg(A[tx]) * 2.0
        mask = T.ballot_sync(A[tx] > 0.0)
        count = T.syncthreads_count(A[tx] > 0.0)
        C[tx] = (
            (T.__ffs(mask) - 1) + 100 * T.cast(T.__fns(T.cast(mask, "uint32"), 0, 3), "int32") + 10000 * count
        )


def _fns(mask: int, base: int, offset: int) -> int:
    """PTX fns.b32, written from its definition."""
    if offset == 0:
        return base if mask >> base & 1 else -1
    step, left = (1, offset) if offset > 0 else (-1, -offset)
    pos = base
    while 0 <= pos < 32:
        if mask >> pos & 1:
            left -= 1
            if left == 0:
                return pos
        pos += step
    return -1


@needs_backend("cuda")
def test_launch_thread_ldg_and_bit_scans_run_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_launch_and_bits, out_idx=[1, 2], target=EMU)
    assert kernel.get_kernel_source("cuda").count("__fns(") == 1
    a = np.random.default_rng(5).standard_normal(64).astype("float32")
    a[0:3] = -1.0  # warp 0's first positive lane is >= 3
    b, c = kernel(a)
    np.testing.assert_array_equal(b, a * 2)
    ref = []
    for tx in range(64):
        warp = a[(tx // 32) * 32 : (tx // 32) * 32 + 32] > 0
        mask = sum(1 << lane for lane in range(32) if warp[lane])
        first = (mask & -mask).bit_length() - 1
        ref.append(first + 100 * _fns(mask, 0, 3) + 10000 * int((a > 0).sum()))
    np.testing.assert_array_equal(c, ref)


def test_launch_thread_must_match_the_kernel_s_extent():
    with pytest.raises(TileScopeError, match=r"launches 64 along threadIdx\.x"):

        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                tx = T.launch_thread("threadIdx.x", 128)
                A[tx] = 0.0


def test_checks_raise_the_python_exception_types_tilelang_raises():
    vector = tirx.Var("v", "float16x2")
    cases = [
        (TypeError, "expects a PrimExpr", lambda: T.extract_lane(1, 0)),
        (ValueError, "expects a vector expression", lambda: T.extract_lane(tirx.Var("s", "float16"), 0)),
        (TypeError, "compile-time integer", lambda: T.extract_lane(vector, tirx.Var("lane", "int32"))),
        (IndexError, "out of bounds", lambda: T.extract_lane(vector, 2)),
        (IndexError, "out of bounds", lambda: T.extract_lane(vector, -1)),
        (ValueError, "Invalid rounding mode", lambda: T.ieee_mul(1.0, 2.0, "xy")),
        (TypeError, "integer or boolean predicate", lambda: T.any_sync(tirx.FloatImm("float32", 0.5))),
        (TypeError, "integer or boolean predicate", lambda: T.syncthreads_and(tirx.FloatImm("float32", 1.0))),
    ]
    for kind, text, call in cases:
        with pytest.raises(kind, match=text) as info:
            call()
        assert isinstance(info.value, TileTypeError)  # still tile's error, with its hint
        assert "hint:" in str(info.value)
    assert T.extract_lane(vector, tirx.IntImm("int32", 1)).indices[0].value == 1


@pytest.mark.parametrize(
    "vote",
    [
        "any_sync",
        "all_sync",
        "ballot_sync",
        "ballot",
        "syncthreads_count",
        "syncthreads_and",
        "syncthreads_or",
    ],
)
def test_votes_outside_a_kernel_are_calls(vote):
    for predicate in (1, True, tirx.Var("p", "bool")):
        assert isinstance(getattr(T, vote)(predicate), tirx.Call)


def test_cumsum_takes_annotations():
    @T.prim_func
    def scan(A: T.Tensor((8, 16), "float32"), B: T.Tensor((8, 16), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8, 16), "float32")
            T.copy(A, S)
            T.cumsum(S, dim=1, annotations={"note": "kept by TileLang, unused here"})
            T.copy(S, B)

    a = np.random.default_rng(2).standard_normal((8, 16)).astype("float32")
    b = tilelang.compile(scan, out_idx=[1], target="cpu")(a)
    np.testing.assert_allclose(b, np.cumsum(a, axis=1), rtol=1e-5, atol=1e-5)


def _allreduce_kernel(op: str, identity: float):
    combine = {"sum": lambda x, y: x + y, "max": lambda x, y: T.max(x, y)}[op]

    @T.prim_func
    def allreduce(A: T.Tensor((2, 8), "float32"), C: T.Tensor((2, 8), "float32")):
        with T.Kernel(1, threads=(8, 2)):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            v = T.alloc_local((1,), "float32")
            out = T.alloc_local((1,), "float32")
            v[0] = A[ty, tx]
            with T.attr(T.comm_reducer(combine, [T.float32(identity)]), "reduce_scope", T.int32(0)):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], tx != 3, out[0], tx, dtype="handle"))
            C[ty, tx] = out[0]

    return allreduce


@needs_backend("cuda")
def test_a_comm_reducer_scope_all_reduces_over_the_named_thread_index(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.random.default_rng(7).standard_normal((2, 8)).astype("float32")
    kept = np.delete(a, 3, axis=1)  # thread 3's condition is false: it adds the identity
    for op, identity, ref in (("sum", 0.0, kept.sum(axis=1)), ("max", -1e30, kept.max(axis=1))):
        c = tilelang.compile(_allreduce_kernel(op, identity), out_idx=[1], target=EMU)(a)
        np.testing.assert_allclose(c, np.repeat(ref[:, None], 8, axis=1), rtol=1e-6)  # every thread


@T.prim_func
def _allreduce_over_a_thread_binding(A: T.Tensor((2, 8), "float32"), C: T.Tensor((2,), "float32")):
    with T.Kernel(1, threads=(8, 2)):
        v = T.alloc_local((1,), "float32")
        out = T.alloc_local((1,), "float32")
        kr = T.thread_binding(0, 8, thread="threadIdx.x")  # TileLang's dequantizing GEMV writes so
        ni = T.thread_binding(0, 2, thread="threadIdx.y")
        v[0] = A[ni, kr]
        with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope", T.int32(0)):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, out[0], kr, dtype="handle"))
        if kr == 0:
            C[ni] = out[0]


@needs_backend("cuda")
def test_all_reduce_over_an_index_bound_with_thread_binding(monkeypatch):
    # `kr = T.thread_binding(...)` is the kernel's threadIdx.x; the all-reduce refused it
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")  # the emulator's run is the check
    a = np.random.default_rng(8).standard_normal((2, 8)).astype("float32")
    c = tilelang.compile(_allreduce_over_a_thread_binding, out_idx=[1], target=EMU)(a)
    np.testing.assert_allclose(c, a.astype(np.float64).sum(axis=1), rtol=1e-5)


@T.prim_func
def _bitwise_reducers(A: T.Tensor((8, 32), "int32"), B: T.Tensor((3, 8), "int32")):
    with T.Kernel(1, threads=64):
        src = T.alloc_fragment((8, 32), "int32")
        T.copy(A, src)
        r_and = T.alloc_reducer((8,), "int32", op="bitand")
        r_or = T.alloc_reducer((8,), "int32", op="bitor")
        r_xor = T.alloc_reducer((8,), "int32", op="bitxor")
        T.reducer_init(r_and)
        T.clear(r_or)  # plain updates (`r_or[i] = r_or[i] | v`) start so; epochs with reducer_init
        T.reducer_init(r_xor)
        for i, k in T.Parallel(8, 32):
            T.reducer_update(r_and[i], src[i, k])
            r_or[i] = r_or[i] | src[i, k]
            T.reducer_update(r_xor[i], src[i, k])
        T.finalize_reducer(r_and)
        T.finalize_reducer(r_or)
        T.finalize_reducer(r_xor)
        for i in T.Parallel(8):
            B[0, i] = r_and[i]
            B[1, i] = r_or[i]
            B[2, i] = r_xor[i]


@pytest.mark.parametrize("target", ["cpu", pytest.param(EMU, marks=needs_backend("cuda"), id="emu")])
def test_bitwise_reducers_match_numpy(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.random.default_rng(8).integers(0, 2**31 - 1, (8, 32)).astype("int32")
    a[:, :16] |= 0x0F0F0000  # keep some bits set in every column so bitand is not always 0
    b = tilelang.compile(_bitwise_reducers, out_idx=[1], target=target)(a)
    np.testing.assert_array_equal(b[0], np.bitwise_and.reduce(a, axis=1))
    np.testing.assert_array_equal(b[1], np.bitwise_or.reduce(a, axis=1))
    np.testing.assert_array_equal(b[2], np.bitwise_xor.reduce(a, axis=1))


def test_a_float_bitwise_reducer_is_refused():
    with pytest.raises(AssertionError, match="integer dtype"):

        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32", op="bitand")
                T.reducer_init(acc)


@T.prim_func
def _nan_reductions(A: T.Tensor((4, 64), "float16"), B: T.Tensor((4, 4), "float16")):
    with T.Kernel(1, threads=32):
        src = T.alloc_fragment((4, 64), "float16")
        T.copy(A, src)
        skip = T.alloc_fragment((4,), "float16")
        T.reduce_max(src, skip, dim=1)
        keep = T.alloc_fragment((4,), "float16")
        T.reduce_max(src, keep, dim=1, nan_propagate=True)
        low = T.alloc_fragment((4,), "float16")
        T.reduce_min(src, low, dim=1, nan_propagate=True)
        mag = T.alloc_fragment((4,), "float16")
        T.reduce_absmax(src, mag, dim=1)
        for i in T.Parallel(4):
            B[i, 0] = skip[i]
            B[i, 1] = keep[i]
            B[i, 2] = low[i]
            B[i, 3] = mag[i]


@pytest.mark.parametrize("target", ["cpu", pytest.param(EMU, marks=needs_backend("cuda"), id="emu")])
def test_max_min_propagate_nan_when_asked(target, monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = (np.arange(256).reshape(4, 64) - 100).astype("float16")
    a[0, 7] = a[1, 0] = a[2, 63] = np.nan  # first, middle and last position (row 3 has none)
    b = tilelang.compile(_nan_reductions, out_idx=[1], target=target)(a)
    np.testing.assert_array_equal(b[3, 0], np.max(a[3]))  # without NaN: the plain maximum
    np.testing.assert_array_equal(b[:, 1], np.max(a, axis=1))  # numpy's max propagates NaN
    np.testing.assert_array_equal(b[:, 2], np.min(a, axis=1))
    np.testing.assert_array_equal(b[3, 3], np.max(np.abs(a[3])))


def test_parsing_a_kernel_does_not_keep_the_caller_s_locals_alive():
    import gc
    import weakref

    def make_kernel():
        @T.prim_func
        def k(a: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=4):
                for i in T.Parallel(4):
                    a[i] = a[i] + 1.0

        return k

    def caller() -> weakref.ref:
        payload = np.zeros(1024, "float32")  # lives in the frame that asks for the kernel
        make_kernel()
        return weakref.ref(payload)

    gc.disable()  # a reference cycle through the frames would hold it until the cyclic GC runs
    try:
        assert caller()() is None
    finally:
        gc.enable()


@T.prim_func
def _shared_atomic_then_read(a: T.Tensor((256,), "int32")):
    with T.Kernel(1, threads=256):
        shared = T.alloc_shared((256,), "int32")
        tx = T.get_thread_binding(0)
        shared[tx ^ 1] = 0
        T.atomic_add(shared[tx], 1)  # a write other threads read next: a barrier between
        a[tx] = shared[tx ^ 32]


@needs_backend("cuda")
def test_a_shared_atomic_is_a_write_that_later_reads_wait_for(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_shared_atomic_then_read, target=EMU)
    assert kernel.get_kernel_source("cuda").count("__syncthreads()") == 2
    a = np.full(256, 7, "int32")
    kernel(a)
    np.testing.assert_array_equal(a, np.ones(256, "int32"))


@T.prim_func
def _dp4a_rows(A: T.Tensor((4, 16), "int8"), B: T.Tensor((4, 16), "int8"), C: T.Tensor((4,), "int32")):
    with T.Kernel(4, threads=1) as bx:
        acc = T.alloc_local((1,), "int32")
        acc[0] = 5
        for k in T.serial(4):
            T.dp4a(A[bx, k * 4], B[bx, k * 4], acc[0])
        C[bx] = acc[0]


def test_dp4a_accumulates_four_int8_products_from_each_start():
    rng = np.random.default_rng(9)
    a = rng.integers(-128, 128, (4, 16)).astype("int8")
    b = rng.integers(-128, 128, (4, 16)).astype("int8")
    c = tilelang.compile(_dp4a_rows, out_idx=[2], target="cpu")(a, b)
    np.testing.assert_array_equal(c, 5 + (a.astype("int32") * b.astype("int32")).sum(axis=1))
    for dtypes in (("float16", "int8", "int32"), ("int8", "int8", "float32"), ("uint8", "uint8", "int32")):
        with pytest.raises(ValueError, match=r"T\.dp4a requires"):

            @T.prim_func
            def bad(X: T.Tensor((4,), dtypes[0]), Y: T.Tensor((4,), dtypes[1]), Z: T.Tensor((1,), dtypes[2])):
                T.dp4a(X, Y, Z)


@T.prim_func
def _rounding(
    A: T.Tensor((12,), "float32"), B: T.Tensor((2, 12), "float32"), C: T.Tensor((2, 12), "float16")
):
    with T.Kernel(1, threads=12):
        for i in T.Parallel(12):
            B[0, i] = T.round(A[i])
            B[1, i] = T.round(A[i], "ties-away-from-zero")
            C[0, i] = T.round(T.cast(A[i], "float16"))
            C[1, i] = T.round(T.cast(A[i], "float16"), rounding_mode="ties-away-from-zero")


def test_round_breaks_ties_to_even_or_away_from_zero():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 3.7, -3.7, 0.0, 1e4], "float32")
    b, c = tilelang.compile(_rounding, out_idx=[1, 2], target="cpu")(a)
    away = np.trunc(a) + np.sign(a) * (np.abs(a - np.trunc(a)) >= 0.5)
    np.testing.assert_array_equal(b[0], np.round(a))  # numpy rounds half to even
    np.testing.assert_array_equal(b[1], away)
    h = a.astype("float16")
    np.testing.assert_array_equal(c[0], np.round(h))
    np.testing.assert_array_equal(c[1], np.trunc(h) + np.sign(h) * (np.abs(h - np.trunc(h)) >= 0.5))
    with pytest.raises(ValueError, match="unknown rounding_mode"):
        T.round(tirx.Var("x", "float32"), "ties-up")


def test_reduce_batch_is_a_hint_that_keeps_the_result():
    @T.prim_func
    def rows(A: T.Tensor((4, 8, 16), "float32"), C: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((4, 8, 16), "float32")
            c = T.alloc_fragment((4, 16), "float32")
            T.copy(A, a)
            T.reduce_sum(a, c, dim=1, batch=2, annotations={"note": 1})
            T.copy(c, C)

    a = np.random.default_rng(4).standard_normal((4, 8, 16)).astype("float32")
    c = tilelang.compile(rows, out_idx=[1], target="cpu")(a)
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="batch must be >= 1"):

        @T.prim_func
        def bad(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=32):
                a = T.alloc_fragment((4, 8), "float32")
                m = T.alloc_fragment((4,), "float32")
                T.reduce_max(a, m, dim=1, batch=0)


def test_alloc_var_literals_take_the_variable_s_type():
    @T.prim_func
    def wide(A: T.Tensor((2,), "float64")):
        with T.Kernel(1, threads=1):
            big = T.alloc_var(T.float64, init=1e300)
            A[0] = big
            A[1] = big * 0.5

    a = tilelang.compile(wide, out_idx=[0], target="cpu")()
    np.testing.assert_array_equal(a, [1e300, 5e299])
    with pytest.raises(ValueError, match="exceeds maximum of float32"):

        @T.prim_func
        def narrow(A: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1):
                v = T.alloc_var(T.float32, init=1e300)
                A[0] = v


@T.prim_func
def _sleep_then_sync(A: T.Tensor((1,), "int32"), B: T.Tensor((1,), "int32")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        if tx == 0:
            T.call_extern("void", "__nanosleep", 100)
            A[0] = -1
        T.sync_warp()
        if tx == 1:
            B[0] = A[0]


@needs_backend("cuda")
def test_nanosleep_builds_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a, b = np.zeros(1, "int32"), np.zeros(1, "int32")
    tilelang.compile(_sleep_then_sync, target=EMU)(a, b)
    assert a[0] == -1 and b[0] == -1  # thread 1 reads thread 0's store after the warp sync


@T.prim_func
def _generator_forms(
    A: T.Tensor((64, 4), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")
):
    with T.Kernel(1, threads=64):
        # TVMScript evaluated the element of a generator once: both names were one buffer
        a, b = (T.alloc_fragment((64,), "float32") for _ in range(2))
        for i in T.Parallel(64):
            a[i] = sum(A[i, k] for k in range(4))  # a generator reading its own variable
        for i in T.Parallel(64):
            b[i] = a[i] * 2.0
        for i in T.Parallel(64):
            a[i] = 1.0
        T.copy(b, B)
        T.copy(a, C)


def test_generator_expressions_evaluate_their_element_per_item():
    x = np.random.default_rng(3).standard_normal((64, 4)).astype("float32")
    b, c = tilelang.compile(_generator_forms, out_idx=[1, 2], target="cpu")(x)
    np.testing.assert_allclose(b, 2 * x.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(c, np.ones(64, "float32"))
