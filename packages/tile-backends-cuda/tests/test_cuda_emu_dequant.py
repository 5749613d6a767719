"""``tile.ops.dequant_matmul``'s CUDA lowering on sm_80, run under the CPU emulator (TILE_DEVICE=emu).

Regression (issue 21): both kernels read per-row fragments (the group ``scale`` and ``zeros``
as ``(block_N, 1)`` tiles indexed ``[i, 0]``, the GEMV's activation slots ``a_slots[slot, b]``)
with a constant index inside a ``T.Parallel`` nest. Layout inference leaves such an access
unconstrained, so those fragments kept a binding of their own and each thread read another
row's scale (or no value at all): the GEMM came out all NaN, the GEMV 70-80% wrong. The
kernels now index only with loop variables (1-D ``scale[i]``/``zeros[i]``) and stage the
activations in shared memory.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.ops as ops
from tile.ops._src.quant import BITS
from tile.testsupport.markers import needs_host_cxx

pytestmark = [needs_host_cxx, pytest.mark.emu]
SM80 = '{"kind": "cuda", "arch": "sm_80"}'


@pytest.mark.parametrize(
    "fmt,m,zeros",
    [("int4", 1, True), ("nf4", 1, False), ("int4", 5, True), ("fp4", 16, False)],  # GEMV; GEMM
)
def test_dequant_matmul_matches_numpy(fmt, m, zeros):
    # three groups along K (the pipelined loop re-stages a_slots, scale and zeros), and an N
    # that is no multiple of the 64-row tile
    n, k, group = 72, 192, 64
    rng = np.random.default_rng(21)
    packed = ops.pack_codes(rng.integers(0, 1 << BITS[fmt], size=(n, k)), fmt)
    a = rng.standard_normal((m, k)).astype(np.float16)
    scale = (rng.random((n, k // group)) + 0.5).astype(np.float16)
    zero = rng.integers(-2, 3, size=(n, k // group)).astype(np.float16) if zeros else None
    got = ops.dequant_matmul(a, packed, scale, zero, fmt, group, target=SM80)
    ref = a.astype(np.float64) @ ops.dequantize_reference(packed, fmt, scale, zero, group).T
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=1e-2, atol=2e-3 * np.abs(ref).max())
