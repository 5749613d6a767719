"""Sub-byte tensor parameters (``T.float4_e2m1fn``) given their packed storage, on the
CUDA emulator (TileLang's testing/python/language/test_tilelang_language_subtype.py rule).

A ``uint8`` tensor of shape ``(m, k)`` holds a logical ``(m, 2k)`` fp4 tensor, two codes per
byte (the even element in the low nibble, as torch's ``float4_e2m1fn_x2``); symbolic dims bind
from the logical shape. Element loads, stores and casts work on the bytes
(``tile.ir.gpu.subbyte_accesses``), checked against numpy and ml_dtypes' ``float4_e2m1fn``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import UnsupportedOnTargetError
from tile.lang.errors import KernelArgumentError
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]
CUDA = {"kind": "cuda", "arch": "sm_90a"}
ROCM = {"kind": "hip", "mcpu": "gfx90a"}


def logical_width_kernel(dtype: str) -> Any:
    """``W[j] = j`` for ``j < n``, where ``n`` is the logical last dim of the packed ``X``."""
    m, n = T.symbolic("m"), T.symbolic("n")

    @T.prim_func
    def main(X: T.Tensor((m, n), dtype), W: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32):
            for j in T.Parallel(n):
                W[j] = j

    return main


def test_packed_storage_binds_the_logical_shape() -> None:
    kernel = tilelang.compile(logical_width_kernel("float4_e2m1fn"), out_idx=[-1], target=CUDA)
    packed = np.zeros((3, 5), np.uint8)  # 3 rows of 10 codes
    np.testing.assert_array_equal(kernel(packed), np.arange(10, dtype=np.int32))


def test_wrong_storage_is_a_typed_error() -> None:
    kernel = tilelang.compile(logical_width_kernel("float4_e2m1fn"), out_idx=[-1], target=CUDA)
    with pytest.raises(KernelArgumentError, match="codes per byte"):
        kernel(np.zeros((3, 5), np.float32))


def test_fixed_logical_shape_checks_the_packed_last_dim() -> None:
    @T.prim_func
    def main(X: T.Tensor((4, 16), "float4_e2m1fn")):
        with T.Kernel(1, threads=32):
            pass

    kernel = tilelang.compile(main, target=CUDA)
    kernel(np.zeros((4, 8), np.uint8))  # 16 codes per row
    with pytest.raises(KernelArgumentError, match="shape"):
        kernel(np.zeros((4, 16), np.uint8))  # 32 codes per row


def pack(codes: np.ndarray) -> np.ndarray:
    """numpy's packing of 4-bit codes along the last dim: two per byte, the even one low."""
    codes = codes.astype(np.uint8) & 15
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


k = T.symbolic("k")


@T.prim_func
def codes_kernel(
    Q: T.Tensor((4, 32), "float4_e2m1fn"),
    X: T.Tensor((4, 32), "float32"),
    N: T.Tensor((4, 32), "int4"),
    U: T.Tensor((k, 8), "uint4"),  # k: only uint4 tensors declare it (TVM binds no uint4 shape)
    V: T.Tensor((k, 8), "uint4"),
    D: T.Tensor((4, 32), "float32"),
    E: T.Tensor((4, 32), "float4_e2m1fn"),
    J: T.Tensor((4, 32), "int32"),
):
    with T.Kernel(4, threads=32) as b:
        for j in T.Parallel(32):
            D[b, j] = T.cast(Q[b, j], "float32")  # decode
            E[b, j] = T.cast(X[b, j], "float4_e2m1fn")  # encode: 32 threads, two per byte
            J[b, j] = T.cast(N[b, j], "int32")  # sign-extended
        for r in T.serial(k):
            if b == 0:
                for j in T.Parallel(8):
                    V[r, 7 - j] = U[r, j]  # code to code, reversed: nibbles change bytes


@pytest.mark.parametrize("target", [CUDA, ROCM], ids=["cuda-sm_90a", "rocm-gfx90a"])
def test_fp4_int4_and_uint4_elements_load_store_and_cast(
    target: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if target is ROCM:  # the same pass and device header (tile_gpu.h); nvcc checks the CUDA one
        pytest.importorskip("tile.backends.rocm")
        monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    kernel = tilelang.compile(codes_kernel, out_idx=[4, 5, 6, 7], target=target)
    rng = np.random.default_rng(4)
    q = rng.integers(0, 256, (4, 16), dtype=np.uint8)
    x = (rng.standard_normal((4, 32)) * 3).astype(np.float32)
    x[0, :9] = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.0, 100.0]  # ties to even; -0; saturation
    i = rng.integers(-8, 8, (4, 32))
    u = rng.integers(0, 16, (3, 8))
    v, d, e, j = kernel(q, x, pack(i), pack(u))
    codes = np.stack([q & 15, q >> 4], -1).reshape(4, 32)  # low nibble first
    np.testing.assert_array_equal(d, codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32))
    np.testing.assert_array_equal(e, pack(x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)))
    np.testing.assert_array_equal(j, i)
    np.testing.assert_array_equal(v, pack(u[:, ::-1]))
    assert v.shape == (3, 4) and v.dtype == np.uint8  # an output is its packed storage


def test_a_code_in_arithmetic_is_refused_at_its_line_and_a_tile_of_codes_holds_bytes(monkeypatch) -> None:
    @T.prim_func
    def arithmetic(X: T.Tensor((4, 16), "float4_e2m1fn"), Y: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=32):
            for j in T.serial(16):
                Y[0, j] = X[1, j] + X[2, j]

    with pytest.raises(UnsupportedOnTargetError, match="float4_e2m1fn") as caught:
        tilelang.compile(arithmetic, target=CUDA)
    assert "Y[0, j] = X[1, j] + X[2, j]" in str(caught.value)
    assert "T.cast(x, 'float32')" in str(caught.value)  # the hint

    # a tile of codes was refused ("a tile of them is not supported"); since session 26 it
    # holds the codes' bytes (tile.ir.transform.pack_subbyte_tiles), so a copy through it
    # moves the packed bytes unchanged
    @T.prim_func
    def shared_codes(X: T.Tensor((4, 16), "float4_e2m1fn"), Y: T.Tensor((4, 16), "float4_e2m1fn")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4, 16), "float4_e2m1fn")
            T.copy(X, S)
            T.copy(S, Y)

    monkeypatch.setenv("TILE_DEVICE", "emu")
    packed = np.random.default_rng(5).integers(0, 256, (4, 8)).astype(np.uint8)
    out = tilelang.compile(shared_codes, out_idx=[1], target=CUDA)(packed)
    np.testing.assert_array_equal(np.asarray(out).view(np.uint8), packed)
