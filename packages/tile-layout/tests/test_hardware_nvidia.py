"""NVIDIA fragments against oracle tables written here from the PTX ISA text.

Every oracle below is transcribed from the PTX ISA (9.x) section named in its
comment, as ``(lane or thread, fragment element i) -> coordinate``, independently
of the fragment code, and compared slot by slot with the Fragment.
"""

from __future__ import annotations

import pytest
from _tables import Table, fragment_table, oracle_table

from tile.layout import LayoutError
from tile.layout import hardware as hw
from tile.testsupport import isa_tables as ISA


def gid(lane: int) -> int:
    """PTX "groupID" = %laneid >> 2."""
    return lane >> 2


def tig(lane: int) -> int:
    """PTX "threadID_in_group" = %laneid % 4."""
    return lane % 4


# PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type"
# (#warp-level-matrix-fragment-mma-16816-float). A (.f16/.bf16, a0..a7):
#   row = groupID for a0, a1, a4, a5; groupID + 8 for a2, a3, a6, a7
#   col = threadID_in_group * 2 + (i & 0x1) for a0..a3; + 8 for a4..a7
def ptx_m16n8k16_a(lane: int, i: int) -> tuple[int, int]:
    row = gid(lane) + (8 if i in (2, 3, 6, 7) else 0)
    col = tig(lane) * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


# Same section, B (b0..b3): row (k) = threadID_in_group * 2 + (i & 0x1) for b0, b1; + 8 for b2, b3;
#   col (n) = groupID.
def ptx_m16n8k16_b(lane: int, i: int) -> tuple[int, int]:
    return tig(lane) * 2 + (i & 1) + (8 if i >= 2 else 0), gid(lane)


# Same section, C/D (c0..c3): row = groupID for c0, c1; groupID + 8 for c2, c3;
#   col = threadID_in_group * 2 + (i & 0x1).  Shared by m16n8k32 (.s32) and m16n8k8 (.f32).
def ptx_m16n8_c(lane: int, i: int) -> tuple[int, int]:
    return gid(lane) + (8 if i >= 2 else 0), tig(lane) * 2 + (i & 1)


# PTX ISA 9.7.14.5.9 "Matrix Fragments for mma.m16n8k32" (#warp-level-matrix-fragment-mma-16832),
# A (.s8/.u8, a0..a15): row = groupID for a0..a3 and a8..a11, else groupID + 8;
#   col = threadID_in_group * 4 + (i & 0x3) for a0..a7, + 16 for a8..a15.
def ptx_m16n8k32_a(lane: int, i: int) -> tuple[int, int]:
    row = gid(lane) + (8 if (4 <= i < 8 or i >= 12) else 0)
    col = tig(lane) * 4 + (i & 3) + (16 if i >= 8 else 0)
    return row, col


# Same section, B (b0..b7): row (k) = threadID_in_group * 4 + (i & 0x3) for b0..b3, + 16 for b4..b7;
#   col (n) = groupID.
def ptx_m16n8k32_b(lane: int, i: int) -> tuple[int, int]:
    return tig(lane) * 4 + (i & 3) + (16 if i >= 4 else 0), gid(lane)


# PTX ISA 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8" (#warp-level-matrix-fragment-mma-1688),
# .tf32 A (a0..a3): row = groupID for a0 and a2, groupID + 8 for a1 and a3;
#   col = threadID_in_group for a0 and a1, threadID_in_group + 4 for a2 and a3.
def ptx_m16n8k8_a(lane: int, i: int) -> tuple[int, int]:
    return gid(lane) + (8 if i in (1, 3) else 0), tig(lane) + (4 if i >= 2 else 0)


# Same section, .tf32 B (b0, b1): row (k) = threadID_in_group for b0, + 4 for b1; col (n) = groupID.
def ptx_m16n8k8_b(lane: int, i: int) -> tuple[int, int]:
    return tig(lane) + 4 * i, gid(lane)


