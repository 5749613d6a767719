"""TileLang's layout names mean the same thing here: T.Layout, T.Fragment, tilelang.layout."""

import tile.lang as tilelang
import tile.lang.language as T
from tile.layout import Fragment, Layout


def test_layout_and_fragment_are_the_algebra_classes():
    assert T.Layout is Layout and T.Fragment is Fragment
    col_major = T.Layout([4, 8], lambda i, j: j * 4 + i)
    assert [int(x) for x in col_major.map_forward_index([1, 2])] == [9]


def test_make_swizzled_layout_is_reachable_the_tilelang_way():
    swizzled = tilelang.layout.make_swizzled_layout([64, 64], "float16")
    # 128-byte rows of fp16: the 128B swizzle; row 1's first 16-byte chunk moves to chunk 1.
    assert swizzled.swizzle_bytes == 128
    assert [int(x) for x in swizzled.map_forward_index([1, 0])] == [1, 8]


# ------------------------------------------------------------------ TileLang's layout module
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tvm import tirx  # noqa: E402

from tile.ir.errors import UnsupportedOnTargetError  # noqa: E402
from tile.lang import layout as tl_layout  # noqa: E402
from tile.lang.layout import swizzle as tl_swizzle  # noqa: E402
from tile.testsupport import isa_tables as isa  # noqa: E402
from tile.testsupport.markers import needs_backend  # noqa: E402

BANK = {
    32: tl_layout.make_quarter_bank_swizzled_layout,
    64: tl_layout.make_half_bank_swizzled_layout,
    128: tl_layout.make_full_bank_swizzled_layout,
}


def _byte_address(layout, coord, rows, span):
    """The byte offset of ``coord`` in a (rows, span-byte) fp16 tile stored under ``layout``."""
    out = [int(e) for e in layout.map_forward_index(list(coord))]
    row, col = out[-2:]
    return row * span + col * 2


@pytest.mark.parametrize("span", [32, 64, 128])
def test_bank_swizzles_put_each_element_where_the_ptx_swizzle_mode_does(span):
    # the oracle: PTX's 32/64/128B modes as byte-address XORs (isa_tables, CUDA guide's tables)
    rows, cols = 16, span // 2
    buf = tirx.decl_buffer((rows, cols), "float16", name="A_shared", scope="shared")
    layout = BANK[span](buf)
    for r in range(rows):
        for c in range(cols):
            assert _byte_address(layout, (r, c), rows, span) == isa.swizzle_byte_addr(r * span + c * 2, span)
    # TileLang's module layout and the load/region forms of the argument
    assert tl_swizzle.make_half_bank_swizzled_layout is tl_layout.make_half_bank_swizzled_layout
    assert BANK[span](tirx.BufferLoad(buf, [0, 0])).is_equal(layout)


@pytest.mark.parametrize("span", [32, 64, 128])
def test_a_stage_indexed_tile_is_swizzled_per_stage(span):
    two = tirx.decl_buffer((8, 64), "float16", name="A2", scope="shared")
    three = tirx.decl_buffer((2, 8, 64), "float16", name="A3", scope="shared")
    four = tirx.decl_buffer((3, 2, 8, 64), "float16", name="A4", scope="shared")
    base = BANK[span](two)
    assert BANK[span](three).is_equal(base.expand([2]))
    assert BANK[span](four).is_equal(base.expand([3, 2]))
    assert [int(e) for e in BANK[span](three).map_forward_index([1, 3, 5])] == [
        1, *(int(e) for e in base.map_forward_index([3, 5]))
    ]


def test_the_8x8_gemm_fragments_are_ldmatrix_destinations():
    plain, trans = tl_layout.make_gemm_fragment_8x8(), tl_layout.make_gemm_fragment_8x8_transposed()
    for lane in range(32):
        for half in (0, 1):
            _m, row, col = isa.ldmatrix_dst(lane, 0, half, trans=False)
            assert plain.owners((row, col)) == [lane] and int(plain.map_forward_index([row, col])[0]) == half
            _m, row, col = isa.ldmatrix_dst(lane, 0, half, trans=True)
            assert trans.owners((row, col)) == [lane] and int(trans.map_forward_index([row, col])[0]) == half
    # TileLang's copy test tiles it on registers: 16 x 8 on the same 32 lanes, 4 locals each
    tiled = plain.repeat([2, 1], repeat_on_thread=False)
    assert int(tiled.get_thread_size()) == 32 and tiled.locals_per_thread() == 4


def test_linear_and_replicated_helpers():
    buf = tirx.decl_buffer((4, 6), "float32", name="S", scope="shared")
    linear = tl_layout.make_linear_layout(buf)
    assert [int(e) for e in linear.map_forward_index([2, 5])] == [2, 5]
    frag = tl_layout.make_fully_replicated_layout_fragment(buf, 64)
    assert frag.owners((3, 1)) == list(range(64)) and frag.locals_per_thread() == 24


