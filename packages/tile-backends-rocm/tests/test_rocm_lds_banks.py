"""LDS bank conflicts of the MFMA gemm's operand reads (``tile.backends.rocm._src.lds``).

Three kinds of checks: hand-computed cases; an independent brute force (addresses from
the XOR formula of gpu-isa-facts §4.4 and the MFMA lane table of §9, a cycle-by-cycle
bank simulation); and the layouts the compiler gives the operands of real gemm kernels,
taken from the module the ROCm backend is handed to build. No hipcc or GPU is needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import tvm_ffi
from tvm import ir, tirx  # type: ignore[import-untyped]

import tile.lang as tilelang
from tile.backends.rocm._src import backend as rocm_backend
from tile.backends.rocm._src.lds import lane_addresses, lane_groups, lds_bank_conflicts, operand_reads
from tile.ir.transform import layout_map_of
from tile.layout import (
    dtype_bits,
    make_padded_layout,
    make_row_major_layout,
    make_swizzle_layout,
    make_swizzled_layout,
)
from tile.ops.gemm import matmul_kernel

TARGET = {"kind": "hip", "mcpu": "gfx90a"}


# ----------------------------------------------------------------------- hand-computed
def test_row_major_64_wide_column_read_is_16_way() -> None:
    # A[64][64] fp16, rows of 128 B: lanes 0..15 read 8 bytes at the same column of 16
    # rows; every row starts on bank 0, so banks 0 and 1 serve 16 words each.
    found = lds_bank_conflicts(operand_reads(make_row_major_layout([64, 64]), "float16", "A"))
    assert (found.worst_ways, found.worst_extra, found.width) == (16, 15, 8)
    assert found.conflicting == found.accesses == 16  # 4 x 4 tiles, one ds_read_b64 each


def test_padding_by_8_bytes_makes_the_column_read_conflict_free() -> None:
    # rows of 136 B = 34 words: row r starts on bank 2r % 32, 16 rows on 16 bank pairs
    found = lds_bank_conflicts(operand_reads(make_padded_layout([64, 64], 4), "float16", "A"))
    assert (found.worst_ways, found.worst_extra, found.width) == (1, 0, 8)


def test_padding_by_16_bytes_leaves_two_ways() -> None:
    # rows of 144 B = 36 words: bank 4r % 32 repeats after 8 rows
    found = lds_bank_conflicts(operand_reads(make_padded_layout([64, 64], 8), "float16", "A"))
    assert (found.worst_ways, found.worst_extra) == (2, 1)


def test_128b_swizzle_reaches_the_16_byte_chunk_floor() -> None:
    # chunk c ^ (r % 8): rows r and r + 8 share a chunk slot and the 8-byte half
    found = lds_bank_conflicts(operand_reads(make_swizzled_layout([128, 64], "float16"), "float16", "A"))
    assert (found.worst_ways, found.worst_extra, found.width) == (2, 1, 8)


def test_row_major_k_by_n_b_reads_are_two_way_and_swizzled_free() -> None:
    # B[32][128]: per element, lanes 0..31 read 32 B of rows v and v + 4, 256 B apart
    plain = lds_bank_conflicts(operand_reads(make_row_major_layout([32, 128]), "float16", "B"))
    swizzled = lds_bank_conflicts(operand_reads(make_swizzled_layout([32, 128], "float16"), "float16", "B"))
    assert (plain.worst_ways, plain.width) == (2, 2)
    assert (swizzled.worst_ways, swizzled.worst_extra, swizzled.width) == (1, 0, 2)


def test_reads_merge_only_where_contiguous() -> None:
    a = operand_reads(make_swizzled_layout([64, 32], "float16"), "float16", "A")
    b = operand_reads(make_swizzled_layout([32, 64], "float16"), "float16", "B")
    assert {x.width for x in a} == {8} and len(a) == 8  # 4 x 2 tiles, one b64 each
    assert {x.width for x in b} == {2} and len(b) == 2 * 4 * 4  # 2 x 4 tiles, four u16 each


def test_lane_groups_follow_the_access_width() -> None:
    assert [len(g) for g in lane_groups(2)] == [32, 32]
    assert [len(g) for g in lane_groups(4)] == [32, 32]
    assert [len(g) for g in lane_groups(8)] == [16] * 4
    assert [len(g) for g in lane_groups(16)] == [8] * 8


# ----------------------------------------------------------------------- brute force
def _xor_swizzle(cols: int, rows: int, span: int) -> Callable[[int, int], int]:
    """Byte address of fp16 element (r, c): 'span'-byte rows stacked per column block, then
    the hardware XOR on address bits (PTX, gpu-isa-facts §4.4)."""
    per_row = span // 2
    bits = int(math.log2(span // 16))

    def address(r: int, c: int) -> int:
        linear = ((c // per_row) * rows + r) * span + (c % per_row) * 2
        return linear ^ (((linear >> 7) & ((1 << bits) - 1)) << 4)

    return address


def _pitched(pitch_bytes: int) -> Callable[[int, int], int]:
    return lambda r, c: r * pitch_bytes + c * 2


def _brute_force_worst_extra(address: Callable[[int, int], int], shape: tuple[int, int], k_last: bool) -> int:
    """Serve every MFMA read cycle by cycle: each cycle every bank serves its lowest pending word."""
    rows, cols = shape
    mn_extent, k_extent = (rows, cols) if k_last else (cols, rows)
    worst = 0
    for mn0 in range(0, mn_extent, 16):
        for k0 in range(0, k_extent, 16):
            # lane l holds operand element v = (mn0 + l % 16, k0 + 4 (l // 16) + v)  (§9 table)
            per_lane = []
            for lane in range(64):
                mn, k = mn0 + lane % 16, k0 + 4 * (lane // 16)
                per_lane.append([address(mn, k + v) if k_last else address(k + v, mn) for v in range(4)])
            merged = all(a[v] == a[0] + 2 * v for a in per_lane for v in range(4)) and all(
                a[0] % 8 == 0 for a in per_lane
            )
            loads = (
                [(8, [a[0] for a in per_lane])]
                if merged
                else [(2, [a[v] for a in per_lane]) for v in range(4)]
            )
            for width, addrs in loads:
                group = 16 if width == 8 else 32
                for start in range(0, 64, group):
                    pending = {
                        w
                        for a in addrs[start : start + group]
                        for w in range(a // 4, (a + width - 1) // 4 + 1)
                    }
                    least = -(-len(pending) // 32)
                    cycles = 0
                    while pending:
                        cycles += 1
                        for bank in range(32):
                            words = sorted(w for w in pending if w % 32 == bank)
                            if words:
                                pending.discard(words[0])
                    worst = max(worst, cycles - least)
    return worst


def _swizzled(shape: tuple[int, int], span: int) -> tuple[Any, Any]:
    """The tile-layout swizzle and, independently, its address formula."""
    return make_swizzle_layout(list(shape), 16, span), _xor_swizzle(shape[1], shape[0], span)


def _plain(shape: tuple[int, int], pad: int = 0) -> tuple[Any, Any]:
    layout = make_padded_layout(list(shape), pad) if pad else make_row_major_layout(list(shape))
    return layout, _pitched((shape[1] + pad) * 2)


BRUTE_CASES = [
    # (shape, operand, transposed, (layout, independent address formula))
    ((128, 32), "A", False, _plain((128, 32))),
    ((64, 64), "A", False, _plain((64, 64))),
    ((64, 64), "A", False, _plain((64, 64), pad=4)),
    ((64, 64), "A", False, _plain((64, 64), pad=8)),
    ((128, 32), "A", False, _swizzled((128, 32), 64)),
    ((128, 32), "A", False, _swizzled((128, 32), 32)),
    ((64, 64), "A", False, _swizzled((64, 64), 128)),
    ((32, 128), "B", False, _plain((32, 128))),
    ((32, 128), "B", False, _swizzled((32, 128), 128)),
    ((32, 128), "B", False, _swizzled((32, 128), 32)),
    ((128, 64), "B", True, _swizzled((128, 64), 128)),
    ((32, 64), "A", True, _plain((32, 64))),
]


@pytest.mark.parametrize(("shape", "operand", "transposed", "pair"), BRUTE_CASES)
def test_analysis_matches_a_brute_force_count(
    shape: tuple[int, int], operand: Any, transposed: bool, pair: tuple[Any, Any]
) -> None:
    layout, address = pair
    k_last = (operand == "A") != transposed
    expected = _brute_force_worst_extra(address, shape, k_last)
    assert lds_bank_conflicts(operand_reads(layout, "float16", operand, transposed)).worst_extra == expected


# ----------------------------------------------------------------------- the compiler's layouts
def _gemm_kernel(m: int, n: int, k: int, trans_b: bool, dtype: str) -> Any:
    import tile.lang.language as T

    @T.prim_func
    def gemm_nt(A: T.Tensor((m, k), dtype), B: T.Tensor((n, k), dtype), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, 1, threads=256) as (_bx, _by):
            A_shared = T.alloc_shared((m, k), dtype)
            B_shared = T.alloc_shared((n, k), dtype)
            C_local = T.alloc_fragment((m, n), "float32")
            T.clear(C_local)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C)

    if trans_b:
        return gemm_nt
    return matmul_kernel(m, n, k, dtype, block_M=m, block_N=n, block_K=k, threads=256)


class _Handed(Exception):
    """Raised by the build stand-in once it has the module (no hipcc or emulator build needed)."""


def _compiled_func(monkeypatch: pytest.MonkeyPatch, kernel: Any, target: Any = TARGET) -> Any:
    """The function the ROCm backend is handed to build (after the whole pass pipeline)."""
    seen: list[Any] = []

    def spy(mod: Any, target: Any) -> Any:
        seen.append(mod)
        raise _Handed

    monkeypatch.setattr(rocm_backend, "build", spy)
    monkeypatch.setenv("TILE_CACHE", "0")
    with pytest.raises(_Handed):
        tilelang.compile(kernel, out_idx=[-1], target=target)
    (mod,) = seen
    (func,) = mod.functions.values()
    return func


def _compiled_layouts(monkeypatch: pytest.MonkeyPatch, kernel: Any) -> dict[str, Any]:
    """The inferred layouts of the module the ROCm backend builds."""
    return dict(layout_map_of(_compiled_func(monkeypatch, kernel)))


def _emitted_read_bytes(func: Any) -> dict[str, set[int]]:
    """Shared buffer -> bytes per lane of the MFMA operand reads the gemm emitted: a
    ``tile::copy_<bits>`` from it, or an element load from it into an operand register."""
    found: dict[str, set[int]] = {}

    def on_call(call: Any) -> None:
        if not (isinstance(call.op, ir.Op) and str(call.op.name) == "tirx.call_extern"):
            return
        name = call.args[0].value
        if name.startswith("tile::copy_"):
            source = call.args[2].args[1].args[0]  # tvm_access_ptr(type, buffer_data(buf), ...)
            found.setdefault(str(source.name), set()).add(int(name.removeprefix("tile::copy_")) // 8)

    def on_store(store: Any) -> None:
        if str(store.buffer.name).endswith("_regs") and isinstance(store.value, ir.TensorLoad):
            source = store.value.source
            found.setdefault(str(source.name), set()).add(dtype_bits(str(source.dtype)) // 8)

    tvm_ffi.structural_walk(func.body, [(ir.Call, on_call), (tirx.BufferStore, on_store)])
    return found


# (M, N, K, B transposed): A [M][K]; B [K][N] or [N][K]. The minimum for K-contiguous
# operands (A, B transposed) is 1 extra way: the floor of any layout that keeps 16-byte
# chunks whole (see lds.py); reads of [K][N] operands are conflict-free.
TILINGS = [
    (128, 128, 32, False, "float16"),
    (64, 128, 32, False, "bfloat16"),
    (128, 128, 64, False, "float16"),
    (128, 128, 32, True, "float16"),
    (64, 128, 64, True, "bfloat16"),
]


@pytest.mark.parametrize(("m", "n", "k", "trans_b", "dtype"), TILINGS)
def test_compiler_picks_layouts_at_the_model_minimum(
    monkeypatch: pytest.MonkeyPatch, m: int, n: int, k: int, trans_b: bool, dtype: str
) -> None:
    layouts = _compiled_layouts(monkeypatch, _gemm_kernel(m, n, k, trans_b, dtype))
    for tile in (16, 32):  # whichever MFMA the gemm uses: the figures are the same
        a = lds_bank_conflicts(operand_reads(layouts["A_shared"], dtype, "A", tile=tile))
        b = lds_bank_conflicts(operand_reads(layouts["B_shared"], dtype, "B", transposed=trans_b, tile=tile))
        assert (a.worst_extra, a.width) == (1, 8), a
        assert (b.worst_extra, b.width) == ((1, 8) if trans_b else (0, 2)), b
    # the same tile stored row-major (what the LDS held before the swizzle was applied)
    plain_a = lds_bank_conflicts(operand_reads(make_row_major_layout([m, k]), dtype, "A"))
    assert plain_a.worst_ways == {32: 8, 64: 16}[k]


@pytest.mark.parametrize(("m", "n", "k", "trans_b", "dtype"), TILINGS)
def test_the_gemm_emits_the_reads_the_model_counts(
    monkeypatch: pytest.MonkeyPatch, m: int, n: int, k: int, trans_b: bool, dtype: str
) -> None:
    # The model's read width (lds.merged_read_elements on the compiled layouts) is the width
    # the lowering emits: one 8-byte tile::copy_64 per lane for [MN][K] operands, element
    # loads for [K][N] B. (hipcc merged few of the element loads: test_rocm_compile.py.)
    func = _compiled_func(monkeypatch, _gemm_kernel(m, n, k, trans_b, dtype))
    layouts = dict(layout_map_of(func))
    emitted = _emitted_read_bytes(func)
    for tile in (16, 32):
        a = operand_reads(layouts["A_shared"], dtype, "A", tile=tile)
        b = operand_reads(layouts["B_shared"], dtype, "B", transposed=trans_b, tile=tile)
        assert {x.width for x in a} == emitted["A_shared"] == {8}
        assert {x.width for x in b} == emitted["B_shared"] == ({8} if trans_b else {2})


@pytest.mark.parametrize(("arch", "copy_bytes"), [("gfx90a", 4), ("gfx942", 8)])
def test_int8_gemm_reads_a_with_one_wide_read_per_lane(
    monkeypatch: pytest.MonkeyPatch, arch: str, copy_bytes: int
) -> None:
    # int8 MFMAs take 4 bytes per lane on CDNA2 (K=8/16 forms) and 8 on CDNA3 (K=16/32).
    from _rocm_kernels import int8_gemm_kernel

    kernel = int8_gemm_kernel(128, 128, 64, 64, 64, 32, 256)
    func = _compiled_func(monkeypatch, kernel, {"kind": "hip", "mcpu": arch})
    layouts = dict(layout_map_of(func))
    emitted = _emitted_read_bytes(func)
    per_lane = {"gfx90a": 4, "gfx942": 8}[arch]
    model = {
        x.width
        for tile in (16, 32)
        for x in operand_reads(layouts["A_s"], "int8", "A", tile=tile, per_lane=per_lane)
    }
    assert emitted["A_s"] == model == {copy_bytes}  # the shared tiles of tile.testsupport's pipelined_gemm
    assert emitted["B_s"] == {1}


@pytest.mark.parametrize(("tile", "k", "per_lane"), [(16, 16, 4), (32, 8, 4), (16, 32, 8), (32, 16, 8)])
def test_the_models_lane_elements_are_the_mfma_operand_layout(tile: int, k: int, per_lane: int) -> None:
    # lds.lane_addresses puts lane l's element v at (l % tile, per_lane * (l // tile) + v) of
    # the operand tile; the gemm takes the elements from tile-layout's mfma_operand.
    from tile.layout.hardware.amd import mfma_operand

    assert tile * k // 64 == per_lane
    offsets = {(r, c): r * k + c for r in range(tile) for c in range(k)}
    model = lane_addresses(offsets, 1, True, 0, 0, tile, per_lane)
    frag = mfma_operand("A", tile, k)
    for coord, _rep, lane, local in frag.enumerate_threads():
        assert model[lane][local[-1]] == coord[0] * k + coord[1]
