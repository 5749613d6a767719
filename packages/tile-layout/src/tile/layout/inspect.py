"""Seeing layouts and fragments: a text grid (:func:`dump`) and a picture (:func:`plot`).

Both show one cell per element of the logical tile, rows by columns. For a
:class:`~tile.layout.Layout` a cell holds the element's offset in the output (the
output coordinates linearized row-major); for a :class:`~tile.layout.Fragment` it
holds ``T<thread>:<local>``, the thread that owns the element and the register
index within that thread (the local index linearized row-major), like the paper's
Figure 6(c). A replicated element lists every owner: ``T0,T32:3``. Tiles of rank
above 2 show one grid per index of their leading dims.

From the command line (one of the named hardware fragments, for a block of warps)::

    python -m tile.layout.inspect --fragment mma_m16n8k16_c --warps 4 --out mma_c_4warps.png
    python -m tile.layout.inspect --fragment mma_m16n8k16_c --warps 4 --format text
    python -m tile.layout.inspect --list

Example::

    >>> from tile.layout.fragment import Fragment
    >>> from tile.layout.layout import Layout
    >>> from tile.layout.inspect import dump
    >>> print(dump(Layout([2, 3], lambda i, j: j * 2 + i)))
    Layout [2, 3] -> 6 offsets
        0 1 2
    0 | 0 2 4
    1 | 1 3 5
    >>> print(dump(Fragment([2, 2], forward_fn=lambda i, j: (j, i))))
    Fragment [2, 2]: 2 threads x 2 locals
           0    1
    0 | T0:0 T1:0
    1 | T0:1 T1:1
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect as pyinspect
import itertools
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from .errors import TileError
from .fragment import Fragment
from .layout import Layout

ColorBy = Literal["thread", "warp"]

PLOT_SUFFIXES = (".png", ".svg")
"""File types :func:`plot` writes, chosen by the path's suffix."""


class InspectError(TileError):
    """A dump or plot request that cannot be honoured (bad path, unknown name)."""


class PlotDependencyError(InspectError):
    """Plotting needs matplotlib, which is not installed."""


# ------------------------------------------------------------------ the cell table
@dataclasses.dataclass(frozen=True)
class _Cells:
    """Every element's label and color key, in row-major order of ``shape``."""

    title: str
    shape: tuple[int, ...]
    labels: dict[tuple[int, ...], str]
    short_labels: dict[tuple[int, ...], str]
    """Thread only (``T5``), for plots too dense for the full label."""
    keys: dict[tuple[int, ...], int]
    """What colors the cell: first owner thread, or the offset for a Layout."""
    is_fragment: bool
    threads: int


def _row_major(coord: Sequence[int], extents: Sequence[int]) -> int:
    flat = 0
    for c, extent in zip(coord, extents, strict=True):
        flat = flat * extent + c
    return flat


def _extents(points: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """Per-dimension largest value + 1 over ``points``."""
    highest: list[int] = []
    for point in points:
        if not highest:
            highest = list(point)
        highest = [max(h, p) for h, p in zip(highest, point, strict=True)]
    return tuple(h + 1 for h in highest)


def _input_shape(obj: Layout) -> tuple[int, ...]:
    shape = obj.const_input_shape()
    if shape is None:
        raise InspectError(
            f"cannot show {type(obj).__name__} with a symbolic shape",
            hint="build it with constant extents to dump or plot it",
        )
    return shape


def _owners_label(owners: Sequence[tuple[int, int]]) -> str:
    """``T0:3``; ``T0,T32:3`` when replicas share the local; ``T0:1;T4:3`` when not."""
    groups: dict[int, list[int]] = {}
    for thread, local in owners:
        threads = groups.setdefault(local, [])
        if thread not in threads:
            threads.append(thread)
    return ";".join(",".join(f"T{t}" for t in threads) + f":{local}" for local, threads in groups.items())


def _fragment_cells(frag: Fragment) -> _Cells:
    shape = _input_shape(frag)
    rows = list(frag.enumerate_threads())
    local_extents = _extents(local for _, _, _, local in rows)
    owners: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for coord, _rep, thread, local in rows:
        owners.setdefault(coord, []).append((thread, _row_major(local, local_extents)))
    for held in owners.values():
        held.sort()
    threads = 1 + max(thread for _, _, thread, _ in rows)
    locals_count = math.prod(local_extents)
    replicas = f", replicate {frag.replicate_size}" if frag.replicate_size > 1 else ""
    title = f"Fragment {list(shape)}: {threads} threads x {locals_count} locals{replicas}"
    return _Cells(
        title=title,
        shape=shape,
        labels={c: _owners_label(held) for c, held in owners.items()},
        short_labels={c: ",".join(dict.fromkeys(f"T{t}" for t, _ in held)) for c, held in owners.items()},
        keys={c: held[0][0] for c, held in owners.items()},
        is_fragment=True,
        threads=threads,
    )


def _layout_cells(layout: Layout) -> _Cells:
    shape = _input_shape(layout)
    rows = list(layout.enumerate())
    out_extents = _extents(out for _, out in rows)
    offsets = {coord: _row_major(out, out_extents) for coord, out in rows}
    title = f"Layout {list(shape)} -> {math.prod(out_extents)} offsets"
    labels = {c: str(o) for c, o in offsets.items()}
    return _Cells(title, shape, labels, labels, offsets, is_fragment=False, threads=0)


def _cells(obj: Layout) -> _Cells:
    if isinstance(obj, Fragment):
        return _fragment_cells(obj)
    if isinstance(obj, Layout):
        return _layout_cells(obj)
    raise InspectError(
        f"can only show a Layout or a Fragment, got {type(obj).__name__}",
        hint="pass a tile.layout.Layout or tile.layout.Fragment",
    )


def _panels(shape: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], int, int]]:
    """``(leading index, rows, cols)`` per 2-D grid; rank 1 is one row."""
    if len(shape) == 1:
        yield (), 1, shape[0]
        return
    *lead, rows, cols = shape
    for index in itertools.product(*(range(n) for n in lead)):
        yield index, rows, cols


