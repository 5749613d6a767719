"""Backend-independent contracts of the layouts and plans the compiler hands to backends.

The hardware tables here are derived independently in this file, from the formulas
in the PTX ISA ("Tensor swizzling modes"; "Matrix Fragments for mma.m16n8k16"), and
compared with what ``tile.layout`` and the layout-inference rules produce. A GPU
backend trusts these tables, so a wrong swizzle XOR or a wrong fragment thread map
must fail here even when the CPU backend, which ignores them, still computes right
answers. No backend is needed: these tests run in every conformance run.
"""

from __future__ import annotations

import itertools

import pytest

from tile.ir.backend import Capabilities
from tile.ir.ops.layout_rules import gemm_fragments
from tile.ir.transform.plan_pipeline import Access, violations
from tile.layout import make_swizzle_layout
from tile.layout.hardware import mma_fragment

# ---------------------------------------------------------------- PTX formulas


def ptx_swizzle(addr: int, span: int) -> int:
    """PTX swizzle of a shared-memory byte address for a ``span``-byte mode."""
    bits = {32: 1, 64: 2, 128: 3}[span]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def ptx_mma_m16n8k16(operand: str) -> dict[tuple[int, int], tuple[int, int]]:
    """``(row, col) -> (lane, element i)`` of mma.m16n8k16 f16 A/B and the f32 C fragment."""
    table = {}
    count = {"A": 8, "B": 4, "C": 4}[operand]
    for lane in range(32):
        group, tig = lane >> 2, lane % 4
        for i in range(count):
            if operand == "A":
                row = group + 8 * ((i // 2) % 2)
                col = tig * 2 + (i & 1) + 8 * (i // 4)
            elif operand == "B":
                row = tig * 2 + (i & 1) + 8 * (i // 2)
                col = group
            else:
                row = group + 8 * (i // 2)
                col = tig * 2 + (i & 1)
            table[(row, col)] = (lane, i)
    return table


GPU_CAPS = Capabilities(
    warp_size=32,
    max_threads=1024,
    shared_bytes=228 * 1024,
    dtypes=frozenset({"float16", "float32"}),
    vector_bits=128,
    has_device=False,
    thread_binding=True,
    async_copy=True,
    mma_shapes=((16, 8, 16),),
)

# ---------------------------------------------------------------- swizzles


@pytest.mark.parametrize(
    ("shape", "dtype", "bits", "span"),
    [((16, 64), "float16", 16, 128), ((8, 32), "float16", 16, 64), ((16, 16), "float16", 16, 32),
     ((8, 128), "int8", 8, 128), ((16, 64), "float16", 16, 64), ((8, 32), "float32", 32, 128)],
)
def test_swizzle_matches_the_ptx_byte_address_formula(shape, dtype, bits, span) -> None:
    rows, cols = shape
    layout = make_swizzle_layout(list(shape), dtype, span)
    span_elems = span * 8 // bits
    for r, c in itertools.product(range(rows), range(cols)):
        # Logical byte address in the stacked (blocks * rows, span) array.
        block, col_in = divmod(c, span_elems)
        addr = ((block * rows + r) * span_elems + col_in) * bits // 8
        pr, pc = (int(e) for e in layout.map_forward_index([r, c]))
        got = (pr * span_elems + pc) * bits // 8
        assert got == ptx_swizzle(addr, span), (r, c, got, ptx_swizzle(addr, span))


# ---------------------------------------------------------------- fragments


@pytest.mark.parametrize("operand", ["A", "B", "C"])
def test_mma_m16n8k16_fragment_matches_ptx_table(operand) -> None:
    frag = mma_fragment(operand, "float16")
    want = ptx_mma_m16n8k16(operand)
    got = {}
    for coord, rep, thread, local in frag.enumerate_threads():
        if rep == 0:
            got[coord] = (thread, *local)
    # (lane, PTX element number a_i / b_i / c_i) for every element of the tile.
    assert got == want


def test_inferred_gemm_fragments_for_gpu_capabilities_match_ptx() -> None:
    """The C/A/B fragments layout inference gives a 32x32x32 fp16 gemm on 4 warps."""
    m = n = k = 32
    c, a, b = gemm_fragments(m, n, 128, GPU_CAPS, "float16", k)
    assert a is not None and b is not None
    ptx_c, ptx_a, ptx_b = ptx_mma_m16n8k16("C"), ptx_mma_m16n8k16("A"), ptx_mma_m16n8k16("B")
    # Every element of C is owned by exactly one thread, and inside its 16x8 atom by the
    # PTX lane; the 4 warps split the tile with whole atoms.
    c_owner = {coord: t for coord, rep, t, _ in c.enumerate_threads() if rep == 0}
    assert sorted(c_owner) == [(i, j) for i in range(m) for j in range(n)]
    for (i, j), t in c_owner.items():
        assert t % 32 == ptx_c[(i % 16, j % 8)][0], (i, j, t)
    warp_of_atom = {}
    for (i, j), t in c_owner.items():
        warp_of_atom.setdefault((i // 16, j // 8), set()).add(t // 32)
    assert all(len(w) == 1 for w in warp_of_atom.values())
    # A's owners read A rows of the C rows they own; lanes follow the PTX A table.
    for i, kk in itertools.product(range(m), range(k)):
        for t in a.owners([i, kk]):
            assert t % 32 == ptx_a[(i % 16, kk % 16)][0], ("A", i, kk, t)
            assert any(c_owner[(i, j)] // 32 == t // 32 for j in range(n))
    for kk, j in itertools.product(range(k), range(n)):
        for t in b.owners([kk, j]):
            assert t % 32 == ptx_b[(kk % 16, j % 8)][0], ("B", kk, j, t)
            assert any(c_owner[(i, j)] // 32 == t // 32 for i in range(m))


# ---------------------------------------------------------------- pipeline plans


def _acc(reads: set[str], writes: set[str], producer: str | None = None) -> Access:
    return Access(set(reads), set(writes), "stmt", None, producer)


def test_plan_rejects_reordering_across_a_war_dependence() -> None:
    # 0 reads S (consumer), 1 overwrites S: running 1 first in the same iteration is wrong.
    body = [_acc({"S"}, {"C"}), _acc({"G"}, {"S"})]
    assert violations(body, stage=[0, 0], order=[1, 0])
    assert not violations(body, stage=[0, 0], order=[0, 1])


def test_plan_rejects_reordering_across_raw_and_waw() -> None:
    raw = [_acc({"G"}, {"S"}), _acc({"S"}, {"C"})]
    assert violations(raw, stage=[0, 0], order=[1, 0])
    waw = [_acc(set(), {"S"}), _acc(set(), {"S"})]
    assert violations(waw, stage=[0, 0], order=[1, 0])


# ---------------------------------------------------------------- dynamic tails


def _tile_column_sums(bm: int, n: int):
    import tile.lang.language as T

    M = T.dynamic("M")
    B = T.dynamic("B")

    @T.prim_func
    def main(A: T.Tensor((M, n), "float32"), S: T.Tensor((B, n), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            af = T.alloc_fragment((bm, n), "float32")
            sf = T.alloc_fragment((n,), "float32")
            T.copy(A[bx * bm, 0], af)
            T.reduce_sum(af, sf, dim=0)
            T.copy(sf, S[bx, 0])

    return main


def test_tail_tile_reads_nothing_past_the_dynamic_extent(tile_backend) -> None:
    """The split main path must be taken only for whole tiles: rows past M read as zero.

    A is a view of the first M rows of a larger array whose extra rows hold a sentinel,
    so a tail tile that runs the unguarded main path sums the sentinel.
    """
    import numpy as np

    bm, n = 16, 16
    kernel = tile_backend.compile(_tile_column_sums(bm, n))
    rng = np.random.default_rng(7)
    for m in (bm * 3 - 1, bm * 3 - 2, bm * 2 + 1, bm * 3):
        big = np.full((m + bm, n), 1.0e6, dtype=np.float32)
        big[:m] = rng.standard_normal((m, n), dtype=np.float32)
        blocks = -(-m // bm)
        sums = np.zeros((blocks, n), dtype=np.float32)
        kernel(big[:m], sums)
        padded = np.zeros((blocks * bm, n), dtype=np.float64)
        padded[:m] = big[:m]
        want = padded.reshape(blocks, bm, n).sum(axis=1)
        np.testing.assert_allclose(sums, want, rtol=1e-5, atol=1e-4, err_msg=f"M={m}")
