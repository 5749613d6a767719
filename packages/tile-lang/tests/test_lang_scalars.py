"""T.alloc_var, T.macro, Python while/if/else and T.serial(start, stop, step) in kernels."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang import TileScopeError


@T.macro
def scaled_copy(dst, src, row, n, factor):
    for j in T.Parallel(n):
        dst[row, j] = src[row, j] * factor


def control_flow_kernel(M, N):
    @T.prim_func
    def kernel(
        A: T.Tensor((M, N), "float32"),
        B: T.Tensor((M, N), "float32"),
        S: T.Tensor((M,), "float32"),
        C: T.Tensor((M,), "int32"),
    ):
        with T.Kernel(M, threads=32) as row:
            total = T.alloc_var("float32", init=0.0)
            steps = T.alloc_var(T.int32)
            steps = 0
            for j in T.serial(1, N, 2):  # odd columns only
                total += A[row, j]
            while steps * steps < row:
                steps = steps + 1
            if total > 0.0:
                scaled_copy(B, A, row, N, 2.0)
            else:
                scaled_copy(B, A, row, N, -1.0)
            S[row] = total
            C[row] = steps

    return kernel


def test_alloc_var_macro_while_if_serial_step():
    M, N = 9, 7
    kernel = tilelang.compile(control_flow_kernel(M, N), out_idx=[1, 2, 3], target="cpu")
    a = np.random.default_rng(3).standard_normal((M, N)).astype("float32")
    b, s, c = kernel(a)
    odd_sum = a[:, 1::2].sum(axis=1)
    np.testing.assert_allclose(s, odd_sum, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(c, [int(np.ceil(np.sqrt(r))) for r in range(M)])
    expected = np.where(odd_sum[:, None] > 0, 2.0 * a, -a)
    np.testing.assert_allclose(b, expected, rtol=1e-6)


def test_alloc_var_needs_a_kernel():
    with pytest.raises(TileScopeError, match=r"T\.alloc_var"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            x = T.alloc_var("float32")  # noqa: F841
            for i in T.Parallel(4):
                A[i] = 0.0


k = 7  # module globals named like a macro's parameter and a macro's local below
scale = 3.0


@T.macro
def _add_k(buf, k):
    for i in T.Parallel(4):
        buf[i] = buf[i] + k


@T.macro
def _scaled(buf, factor):
    scale = T.float32(factor) * 2
    for i in T.Parallel(4):
        buf[i] = buf[i] * scale


def test_a_macros_own_names_shadow_module_globals():
    # Python's rule: a parameter or an assigned local of the macro hides the module's name
    # (TVM's macro refused both: "Variable k already defined in current scope")
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            frag = T.alloc_fragment((4,), "float32")
            T.copy(A, frag)
            _add_k(frag, 2)
            _scaled(frag, 5)
            T.copy(frag, A)

    a = np.ones(4, "float32")
    tilelang.compile(main, target="cpu")(a)
    np.testing.assert_array_equal(a, np.full(4, (1 + 2) * 10, "float32"))
