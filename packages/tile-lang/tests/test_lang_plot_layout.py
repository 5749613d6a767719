"""``tile.lang.tools.plot_layout`` and the helpers TileLang's examples/plot_layout scripts use:
the mma.sync operand maps of ``cuda.intrinsics.layout.mma_layout`` and the bank swizzles built
from sizes (``make_quarter_bank_swizzled_layout(8, 16, 16)``).

References: labels computed by hand from each layout's definition; PTX's mma fragment tables
(``tile.testsupport.isa_tables``); the swizzle's XOR rule by hand.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

import tile.lang.language as T
from tile.lang._src import plot_layout as plot_module
from tile.lang.cuda.intrinsics.layout import mma_layout
from tile.lang.errors import ArgumentTypeError, ArgumentValueError
from tile.lang.layout import (
    make_full_bank_swizzled_layout,
    make_half_bank_swizzled_layout,
    make_quarter_bank_swizzled_layout,
)
from tile.lang.tools import PlotDependencyError, plot_layout
from tile.testsupport import isa_tables as ISA

SVG = "{http://www.w3.org/2000/svg}"


def _cells(path):
    """``{(row, col): [label lines]}`` of a plot's SVG file."""
    root = ET.parse(path).getroot()
    return {
        (int(g.get("data-row")), int(g.get("data-col"))): [t.text for t in g.iter(f"{SVG}text")]
        for g in root.iter(f"{SVG}g")
    }


def test_a_layout_is_drawn_over_its_inputs_labelled_with_outputs(tmp_path, capsys):
    transpose = T.Layout([4, 4], lambda i, j: (j, i))
    plot_layout(transpose, save_directory=tmp_path, name="t", formats="svg")
    assert f"Saved {tmp_path / 't.svg'}" in capsys.readouterr().out
    cells = _cells(tmp_path / "t.svg")
    assert cells == {(i, j): [str(j * 4 + i)] for i in range(4) for j in range(4)}


def test_the_output_view_labels_outputs_with_their_inputs(tmp_path):
    reshape = T.Layout([2, 4, 8], lambda i, j, k: (k, i * 4 + j))
    plot_layout(reshape, save_directory=tmp_path, name="r", formats="svg", view="output")
    cells = _cells(tmp_path / "r.svg")
    assert len(cells) == 64
    for i in range(2):
        for j in range(4):
            for k in range(8):
                assert cells[(k, i * 4 + j)] == [str((i, j, k))]


def test_grid_shape_redraws_the_inputs(tmp_path):
    layout = T.Layout([2, 4, 8], lambda i, j, k: (k, i * 4 + j))
    plot_layout(layout, save_directory=tmp_path, name="g", formats="svg", grid_shape=(4, 16))
    cells = _cells(tmp_path / "g.svg")
    assert set(cells) == {(r, c) for r in range(4) for c in range(16)}
    # input (0, 1, 3) is flat 11: row 0, col 11; its output (3, 1) flattens to 3 * 8 + 1
    assert cells[(0, 11)] == [str(3 * 8 + 1)]
    with pytest.raises(ArgumentValueError, match="holds 60 cells"):
        plot_layout(layout, save_directory=tmp_path, formats="svg", grid_shape=(4, 15))


def test_a_fragment_cell_names_each_holder_thread_and_register(tmp_path):
    fragment = T.Fragment(
        [16, 16],
        forward_thread_fn=lambda i, j: mma_layout.shared_16x16_to_mma_32x8_layout_sr_a(i, j)[0],
        forward_index_fn=lambda i, j: mma_layout.shared_16x16_to_mma_32x8_layout_sr_a(i, j)[1],
    )
    plot_layout(fragment, save_directory=tmp_path, name="a", formats="svg")
    cells = _cells(tmp_path / "a.svg")
    for lane in range(32):
        for reg in range(8):
            row, col = ISA.mma_m16n8k16_f16_a(lane, reg)
            assert cells[(row, col)] == [f"T{lane} L{reg}"]


def test_a_replicated_fragment_lists_every_holder(tmp_path):
    both = T.Fragment([4], forward_thread_fn=lambda i, rep: rep * 4 + i, replicate=2)
    plot_layout(both, save_directory=tmp_path, name="rep", formats="svg")
    cells = _cells(tmp_path / "rep.svg")
    assert cells[(0, 2)] == ["T2 L2", "T6 L2"]  # no forward_index_fn: each element its own register


