"""Eager kernels: @tilelang.jit on a kernel body, T.const dims, T.empty outputs, return."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang import KernelArgumentError, TileScopeError


@tilelang.jit
def matmul(A, B, block_M: int = 16, block_N: int = 16, block_K: int = 16, dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), dtype)
        B_s = T.alloc_shared((block_K, block_N), dtype)
        C_f = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        T.copy(C_f, C[by * block_M, bx * block_N])
    return C


def test_eager_gemm_specializes_per_shape_and_reuses_kernels():
    rng = np.random.default_rng(1)
    before = len(matmul.kernels)
    for m in (5, 40, 40):
        a = rng.standard_normal((m, 24)).astype("float32")
        b = rng.standard_normal((24, 33)).astype("float32")
        c = matmul(a, b)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert len(matmul.kernels) - before == 2  # 5 and 40: the second 40 reuses
    kernel = matmul.get_kernel(a, b)
    assert [p.shape for p in kernel.params] == [(40, 24), (24, 33), (40, 33)]
    assert "T.launch_thread" in kernel.get_kernel_source() or kernel.get_kernel_source()


def test_eager_compile_time_values_and_torch_tensors():
    torch = pytest.importorskip("torch")
    a = torch.randn(20, 16)
    b = torch.randn(16, 8)
    c = matmul(a, b, block_M=8, block_N=8, block_K=8)
    assert isinstance(c, torch.Tensor)
    np.testing.assert_allclose(c.numpy(), (a @ b).numpy(), rtol=1e-4, atol=1e-4)


@tilelang.jit
def sum_and_diff(A, B):
    """Unannotated tensors take the shape and dtype they are called with."""
    S = T.empty(A.shape, A.dtype)
    D = T.empty(A.shape, A.dtype)
    with T.Kernel(1, threads=32):
        for i in T.Parallel(A.shape[0]):
            D[i] = A[i] - B[i]
            S[i] = A[i] + B[i]
    return D, S


def test_eager_unannotated_params_and_tuple_return_order():
    a = np.arange(7, dtype="float32")
    b = np.full(7, 2.0, dtype="float32")
    d, s = sum_and_diff(a, b)
    np.testing.assert_allclose(d, a - b)
    np.testing.assert_allclose(s, a + b)


@tilelang.jit
def scale_rows(X, factor: float = 2.0):
    M = T.dynamic("M")
    N = T.const("N")
    X: T.Tensor((M, N), "float32")
    Y = T.empty((M, N), "float32")
    with T.Kernel(T.ceildiv(M, 4), threads=32) as bx:
        tile = T.alloc_fragment((4, N), "float32")
        T.copy(X[bx * 4, 0], tile)
        for i, j in T.Parallel(4, N):
            tile[i, j] = tile[i, j] * factor
        T.copy(tile, Y[bx * 4, 0])
    return Y


def test_eager_dynamic_dim_compiles_once():
    before = len(scale_rows.kernels)
    for m in (1, 9, 30):
        x = np.random.default_rng(m).standard_normal((m, 6)).astype("float32")
        np.testing.assert_allclose(scale_rows(x, factor=3.0), 3.0 * x, rtol=1e-6)
    assert len(scale_rows.kernels) - before == 1


def test_eager_const_dims_must_agree():
    with pytest.raises(KernelArgumentError, match="dim K"):
        matmul(np.zeros((4, 8), "float32"), np.zeros((9, 4), "float32"))


def test_empty_and_const_outside_an_eager_kernel():
    with pytest.raises(TileScopeError, match="eager"):
        T.empty((4,), "float32")
    with pytest.raises(TileScopeError, match="eager"):
        T.const("M")


def test_factory_style_jit_still_works():
    @tilelang.jit(out_idx=[-1])
    def factory(n):
        @T.prim_func
        def inc(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(n):
                    B[i] = A[i] + 1.0

        return inc

    a = np.arange(5, dtype="float32")
    np.testing.assert_allclose(factory(5)(a), a + 1)


@tilelang.jit
def scaled_copy(A, dtype: str = "float32"):
    """TileLang's eager prelude: Python tile sizes, a chained assignment, a scope string and an
    argument check, all before T.Kernel."""
    assert dtype in ("float32", "float16"), "float32 or float16 only"
    warps = block = 2
    block_M = block * 32
    scope = "shared.dyn"
    factor = 1
    if dtype == "float16":
        factor = 2  # Python rebinds a name; TVMScript alone refused a second definition
    M = T.const("M")
    A: T.Tensor((M,), dtype)
    B = T.empty((M,), dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=warps * 32) as bx:
        S = T.alloc_shared((block_M,), dtype, scope=scope)
        for i in T.Parallel(block_M):
            S[i] = A[bx * block_M + i]
        for i in T.Parallel(block_M):
            B[bx * block_M + i] = S[i] * (block_M * factor)
    return B


def test_eager_prelude_keeps_python_values_and_checks_asserts_in_python():
    a = np.arange(192, dtype="float32")
    np.testing.assert_array_equal(scaled_copy(a), a * 64)  # block_M stayed the Python int 64
    np.testing.assert_array_equal(scaled_copy(a.astype("float16"), dtype="float16"), a * 128)
    kernel = scaled_copy.get_kernel(a)
    assert [p.shape for p in kernel.params] == [(192,), (192,)]
    with pytest.raises(AssertionError, match="float32 or float16 only") as info:
        scaled_copy(a.astype("int32"), dtype="int32")
    where = info.value.location
    assert where is not None and where.source_line.strip().startswith("assert dtype")


@tilelang.jit
def checked_rows(X):
    M = T.dynamic("M")
    N = T.const("N")
    X: T.Tensor((M, N), "float32")
    Y = T.empty((M, N), "float32")
    assert N % 2 == 0, "an even row length"  # N is a Python int by now: checked at compile time
    assert M > 0  # M is a runtime dim: the kernel's own runtime check, as before
    with T.Kernel(M, threads=32) as bx:
        for j in T.Parallel(N):
            Y[bx, j] = X[bx, j] + 1.0
    return Y


def test_eager_prelude_asserts_on_runtime_dims_stay_runtime_checks():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    np.testing.assert_array_equal(checked_rows(x), x + 1)
    assert "assert M > 0" in checked_rows.get_kernel(x).get_kernel_source()
    with pytest.raises(AssertionError, match="an even row length"):
        checked_rows(np.zeros((3, 5), "float32"))


@tilelang.jit
def _transpose_dims_one_by_one(X):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), "float32")
    Y = T.empty(N, M, dtype=X.dtype)  # the dims one by one, dtype by keyword
    Z = T.empty(X.shape, dtype="float32")
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(M, N):
            Y[j, i] = X[i, j]
            Z[i, j] = X[i, j] * 2.0
    return Y, Z


def test_empty_takes_dims_one_by_one_or_a_shape():
    x = np.arange(6 * 10, dtype="float32").reshape(6, 10)
    y, z = _transpose_dims_one_by_one(x)
    np.testing.assert_array_equal(np.asarray(y), x.T)
    np.testing.assert_array_equal(np.asarray(z), x * 2)


def test_par_compile_of_an_eager_kernel():
    # TileLang's eager kernels have par_compile (language/eager_jit): compile each config ahead;
    # a T.ptr() placeholder's tensor has no shape before a call, so that config is not compiled
    @tilelang.jit(target="cpu")
    def scale(A, factor: float = 2.0):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        B = T.empty((N,), T.float32)
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                B[i] = A[i] * factor
        return B

    compiled, skipped = scale.par_compile([{"N": 64, "factor": 3.0}, {"A": T.ptr(), "N": 8}])
    assert skipped is None
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(compiled(a)), a * 3.0)
    np.testing.assert_array_equal(np.asarray(scale(a[:8])), a[:8] * 2.0)  # compiled at the call
