"""Forms TileLang's testing/python/language files use (second batch): reducer epochs and
their lifecycle errors, a reducer epoch inside ``T.Pipelined``, ``T.copy`` of two single
elements, views of the wrong size as ``AssertionError``s, function-scope ``T.alloc_global``
in an eager kernel, and ``get_kernel_source(kernel_only=True)``. Results are checked against
numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import ArgumentTypeError, TileScopeError, TileTypeError
from tile.testsupport.markers import needs_backend

EMU = {"kind": "cuda", "arch": "sm_90a"}


@T.prim_func
def _scalar_copies(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
    with T.Kernel(1, threads=1):
        for i in T.serial(4):
            T.copy(A[3 - i], B[i])  # one element each, converted to the destination's type


def test_copy_of_two_single_elements_copies_that_element():
    a = np.array([1.5, 2.5, -3.5, 7.0], "float32")
    b = tilelang.compile(_scalar_copies, out_idx=[1], target="cpu")(a)
    np.testing.assert_array_equal(b, [7, -3, 2, 1])  # float -> int32 truncates toward zero


@pytest.mark.parametrize("make_view", [lambda A: T.view(A, [4, 9]), lambda A: T.reshape(A, [4, 9])])
def test_a_view_of_the_wrong_size_is_also_an_assertion_error(make_view):
    with pytest.raises(AssertionError, match="same bytes") as caught:

        @T.prim_func
        def bad(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                make_view(A)

    assert isinstance(caught.value, TileTypeError)


def test_a_view_outside_a_kernel_is_refused():
    from tvm import tirx

    with pytest.raises(TileScopeError, match="outside a kernel"):
        T.view(tirx.decl_buffer((16, 32), "float32", name="A"), (16, 64), dtype="float16")


@tilelang.jit
def _eager_with_scratch(A, block: int = 8):
    n = T.const("n")
    A: T.Tensor[[n], T.float32]
    out = T.empty([n], dtype="float32")
    scratch = T.alloc_global([n], "float32")  # global memory every kernel of the call sees
    with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
        for i in T.Parallel(block):
            scratch[bx * block + i] = A[bx * block + i] * 2
        for i in T.Parallel(block):
            out[bx * block + i] = scratch[bx * block + i] + 1
    return out


def test_an_eager_kernel_with_function_scope_scratch_returns_its_output():
    a = np.arange(32, dtype="float32")
    np.testing.assert_array_equal(_eager_with_scratch(a), 2 * a + 1)


def test_kernel_only_source_is_the_device_source():
    kernel = tilelang.compile(_scalar_copies, out_idx=[1], target="cpu")
    assert kernel.get_kernel_source(kernel_only=True) == kernel.get_kernel_source()


# ---- reducer epochs -------------------------------------------------------------------------


@T.prim_func
def _pipelined_epochs(A: T.Tensor((32,), "float32"), B: T.Tensor((2,), "float32")):
    with T.Kernel(1, threads=64):
        tile_s = T.alloc_shared((8,), "float32")
        frag = T.alloc_fragment((8,), "float32")
        running_max = T.alloc_fragment((1,), "float32")
        running_sum = T.alloc_fragment((1,), "float32")
        running_max[0] = -T.infinity("float32")
        running_sum[0] = 0.0
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[k * 8], tile_s)
            T.copy(tile_s, frag)
            most = T.alloc_reducer((1,), "float32", op="max")  # declared in the body
            T.reducer_init(most, running_max[0])
            total = T.alloc_reducer((1,), "float32", op="sum")
            T.reducer_init(total, 1.0)
            for i in T.Parallel(8):  # 8 of the 64 threads combine
                T.reducer_update(most[0], frag[i])
            for i in T.Parallel(8):
                T.reducer_update(total[0], frag[i])
            result = T.alloc_fragment((1,), "float32")
            T.finalize_reducer(most, result)
            T.finalize_reducer(total)
            running_max[0] = result[0]
            running_sum[0] = running_sum[0] + total[0]
        B[0] = running_max[0]
        B[1] = running_sum[0]


def _pipelined_reference(a):
    return np.array([a.max(), sum(1.0 + a[k * 8 : k * 8 + 8].sum() for k in range(4))], "float32")


def test_reducer_epochs_inside_a_pipelined_loop():
    a = np.random.default_rng(3).standard_normal(32).astype("float32")
    b = tilelang.compile(_pipelined_epochs, out_idx=[1], target="cpu")(a)
    np.testing.assert_allclose(b, _pipelined_reference(a), rtol=1e-5)


@needs_backend("cuda")
def test_reducer_epochs_inside_a_pipelined_loop_on_the_emulator(monkeypatch):
    # sm_90a: the loop is a cp.async ring, whose statements are wrapped one by one (the
    # reducers declared in the body were an internal error there); 8 of 64 threads combine
    # atomically inside `if tx < 8`, loop after loop, which needs no barrier inside the `if`
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.random.default_rng(4).standard_normal(32).astype("float32")
    b = tilelang.compile(_pipelined_epochs, out_idx=[1], target=EMU)(a)
    np.testing.assert_allclose(b, _pipelined_reference(a), rtol=1e-5)


ONLINE_K, ONLINE_BLOCK = 256, 64


@T.prim_func
def _online_logsumexp(A: T.Tensor((ONLINE_K,), "float32"), B: T.Tensor((1,), "float32")):
    # reducer_v2's online softmax: the (1,) epoch results are read in T.Parallel loops over
    # i at index 0, so every thread must hold them (tile placed them on one thread and
    # refused the read, LayoutInferenceError; TileLang replicates them)
    with T.Kernel(1, threads=64):
        a_frag = T.alloc_fragment((ONLINE_BLOCK,), "float32")
        running_max = T.alloc_fragment((1,), "float32")
        running_sum = T.alloc_fragment((1,), "float32")
        running_max[0] = -T.infinity("float32")
        running_sum[0] = 0.0
        for k in T.serial(ONLINE_K // ONLINE_BLOCK):
            T.copy(A[k * ONLINE_BLOCK], a_frag)
            new_max = T.alloc_reducer((1,), "float32", op="max")
            T.reducer_init(new_max, running_max[0])
            for i in T.Parallel(ONLINE_BLOCK):
                T.reducer_update(new_max[0], a_frag[i])
            max_result = T.alloc_fragment((1,), "float32")
            T.finalize_reducer(new_max, max_result)
            new_sum = T.alloc_reducer((1,), "float32", op="sum")
            T.reducer_init(new_sum)
            for i in T.Parallel(ONLINE_BLOCK):
                T.reducer_update(new_sum[0], T.exp(a_frag[i] - max_result[0]))
            sum_result = T.alloc_fragment((1,), "float32")
            T.finalize_reducer(new_sum, sum_result)
            running_sum[0] = T.exp(running_max[0] - max_result[0]) * running_sum[0] + sum_result[0]
            running_max[0] = max_result[0]
        if T.get_thread_binding() == 0:
            B[0] = T.log(running_sum[0]) + running_max[0]


@needs_backend("cuda")
def test_a_one_element_fragment_read_across_a_parallel_loop_is_held_by_every_thread(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.random.default_rng(7).standard_normal(ONLINE_K).astype("float32") * 4
    b = tilelang.compile(_online_logsumexp, out_idx=[1], target=EMU)(a)
    want = np.log(np.exp(a.astype(np.float64) - a.max()).sum()) + a.max()
    np.testing.assert_allclose(b, [want], rtol=1e-5)


def _kernel(body):
    """A kernel over A (8,) and B (1,) whose reducer part is ``body(src, acc, B)``."""

    @T.prim_func
    def kernel(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            src = T.alloc_fragment((8,), "float32")
            T.copy(A, src)
            acc = T.alloc_reducer((1,), "float32", op="sum")
            body(src, acc, B)

    return kernel


@T.macro
def _update_all(src, acc):
    for i in T.Parallel(8):
        T.reducer_update(acc[0], src[i])


@T.macro
def _init_update_finalize(src, acc, B):
    T.reducer_init(acc, 0.5)
    _update_all(src, acc)
    T.finalize_reducer(acc)
    B[0] = acc[0]  # after the finalize: the result


@T.macro
def _start_float16(src, acc, B):
    T.reducer_init(acc, T.float16(1.0))
    _update_all(src, acc)
    T.finalize_reducer(acc)


@T.macro
def _no_init(src, acc, B):
    _update_all(src, acc)
    T.finalize_reducer(acc)


@T.macro
def _cleared_then_updated(src, acc, B):
    T.clear(acc)  # plain updates (`acc[0] += v`) start so, not T.reducer_update
    _update_all(src, acc)
    T.finalize_reducer(acc)


@T.macro
def _no_finalize(src, acc, B):
    T.reducer_init(acc)
    _update_all(src, acc)


@T.macro
def _stored(src, acc, B):
    T.reducer_init(acc)
    for i in T.Parallel(8):
        acc[0] += src[i]
    T.finalize_reducer(acc)


@T.macro
def _read_early(src, acc, B):
    T.reducer_init(acc)
    _update_all(src, acc)
    B[0] = acc[0]
    T.finalize_reducer(acc)


@T.macro
def _update_outside_parallel(src, acc, B):
    T.reducer_init(acc)
    T.reducer_update(acc[0], src[0])
    T.finalize_reducer(acc)


@T.macro
def _init_twice(src, acc, B):
    T.reducer_init(acc)
    T.reducer_init(acc)
    _update_all(src, acc)
    T.finalize_reducer(acc)


@T.macro
def _finalize_after_the_loop(src, acc, B):
    for _ in T.serial(2):
        T.reducer_init(acc)
        _update_all(src, acc)
    T.finalize_reducer(acc)


@T.macro
def _finalize_in_a_loop(src, acc, B):
    T.reducer_init(acc)
    for _ in T.serial(2):
        _update_all(src, acc)
        T.finalize_reducer(acc)


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        (_start_float16, ArgumentTypeError, "float16, which does not match reducer acc's dtype float32"),
        (_no_init, TileScopeError, "T.reducer_update of acc before T.reducer_init"),
        (_cleared_then_updated, TileScopeError, "T.reducer_update of acc before T.reducer_init"),
        (_no_finalize, TileScopeError, "is never finalized"),
        (_stored, TileScopeError, "illegal store to reducer acc"),
        (_read_early, TileScopeError, "illegal read of reducer acc before T.finalize_reducer"),
        (_update_outside_parallel, TileScopeError, "outside any T.Parallel loop"),
        (_init_twice, TileScopeError, "double T.reducer_init of acc"),
        (_finalize_after_the_loop, TileScopeError, "not in the scope of its T.reducer_init"),
        (_finalize_in_a_loop, TileScopeError, "not in the scope of its T.reducer_init"),
    ],
)
def test_reducer_epoch_misuse_is_a_typed_error(body, error, match):
    with pytest.raises(error, match=match):
        _kernel(body)


def test_accesses_inside_an_epoch_are_refused_at_their_line():
    with pytest.raises(TileScopeError, match="illegal store") as caught:

        @T.prim_func
        def stored(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), "float32")
                T.reducer_init(acc)
                for i in T.Parallel(8):
                    acc[0] += A[i]  # the line named
                T.finalize_reducer(acc)

    location = caught.value.location
    assert location is not None and location.filename == __file__
    assert "the line named" in (location.source_line or "")


def test_a_well_formed_epoch_is_read_after_its_finalize():
    a = np.arange(1, 9, dtype="float32")
    b = tilelang.compile(_kernel(_init_update_finalize), out_idx=[1], target="cpu")(a)
    np.testing.assert_array_equal(b, [0.5 + 36])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_a_fast_math_call_has_its_arguments_type(dtype):
    from tvm import ir, tirx

    result = T.__tan(tirx.Var("x", dtype))
    assert isinstance(result, ir.Call) and str(result.ty) == dtype


@T.prim_func
def _half_exp(A: T.Tensor((8,), "float16"), B: T.Tensor((8,), "float16")):
    with T.Kernel(1, threads=8):
        for i in T.Parallel(8):
            B[i] = T.__exp(A[i]) + T.__sin(A[i])


def test_a_16_bit_fast_math_call_is_computed_in_float32():
    a = np.linspace(-2, 2, 8).astype("float16")
    b = tilelang.compile(_half_exp, out_idx=[1], target="cpu")(a)
    x = a.astype("float32")
    want = (np.exp(x).astype("float16").astype("float32") + np.sin(x).astype("float16").astype("float32"))
    np.testing.assert_allclose(b.astype("float32"), want, rtol=2e-3)


def test_a_jit_kernel_named_like_a_test_is_not_collected_by_pytest():
    # TileLang's let test defines `@tilelang.jit def test_kernel(A: T.Tensor(...))`; pytest
    # collected tile's wrapper (its __wrapped__ is a function) as a test and asked for a fixture
    # named A. pytest skips a test-named object whose __test__ is false.
    @tilelang.jit
    def test_kernel(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            A[0] = 1.0

    @tilelang.jit
    def test_eager(A):
        A: T.Tensor[[4], T.float32]
        with T.Kernel(1, threads=1):
            A[0] = 1.0

    for kernel in (test_kernel, test_eager):
        assert getattr(kernel, "__test__", True) is False
        assert kernel.__name__.startswith("test_")


@T.prim_func
def _handle_parameter(A_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (4, 8), "float32", align=16)
    with T.Kernel(1, threads=1):
        for i, j in T.grid(4, 8):
            A[i, j] = A[i, j] * 2.0 + n


def test_a_handle_parameter_typed_by_match_buffer_is_that_tensor():
    assert [str(p.name) for p in _handle_parameter.params] == ["A", "n"]
    a = np.arange(32, dtype="float32").reshape(4, 8)
    kernel = tilelang.compile(_handle_parameter, target="cpu")
    got = a.copy()
    kernel(got, 3)
    np.testing.assert_array_equal(got, a * 2 + 3)


@T.prim_func
def _infinities(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float16")):
    with T.Kernel(1, threads=4):
        T.fill(A, T.infinity("float32"))
        T.fill(B, -T.infinity(T.float16))


def test_infinity_of_floating_point_types():
    a, b = (np.asarray(x) for x in tilelang.compile(_infinities, out_idx=[0, 1], target="cpu")())
    assert np.all(a == np.inf) and np.all(b == -np.inf)
    for dtype in ("bfloat16", "float8_e5m2", "float64"):  # TVMScript's T.infinity refused the first two
        value = T.infinity(dtype)
        assert str(value.ty) == dtype and float(value.value) == np.inf


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e8m0fnu", "int32"])
def test_a_type_without_infinity_is_refused(dtype):
    with pytest.raises(ValueError, match="has no infinity"):
        T.infinity(dtype)


def test_reinterpret_takes_a_vector_dtype_constructor():
    from tvm import tirx

    bits = tirx.Var("bits", "uint32x4")
    assert str(T.reinterpret(bits, T.float32x4).ty) == "float32x4"  # TileLang's order (ldg's tests)
    assert str(T.reinterpret(T.float32x2, tirx.Var("pair", "uint32x2")).ty) == "float32x2"


@T.prim_func
def _two_blocks_per_sm(A: T.Tensor((4, 32), "float32"), B: T.Tensor((4, 32), "float32")):
    with T.Kernel(4, threads=32) as bx:
        T.annotate_min_blocks_per_sm(2)
        for i in T.Parallel(32):
            B[bx, i] = A[bx, i] + 1.0


def test_min_blocks_per_sm_is_ignored_on_the_cpu():
    a = np.arange(128, dtype="float32").reshape(4, 32)
    np.testing.assert_array_equal(tilelang.compile(_two_blocks_per_sm, out_idx=[1], target="cpu")(a), a + 1)


@needs_backend("cuda")
def test_min_blocks_per_sm_is_the_second_launch_bound_on_cuda(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")

    @tilelang.jit(out_idx=[1], target=EMU)
    def factory():  # TileLang's tests ask a factory without parameters for its source
        return _two_blocks_per_sm

    assert "__launch_bounds__(32, 2)" in factory.get_kernel_source()
    a = np.arange(128, dtype="float32").reshape(4, 32)
    np.testing.assert_array_equal(factory()(a), a + 1)


@T.prim_func
def _unrolled(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32"), n: T.int32):
    with T.Kernel(1, threads=1):
        for i in T.unroll(n):  # a trip count known at run time: a serial loop
            B[i] = A[i] * 2.0
        for i in T.unroll(0, 16, unroll_factor=4):  # TileLang's partial unrolling: accepted
            B[i] = B[i] + 1.0


def test_unroll_over_a_run_time_extent_is_a_serial_loop():
    a = np.arange(16, dtype="float32")
    b = np.zeros(16, "float32")
    tilelang.compile(_unrolled, target="cpu")(a, b, 5)
    np.testing.assert_array_equal(b, np.where(np.arange(16) < 5, 2 * a, 0) + 1)


@T.prim_func
def _flag(flag: T.Tensor((2,), "int32")):
    with T.Kernel(1, threads=1):
        T.atomic_store(flag[0], 7, memory_order="release")  # a Python number: an int32 constant
        T.atomic_store(flag[1], T.atomic_load(flag[0], memory_order="acquire") + 1)


def test_atomic_store_of_a_number():
    flag = np.zeros(2, "int32")
    tilelang.compile(_flag, target="cpu")(flag)
    np.testing.assert_array_equal(flag, [7, 8])


def _store_with(order):
    @T.prim_func
    def bad(flag: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=1):
            T.atomic_store(flag[0], 1, memory_order=order)


def _load_with(order):
    @T.prim_func
    def bad(flag: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=1):
            flag[1] = T.atomic_load(flag[0], memory_order=order)


@pytest.mark.parametrize(
    ("build", "name", "order"),
    [
        (_store_with, "atomic_store", "acquire"),
        (_load_with, "atomic_load", "release"),
        (_store_with, "atomic_store", "x"),
    ],
)
def test_a_memory_order_the_access_cannot_have_is_a_value_error(build, name, order):
    with pytest.raises(ValueError, match=f"{name} does not support memory_order"):
        build(order)
