"""``tile.lang.tools.plot_layout``: draw a layout or fragment as a grid of labelled cells.

A ``T.Layout`` is drawn over its input space (``view="input"``: each cell is an input
position, labelled with the flattened output position it maps to) or its output space
(``view="output"``: each output position, labelled with the input coordinates mapped to it).
A ``T.Fragment`` is drawn over its tile, each element labelled with the thread that holds it
and the index among that thread's registers (``T3 L1``; every holder of a replicated element).

SVG is written by tile itself; PDF and PNG go through matplotlib when it is installed. The
default format is PDF as in TileLang, or SVG (with a warning) where matplotlib is missing.
"""

from __future__ import annotations

import colorsys
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from tile.ir.errors import TileError, TileWarning
from tile.layout import Fragment, Layout

from ..errors import ArgumentTypeError, ArgumentValueError

FORMATS = ("pdf", "png", "svg")
_DEFAULT = "pdf"


class PlotDependencyError(TileError):
    """A PDF or PNG plot was asked for and matplotlib is not installed."""


@dataclass(frozen=True)
class Cell:
    """One grid cell: its row and column, its label lines, and the value it is coloured by."""

    row: int
    col: int
    label: tuple[str, ...]
    key: int


@dataclass(frozen=True)
class Grid:
    rows: int
    cols: int
    cells: tuple[Cell, ...]
    title: str
    keys: int
    """How many distinct colour keys there are (threads, or output positions)."""


def _as_2d(shape: Sequence[int]) -> tuple[int, int]:
    if not shape:
        return 1, 1
    return math.prod(shape[:-1]), shape[-1]


def _flat(coord: Sequence[int], shape: Sequence[int]) -> int:
    index = 0
    for c, n in zip(coord, shape, strict=True):
        index = index * n + c
    return index


def _constant_shape(layout: Layout) -> list[int]:
    shape = layout.const_input_shape()
    if shape is None:
        raise ArgumentValueError(
            "plot_layout draws layouts of constant shape; this one's input shape is symbolic",
            hint="build the layout with integer extents",
        )
    return list(shape)