def test_formats_and_the_missing_matplotlib(tmp_path, monkeypatch):
    layout = T.Layout([2, 2], lambda i, j: (j, i))
    with pytest.raises(ArgumentValueError, match="format 'jpg'"):
        plot_layout(layout, save_directory=tmp_path, formats="jpg")
    with pytest.raises(ArgumentTypeError, match=r"T\.Layout or T\.Fragment"):
        plot_layout([[0, 1]], save_directory=tmp_path)
    monkeypatch.setattr(plot_module, "_has_matplotlib", lambda: False)
    with pytest.raises(PlotDependencyError, match="png output needs matplotlib"):
        plot_layout(layout, save_directory=tmp_path, formats="svg,png")
    with pytest.warns(UserWarning, match="matplotlib is not installed"):
        plot_layout(layout, save_directory=tmp_path, name="d")  # TileLang's default: PDF
    assert (tmp_path / "d.svg").exists() and not (tmp_path / "d.pdf").exists()


def test_png_and_pdf_through_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    plot_layout(T.Layout([4, 4], lambda i, j: (j, i)), save_directory=tmp_path, name="m", formats="all")
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "m.pdf").read_bytes()[:5] == b"%PDF-"
    assert (tmp_path / "m.svg").exists()


@pytest.mark.parametrize(
    ("function", "table", "rows", "cols", "regs_a"),
    [
        ("16x8_to_mma_32x4", (ISA.mma_m16n8k8_tf32_a, ISA.mma_m16n8k8_tf32_b), 16, 8, 4),
        ("16x16_to_mma_32x8", (ISA.mma_m16n8k16_f16_a, ISA.mma_m16n8k16_f16_b), 16, 16, 8),
        ("16x32_to_mma_32x16", (ISA.mma_m16n8k32_s8_a, ISA.mma_m16n8k32_s8_b), 16, 32, 16),
    ],
)
def test_mma_operand_maps_follow_the_ptx_tables(function, table, rows, cols, regs_a):
    sr_a = getattr(mma_layout, f"shared_{function}_layout_sr_a")
    sr_b = getattr(mma_layout, f"shared_{function}_layout_sr_b")
    a_table, b_table = table
    for lane in range(32):
        for reg in range(regs_a):
            m, k = a_table(lane, reg)
            assert sr_a(m, k) == (lane, reg)
        per_n8 = regs_a // 2  # one n8 instruction's B registers; the second n8 block follows
        for reg in range(per_n8):
            k, n = b_table(lane, reg)
            assert sr_b(n, k) == (lane, reg)
            assert sr_b(n + 8, k) == (lane, reg + per_n8)
    assert {sr_a(i, j) for i in range(rows) for j in range(cols)} == {
        (lane, reg) for lane in range(32) for reg in range(regs_a)
    }


def test_bank_swizzles_from_sizes():
    # 32B swizzle of 16-bit rows of 16: rows 0-3 as stored, rows 4-7 swap their two 8-element halves
    quarter = make_quarter_bank_swizzled_layout(8, 16, 16)
    for i in range(8):
        for j in range(16):
            expected = (i, j if i < 4 else (j + 8) % 16)
            assert tuple(int(x) for x in quarter.map_forward_index([i, j])) == expected
    # 128B swizzle: each 16-byte chunk (8 halves) of row i moves to chunk (c ^ (i % 8))
    full = make_full_bank_swizzled_layout(32, 64, 16)
    for i in (0, 3, 13, 31):
        for j in (0, 9, 63):
            expected = (i, ((j // 8) ^ (i % 8)) * 8 + j % 8)
            assert tuple(int(x) for x in full.map_forward_index([i, j])) == expected
    half = make_half_bank_swizzled_layout(8, 32, 16)
    assert tuple(int(x) for x in half.map_forward_index([2, 0])) == (2, 8)
    with pytest.raises(Exception, match="rows, columns"):
        make_full_bank_swizzled_layout(8, 64)


def test_mfma_operand_maps_follow_the_cdna_tables():
    from tile.lang.rocm.intrinsics import get_mma_micro_size, mfma_layout

    for lane in range(64):
        for v in range(4):
            i, k = ISA.mfma_16x16x16_f16_a(lane, v)
            assert mfma_layout.shared_16x16_to_local_64x4_layout_A(i, k) == (lane, v)
            k, j = ISA.mfma_16x16x16_f16_b(lane, v)
            assert mfma_layout.shared_16x16_to_local_64x4_layout_B(j, k) == (lane, v)
    # every K: a bijection onto 64 lanes x K/4 registers, lane i + 16 * (k // (K/4)) by hand
    for k_dim, place in ((4, mfma_layout.shared_16x4_to_local_64x1_layout_A),
                         (32, mfma_layout.shared_16x32_to_local_64x8_layout_A),
                         (64, mfma_layout.shared_16x64_to_local_64x16_layout_A)):
        per_lane = k_dim // 4
        got = {place(i, k) for i in range(16) for k in range(k_dim)}
        assert got == {(lane, r) for lane in range(64) for r in range(per_lane)}
        assert place(5, k_dim - 1) == (5 + 48, per_lane - 1)
    assert get_mma_micro_size("float16") == (16, 16, 16) and get_mma_micro_size("int8") == (16, 16, 32)
