"""Sub-byte tensor parameters (``T.float4_e2m1fn``) given their packed storage, on the
CUDA emulator (TileLang's testing/python/language/test_tilelang_language_subtype.py rule).

A ``uint8`` tensor of shape ``(m, k)`` holds a logical ``(m, 2k)`` fp4 tensor, two codes per
byte; symbolic dims bind from the logical shape. The kernel may pass such a tensor along; an
element access is a typed refusal (CUDA has no fp4 loads in tile).
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


def test_element_access_is_refused_at_its_line() -> None:
    @T.prim_func
    def main(X: T.Tensor((4, 16), "float4_e2m1fn"), Y: T.Tensor((4, 16), "float4_e2m1fn")):
        with T.Kernel(1, threads=32):
            for k in T.serial(16):
                Y[0, k] = X[1, k]

    with pytest.raises(UnsupportedOnTargetError, match="float4_e2m1fn") as caught:
        tilelang.compile(main, target=CUDA)
    assert "Y[0, k] = X[1, k]" in str(caught.value)
    assert "2 codes per byte" in str(caught.value)  # the hint: declare the packed storage