def test_wgmma_swizzle_is_the_widest_mode_the_continuity_allows():
    wide = tirx.decl_buffer((64, 64), "float16", name="A", scope="shared")
    narrow = tirx.decl_buffer((64, 16), "float16", name="B", scope="shared")
    assert tl_layout.make_wgmma_swizzled_layout(wide).swizzle_bytes == 128
    assert tl_layout.make_wgmma_swizzled_layout(wide, continuity=32).swizzle_bytes == 64
    assert tl_layout.make_wgmma_swizzled_layout(wide, continuity=16, k_major=False).swizzle_bytes == 32
    assert tl_layout.make_wgmma_swizzled_layout(narrow).swizzle_bytes == 32
    odd = tirx.decl_buffer((64, 8), "float16", name="C", scope="shared")  # 16-byte rows: no mode
    assert not hasattr(tl_layout.make_wgmma_swizzled_layout(odd), "swizzle_bytes")


def test_make_swizzled_layout_takes_tilelangs_arguments_and_tiles():
    buf = tirx.decl_buffer((64, 64), "float16", name="A", scope="shared")
    assert tl_layout.make_swizzled_layout(buf, k_major=False).swizzle_bytes == 128
    assert tl_layout.make_swizzled_layout(buf, False, True).swizzle_bytes == 128
    assert tl_layout.make_swizzled_layout([64, 64], "float16").swizzle_bytes == 128  # tile's form
    # 16-byte rows fit no swizzle: row-major unless padding is asked for
    thin = tirx.decl_buffer((64, 8), "float16", name="T", scope="shared")
    assert int(tl_layout.make_swizzled_layout(thin).offset([1, 0])) == 8
    assert int(tl_layout.make_swizzled_layout(thin, allow_pad=True).offset([1, 0])) == 16


def test_swizzle_mode_codes_follow_the_ptx_descriptor_table():
    Mode = tl_layout.SwizzleMode
    modes = ((Mode.NONE, 0), (Mode.SWIZZLE_32B, 32), (Mode.SWIZZLE_64B, 64), (Mode.SWIZZLE_128B, 128))
    for mode, span in modes:
        assert mode.wgmma_layout_type() == isa.WGMMA_SWIZZLE_CODE[span]
        assert mode.swizzle_byte_size() == (span or 1)
        assert mode.swizzle_atom_size() == (span // 16 or 1)
        assert mode.smem_alignment() == (8 * span or 128)  # the pattern repeats every 8 rows of the span
    assert [Mode.from_ordinal(i) for i in range(4)] == list(Mode)
    assert Mode.SWIZZLE_64B.is_swizzle_64b() and not Mode.NONE.is_swizzle_32b() and Mode.NONE.is_none()


@pytest.mark.parametrize(
    "call",
    [
        lambda b: tl_layout.make_volta_swizzled_layout(b),
        lambda b: tl_layout.make_tcgen05mma_swizzled_layout(b),
        lambda b: tl_layout.make_cutlass_metadata_layout(b, "float16", "9.0"),
        lambda b: tl_layout.SwizzleMode.SWIZZLE_128B.tcgen05_layout_type(),
    ],
    ids=["volta", "tcgen05", "cutlass-metadata", "tcgen05-code"],
)
def test_layouts_for_hardware_tile_does_not_target_are_refused(call):
    buf = tirx.decl_buffer((64, 64), "float16", name="A", scope="shared")
    with pytest.raises(UnsupportedOnTargetError) as err:
        call(buf)
    assert err.value.hint


def test_a_layout_helper_given_no_buffer_names_the_fix():
    with pytest.raises(tilelang.errors.TileTypeError, match="make_half_bank_swizzled_layout"):
        tl_layout.make_half_bank_swizzled_layout(3)


def _gemm_with(make, M=64, N=64, K=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            T.annotate_layout({A_s: make(A_s), B_s: make(B_s)})
            T.clear(C_l)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    return main


def _staged_copy(make, stages=2, M=16, K=64):
    @T.prim_func
    def main(A: T.Tensor((stages, M, K), "float16"), B: T.Tensor((stages, M, K), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((stages, M, K), "float16")
            T.annotate_layout({S: make(S)})
            for s in T.serial(stages):
                T.copy(A[s, 0:M, 0:K], S[s, :, :])
            for s in T.serial(stages):
                T.copy(S[s, :, :], B[s, 0:M, 0:K])

    return main


@needs_backend("cuda")
@pytest.mark.parametrize("span", [32, 64])
def test_a_gemm_keeps_the_programs_narrower_swizzle_on_the_emulator(monkeypatch, span):
    # T.gemm used to demand its own 128B swizzle and report a conflict with the annotation; the
    # wgmma descriptors now describe the program's mode (SBO = 8 rows of the span, PTX)
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_gemm_with(BANK[span]), target={"kind": "cuda", "arch": "sm_90a"})
    source = kernel.get_kernel_source()
    assert f"(uint){8 * span}, {span})" in source and "wgmma" in source
    rng = np.random.default_rng(span)
    a = rng.standard_normal((64, 64)).astype("float16")
    b = rng.standard_normal((64, 64)).astype("float16")
    c = np.zeros((64, 64), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_a_stage_indexed_swizzled_tile_round_trips_on_the_cpu():
    kernel = tilelang.compile(_staged_copy(tl_layout.make_full_bank_swizzled_layout), target="cpu")
    a = np.random.default_rng(0).standard_normal((2, 16, 64)).astype("float16")
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(a, b)
