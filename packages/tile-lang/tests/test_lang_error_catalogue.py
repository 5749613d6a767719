"""The error catalogue: one tiny program per user mistake, each checked for its error
type, the key phrase of its message, the line it points at, and a hint.

Each mistake is a function below; the line the error must point at carries the
marker comment ``# <-``. Kernel-call mistakes point at the kernel's definition (its decorator line)
(the signature that the arguments disagree with); compile-call mistakes point at
the ``tilelang.compile`` call.
"""

import inspect

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import (
    ResourceLimitError,
    TargetError,
    TileError,
    TileShapeError,
    TileTypeError,
    UnsupportedOnTargetError,
)
from tile.lang import KernelArgumentError, TileScopeError

MARK = "# <-"


def copy_kernel():
    @T.prim_func  # <-
    def copy64(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            T.copy(A, B)

    return copy64


# ---------------------------------------------------------------- tile operators


def copy_extents_differ():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            S = T.alloc_shared((32, 32), "float32")
            # S is more local and smaller: half of A's region would be dropped
            T.copy(A[0:32, 0:64], S)  # <-


def copy_ranks_differ():
    @T.prim_func
    def k(A: T.Tensor((4, 32, 32), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            S = T.alloc_shared((32, 32), "float32")
            T.copy(A[0:4, 0:32, 0:32], S)  # <-


def parallel_without_extents():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for _i in T.Parallel():  # <-
                A[0] = 1.0


def copy_from_a_number():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            T.copy(1.0, A)  # <-


def gemm_k_differs():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            a = T.alloc_shared((16, 8), "float32")
            b = T.alloc_shared((16, 16), "float32")
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(a, b, c)  # <-


def gemm_dtypes_differ():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            a = T.alloc_shared((16, 16), "float16")
            b = T.alloc_shared((16, 16), "float32")
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(a, b, c)  # <-


def gemm_accumulator_in_shared():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            a = T.alloc_shared((16, 16), "float32")
            b = T.alloc_shared((16, 16), "float32")
            c = T.alloc_shared((16, 16), "float32")
            T.gemm(a, b, c)  # <-


def gemm_three_dims():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            a = T.alloc_shared((2, 16, 16), "float32")
            b = T.alloc_shared((16, 16), "float32")
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(a, b, c)  # <-


def gemm_operand_element():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            b = T.alloc_shared((16, 16), "float32")
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(A[0, 0], b, c)  # <-


def gemm_k_differs_with_transposed_b():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            a = T.alloc_shared((16, 32), "float32")
            b = T.alloc_shared((16, 16), "float32")
            c = T.alloc_fragment((16, 16), "float32")
            T.gemm(a, b, c, transpose_B=True)  # <-


def reduce_dim_out_of_range():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            s = T.alloc_fragment((16, 16), "float32")
            m = T.alloc_fragment((16,), "float32")
            T.reduce_max(s, m, dim=2)  # <-


def reduce_destination_shape():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            s = T.alloc_fragment((16, 32), "float32")
            m = T.alloc_fragment((32,), "float32")
            T.reduce_sum(s, m, dim=1)  # <-


def reduce_max_destination_shape():
    @T.prim_func
    def k(X: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            src = T.alloc_fragment((4, 8), "float32")
            dst = T.alloc_fragment((8,), "float32")
            T.reduce_max(src, dst, dim=1)  # <-


def cumsum_destination_shape():
    @T.prim_func
    def k(X: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            S = T.alloc_shared((4, 8), "float32")
            D = T.alloc_fragment((8, 4), "float32")
            T.cumsum(S, D, dim=0)  # <-


def atomic_extents_differ():
    @T.prim_func
    def k(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            L = T.alloc_fragment((16, 16), "float32")
            T.atomic_add(C[0:8, 0:16], L)  # <-


def atomic_with_a_vector_value():
    @T.prim_func
    def k(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            T.atomic_max(C[0, 0], T.Broadcast(T.float32(1.0), 2))  # <-


def reduce_single_element():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            s = T.alloc_fragment((16, 16), "float32")
            T.reduce_sum(s, A[0, 0], dim=1)  # <-


def fill_with_a_buffer():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            s = T.alloc_fragment((16,), "float32")
            T.fill(s, A)  # <-


# ---------------------------------------------------------------- kernels and scopes


def fragment_outside_kernel():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        F = T.alloc_fragment((16,), "float32")  # <-
        T.clear(F)


def kernel_with_four_grid_dims():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, 1, 1, 1, threads=32) as _bx:  # <-
            A[0] = 1.0


def kernel_nested():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:  # noqa: SIM117 (the nesting is the mistake)
            with T.Kernel(1, threads=32) as _by:  # <-
                A[0] = 1.0


def threads_not_positive():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=0) as _bx:  # <-
            A[0] = 1.0


def threads_over_target_limit():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=4096) as _bx:  # <-
            A[0] = 1.0

    tilelang.compile(k, target="cpu")


def parallel_float_extent():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for i in T.Parallel(3.5):  # <-
                A[i] = 1.0


def pipelined_negative_stages():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for i in T.Pipelined(16, num_stages=-1):  # <-
                A[i] = 1.0


def pipelined_order_and_stage_disagree():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for i in T.Pipelined(16, num_stages=2, order=[0, 1], stage=[0]):  # <-
                A[i] = 1.0


def thread_binding_dim_out_of_range():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            ty = T.get_thread_binding(1)  # <-
            A[ty] = 1.0


def thread_binding_on_the_cpu():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            tx = T.get_thread_binding()  # <-
            A[tx] = 1.0

    tilelang.compile(k, target="cpu")


def shared_memory_over_capacity():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            big = T.alloc_shared((4096, 2048), "float32")  # <-
            small = T.alloc_shared((16,), "float32")
            T.copy(A, small)
            T.fill(big, 0.0)

    tilelang.compile(k, target="cpu")


def dtype_unsupported_by_backend():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            scaled = T.alloc_shared((16,), "float8_e4m3fnuz")  # <-
            T.clear(scaled)

    tilelang.compile(k, target="cpu")


# ---------------------------------------------------------------- compiling


def unknown_target():
    tilelang.compile(copy_kernel(), target="tpu")  # <-


def malformed_json_target():
    tilelang.compile(copy_kernel(), target='{"kind": "cpu",')  # <-


def out_idx_out_of_range():
    tilelang.compile(copy_kernel(), out_idx=[5], target="cpu")  # <-


def compile_a_plain_function():
    def not_a_kernel(A):
        return A

    tilelang.compile(not_a_kernel, target="cpu")  # <-


# ---------------------------------------------------------------- calling


@pytest.fixture(scope="module")
def copy64():
    return tilelang.compile(copy_kernel(), out_idx=[-1], target="cpu")


def call_with_too_many_arguments(kernel):
    kernel(np.zeros((64, 64), "float32"), np.zeros((64, 64), "float32"))


def call_with_wrong_shape(kernel):
    kernel(np.zeros((64, 32), "float32"))


def call_with_wrong_dtype(kernel):
    kernel(np.zeros((64, 64), "float16"))


def call_with_non_contiguous(kernel):
    kernel(np.zeros((64, 128), "float32")[:, ::2])


def call_with_tensor_on_another_device(kernel):
    torch = pytest.importorskip("torch")
    kernel(torch.empty((64, 64), dtype=torch.float32, device="meta"))


def call_with_a_list(kernel):
    kernel([[0.0] * 64] * 64)


# (mistake, error type, key phrase)
PROGRAM_MISTAKES = [
    (copy_extents_differ, TileShapeError, "T.copy extents differ"),
    (copy_ranks_differ, TileShapeError, "T.copy ranks differ"),
    (copy_from_a_number, TileTypeError, "copy source must be a buffer"),
    (gemm_k_differs, TileShapeError, "K of A is 8 but K of B is 16"),
    (gemm_dtypes_differ, TileTypeError, "A a is float16, B b is float32"),
    (gemm_accumulator_in_shared, TileTypeError, "it must be a fragment"),
    (gemm_k_differs_with_transposed_b, TileShapeError, "K of A is 32 but K of B is 16"),
    (gemm_three_dims, TileShapeError, "must be 2-D"),
    (gemm_operand_element, TileShapeError, "must be a buffer or a slice, got an element of A"),
    (reduce_dim_out_of_range, TileShapeError, "dim=2 is out of range"),
    (reduce_destination_shape, TileShapeError, "along dim 1 leaves (16)"),
    (reduce_max_destination_shape, TileShapeError, "reducing src (4, 8) along dim 1 leaves (4)"),
    (reduce_single_element, TileTypeError, "not single elements"),
    (cumsum_destination_shape, TileShapeError, "T.cumsum: D spans (8, 4) but S spans (4, 8)"),
    (atomic_extents_differ, TileShapeError, "destination C spans (8, 16), value L spans (16, 16)"),
    (atomic_with_a_vector_value, TileTypeError, "scalar or a buffer tile as value, got a float32x2 vector"),
    (fill_with_a_buffer, TileTypeError, "T.fill value must be a scalar"),
    (fragment_outside_kernel, TileScopeError, "T.alloc_fragment can only be used inside"),
    (kernel_with_four_grid_dims, TileTypeError, "1 to 3 grid extents, got 4"),
    (kernel_nested, TileScopeError, "cannot be nested"),
    (threads_not_positive, TileTypeError, "threads= must be positive, got 0"),
    (threads_over_target_limit, ResourceLimitError, "asks for 4096 threads per block"),
    (parallel_float_extent, TileTypeError, "T.Parallel extents must be integers"),
    (parallel_without_extents, TileTypeError, "T.Parallel needs at least one extent"),
    (pipelined_negative_stages, TileTypeError, "num_stages must be an integer >= 0, got -1"),
    (pipelined_order_and_stage_disagree, TileTypeError, "order= has 2 entries but stage= has 1"),
    (thread_binding_dim_out_of_range, TileTypeError, "asked for dim 1"),
    (thread_binding_on_the_cpu, UnsupportedOnTargetError, "thread"),
    (shared_memory_over_capacity, ResourceLimitError, "allocates 33554496 bytes of shared memory"),
    (dtype_unsupported_by_backend, UnsupportedOnTargetError, "element type float8_e4m3fnuz"),
    (unknown_target, TargetError, "no installed backend compiles for target kind 'tpu'"),
    (malformed_json_target, TargetError, "does not parse"),
    (out_idx_out_of_range, KernelArgumentError, "out_idx 5 is out of range"),
    (compile_a_plain_function, TileError, "expects a kernel made with @T.prim_func"),
]

CALL_MISTAKES = [
    (call_with_too_many_arguments, "expected 1 arguments (A), got 2"),
    (call_with_wrong_shape, "has shape [64, 32], expected [64, 64]"),
    (call_with_wrong_dtype, "has dtype float16, expected float32"),
    (call_with_non_contiguous, "is not contiguous"),
    (call_with_tensor_on_another_device, "is on device meta"),
    (call_with_a_list, "must be a numpy array or torch tensor"),
]


def marked_line(fn):
    lines, start = inspect.getsourcelines(fn)
    marked = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(MARK)]
    assert len(marked) == 1, f"{fn.__name__} must mark exactly one line"
    return marked[0]


def check_located(err, line, phrase):
    assert phrase in err.message, err.message
    assert err.hint, f"no hint for: {err.message}"
    assert err.location is not None, f"no location for: {err.message}"
    assert err.location.filename == __file__
    assert err.location.line == line, str(err)
    assert "^" in str(err) and "hint:" in str(err)


@pytest.mark.parametrize(
    "mistake,error,phrase", PROGRAM_MISTAKES, ids=[m.__name__ for m, _, _ in PROGRAM_MISTAKES]
)
def test_program_mistake(mistake, error, phrase):
    with pytest.raises(error) as info:
        mistake()
    check_located(info.value, marked_line(mistake), phrase)


@pytest.mark.parametrize("mistake,phrase", CALL_MISTAKES, ids=[m.__name__ for m, _ in CALL_MISTAKES])
def test_call_mistake(copy64, mistake, phrase):
    with pytest.raises(KernelArgumentError) as info:
        mistake(copy64)
    check_located(info.value, marked_line(copy_kernel), phrase)


def test_the_catalogue_has_at_least_25_distinct_mistakes():
    phrases = [p for _, _, p in PROGRAM_MISTAKES] + [p for _, p in CALL_MISTAKES]
    assert len(set(phrases)) == len(phrases) >= 25
