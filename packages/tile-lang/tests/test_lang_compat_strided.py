"""TileLang's ``T.StridedTensor``, ``T.gemm_sp`` and ``T.float4_e2m1_unpacked``, each checked
against an independent reference (numpy, torch views, the OCP MX e2m1 value table)."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import KernelArgumentError, TileTypeError
from tile.testsupport.markers import needs_backend

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
    with pytest.raises(TileTypeError, match="2 dims but 1 strides"):
        T.StridedTensor((4, 4), (1,), "float32")


def test_strided_tensor_refuses_a_contiguous_tensor_of_other_strides():
    kernel = tilelang.compile(_strided_scale(32, 32, 80), out_idx=[1], target="cpu")
    base = RNG.standard_normal((32, 80)).astype("float32")
    np.testing.assert_allclose(kernel(base[:, 16:48]), base[:, 16:48] * 2.0 + 1.0, rtol=1e-6)
    with pytest.raises(KernelArgumentError, match=r"strides \[32, 1\]"):
        kernel(np.ascontiguousarray(base[:, 16:48]))  # after a call: no fast path skips the check


# ---------------------------------------------------------------- T.gemm_sp


def _sparse_2of4(M, K, dtype, kept=2, group=4):
    """A dense (M, K) matrix with at most ``kept`` non-zeros in each group of ``group`` along K."""
    dense = RNG.integers(-4, 5, (M, K)).astype(dtype)
    for m in range(M):
        for g in range(K // group):
            keep = RNG.choice(group, size=RNG.integers(0, kept + 1), replace=False)
            mask = np.zeros(group, bool)
            mask[keep] = True
            dense[m, g * group : (g + 1) * group][~mask] = 0
    return dense


def _compress(dense, meta_bits, kept=2, group=4):
    """numpy's compression: kept values and 4-bit position nibbles packed from the low bits."""
    M, K = dense.shape
    values = np.zeros((M, K // group * kept), dense.dtype)
    per_meta = meta_bits // 4
    meta = np.zeros((M, K // group // per_meta), np.int64)
    for m in range(M):
        for g in range(K // group):
            nz = [i for i in range(group) if dense[m, g * group + i] != 0]
            if kept == 2:
                pos = (nz + [p for p in (0, 1, 2, 3) if p not in nz])[:2] if len(nz) < 2 else nz
                pos = sorted(pos)
                nibble = pos[0] | (pos[1] << 2)
            else:
                pos = nz or [0]
                nibble = 0b0100 if pos[0] == 0 else 0b1110
            for i, p in enumerate(pos):
                values[m, g * kept + i] = dense[m, g * group + p]
            meta[m, g // per_meta] |= nibble << (4 * (g % per_meta))
    signed = {8: np.int8, 16: np.int16, 32: np.int32}[meta_bits]
    return values, meta.astype(np.uint64).astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[meta_bits]).view(
        signed
    )


def _gemm_sp_kernel(M, N, K, dtype, meta, block_K, kept=2, group=4):
    from tile.lang._src.compat_sparse import metadata_factor

    e_factor = metadata_factor(dtype, meta)

    @T.prim_func
    def gemm_sp(
        A_sparse: T.Tensor((M, K * kept // group), dtype),
        E: T.Tensor((M, K // e_factor), meta),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(1, 1, threads=128):
            A_s = T.alloc_shared((M, block_K * kept // group), dtype)
            E_s = T.alloc_shared((M, block_K // e_factor), meta)
            B_s = T.alloc_shared((block_K, N), dtype)
            C_l = T.alloc_fragment((M, N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A_sparse[0, k * block_K * kept // group], A_s)
                T.copy(E[0, k * block_K // e_factor], E_s)
                T.copy(B[k * block_K, 0], B_s)
                T.gemm_sp(A_s, E_s, B_s, C_l, transpose_A=False, transpose_E=False, transpose_B=False)
            T.copy(C_l, C[0, 0])

    return gemm_sp


@pytest.mark.parametrize(
    ("dtype", "meta", "kept", "group"),
    [("float16", "int16", 2, 4), ("float16", "int8", 2, 4), ("float32", "int32", 1, 2)],
)
def test_gemm_sp_matches_the_dense_product_of_the_decompressed_matrix(dtype, meta, kept, group):
    M, N, K = 32, 32, 128
    dense = _sparse_2of4(M, K, dtype, kept, group)
    values, metadata = _compress(dense, int(meta[3:]), kept, group)
    b = RNG.integers(-3, 4, (K, N)).astype(dtype)
    kernel = tilelang.compile(
        _gemm_sp_kernel(M, N, K, dtype, meta, 64, kept, group), out_idx=[3], target="cpu"
    )
    expected = dense.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(kernel(values, metadata, b), expected.astype("float32"))


@needs_backend("cuda")
def test_gemm_sp_on_the_cuda_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    torch = pytest.importorskip("torch")
    M, N, K = 32, 32, 128
    dense = _sparse_2of4(M, K, "float16")
    values, metadata = _compress(dense, 16)
    b = RNG.integers(-3, 4, (K, N)).astype("float16")
    target = {"kind": "cuda", "arch": "sm_80"}
    kernel = tilelang.compile(_gemm_sp_kernel(M, N, K, "float16", "int16", 64), out_idx=[3], target=target)
    out = kernel(*(torch.from_numpy(x) for x in (values, metadata, b)))
    np.testing.assert_array_equal(np.asarray(out), (dense.astype(np.float64) @ b).astype("float32"))


@T.prim_func
def _gemm_sp_k_major(
    A_sparse: T.Tensor((32, 16), "float16"),  # (K/2, M): transpose_A
    E: T.Tensor((8, 16), "int8"),  # (K/8, M): transpose_E
    B: T.Tensor((32, 64), "float16"),  # (N, K): transpose_B
    C: T.Tensor((16, 32), "float32"),
):
    with T.Kernel(1, threads=128):
        C_l = T.alloc_fragment((16, 32), "float32")
        A_s = T.alloc_shared((32, 16), "float16")
        E_s = T.alloc_shared((8, 16), "int8")
        T.copy(A_sparse, A_s)
        T.copy(E, E_s)
        T.gemm_sp(A_s, E_s, B, C_l, True, True, True, clear_accum=True)
        T.copy(C_l, C)


def test_gemm_sp_k_major_operands_and_shape_errors():
    dense = _sparse_2of4(16, 64, "float16")
    values, metadata = _compress(dense, 8)
    b = RNG.integers(-3, 4, (32, 64)).astype("float16")
    kernel = tilelang.compile(_gemm_sp_k_major, out_idx=[3], target="cpu")
    out = kernel(np.ascontiguousarray(values.T), np.ascontiguousarray(metadata.T), b)
    np.testing.assert_array_equal(out, (dense.astype(np.float64) @ b.T.astype(np.float64)).astype("float32"))
    with pytest.raises(TileTypeError, match=r"whose int16 metadata is \[32, 4\]; E is \[32, 8\]"):

        @T.prim_func
        def wrong(
            A: T.Tensor((32, 32), "float16"), E: T.Tensor((32, 8), "int16"), C: T.Tensor((32, 32), "float32")
        ):
            with T.Kernel(1, threads=128):
                C_l = T.alloc_fragment((32, 32), "float32")
                T.gemm_sp(A, E, A, C_l)
