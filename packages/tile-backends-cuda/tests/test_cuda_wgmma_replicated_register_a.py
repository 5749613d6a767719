"""wgmma with A in registers when two warpgroups split N (``policy=FullCol`` on 256 threads, M =
64): both warpgroups need all 64 rows of A, so the fragment holds each element twice (one copy
per warpgroup, ``layout_rules.warpgroup_a_fragment``). The check that A sits in wgmma register
order looked at the first copy only and refused the gemm ("needs acc_s_cast's registers in wgmma
A order": TileLang's examples/deepseek_mla/example_mla_decode_persistent.py, whose P @ V reads
the softmax tile this way); each warpgroup now reads its own copy. Results against numpy on the
CPU emulator (TILE_DEVICE=emu).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]

H, BN, D = 64, 64, 128


@T.prim_func
def _pv(P: T.Tensor((H, BN), "float16"), V: T.Tensor((BN, D), "float16"), Out: T.Tensor((H, D), "float32")):
    with T.Kernel(1, threads=256):
        p_regs = T.alloc_fragment((H, BN), "float16")
        acc = T.alloc_fragment((H, D), "float32")
        P_s, V_s = T.alloc_shared((H, BN), "float16"), T.alloc_shared((BN, D), "float16")
        T.copy(P, P_s)
        T.copy(V, V_s)
        T.copy(P_s, p_regs)
        T.clear(acc)
        T.gemm(p_regs, V_s, acc, policy=T.GemmWarpPolicy.FullCol)
        T.copy(acc, Out)


def test_two_warpgroups_read_their_own_copy_of_a_register_a(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_pv, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    assert "tile_wgmma_m64n64k16_rs_f16_f32" in kernel.get_kernel_source()
    rng = np.random.default_rng(5)
    p = rng.standard_normal((H, BN)).astype("float16")
    v = rng.standard_normal((BN, D)).astype("float16")
    expected = p.astype(np.float64) @ v.astype(np.float64)
    np.testing.assert_allclose(kernel(p, v), expected, rtol=1e-3, atol=1e-3)
