"""Eager-kernel forms TileLang programs write: a macro that opens the kernel and returns its
output, a body that only declares its tensors (in the body or the signature), T.const strides,
get_tir on T.Tensor prototypes, and `if` on a Python value that is not a bool."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T


@T.macro
def doubled(A):
    M, N = A.shape  # Python values (the macro opens the kernel below)
    B = T.empty(M, N, dtype=A.dtype)
    with T.Kernel(T.ceildiv(M, 8), threads=32) as bx:
        for i, j in T.Parallel(8, N):
            if bx * 8 + i < M:
                B[bx * 8 + i, j] = A[bx * 8 + i, j] * 2.0
    return B


@tilelang.jit
def doubled_const(A):
    M, N = T.const("M, N")
    A: T.Tensor[[M, N], T.float32]
    return doubled(A)


@tilelang.jit
def doubled_fixed(A: T.Tensor[[12, 4], T.float32]):
    return doubled(A)


@tilelang.jit
def doubled_dynamic(A):
    M = T.dynamic("M")
    N = T.const("N")
    A: T.Tensor[[M, N], T.float32]
    return doubled(A)


@pytest.mark.parametrize("kernel", [doubled_const, doubled_fixed, doubled_dynamic])
def test_a_macro_that_opens_the_kernel_returns_its_output(kernel):
    a = np.arange(48, dtype=np.float32).reshape(12, 4)
    np.testing.assert_array_equal(kernel(a), 2 * a)


def test_a_macro_called_inside_a_kernel_still_returns_an_expression():
    @T.macro
    def cube(x):
        return x * x * x

    @tilelang.jit
    def cubes(A):
        N = T.const("N")
        A: T.Tensor((N,), "float32")
        C = T.empty((N,), "float32")
        with T.Kernel(1, threads=32):
            for i in T.Parallel(N):
                C[i] = cube(A[i]) + 1.0
        return C

    a = np.linspace(-2, 2, 16, dtype=np.float32)
    np.testing.assert_allclose(cubes(a), a**3 + 1, rtol=1e-6)


@tilelang.jit
def copy_into(A: T.Tensor[[16, 8], T.float32], B: T.Tensor[[16, 8], T.float32]):
    copy_rows(A, B)


@T.macro
def copy_rows(A, B):
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, 4), threads=32) as bx:
        T.copy(A[bx * 4 : bx * 4 + 4, 0:N], B[bx * 4 : bx * 4 + 4, 0:N])


def test_a_body_that_only_types_its_parameters_is_an_eager_kernel():
    a = np.random.default_rng(0).random((16, 8), dtype=np.float32)
    b = np.zeros_like(a)
    copy_into(a, b)
    np.testing.assert_array_equal(b, a)
    func = copy_into.get_tir(T.Tensor((16, 8), "float32"), T.Tensor((16, 8), "float32"))
    assert [tuple(int(d) for d in p.shape) for p in func.params] == [(16, 8), (16, 8)]


def test_get_tir_specializes_const_dims_to_tensor_prototypes():
    func = doubled_const.get_tir(T.Tensor((24, 3), "float32"))
    shapes = [tuple(int(d) for d in p.shape) for p in func.params]
    assert shapes == [(24, 3), (24, 3)]  # A, then the returned B


@tilelang.jit
def strided_copy(A):
    M, N, SM, SN = T.const("M, N, SM, SN")
    A: T.StridedTensor[[M, N], [SM, SN], T.float32]
    B = T.empty((M, N), T.float32)
    with T.Kernel(1, threads=32):
        for i, j in T.Parallel(M, N):
            B[i, j] = A[i, j]
    return B


def test_const_strides_are_bound_from_the_tensor_and_keyed_per_strides():
    base = np.arange(4 * 3 * 6 * 2, dtype=np.float32).reshape(4, 3, 6, 2)
    every_third = base[:, 0, :, 0]  # element strides (36, 2)
    np.testing.assert_array_equal(strided_copy(every_third), every_third)
    other = base[:, 1, :, 1]  # same shape and strides: the same kernel
    np.testing.assert_array_equal(strided_copy(other), other)
    assert len(strided_copy.kernels) == 1
    dense = np.ascontiguousarray(every_third)  # strides (6, 1): another kernel
    np.testing.assert_array_equal(strided_copy(dense), dense)
    assert len(strided_copy.kernels) == 2


def _no_gpu():
    return None


@tilelang.jit
def maybe_scaled(A):
    N = T.const("N")
    A: T.Tensor((N,), "float32")
    B = T.empty((N,), "float32")
    on_hopper = _no_gpu()  # None: a Python value, falsy
    scale = 3.0 if on_hopper else 2.0
    with T.Kernel(1, threads=32):
        for i in T.Parallel(N):
            if on_hopper:
                B[i] = A[i] * 10.0
            else:
                B[i] = A[i] * scale
    return B


def test_if_on_none_takes_the_branch_python_would():
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(maybe_scaled(a), 2 * a)


def test_python_type_annotations_on_body_names_are_plain_assignments():
    # TileLang's DSA indexer backward: `dtype: str = BF16` in the body (TVMScript took the
    # annotation for a TIR variable type: "Annotation should resolve to Var")
    @tilelang.jit
    def scaled(X, scale: float = 2.0):
        n = T.const("n")
        X: T.Tensor((n,), T.float32)
        Y = T.empty((n,), T.float32)
        dtype: str = T.float32
        factor: float = scale * 1.5
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                Y[i] = X[i] * T.cast(factor, dtype)
        return Y

    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(scaled(x), x * 3.0)

    @T.prim_func
    def plain(A: T.Tensor((4,), "int32")):
        width: int = 3
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                A[i] = i * width

    a = np.zeros(4, np.int32)
    tilelang.compile(plain, target="cpu")(a)
    np.testing.assert_array_equal(a, [0, 3, 6, 9])
