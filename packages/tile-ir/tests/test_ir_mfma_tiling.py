"""``layout_rules.mfma_tiling``: the one MFMA choice both the accumulator layout and a wave64
backend's gemm lowering read (no device, a capabilities row written here)."""

import pytest

from tile.ir.backend import Capabilities, MmaInstruction
from tile.ir.ops.layout_rules import gemm_fragments, mfma_tiling
from tile.layout.hardware import make_mfma_block_fragment

F16 = (MmaInstruction(16, 16, 16, "float16", "float32"), MmaInstruction(32, 32, 8, "float16", "float32"))
I8_CDNA3 = (MmaInstruction(16, 16, 32, "int8", "int32"), MmaInstruction(32, 32, 16, "int8", "int32"))
WAVE64 = Capabilities(
    64, 1024, 65536, frozenset({"float16", "int8", "float32", "int32"}), 128, False,
    mma_shapes=((16, 16, 16), (32, 32, 8)), mma_instructions=F16 + I8_CDNA3,
)  # fmt: skip


def _shape(t):
    return None if t is None else (t.instruction.m, t.instruction.k, t.waves_m, t.waves_n)


@pytest.mark.parametrize(
    ("m", "n", "k", "threads", "dtype", "policy", "want"),
    [
        (128, 128, 32, 256, "float16", 0, (32, 8, 2, 2)),  # 64x64 per wave: 32x32 tiles
        (32, 48, 32, 64, "float16", 0, (16, 16, 1, 1)),  # 48 columns: no 32x32 split
        (64, 64, 32, 256, "float16", 1, (16, 16, 4, 1)),  # FullRow: 16 rows per wave
        (64, 64, 8, 128, "float16", 0, (32, 8, 1, 2)),  # K=8: only the 32x32x8 divides it
        (64, 64, 16, 128, "int8", 0, (32, 16, 1, 2)),
        (32, 48, 32, 64, "int8", 0, (16, 32, 1, 1)),
        (32, 48, 16, 64, "int8", 0, None),  # K=16 fits no CDNA3 int8 MFMA over 16x16 tiles
        (64, 64, 32, 128, "float32", 0, None),  # no fp32 MFMA listed
    ],
)
def test_mfma_tiling_prefers_32x32_where_the_waves_split(m, n, k, threads, dtype, policy, want) -> None:
    assert _shape(mfma_tiling(m, n, k, threads, WAVE64, dtype, policy)) == want


def test_accumulator_layout_follows_the_tiling() -> None:
    c, a, b = gemm_fragments(128, 128, 256, WAVE64, "float16", 32)
    assert a is not None and b is not None
    assert c.is_equal(make_mfma_block_fragment(128, 128, 2, 2, tile=32))
    # No MFMA for fp32: the 16x16 D layout (the per-thread fallback computes any layout).
    c32, a32, b32 = gemm_fragments(128, 128, 256, WAVE64, "float32", 32)
    assert a32 is None and b32 is None
    assert c32.is_equal(make_mfma_block_fragment(128, 128, 2, 2))