def fragment_grid(fragment: Fragment, verbose: bool = False) -> Grid:
    """The cells of ``fragment``: each element's holders as ``T<thread> L<local>`` lines."""
    shape = _constant_shape(fragment)
    rows, cols = _as_2d(shape)
    holders: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for coord, _rep, thread, local in fragment.enumerate_threads():
        local_index = local[0] if len(local) == 1 else _flat(local, [max(1, n) for n in local])
        holders.setdefault(tuple(coord), []).append((thread, local_index))
        if verbose:
            print(f"{tuple(coord)} -> thread {thread}, local {tuple(local)}")
    cells = []
    for coord, held in holders.items():
        flat = _flat(coord, shape)
        label = tuple(f"T{t} L{loc}" for t, loc in held)
        cells.append(Cell(flat // cols, flat % cols, label, held[0][0]))
    threads = fragment.get_thread_size()
    title = f"Fragment {shape}: {threads} threads, {fragment.locals_per_thread()} locals each"
    return Grid(rows, cols, tuple(cells), title, max(1, int(threads)))


def layout_grid(
    layout: Layout, view: str = "input", grid_shape: tuple[int, int] | None = None, verbose: bool = False
) -> Grid:
    """The cells of ``layout`` in the ``view`` space (see the module docstring)."""
    if view not in ("input", "output"):
        raise ArgumentValueError(f"plot_layout: view={view!r}", hint='pass view="input" or view="output"')
    in_shape = _constant_shape(layout)
    out_shape = [int(n) for n in layout.get_output_shape()]
    pairs = list(layout.enumerate())
    if verbose:
        for src, dst in pairs:
            print(f"{src} -> {dst}")
    if view == "output":
        if grid_shape is not None:
            raise ArgumentValueError("plot_layout: grid_shape applies to view='input' only")
        rows, cols = _as_2d(out_shape)
        by_output: dict[int, list[tuple[int, ...]]] = {}
        for src, dst in pairs:
            by_output.setdefault(_flat(dst, out_shape), []).append(tuple(src))
        drawn = tuple(
            Cell(flat // cols, flat % cols, tuple(str(s) for s in sources), _flat(sources[0], in_shape))
            for flat, sources in by_output.items()
        )
        return Grid(rows, cols, drawn, f"Layout {in_shape} -> {out_shape} (output view)", math.prod(in_shape))
    total = math.prod(in_shape)
    rows, cols = _as_2d(in_shape)
    if grid_shape is not None:
        rows, cols = (int(n) for n in grid_shape)
        if rows * cols != total:
            raise ArgumentValueError(
                f"plot_layout: grid_shape={tuple(grid_shape)} holds {rows * cols} cells, "
                f"the layout's input has {total}",
                hint="give a (rows, cols) whose product is the number of input elements",
            )
    cells: list[Cell] = []
    for src, dst in pairs:
        flat_in, flat_out = _flat(src, in_shape), _flat(dst, out_shape)
        cells.append(Cell(flat_in // cols, flat_in % cols, (str(flat_out),), flat_out))
    return Grid(rows, cols, tuple(cells), f"Layout {in_shape} -> {out_shape}", math.prod(out_shape))


def _colour(key: int, keys: int) -> str:
    """A light, distinct colour per key (hues spread over the keys)."""
    hue = (key * 0.618033988749895) % 1.0 if keys > 12 else key / max(keys, 1)
    r, g, b = colorsys.hls_to_rgb(hue, 0.78, 0.55)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def render_svg(grid: Grid) -> str:
    """The grid as an SVG document (no dependency)."""
    lines = max((len(c.label) for c in grid.cells), default=1)
    width, height, top = 54, 16 + 12 * lines, 28
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{grid.cols * width + 2}" '
        f'height="{grid.rows * height + top + 2}" font-family="monospace" font-size="10">',
        f'<text x="1" y="16" font-size="12">{escape(grid.title)}</text>',
    ]
    for cell in grid.cells:
        x, y = 1 + cell.col * width, top + cell.row * height
        out.append(
            f'<g class="cell" data-row="{cell.row}" data-col="{cell.col}">'
            f'<rect x="{x}" y="{y}" width="{width}" height="{height}" '
            f'fill="{_colour(cell.key, grid.keys)}" stroke="#333" stroke-width="0.5"/>'
        )
        for i, text in enumerate(cell.label):
            out.append(f'<text x="{x + 4}" y="{y + 14 + 12 * i}">{escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _render_matplotlib(grid: Grid, path: str, colormap: str | None) -> None:
    import matplotlib  # type: ignore[import-not-found, unused-ignore]  # an optional dependency

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

    cmap = plt.get_cmap(colormap) if colormap else None
    lines = max((len(c.label) for c in grid.cells), default=1)
    fig, ax = plt.subplots(figsize=(max(2.0, grid.cols * 0.7), max(1.5, grid.rows * (0.3 + 0.18 * lines))))
    for cell in grid.cells:
        colour = cmap(cell.key / max(grid.keys - 1, 1)) if cmap else _colour(cell.key, grid.keys)
        box = plt.Rectangle((cell.col, cell.row), 1, 1, facecolor=colour, edgecolor="#333", linewidth=0.5)
        ax.add_patch(box)
        ax.text(cell.col + 0.5, cell.row + 0.5, "\n".join(cell.label), ha="center", va="center", fontsize=6)
    ax.set_xlim(0, grid.cols)
    ax.set_ylim(grid.rows, 0)
    ax.set_aspect("auto")
    ax.set_xticks([c + 0.5 for c in range(grid.cols)], [str(c) for c in range(grid.cols)], fontsize=6)
    ax.set_yticks([r + 0.5 for r in range(grid.rows)], [str(r) for r in range(grid.rows)], fontsize=6)
    ax.set_title(grid.title, fontsize=8)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def _formats(formats: str | Sequence[str]) -> list[str]:
    names = formats.split(",") if isinstance(formats, str) else list(formats)
    wanted: list[str] = []
    for name in (n.strip().lower() for n in names):
        for fmt in FORMATS if name == "all" else (name,):
            if fmt not in FORMATS:
                raise ArgumentValueError(
                    f"plot_layout: format {fmt!r}", hint="use pdf, png, svg, all, or a comma-separated list"
                )
            if fmt not in wanted:
                wanted.append(fmt)
    return wanted


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_layout(
    layout: Any,
    save_directory: str | os.PathLike[str] = "./tmp",
    name: str = "layout",
    colormap: str | None = None,
    verbose: bool = False,
    formats: str | Sequence[str] | None = None,
    view: str = "input",
    grid_shape: tuple[int, int] | None = None,
) -> None:
    """Draw ``layout`` (a ``T.Layout`` or ``T.Fragment``) into ``save_directory/name.<format>``.

    ``formats``: ``"pdf"`` (TileLang's default), ``"png"``, ``"svg"``, ``"all"`` or a
    comma-separated list. PDF and PNG need matplotlib; left unset, the format is PDF where
    matplotlib is installed and SVG (with a ``TileWarning``) where it is not. ``view`` and
    ``grid_shape`` apply to a ``T.Layout`` (see the module docstring). Prints each saved path.

    Raises:
        ArgumentTypeError: ``layout`` is neither a layout nor a fragment.
        ArgumentValueError: an unknown format or view, or a ``grid_shape`` of the wrong size.
        PlotDependencyError: PDF or PNG asked for explicitly without matplotlib.
    """
    if isinstance(layout, Fragment):
        grid = fragment_grid(layout, verbose)
    elif isinstance(layout, Layout):
        grid = layout_grid(layout, view, grid_shape, verbose)
    else:
        raise ArgumentTypeError(
            f"plot_layout takes a T.Layout or T.Fragment, got {type(layout).__name__}",
            hint="build one with T.Layout(shape, fn) or T.Fragment(shape, forward_thread_fn=...)",
        )
    if formats is None:
        wanted = [_DEFAULT]
        if not _has_matplotlib():
            warnings.warn(
                "plot_layout: matplotlib is not installed, so the plot is an SVG file "
                "(pip install matplotlib for PDF and PNG)",
                TileWarning,
                stacklevel=2,
            )
            wanted = ["svg"]
    else:
        wanted = _formats(formats)
    needs_matplotlib = [f for f in wanted if f != "svg"]
    if needs_matplotlib and not _has_matplotlib():
        raise PlotDependencyError(
            f"plot_layout: {', '.join(needs_matplotlib)} output needs matplotlib, which is not installed",
            hint='pip install matplotlib, or pass formats="svg" (written without it)',
        )
    os.makedirs(save_directory, exist_ok=True)
    for fmt in wanted:
        path = os.path.join(os.fspath(save_directory), f"{name}.{fmt}")
        if fmt == "svg":
            with open(path, "w", encoding="utf-8") as out:
                out.write(render_svg(grid))
        else:
            _render_matplotlib(grid, path, colormap)
        print(f"Saved {path}")
