"""A symbolic dim that appears only inside a shape expression (TileLang's
`A: T.Tensor((n * 4,), dtype)`, testing/python/language annot tests) is solved from the tensor's
size at the call, in prim_func and eager kernels, and a size no whole n gives is refused."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_backend


def _fill_with_n(extent, target="cpu"):
    """A kernel that writes n into every element of A, whose shape is extent(n)."""
    n = T.symbolic("n")

    @T.prim_func
    def kernel(A: T.Tensor((extent(n),), T.int32)):
        with T.Kernel(1) as _:
            for i in range(extent(n)):
                A[i] = n

    return tilelang.compile(kernel, target=target)


@pytest.mark.parametrize(
    ("extent", "size", "n"),
    [
        (lambda n: n * 4, 16, 4),
        (lambda n: n + 1, 16, 15),
        (lambda n: n * 3 + 1, 16, 5),
        (lambda n: 2 * (n - 1), 8, 5),
    ],
)
def test_n_is_solved_from_the_size(extent, size, n):
    a = np.full(size, -1, np.int32)
    _fill_with_n(extent)(a)
    np.testing.assert_array_equal(a, np.full(size, n, np.int32))


def test_a_size_no_whole_n_gives_is_refused_naming_the_dim():
    kernel = _fill_with_n(lambda n: n * 4)
    with pytest.raises(ValueError, match=r"dim 0 of A must be n \* 4"):
        kernel(np.zeros(18, np.int32))


def test_other_tensors_shapes_follow_the_solved_dim():
    n = T.symbolic("n")

    @T.prim_func
    def pick(A: T.Tensor((n * 4,), T.int32), B: T.Tensor((n * 2 + 1,), T.int32)):
        with T.Kernel(1) as _:
            for i in range(n):
                B[i] = A[i * 4] + n
            B[n * 2] = -1

    kernel = tilelang.compile(pick, out_idx=[1], target="cpu")
    a = np.arange(20, dtype=np.int32)
    b = kernel(a)  # the output's shape comes from n = 5
    assert b.shape == (11,)
    np.testing.assert_array_equal(b[:5], a[::4] + 5)
    assert b[10] == -1


@tilelang.jit
def pair_sums(A):
    n = T.dynamic("n")
    A: T.Tensor((n * 2,), "float32")
    B = T.empty((n,), "float32")
    with T.Kernel(1, threads=1):
        for i in T.serial(n):
            B[i] = A[2 * i] + A[2 * i + 1]
    return B


def test_an_eager_kernel_sizes_its_output_from_the_solved_dim():
    for size in (10, 6):
        a = np.arange(size, dtype=np.float32)
        np.testing.assert_array_equal(pair_sums(a), a[0::2] + a[1::2])
    assert len(pair_sums.kernels) == 1  # n stays symbolic: one kernel for both sizes


@pytest.mark.parametrize(
    "arch", [pytest.param(a, marks=needs_backend("cuda")) for a in ("sm_80", "sm_90a")]
)
def test_on_cuda_targets(monkeypatch, arch):
    # the kernel's check of the solved n is an assertion statement in the device code, which the
    # barrier planner's walk of other statements stopped at (TileLang's annot tests: "module
    # 'tvm.ir' has no attribute 'PrimExpr'")
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.full(16, -1, np.int32)
    _fill_with_n(lambda n: n * 4, {"kind": "cuda", "arch": arch})(a)
    np.testing.assert_array_equal(a, np.full(16, 4, np.int32))