# PTX ISA 9.7.14.6 "ldmatrix" (#warp-level-matrix-instructions-ldmatrix), figure "ldmatrix fragment
# layout for one 8x8 Matrix with 16-bit elements": each lane receives two consecutive elements of
# row lane / 4 ("a group of four threads loads an entire row"), in register r_q for matrix q;
# with .trans the matrix is read column-major, so the lane gets row 2 * (lane % 4) + h, col lane / 4.
# Our tile stacks matrix q at rows 8q..8q+7 and numbers element (q, h) as local 2q + h.
def ptx_ldmatrix(trans: bool):
    def fn(lane: int, i: int) -> tuple[int, int]:
        q, h = divmod(i, 2)
        if trans:
            return 8 * q + 2 * tig(lane) + h, gid(lane)
        return 8 * q + gid(lane), 2 * tig(lane) + h

    return fn


# PTX ISA 9.7.15.5.1 "Register Fragments" for wgmma.mma_async .m64nNk16
# (#asynchronous-warpgroup-level-matrix-register-fragment-wgmma-64n16), figure "WGMMA .m64nNk16
# register fragment layout for accumulator matrix D": warp w = tid / 32 of the warpgroup covers
# rows 16w..16w+15; within it, every 8 columns repeat the m16n8 C pattern in the next 4 registers:
#   row = 16w + groupID + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + threadID_in_group * 2 + (i & 1).
def ptx_wgmma_d(tid: int, i: int) -> tuple[int, int]:
    w, lane = divmod(tid, 32)
    return 16 * w + gid(lane) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * tig(lane) + (i & 1)


# Same section, figure "WGMMA .m64nNk16 register fragment layout for matrix A": warp w holds rows
# 16w.. in the m16n8k16 A arrangement.
def ptx_wgmma_a(tid: int, i: int) -> tuple[int, int]:
    w, lane = divmod(tid, 32)
    row, col = ptx_m16n8k16_a(lane, i)
    return 16 * w + row, col


# wgmma.mma_async.m64nNk8 (tf32) register A: the PTX figure "WGMMA .m64nNk8 register fragment
# layout for matrix A", read as CUTLASS's ALayout_64x8 ((4,8,4),(2,2)):((64,1,16),(8,256)) over
# m + 64k: thread (t, g, w) and value (v0, v1) -> m = g + 16w + 8 v0, k = t + 4 v1.
def ptx_wgmma_tf32_a(tid: int, i: int) -> tuple[int, int]:
    w, lane = divmod(tid, 32)
    g, t = divmod(lane, 4)
    return 16 * w + g + 8 * (i & 1), t + 4 * (i >> 1)


# PTX ISA "Matrix Fragments for mma.m8n8k4 with .f64 floating point type": A (8x4, a0):
#   row = groupID, col = threadID_in_group; B (4x8, b0): row (k) = threadID_in_group,
#   col (n) = groupID. tile stacks two m8n8k4 on rows 0-7 and 8-15: a1 is row groupID + 8.
def ptx_dmma_m16n8k4_a(lane: int, i: int) -> tuple[int, int]:
    return gid(lane) + 8 * i, tig(lane)


def ptx_dmma_b(lane: int, i: int) -> tuple[int, int]:
    assert i == 0
    return tig(lane), gid(lane)


