"""dump / plot / the command line of tile.layout.inspect."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tile.layout.inspect as inspect_mod
from tile.layout.errors import LayoutError, TileError
from tile.layout.fragment import Fragment
from tile.layout.hardware import make_mma_block_fragment, mma_m16n8_c
from tile.layout.inspect import (
    InspectError,
    PlotDependencyError,
    dump,
    named_fragments,
    plot,
    stack_on_threads,
)
from tile.layout.layout import Layout

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
needs_matplotlib = pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG = "{http://www.w3.org/2000/svg}"


def test_dump_layout_exact() -> None:
    col_major = Layout([3, 4], lambda i, j: j * 3 + i)
    assert dump(col_major) == "\n".join(
        [
            "Layout [3, 4] -> 12 offsets",
            "     0  1  2  3",
            "0 |  0  3  6  9",
            "1 |  1  4  7 10",
            "2 |  2  5  8 11",
        ]
    )


def test_dump_layout_linearizes_a_2d_output() -> None:
    transpose = Layout([2, 3], lambda i, j: [j, i])  # output shape [3, 2]
    assert dump(transpose).splitlines()[1:] == [
        "    0 1 2",
        "0 | 0 2 4",
        "1 | 1 3 5",
    ]


def test_dump_fragment_exact() -> None:
    # 4x4 tile, 4 threads; thread = column, local = row.
    frag = Fragment([4, 4], forward_fn=lambda i, j: (j, i))
    assert dump(frag) == "\n".join(
        [
            "Fragment [4, 4]: 4 threads x 4 locals",
            "       0    1    2    3",
            "0 | T0:0 T1:0 T2:0 T3:0",
            "1 | T0:1 T1:1 T2:1 T3:1",
            "2 | T0:2 T1:2 T2:2 T3:2",
            "3 | T0:3 T1:3 T2:3 T3:3",
        ]
    )


def test_dump_replicated_lists_every_owner() -> None:
    # Two threads own each element of a 1x2 tile: thread j and j + 2.
    frag = Fragment([1, 2], forward_thread_fn=lambda i, j, rep: j + 2 * rep, forward_index_fn=lambda i, j: i,
                    replicate=2)  # fmt: skip
    assert dump(frag) == "\n".join(
        [
            "Fragment [1, 2]: 4 threads x 1 locals, replicate 2",
            "          0       1",
            "0 | T0,T2:0 T1,T3:0",
        ]
    )


def test_dump_owners_with_different_locals() -> None:
    assert inspect_mod._owners_label([(0, 1), (4, 3)]) == "T0:1;T4:3"
    assert inspect_mod._owners_label([(0, 3), (32, 3)]) == "T0,T32:3"


def test_dump_rank1_and_rank3() -> None:
    assert dump(Layout([3], lambda i: 2 - i)).splitlines() == [
        "Layout [3] -> 3 offsets",
        "    0 1 2",
        "    2 1 0",
    ]
    rank3 = Fragment([2, 1, 2], forward_fn=lambda b, i, j: (j, b))
    assert dump(rank3).splitlines() == [
        "Fragment [2, 1, 2]: 2 threads x 2 locals",
        "",
        "[0, :, :]",
        "       0    1",
        "0 | T0:0 T1:0",
        "",
        "[1, :, :]",
        "       0    1",
        "0 | T0:1 T1:1",
    ]


def test_dump_mma_c_matches_ptx() -> None:
    # PTX m16n8 C: lane = 4 * (m % 8) + n // 2, register = 2 * (m // 8) + n % 2.
    lines = dump(mma_m16n8_c()).splitlines()
    assert lines[0] == "Fragment [16, 8]: 32 threads x 4 locals"
    for m in range(16):
        cells = lines[2 + m].split("|")[1].split()
        assert cells == [f"T{4 * (m % 8) + n // 2}:{2 * (m // 8) + n % 2}" for n in range(8)]


def test_stack_on_threads_is_the_block_helper() -> None:
    block = stack_on_threads(mma_m16n8_c(), 4)
    assert dump(block) == dump(make_mma_block_fragment(64, 8, 4, 1))
    assert stack_on_threads(mma_m16n8_c(), 1) is not None


def test_named_fragments_come_from_the_hardware_module() -> None:
    names = named_fragments()
    assert {"mma_m16n8k16_c", "mma_m16n8k16_a", "mma_m16n8_c", "mfma_16x16x16_d"} <= set(names)
    assert "make_mma_block_fragment" not in names  # needs arguments
    for build in names.values():
        assert isinstance(build(), Fragment)


def test_wrong_inputs_are_typed() -> None:
    with pytest.raises(InspectError):
        dump("not a layout")  # type: ignore[arg-type]
    with pytest.raises(InspectError, match=r"\.png, \.svg"):
        plot(mma_m16n8_c(), "out.jpg")
    with pytest.raises(TileError):
        plot(mma_m16n8_c(), "out.png", color_by="lane")  # type: ignore[arg-type]


def test_too_many_points_is_a_layout_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_LAYOUT_MAX_ENUMERATE", "10")
    with pytest.raises(LayoutError, match="TILE_LAYOUT_MAX_ENUMERATE"):
        dump(Layout([4, 4], lambda i, j: i * 4 + j))


def test_missing_matplotlib_has_an_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_import = importlib.import_module

    def no_matplotlib(name: str, package: str | None = None) -> object:
        if name.split(".")[0] == "matplotlib":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", no_matplotlib)
    with pytest.raises(PlotDependencyError) as info:
        plot(mma_m16n8_c(), tmp_path / "c.png")
    assert isinstance(info.value, TileError)
    assert "pip install tile-layout[plot]" in str(info.value)


@needs_matplotlib
def test_plot_png(tmp_path: Path) -> None:
    out = plot(mma_m16n8_c(), tmp_path / "sub" / "c.png", title="mma C")
    data = out.read_bytes()
    assert out == tmp_path / "sub" / "c.png"
    assert data[:8] == PNG_MAGIC and len(data) > 1000


def _cell_groups(path: Path) -> list[ET.Element]:
    root = ET.parse(path).getroot()
    return [g for g in root.iter(f"{SVG}g") if g.get("id", "").startswith("cell-")]


@needs_matplotlib
def test_plot_svg_labels_every_element(tmp_path: Path) -> None:
    frag = stack_on_threads(mma_m16n8_c(), 2)  # 32 x 8
    out = plot(frag, tmp_path / "c.svg", color_by="warp")
    groups = _cell_groups(out)
    assert len(groups) == 32 * 8
    texts = [t for g in groups for t in g.iter(f"{SVG}text")]
    assert len(texts) == 32 * 8
    labels = {g.get("id"): "".join(t.itertext()).strip() for g in groups for t in g.iter(f"{SVG}text")}
    assert labels["cell-9-3"] == "T5:3"  # PTX: (9, 3) -> lane 5, c3
    assert labels["cell-25-3"] == "T37:3"  # the same element of warp 1


@needs_matplotlib
def test_plot_svg_layout_and_replicated(tmp_path: Path) -> None:
    layout = Layout([4, 8], lambda i, j: i * 8 + (j ^ i))
    groups = _cell_groups(plot(layout, tmp_path / "l.svg"))
    assert len(groups) == 32
    replicated = Fragment([2, 2], forward_thread_fn=lambda i, j, rep: j + 2 * rep,
                          forward_index_fn=lambda i, j: i, replicate=2)  # fmt: skip
    groups = _cell_groups(plot(replicated, tmp_path / "r.svg"))
    assert sorted("".join(t.itertext()) for g in groups for t in g.iter(f"{SVG}text")) == [
        "T0,T2:0", "T0,T2:1", "T1,T3:0", "T1,T3:1",
    ]  # fmt: skip


@needs_matplotlib
def test_plot_big_tile_labels_threads_only(tmp_path: Path) -> None:
    big = make_mma_block_fragment(96, 16, 2, 1)  # past 80 rows a cell has room for the thread only
    groups = _cell_groups(plot(big, tmp_path / "big.svg"))
    assert len(groups) == 96 * 16
    sample = "".join(next(iter(groups)).itertext()).strip()
    assert sample.startswith("T") and ":" not in sample


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tile.layout.inspect", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_cli_text(tmp_path: Path) -> None:
    done = _run_cli("--fragment", "mma_m16n8k16_c", "--warps", "4", "--format", "text", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == dump(make_mma_block_fragment(64, 8, 4, 1)) + "\n"


@needs_matplotlib
def test_cli_png(tmp_path: Path) -> None:
    done = _run_cli(
        "--fragment", "mma_m16n8k16_c", "--warps", "4", "--out", "mma_c_4warps.png", cwd=tmp_path
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "mma_c_4warps.png"
    assert (tmp_path / "mma_c_4warps.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_list_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    # In process: argparse's answers need no fresh interpreter.
    assert inspect_mod.main(["--list"]) == 0
    assert capsys.readouterr().out.split() == sorted(named_fragments())
    for argv, message in (
        (["--fragment", "nope"], "invalid choice"),
        (["--fragment", "mma_m16n8_c", "--warps", "0"], "--warps"),
        (["--warps", "2"], "--fragment is required"),
        (["--fragment", "mma_m16n8_c", "--out", "c.jpg"], "pass --format"),
    ):
        with pytest.raises(SystemExit) as info:
            inspect_mod.main(argv)
        assert info.value.code == 2
        assert message in capsys.readouterr().err


def test_cli_text_to_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.txt"
    assert inspect_mod.main(["--fragment", "mfma_16x16x16_d", "--out", str(out)]) == 0
    assert out.read_text() == dump(named_fragments()["mfma_16x16x16_d"]()) + "\n"


def test_docstring_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if not HAS_MATPLOTLIB:
        pytest.skip("the plot example needs matplotlib")
    result = doctest.testmod(inspect_mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
