"""TileLang's ``T.StridedTensor``, ``T.gemm_sp`` and ``T.float4_e2m1_unpacked``, each checked
against an independent reference (numpy, torch views, the OCP MX e2m1 value table)."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.lang.errors import KernelArgumentError, TileTypeError

RNG = np.random.default_rng(1919)


def _strided_scale(M, N, ld):
    @T.prim_func
    def scale(A: T.StridedTensor((M, N), (ld, 1), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 16), T.ceildiv(M, 16), threads=64) as (bx, by):
            for i, j in T.Parallel(16, 16):
                B[by * 16 + i, bx * 16 + j] = A[by * 16 + i, bx * 16 + j] * 2.0 + 1.0

    return scale


@T.prim_func
def _strided_copy_tile(
    A: T.StridedTensor((32, 32), (1, 48), "float32"),  # column-major: a transposed view
    B: T.Tensor((32, 32), "float32"),
):
    with T.Kernel(2, 2, threads=64) as (bx, by):
        S = T.alloc_shared((16, 16), "float32")
        T.copy(A[by * 16, bx * 16], S)
        T.copy(S, B[by * 16, bx * 16])


def test_strided_tensor_reads_a_column_slice_without_a_copy():
    torch = pytest.importorskip("torch")
    base = torch.from_numpy(RNG.standard_normal((32, 80)).astype("float32"))
    view = base[:, 8:40]  # strides (80, 1), offset 8: not contiguous
    assert not view.is_contiguous()
    kernel = tilelang.compile(_strided_scale(32, 32, 80), out_idx=[1], target="cpu")
    out = kernel(view)
    np.testing.assert_allclose(np.asarray(out), base.numpy()[:, 8:40] * 2.0 + 1.0, rtol=1e-6)


def test_strided_tensor_transposed_view_through_shared():
    torch = pytest.importorskip("torch")
    store = torch.from_numpy(RNG.standard_normal((32, 48)).astype("float32"))
    view = store[:, :32].t()  # element (i, j) at j * 48 + i
    kernel = tilelang.compile(_strided_copy_tile, out_idx=[1], target="cpu")
    np.testing.assert_array_equal(np.asarray(kernel(view)), store.numpy()[:, :32].T)


def test_strided_tensor_numpy_view_and_symbolic_stride():
    ld = T.dynamic("ld")
    base = RNG.standard_normal((32, 64)).astype("float32")
    kernel = tilelang.compile(_strided_scale(32, 32, ld), out_idx=[1], target="cpu")
    np.testing.assert_allclose(kernel(base[:, 5:37]), base[:, 5:37] * 2.0 + 1.0, rtol=1e-6)
    wider = RNG.standard_normal((32, 100)).astype("float32")
    np.testing.assert_allclose(kernel(wider[:, 60:92]), wider[:, 60:92] * 2.0 + 1.0, rtol=1e-6)


def test_strided_tensor_rejects_other_strides():
    kernel = tilelang.compile(_strided_scale(32, 32, 80), out_idx=[1], target="cpu")
    base = np.zeros((32, 64), "float32")
    with pytest.raises(KernelArgumentError, match=r"strides \[64, 1\].*declares \[80, 1\]"):
        kernel(base[:, :32])
    with pytest.raises(UnsupportedOnTargetError, match=r"T\.StridedTensor parameter.*A: cuda kernels"):
        tilelang.compile(_strided_scale(32, 32, 80), out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})
    with pytest.raises(TileTypeError, match="2 dims but 1 strides"):
        T.StridedTensor((4, 4), (1,), "float32")


def test_strided_tensor_refuses_a_contiguous_tensor_of_other_strides():
    kernel = tilelang.compile(_strided_scale(32, 32, 80), out_idx=[1], target="cpu")
    base = RNG.standard_normal((32, 80)).astype("float32")
    np.testing.assert_allclose(kernel(base[:, 16:48]), base[:, 16:48] * 2.0 + 1.0, rtol=1e-6)
    with pytest.raises(KernelArgumentError, match=r"strides \[32, 1\]"):
        kernel(np.ascontiguousarray(base[:, 16:48]))  # after a call: no fast path skips the check