def _coord(lead: tuple[int, ...], row: int, col: int, rank: int) -> tuple[int, ...]:
    return (col,) if rank == 1 else (*lead, row, col)


def _panel_name(lead: tuple[int, ...], rank: int) -> str:
    return "[" + ", ".join([*map(str, lead), *([":"] * min(rank, 2))]) + "]"


# ------------------------------------------------------------------ text
def dump(obj: Layout) -> str:
    """A text grid of ``obj``: offsets for a Layout, ``T<thread>:<local>`` for a Fragment.

    Rows are the second-to-last dim, columns the last; a rank-1 tile is one row
    and higher ranks get one grid per leading index, headed ``[i, :, :]``.

    Raises:
        InspectError: ``obj`` is not a Layout/Fragment, or its shape is symbolic.
        LayoutError: it has more than ``TILE_LAYOUT_MAX_ENUMERATE`` points.

    Example::

        >>> from tile.layout.fragment import Fragment
        >>> print(dump(Fragment([4], forward_fn=lambda i: (i // 2, i % 2))))
        Fragment [4]: 2 threads x 2 locals
               0    1    2    3
            T0:0 T0:1 T1:0 T1:1
    """
    cells = _cells(obj)
    rank = len(cells.shape)
    width = max(len(label) for label in cells.labels.values())
    lines = [cells.title]
    for lead, rows, cols in _panels(cells.shape):
        if lead:
            lines += ["", _panel_name(lead, rank)]
        cell_width = max(width, len(str(cols - 1)))
        row_width = len(str(rows - 1))
        lines.append(" " * (row_width + 3) + " ".join(str(c).rjust(cell_width) for c in range(cols)))
        for row in range(rows):
            head = " " * (row_width + 3) if rank == 1 else f"{row:>{row_width}} | "
            labels = (cells.labels[_coord(lead, row, col, rank)].rjust(cell_width) for col in range(cols))
            lines.append(head + " ".join(labels))
    return "\n".join(lines)


# ------------------------------------------------------------------ pictures
def _matplotlib() -> Any:
    try:
        return importlib.import_module("matplotlib")
    except ImportError as exc:
        raise PlotDependencyError(
            "plotting a layout needs matplotlib, which is not installed",
            hint="pip install tile-layout[plot]",
        ) from exc


def _text_color(rgba: Sequence[float]) -> str:
    """Black or white, whichever reads better on ``rgba`` (sRGB luminance)."""
    red, green, blue = rgba[:3]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _thread_palette(mpl: Any) -> list[tuple[float, ...]]:
    """40 distinct colors (tab20 then tab20b), so the 32 lanes of a warp all differ."""
    return [tuple(c) for name in ("tab20", "tab20b") for c in mpl.colormaps[name].colors]


def _cell_colors(
    cells: _Cells, color_by: ColorBy, colormap: str | None, warp_size: int, mpl: Any
) -> dict[tuple[int, ...], tuple[float, ...]]:
    if not cells.is_fragment:
        cmap = mpl.colormaps[colormap or "viridis"]
        top = max(max(cells.keys.values()), 1)
        return {c: tuple(cmap(key / top)) for c, key in cells.keys.items()}
    if colormap is None:
        palette = list(mpl.colormaps["tab10"].colors) if color_by == "warp" else _thread_palette(mpl)
    else:
        cmap = mpl.colormaps[colormap]
        count = cmap.N if cmap.N < 256 else 16  # a listed map cycles; a smooth one is sampled
        palette = [tuple(cmap(k / max(count - 1, 1))) for k in range(count)]

    def color(key: int) -> tuple[float, ...]:
        group = key // warp_size if color_by == "warp" else key
        return tuple(palette[group % len(palette)])

    return {c: color(key) for c, key in cells.keys.items()}


