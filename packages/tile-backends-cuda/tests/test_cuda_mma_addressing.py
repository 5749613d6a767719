"""ldmatrix row addresses of the gemm lowering, checked against the PTX reference tables.

For every operand storage the lowering reads with ldmatrix, the lane addresses of
``ldmatrix_plan`` are fed to the reference ldmatrix (``isa_tables.ldmatrix_simulate``,
an independent model of the PTX text); the registers that come back must be the mma
fragment in PTX element order, i.e. tile-layout's ``mma_fragment`` local order. The
same addresses, mapped through the swizzled shared layout ``infer_layout`` gives the
operand, must touch every bank once per 8x8 matrix.
"""

from __future__ import annotations

import pytest

from tile.backends.cuda._src.gemm import LdmatrixPlan, MmaKind, ldmatrix_plan, mma_kind
from tile.layout import make_swizzled_layout
from tile.layout.hardware import mma_fragment
from tile.testsupport import isa_tables as isa

F16 = mma_kind("float16", "float32")
S8 = mma_kind("int8", "int32")
TF32 = mma_kind("float32", "float32")


def _frag_table(operand: str, dtype: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(lane, element) -> (row, col) of tile-layout's mma fragment."""
    frag = mma_fragment(operand, dtype)
    return {(t, loc[0]): tuple(c) for c, _r, t, loc in frag.enumerate_threads()}  # type: ignore[misc]


def _simulate(
    kind: MmaKind, operand: str, k_contiguous: bool, tiles: int, plan: LdmatrixPlan | None = None
) -> dict[tuple[int, int], tuple[int, int]]:
    """(lane, element) -> (mn, k) of the tile the lowering's ldmatrix delivers.

    Storage is a dense [rows][cols] array of element ids; each 16-bit ldmatrix half
    carries 16 // bits elements (bytes: low byte = lower address; a tf32 element spans
    two halves, low half first).
    """
    assert isa is not None
    plan = plan or ldmatrix_plan(operand, k_contiguous, kind, tiles)
    assert plan is not None
    bits, elem_bytes = kind.elem_bits, kind.elem_bits // 8
    mn_extent = 16 if operand == "A" else 8 * tiles
    cols = kind.k if k_contiguous else mn_extent

    def coord_of(byte: int) -> tuple[int, int]:
        r, c = divmod(byte // elem_bytes, cols)
        return (r, c) if k_contiguous else (c, r)  # (mn, k)

    addrs = []
    for lane in range(32):
        r, c = plan.row(lane)
        addrs.append((r * cols + c) * elem_bytes)
    regs = isa.ldmatrix_simulate(lambda a: a, addrs, plan.num, plan.trans)
    per_reg = 32 // bits
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for lane in range(32):
        for reg in range(plan.num):
            halves = regs[lane][reg]
            for e in range(per_reg):
                half = halves[(e * bits) // 16]  # the half's own byte address
                byte = half + (e * bits // 8) % 2 if bits == 8 else half
                if bits == 32 and e == 0:
                    assert halves[1] == halves[0] + 2, "a tf32 element must come from one 4-byte word"
                out[(lane, reg * per_reg + e)] = coord_of(byte)
    return out


def _expected(kind: MmaKind, operand: str, tiles: int) -> dict[tuple[int, int], tuple[int, int]]:
    """The same map from tile-layout's fragment, as (mn, k); tile j of B at elements 2j.."""
    table = _frag_table(operand, kind.in_dtype)
    per_tile = kind.a_elems if operand == "A" else kind.b_elems
    out = {}
    for tile in range(tiles):
        for (lane, i), (r, c) in table.items():
            mn, k = (r, c) if operand == "A" else (c, r)
            out[(lane, tile * per_tile + i)] = (mn + 8 * tile if operand == "B" else mn, k)
    return out


CASES = [
    ("A", True, 1, F16), ("A", False, 1, F16),
    ("B", True, 2, F16), ("B", False, 2, F16), ("B", True, 1, F16), ("B", False, 1, F16),
    ("A", True, 1, S8), ("B", True, 2, S8), ("B", True, 1, S8),
    ("A", True, 1, TF32), ("B", True, 2, TF32), ("B", True, 1, TF32),
]  # fmt: skip


CASE_IDS = [f"{o}-{'K' if k else 'MN'}major-x{t}-{kd.in_dtype}" for o, k, t, kd in CASES]


@pytest.mark.parametrize(("operand", "k_contiguous", "tiles", "kind"), CASES, ids=CASE_IDS)
def test_ldmatrix_addresses_deliver_the_mma_fragment(
    operand: str, k_contiguous: bool, tiles: int, kind: MmaKind
) -> None:
    assert _simulate(kind, operand, k_contiguous, tiles) == _expected(kind, operand, tiles)


def test_no_ldmatrix_for_transposed_8_and_32_bit_operands() -> None:
    assert ldmatrix_plan("A", False, S8) is None and ldmatrix_plan("B", False, TF32, 2) is None


def test_a_wrong_row_formula_is_detected() -> None:
    plan = ldmatrix_plan("A", True, F16)
    assert plan is not None
    swapped = LdmatrixPlan(plan.num, plan.trans, lambda lane: (lane % 16, 8 * (1 - lane // 16)))
    assert _simulate(F16, "A", True, 1, swapped) != _expected(F16, "A", 1)


# --------------------------------------------------------------------------- banks
BANK_CASES = [
    # (storage shape, dtype, operand, k_contiguous): the paper GEMM's A [128][32] and B [32][128],
    # FlashAttention's K [128][128] read as B^T, and an int8 A.
    ((128, 32), "float16", "A", True),
    ((32, 128), "float16", "B", False),
    ((128, 128), "float16", "B", True),
    ((64, 64), "bfloat16", "A", False),
    ((128, 64), "int8", "A", True),
]


@pytest.mark.parametrize(("shape", "dtype", "operand", "k_contiguous"), BANK_CASES)
def test_ldmatrix_through_the_swizzled_layout_is_bank_conflict_free(
    shape: tuple[int, int], dtype: str, operand: str, k_contiguous: bool
) -> None:
    assert isa is not None
    kind = mma_kind(dtype, "int32" if dtype == "int8" else "float32")
    assert kind is not None
    layout = make_swizzled_layout(list(shape), dtype)
    elem_bytes = kind.elem_bits // 8
    tiles = 2 if operand == "B" else 1
    plan = ldmatrix_plan(operand, k_contiguous, kind, tiles)
    assert plan is not None
    mn_extent = shape[0] if k_contiguous else shape[1]
    k_extent = shape[1] if k_contiguous else shape[0]
    for mn0 in range(0, mn_extent, 16):
        for k0 in range(0, k_extent, kind.k):
            addrs = []
            for lane in range(32):
                r, c = plan.row(lane)
                row, col = (mn0 + r, k0 + c) if k_contiguous else (k0 + r, mn0 + c)
                addrs.append(_flat(layout, row, col) * elem_bytes)
            for q in range(plan.num):
                matrix = addrs[8 * q : 8 * q + 8]
                assert isa.ldmatrix_matrix_conflict_free(matrix), (mn0, k0, q, [hex(a) for a in matrix])


def _flat(layout, row: int, col: int) -> int:  # type: ignore[no-untyped-def]
    out = [int(e) for e in layout.map_forward_index([row, col])]
    shape = [int(e) for e in layout.get_output_shape()]
    flat = 0
    for index, extent in zip(out, shape, strict=True):
        flat = flat * extent + index
    return flat


def test_an_unswizzled_128_byte_pitch_conflicts() -> None:
    # The check above can fail: plain row-major [128][64] fp16 (128-byte rows) is 8-way.
    assert isa is not None
    plan = ldmatrix_plan("A", True, F16)
    assert plan is not None
    addrs = [(r * 64 + c) * 2 for r, c in (plan.row(lane) for lane in range(8))]
    assert not isa.ldmatrix_matrix_conflict_free(addrs)