CASES = [
    ("mma.m16n8k16.f16 A", lambda: hw.mma_m16n8k16_a("float16"), ptx_m16n8k16_a, 32, 8),
    ("mma.m16n8k16.bf16 A", lambda: hw.mma_m16n8k16_a("bfloat16"), ptx_m16n8k16_a, 32, 8),
    ("mma.m16n8k16 B", lambda: hw.mma_m16n8k16_b("float16"), ptx_m16n8k16_b, 32, 4),
    ("mma.m16n8 C", hw.mma_m16n8_c, ptx_m16n8_c, 32, 4),
    ("mma.m16n8k32.s8 A", lambda: hw.mma_m16n8k32_a("int8"), ptx_m16n8k32_a, 32, 16),
    ("mma.m16n8k32.u8 B", lambda: hw.mma_m16n8k32_b("uint8"), ptx_m16n8k32_b, 32, 8),
    ("mma.m16n8k8.tf32 A", lambda: hw.mma_m16n8k8_a("tf32"), ptx_m16n8k8_a, 32, 4),
    ("mma.m16n8k8.tf32 B", lambda: hw.mma_m16n8k8_b("tf32"), ptx_m16n8k8_b, 32, 2),
    ("ldmatrix.x1", lambda: hw.ldmatrix_fragment(1), ptx_ldmatrix(False), 32, 2),
    ("ldmatrix.x2", lambda: hw.ldmatrix_fragment(2), ptx_ldmatrix(False), 32, 4),
    ("ldmatrix.x4", lambda: hw.ldmatrix_fragment(4), ptx_ldmatrix(False), 32, 8),
    ("ldmatrix.x1.trans", lambda: hw.ldmatrix_fragment(1, trans=True), ptx_ldmatrix(True), 32, 2),
    ("ldmatrix.x2.trans", lambda: hw.ldmatrix_fragment(2, trans=True), ptx_ldmatrix(True), 32, 4),
    ("ldmatrix.x4.trans", lambda: hw.ldmatrix_fragment(4, trans=True), ptx_ldmatrix(True), 32, 8),
    ("wgmma m64k16 A", hw.wgmma_m64k16_a, ptx_wgmma_a, 128, 8),
    ("wgmma m64k8 tf32 A", lambda: hw.wgmma_m64k8_a("tf32"), ptx_wgmma_tf32_a, 128, 4),
    ("wgmma A for float32", lambda: hw.wgmma_a("float32"), ptx_wgmma_tf32_a, 128, 4),
    ("wgmma A for bfloat16", lambda: hw.wgmma_a("bfloat16"), ptx_wgmma_a, 128, 8),
    ("2 x mma.m8n8k4.f64 A", lambda: hw.mma_fragment("A", "float64"), ptx_dmma_m16n8k4_a, 32, 2),
    ("mma.m8n8k4.f64 B", lambda: hw.mma_fragment("B", "float64"), ptx_dmma_b, 32, 1),
]


@pytest.mark.parametrize(("name", "make", "oracle", "threads", "elems"), CASES, ids=[c[0] for c in CASES])
def test_fragment_matches_ptx_table(name, make, oracle, threads, elems) -> None:
    frag = make()
    assert frag.replicate_size == 1
    assert int(frag.get_thread_size()) == threads
    assert frag.locals_per_thread() == elems
    assert fragment_table(frag) == oracle_table(oracle, threads, elems)