def _tick_step(extent: int) -> int:
    return 1 if extent <= 32 else 8 if extent <= 64 else 16


def plot(
    obj: Layout,
    path: str | Path,
    *,
    title: str | None = None,
    color_by: ColorBy = "thread",
    colormap: str | None = None,
    warp_size: int = 32,
    dpi: int = 150,
) -> Path:
    """Draw ``obj`` as a grid of labelled cells and write it to ``path`` (.png or .svg).

    Fragment cells read ``T<thread>:<local>`` and are colored by thread (or by
    ``thread // warp_size`` with ``color_by="warp"``); Layout cells show their
    offset on a sequential colormap. Grids wider or taller than 32 cells label
    only the thread, in a smaller font. SVG keeps labels as ``<text>``, each in a
    group whose id is ``cell-<coord>``. matplotlib is imported here, and only its
    Agg and SVG renderers are used (no window, no change to pyplot's state).

    Raises:
        PlotDependencyError: matplotlib is missing (``pip install tile-layout[plot]``).
        InspectError: the suffix is not .png or .svg, or the shape is symbolic.

    Example::

        >>> from tile.layout.fragment import make_linear_fragment
        >>> from tile.layout.inspect import plot
        >>> plot(make_linear_fragment([8, 8], 32), "/tmp/linear.png").suffix
        '.png'
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise InspectError(
            f"cannot tell the image type of {str(path)!r}",
            hint=f"end the file name with one of {', '.join(PLOT_SUFFIXES)}",
        )
    if color_by not in ("thread", "warp"):
        raise InspectError(f"color_by={color_by!r} is not known", hint="use 'thread' or 'warp'")
    cells = _cells(obj)
    mpl = _matplotlib()
    figure_mod = importlib.import_module("matplotlib.figure")
    agg = importlib.import_module("matplotlib.backends.backend_agg")

    panels = list(_panels(cells.shape))
    rows, cols = panels[0][1], panels[0][2]
    # Cells shrink from 0.7 in toward 0.2 in as the grid grows, so the figure stays
    # under ~26 in on its long side for 128x128 tiles; below 0.3 in a cell only
    # has room for the thread.
    cell_in = max(0.2, min(0.7, 24.0 / max(rows, cols)))
    dense = cell_in < 0.3
    labels = cells.short_labels if dense else cells.labels
    longest = max(len(label) for label in labels.values())
    font_pt = max(3.0, min(9.0, 0.85 * cell_in * 72 / (0.7 * max(longest, 2))))
    # Fixed margins in inches instead of a layout engine: a layout engine measures
    # every label in an extra draw, which doubles the time for large tiles.
    grid_w, grid_h = cols * cell_in, rows * cell_in
    top, bottom, gap, side = 0.5, 0.25, 0.45, 0.6
    fig_w = max(grid_w + 2 * side, 4.0)
    fig_h = top + len(panels) * (grid_h + gap) + bottom

    colors = _cell_colors(cells, color_by, colormap, warp_size, mpl)
    rank = len(cells.shape)
    fig = figure_mod.Figure(figsize=(fig_w, fig_h), dpi=dpi)
    agg.FigureCanvasAgg(fig)
    axes = []
    for k in range(len(panels)):
        y = fig_h - top - (k + 1) * (grid_h + gap) + bottom
        box = ((fig_w - grid_w) / 2 / fig_w, y / fig_h, grid_w / fig_w, grid_h / fig_h)
        axes.append(fig.add_axes(box))
    for ax, (lead, _, _) in zip(axes, panels, strict=True):
        image = [[colors[_coord(lead, r, c, rank)] for c in range(cols)] for r in range(rows)]
        ax.imshow(image, interpolation="nearest", aspect="equal")
        for r in range(rows):
            for c in range(cols):
                coord = _coord(lead, r, c, rank)
                label = ax.text(
                    c, r, labels[coord], ha="center", va="center", fontsize=font_pt,
                    color=_text_color(colors[coord]), gid="cell-" + "-".join(map(str, coord)),
                )  # fmt: skip
                label.set_in_layout(False)  # the cells bound the axes; skip the costly text extents
        ax.set_xticks(range(0, cols, _tick_step(cols)))
        ax.set_yticks(range(0, rows, _tick_step(rows)) if rank > 1 else [])
        ax.tick_params(labelsize=max(font_pt, 6.0), length=0, top=True, labeltop=True, bottom=False,
                       labelbottom=False)  # fmt: skip
        ax.set_xticks([x - 0.5 for x in range(cols + 1)], minor=True)
        ax.set_yticks([y - 0.5 for y in range(rows + 1)], minor=True)
        ax.grid(which="minor", color="white", linewidth=0.6 if not dense else 0.2)
        ax.tick_params(which="minor", length=0)
        if lead:
            ax.set_ylabel(_panel_name(lead, rank))
    fig.suptitle(cells.title if title is None else title, fontsize=11, y=1 - 0.12 / fig_h, va="top")
    path.parent.mkdir(parents=True, exist_ok=True)
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tile"}):
        fig.savefig(path, format=suffix[1:], dpi=dpi)
    return path


# ------------------------------------------------------------------ named fragments
# Names people look for that the hardware module spells differently: the m16n8 C
# fragment is shared by every K of mma.sync.
_ALIASES = {
    "mma_m16n8k16_c": "mma_m16n8_c",
    "mma_m16n8k32_c": "mma_m16n8_c",
    "mma_m16n8k8_c": "mma_m16n8_c",
}


def _takes_no_arguments(fn: Callable[..., Any]) -> bool:
    try:
        params = pyinspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


def named_fragments() -> dict[str, Callable[[], Fragment]]:
    """The instruction fragments the command line can show, by name.

    Read from :mod:`tile.layout.hardware`: its ``NAMED_FRAGMENTS`` mapping when it
    has one, else every public function there that builds a ``Fragment`` from its
    defaults alone (``mma_m16n8_c``, ``mma_m16n8k16_a``, ``mfma_16x16x16_d``, ...).
    A new fragment in the hardware module shows up here without an edit.
    """
    hardware = importlib.import_module("tile.layout.hardware")
    table = getattr(hardware, "NAMED_FRAGMENTS", None)
    if table is not None:
        registry: dict[str, Callable[[], Fragment]] = dict(table)
    else:
        registry = {
            name: fn
            for name, fn in vars(hardware).items()
            if not name.startswith("_")
            and pyinspect.isfunction(fn)
            and fn.__module__.startswith(hardware.__name__)
            and pyinspect.signature(fn).return_annotation in (Fragment, "Fragment")
            and _takes_no_arguments(fn)
        }
    for alias, target in _ALIASES.items():
        if target in registry and alias not in registry:
            registry[alias] = registry[target]
    return registry


def stack_on_threads(frag: Fragment, copies: int) -> Fragment:
    """``copies`` copies of ``frag`` stacked along dim 0, each on its own threads.

    For a one-warp instruction fragment this is the block of ``copies`` warps that
    the paper builds with ``repeat_on_thread`` (Figure 6(b)).

    Example::

        >>> from tile.layout.hardware import mma_m16n8_c
        >>> block = stack_on_threads(mma_m16n8_c(), 4)
        >>> [int(e) for e in block.get_input_shape()], int(block.get_thread_size())
        ([64, 8], 128)
    """
    if copies == 1:
        return frag
    return frag.repeat([copies] + [1] * (frag.ndim - 1), repeat_on_thread=True)


def _main_parser(names: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tile.layout.inspect",
        description="Show a named hardware fragment as a text grid or a picture.",
    )
    parser.add_argument("--fragment", choices=names, help="which fragment to show")
    parser.add_argument(
        "--warps",
        type=int,
        default=1,
        help="copies stacked along the rows on new threads: warps for mma/ldmatrix, "
        "waves for MFMA, warpgroups for wgmma (default 1)",
    )
    parser.add_argument("--out", type=Path, help="write here (.png, .svg or .txt); default: stdout")
    parser.add_argument("--format", choices=("text", "png", "svg"), help="default: from --out's suffix")
    parser.add_argument("--color-by", choices=("thread", "warp"), default="thread")
    parser.add_argument("--title", help="picture title (default: a summary of the fragment)")
    parser.add_argument("--list", action="store_true", help="list the fragment names and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    registry = named_fragments()
    parser = _main_parser(sorted(registry))
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(sorted(registry)))
        return 0
    if args.fragment is None:
        parser.error("--fragment is required (see --list)")
    if args.warps < 1:
        parser.error("--warps must be >= 1")
    fmt = args.format or (args.out.suffix.lower().lstrip(".") if args.out else "text")
    if fmt == "txt":
        fmt = "text"
    if fmt not in ("text", "png", "svg"):
        parser.error(f"cannot tell the output format of {args.out}; pass --format")
    try:
        frag = stack_on_threads(registry[args.fragment](), args.warps)
        if fmt == "text":
            text = dump(frag) + "\n"
            if args.out is None:
                sys.stdout.write(text)
            else:
                args.out.write_text(text)
            return 0
        out = args.out or Path(f"{args.fragment}_{args.warps}warps.{fmt}")
        if out.suffix.lower() != "." + fmt:
            out = out.with_suffix("." + fmt)
        plot(frag, out, title=args.title, color_by=args.color_by)
    except TileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
