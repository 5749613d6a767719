"""AMD MFMA fragments against oracle tables written here from AMD's documentation.

Source: AMD Matrix Instruction Calculator (github.com/ROCm/amd_matrix_instruction_calculator),
``--detail-instruction`` "Matrix element to register mapping with no modifiers" for CDNA3
``v_mfma_f32_16x16x16_f16`` / ``v_mfma_f32_32x32x8_f16`` (CDNA2 ``..._16x16x16f16`` /
``..._32x32x8f16`` print the same mapping). Oracles map ``(lane, element) -> coordinate``.
"""

from __future__ import annotations

import pytest
from _tables import fragment_table, oracle_table

from tile.layout import LayoutError
from tile.layout import hardware as hw
from tile.testsupport import isa_tables as ISA


# 16x16x16: "A[i][k]: lane = i + 16 * (k / 4), item = k % 4" -> lane l holds A[l % 16][4 * (l / 16) + v].
def amd_16x16x16_a(lane: int, v: int) -> tuple[int, int]:
    return lane % 16, 4 * (lane // 16) + v


# "B[k][j]: lane = j + 16 * (k / 4), item = k % 4" -> lane l holds B[4 * (l / 16) + v][l % 16].
def amd_16x16x16_b(lane: int, v: int) -> tuple[int, int]:
    return 4 * (lane // 16) + v, lane % 16


# "D[i][j]: lane = j + 16 * (i / 4), GPR = i % 4" -> lane l, VGPR g holds D[4 * (l / 16) + g][l % 16].
def amd_16x16_d(lane: int, g: int) -> tuple[int, int]:
    return 4 * (lane // 16) + g, lane % 16


# 32x32x8: "A[i][k]: lane = i + 32 * (k / 4), item = k % 4".
def amd_32x32x8_a(lane: int, v: int) -> tuple[int, int]:
    return lane % 32, 4 * (lane // 32) + v


# "B[k][j]: lane = j + 32 * (k / 4), item = k % 4".
def amd_32x32x8_b(lane: int, v: int) -> tuple[int, int]:
    return 4 * (lane // 32) + v, lane % 32


# "D[i][j]: lane = j + 32 * ((i / 4) % 2), GPR = 4 * (i / 8) + i % 4": VGPR g, lane l holds
# D[8 * (g / 4) + 4 * (l / 32) + g % 4][l % 32].
def amd_32x32_d(lane: int, g: int) -> tuple[int, int]:
    return 8 * (g // 4) + 4 * (lane // 32) + g % 4, lane % 32


CASES = [
    ("16x16x16 f16 A", lambda: hw.mfma_16x16x16_a("float16"), amd_16x16x16_a, 4),
    ("16x16x16 bf16 A", lambda: hw.mfma_16x16x16_a("bfloat16"), amd_16x16x16_a, 4),
    ("16x16x16 B", hw.mfma_16x16x16_b, amd_16x16x16_b, 4),
    ("16x16 D", hw.mfma_16x16x16_d, amd_16x16_d, 4),
    ("32x32x8 A", hw.mfma_32x32x8_a, amd_32x32x8_a, 4),
    ("32x32x8 B", hw.mfma_32x32x8_b, amd_32x32x8_b, 4),
    ("32x32 D", hw.mfma_32x32x8_d, amd_32x32_d, 16),
]


@pytest.mark.parametrize(("name", "make", "oracle", "elems"), CASES, ids=[c[0] for c in CASES])
def test_fragment_matches_amd_table(name, make, oracle, elems) -> None:
    frag = make()
    assert int(frag.get_thread_size()) == 64
    assert frag.locals_per_thread() == elems
    assert fragment_table(frag) == oracle_table(oracle, 64, elems)


def test_a_deliberately_wrong_table_is_detected() -> None:
    # Forgetting the 4-row blocking of the 32x32 accumulator (row = g + 16 * (lane / 32)).
    def wrong(lane: int, g: int) -> tuple[int, int]:
        return g + 16 * (lane // 32), lane % 32

    assert fragment_table(hw.mfma_32x32x8_d()) != oracle_table(wrong, 64, 16)


def test_block_fragment_of_four_waves() -> None:
    frag = hw.make_mfma_block_fragment(64, 64, 2, 2)
    assert int(frag.get_thread_size()) == 256 and frag.locals_per_thread() == 16
    assert (frag.ownership_counts() == 1).all()
    # (16, 33): wave (0, 1) = wave 1 (threads 64..127); inside its 32x32 tile, element (16, 1)
    # is (0, 1) of the 16x16 D tile (1, 0): lane = j + 16 * (i // 4) = 1.
    assert frag.owners((16, 33)) == [64 + 1]
    with pytest.raises(LayoutError):
        hw.make_mfma_block_fragment(48, 64, 2, 2)
    with pytest.raises(LayoutError):
        hw.mfma_16x16x16_a("int8")




def test_cross_check_with_shared_isa_tables() -> None:
    assert ISA is not None
    pairs = [
        (hw.mfma_16x16x16_a(), ISA.mfma_16x16x16_f16_a, 4),
        (hw.mfma_16x16x16_b(), ISA.mfma_16x16x16_f16_b, 4),
        (hw.mfma_16x16x16_d(), ISA.mfma_16x16x16_f32_d, 4),
        (hw.mfma_32x32x8_a(), ISA.mfma_32x32x8_f16_a, 4),
        (hw.mfma_32x32x8_b(), ISA.mfma_32x32x8_f16_b, 4),
        (hw.mfma_32x32x8_d(), ISA.mfma_32x32_f32_d, 16),
    ]
    for frag, fn, elems in pairs:
        assert fragment_table(frag) == oracle_table(fn, 64, elems)


# v_mfma_i32_16x16x32_i8 (CDNA3): 8 int8 per lane, lane l holds A[l % 16][8 * (l / 16) + v] and
# B[8 * (l / 16) + v][l % 16]. Written from IREE's table of AMD intrinsics (iree-org/iree,
# compiler/src/iree/compiler/Codegen/Dialect/GPU/IR/IREEGPUAttrs.cpp, getSingleSubgroupLayout:
# MFMA_I32_16x16x32_I8 -> mfmaLhs16xK(32) = thread {16, 4}, strides {1, 16}, element {1, 8}).
def amd_16x16x32_a(lane: int, v: int) -> tuple[int, int]:
    return lane % 16, 8 * (lane // 16) + v


def amd_16x16x32_b(lane: int, v: int) -> tuple[int, int]:
    return 8 * (lane // 16) + v, lane % 16


# v_mfma_i32_32x32x16_i8 (CDNA3): mfmaLhs32xK(16) = thread {32, 2}, strides {1, 32}, element {1, 8}.
def amd_32x32x16_a(lane: int, v: int) -> tuple[int, int]:
    return lane % 32, 8 * (lane // 32) + v


GENERAL_CASES = [
    # The shape-generic builder reproduces the f16 tables (v_mfma_i32_16x16x16i8 and
    # v_mfma_i32_32x32x8i8 on CDNA2 share them: 4 bytes per lane in the same places).
    ("16x16x16 A", lambda: hw.mfma_operand("A", 16, 16), amd_16x16x16_a, 4),
    ("16x16x16 B", lambda: hw.mfma_operand("B", 16, 16), amd_16x16x16_b, 4),
    ("32x32x8 A", lambda: hw.mfma_operand("A", 32, 8), amd_32x32x8_a, 4),
    ("32x32x8 B", lambda: hw.mfma_operand("B", 32, 8), amd_32x32x8_b, 4),
    ("16x16x32 A", lambda: hw.mfma_operand("A", 16, 32), amd_16x16x32_a, 8),
    ("16x16x32 B", lambda: hw.mfma_operand("B", 16, 32), amd_16x16x32_b, 8),
    ("32x32x16 A", lambda: hw.mfma_operand("A", 32, 16), amd_32x32x16_a, 8),
    ("16x16 D", lambda: hw.mfma_d(16), amd_16x16_d, 4),
    ("32x32 D", lambda: hw.mfma_d(32), amd_32x32_d, 16),
]


@pytest.mark.parametrize(
    ("name", "make", "oracle", "elems"), GENERAL_CASES, ids=[c[0] for c in GENERAL_CASES]
)
def test_shape_generic_mfma_fragments_match_amd_tables(name, make, oracle, elems) -> None:
    frag = make()
    assert frag.locals_per_thread() == elems
    assert fragment_table(frag) == oracle_table(oracle, 64, elems)


def test_block_fragment_of_32x32_tiles() -> None:
    frag = hw.make_mfma_block_fragment(128, 64, 2, 2, tile=32)
    assert int(frag.get_thread_size()) == 256 and frag.locals_per_thread() == 32
    assert (frag.ownership_counts() == 1).all()
    # (72, 33): wave (1, 1) = threads 192..255; in its 64x32 part, (8, 1) of the upper 32x32 tile:
    # lane = j + 32 * ((i // 4) % 2) = 1, VGPR 4 * (i // 8) + i % 4 = 4.
    assert frag.owners((72, 33)) == [192 + 1]
    with pytest.raises(LayoutError):
        hw.make_mfma_block_fragment(64, 48, 2, 2, tile=32)
    with pytest.raises(LayoutError):
        hw.mfma_operand("A", 16, 8)