@pytest.mark.parametrize("n", list(range(8, 257, 8)))
def test_wgmma_accumulator_matches_ptx_table_for_every_n(n: int) -> None:
    frag = hw.wgmma_m64nnk16_d(n)
    assert [int(e) for e in frag.get_input_shape()] == [64, n]
    assert fragment_table(frag) == oracle_table(ptx_wgmma_d, 128, n // 2)


def test_a_deliberately_wrong_table_is_detected() -> None:
    # Swap the k halves of the A oracle (a4..a7 <-> a0..a3): an easy transcription slip.
    def wrong(lane: int, i: int) -> tuple[int, int]:
        return ptx_m16n8k16_a(lane, i ^ 4)

    got = fragment_table(hw.mma_m16n8k16_a())
    assert got != oracle_table(wrong, 32, 8)
    # And the tf32 A order really differs from the f16 one (rows alternate first).
    f16_like = {(t, i): ptx_m16n8k16_a(t, i) for t in range(32) for i in range(4)}
    assert fragment_table(hw.mma_m16n8k8_a()) != {k: (r, c % 8) for k, (r, c) in f16_like.items()}


def test_worked_example_lane5_of_a() -> None:
    # gpu-isa-facts §1: lane 5 (g=1, t=1) holds A[1][2], A[1][3], A[9][2], A[9][3], A[1][10], ...
    frag = hw.mma_m16n8k16_a()
    held = sorted((local[0], coord) for coord, _, t, local in frag.enumerate_threads() if t == 5)
    assert [c for _, c in held] == [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]


def test_base_repeat_is_how_the_operands_are_built() -> None:
    # Paper Fig. 6: the m16n8 C fragment is the ldmatrix 8x8 base repeated twice along M on registers.
    assert hw.mma_m16n8_c().is_equal(hw.ldmatrix_fragment(1).repeat([2, 1]))
    assert hw.ldmatrix_fragment(2).is_equal(hw.mma_m16n8_c())


def test_mma_fragment_dispatch_by_dtype() -> None:
    assert hw.mma_fragment("A", "float16").is_equal(hw.mma_m16n8k16_a())
    assert hw.mma_fragment("B", "int8").is_equal(hw.mma_m16n8k32_b())
    assert hw.mma_fragment("A", "tf32").is_equal(hw.mma_m16n8k8_a())
    assert hw.mma_fragment("C").is_equal(hw.mma_m16n8_c())
    with pytest.raises(LayoutError):
        hw.mma_fragment("A", "int4")
    with pytest.raises(LayoutError):
        hw.mma_m16n8k16_a("int8")
    with pytest.raises(LayoutError):
        hw.wgmma_m64nnk16_d(12)
    with pytest.raises(LayoutError):
        hw.ldmatrix_fragment(3)


def test_block_fragment_of_four_warps() -> None:
    frag = hw.make_mma_block_fragment(64, 64, 2, 2)
    assert int(frag.get_thread_size()) == 128 and frag.locals_per_thread() == 32
    assert (frag.ownership_counts() == 1).all()
    # Warp 1 (row-major order) holds the top-right 32x32 sub-tile; lane = 4 * (m % 8) + (n % 8) // 2.
    for m, n in [(0, 32), (5, 47), (31, 63)]:
        assert frag.owners((m, n)) == [32 + 4 * (m % 8) + (n % 8) // 2]
    col = hw.make_mma_block_fragment(64, 64, 2, 2, warp_order="col")
    assert col.owners((0, 32)) == [64]
    with pytest.raises(LayoutError):
        hw.make_mma_block_fragment(64, 64, 3, 2)




def _warp_rows(fn, tid: int, i: int) -> tuple[int, int]:
    row, col = fn(tid % 32, i)
    return 16 * (tid // 32) + row, col


def test_cross_check_with_shared_isa_tables() -> None:
    assert ISA is not None
    pairs = [
        (hw.mma_m16n8k16_a(), ISA.mma_m16n8k16_f16_a, 32, 8),
        (hw.mma_m16n8k16_b(), ISA.mma_m16n8k16_f16_b, 32, 4),
        (hw.mma_m16n8_c(), ISA.mma_m16n8_c, 32, 4),
        (hw.mma_m16n8k32_a(), ISA.mma_m16n8k32_s8_a, 32, 16),
        (hw.mma_m16n8k32_b(), ISA.mma_m16n8k32_s8_b, 32, 8),
        (hw.mma_m16n8k8_a(), ISA.mma_m16n8k8_tf32_a, 32, 4),
        (hw.mma_m16n8k8_b(), ISA.mma_m16n8k8_tf32_b, 32, 2),
        (hw.wgmma_m64k16_a(), ISA.wgmma_a_f16, 128, 8),
        # m64nNk8 tf32: warp w holds rows 16w.. as the m16n8k8 tf32 A (CUTLASS ALayout_64x8)
        (hw.wgmma_m64k8_a(), lambda t, i: _warp_rows(ISA.mma_m16n8k8_tf32_a, t, i), 128, 4),
    ]
    for frag, fn, threads, elems in pairs:
        assert fragment_table(frag) == oracle_table(fn, threads, elems)
    for n in (8, 16, 64, 128, 256):
        table = oracle_table(lambda t, i, n=n: ISA.wgmma_d(t, i, n), 128, n // 2)
        assert fragment_table(hw.wgmma_m64nnk16_d(n)) == table


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_ldmatrix_cross_check_with_shared_isa_tables(num: int, trans: bool) -> None:
    assert ISA is not None

    def fn(lane: int, i: int) -> tuple[int, int]:
        matrix, row, col = ISA.ldmatrix_dst(lane, i // 2, i % 2, trans)
        return 8 * matrix + row, col

    expected: Table = oracle_table(fn, 32, 2 * num)
    assert fragment_table(hw.ldmatrix_fragment(num, trans)) == expected
