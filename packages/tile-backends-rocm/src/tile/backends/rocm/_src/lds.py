"""LDS bank conflicts of the MFMA gemm's operand reads (CDNA: gfx90a, gfx942; wave64).

Bank model (gpu-isa-facts §9, from the ROCm Compute Profiler's "Local data share"
page): the LDS has 32 banks of 4 bytes, bank = ``(addr / 4) % 32``; a bank serves one
4-byte word per cycle, and lanes that read the same word are served together
(broadcast).

Which lanes of a wave64 are served together depends on the access width. Sources:

* ``ds_read_b32`` and narrower (``ds_read_u16``): AMD's *OpenCL Programming Guide*
  (GCN, "Local Memory (LDS) Optimizations", as quoted on AMD's community forum,
  community.amd.com thread 196599 and archive thread 166644): "Bank conflicts are
  determined by what addresses are accessed on each half wavefront boundary. Threads
  0 through 31 are checked for conflicts as are threads 32 through 63": groups of 32
  lanes.
* ``ds_read_b64``: the same guide asks that "the memory requests generated from a
  quarter-wavefront avoid bank conflicts" and calls sequential ``float2`` reads
  conflict-free: groups of 16 consecutive lanes (16 x 8 B = the 128 bytes of all banks).
* ``ds_write_b128`` / ``ds_read_b128``: Composable Kernel's *Understanding AMD GPU LDS
  and Bank Conflicts* (rocm.docs.amd.com, ck_tile/hardware/lds_bank_conflicts) divides a
  wave64 ``ds_write_b128`` into 8 phases of 8 consecutive lanes (0-7, 8-15, ...).

*Assumption* (not documented by AMD for CDNA2/CDNA3 in what we found): reads follow the
same grouping as the writes, i.e. a group is ``128 / width`` consecutive lanes for 8- and
16-byte accesses and 32 lanes for 4 bytes and narrower (``LANE_GROUPS``). A third-party
script claims that gfx942 serves ``ds_read_b128`` in interleaved 8-lane groups (0-3 with
20-23, ...); no AMD text for it was found, so it is not modelled. ROC's "a wave gets at
most 64 B/cycle" bounds throughput, not conflicts: it is part of the unavoidable cost.

A group needs at least ``ceil(distinct words / 32)`` bank cycles; its *ways* are the most
distinct words any one bank must serve. ``extra`` = ways - that minimum is the
serialization the layout causes: 0 is conflict-free.

Access pattern (``gemm.py``): for ``v_mfma_f32_16x16x16f16`` lane ``l`` of a wave reads A
tile elements ``A[l%16][4(l//16)+v]`` and B tile elements ``B[4(l//16)+v][l%16]``,
v = 0..3 (32x32x8: ``l%32`` and ``4(l//32)+v``; ``tile``/``per_lane`` arguments). The
gemm reads a lane's elements with one wide load (``tile::copy_64``: ``ds_read_b64``;
``copy_32`` / ``copy_128``) exactly where ``merged_read_elements`` finds them contiguous
and aligned in the physical layout on every lane, and element by element elsewhere, so
``operand_reads`` lists the reads it emits. (hipcc does not merge element loads from
swizzled LDS reliably: a 128x128x32 fp16 gemm on gfx90a, A ``[M][K]``, had 56
``ds_read_u16``, one ``ds_read_b64`` and one ``ds_read2_b32`` per K tile before the gemm
emitted wide reads; ``tests/test_rocm_compile.py`` has the counts after.)
The gemm decides for the tiles it reads; ``operand_reads`` looks at an operand tile at
every multiple of 16 (32) of the operand, a superset of what any wave partition reads.

Floor for K-contiguous operands (A ``[M][K]``, B transposed ``[N][K]``): a group of 16
lanes reads the same 8-byte half of one 16-byte chunk in each of 16 rows, so a layout
that moves whole 16-byte chunks (every XOR swizzle, which keeps the 16-byte copy stores
into LDS whole) reaches at best 8 distinct bank pairs: 2 ways. Only a layout that splits
the chunks (8-byte granularity, or an 8-byte row pad that unaligns the 16-byte stores)
gets those reads to 1 way.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from tile.layout import Layout, dtype_bits

BANKS = 32
BANK_BYTES = 4
TILE = 16
PER_LANE = 4
WAVE = 64
Operand = Literal["A", "B"]


def lane_groups(width: int) -> list[range]:
    """The lanes of a wave64 the LDS serves together for a ``width``-byte access (see module doc)."""
    size = BANKS * BANK_BYTES // width if width >= 8 else 32
    return [range(start, start + size) for start in range(0, WAVE, size)]


@dataclasses.dataclass(frozen=True)
class LdsAccess:
    """One LDS instruction of one wave: each lane's byte address, all ``width`` bytes wide."""

    width: int
    addresses: tuple[int, ...]
    what: str = ""


@dataclasses.dataclass(frozen=True)
class GroupCost:
    ways: int
    """Most distinct 4-byte words one bank serves for this lane group."""
    minimum: int
    """``ceil(distinct words / 32)``: cycles no layout can avoid."""

    @property
    def extra(self) -> int:
        return self.ways - self.minimum


def _words(address: int, width: int) -> range:
    first = address // BANK_BYTES
    return range(first, max(first + 1, (address + width + BANK_BYTES - 1) // BANK_BYTES))


def group_cost(addresses: Iterable[int], width: int) -> GroupCost:
    """Bank cost of one group of lanes served together."""
    words = {w for a in addresses for w in _words(a, width)}
    per_bank: dict[int, int] = {}
    for w in words:
        per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
    return GroupCost(max(per_bank.values(), default=0), max(1, math.ceil(len(words) / BANKS)))


def access_cost(access: LdsAccess) -> GroupCost:
    """The worst group of one access (``extra`` = 0: conflict-free)."""
    groups = lane_groups(access.width)
    costs = [group_cost([access.addresses[lane] for lane in g], access.width) for g in groups]
    return max(costs, key=lambda c: (c.extra, c.ways))


def element_offsets(layout: Layout) -> dict[tuple[int, ...], int]:
    """Logical coordinate -> physical element offset (row-major over the layout's output shape)."""
    out_shape = [int(e) for e in layout.get_output_shape()]
    offsets = {}
    for coord, phys in layout.enumerate():
        flat = 0
        for index, extent in zip(phys, out_shape, strict=True):
            flat = flat * extent + index
        offsets[coord] = flat
    return offsets


def merged_read_elements(addresses: Sequence[Sequence[int]], elem: int, per_lane: int) -> int:
    """Elements per LDS read: the widest power-of-two run (at most 16 bytes) that is
    contiguous and aligned on every lane.

    ``addresses``: per lane, the byte addresses of its ``per_lane`` operand elements
    (any number of lanes: pass every tile a gemm reads to get the width that fits all).
    The gemm lowering (``gemm.py``) emits its operand reads at this width, so the model
    counts the reads it emits.

    Example::

        >>> merged_read_elements([[0, 2, 4, 6], [8, 10, 12, 14]], 2, 4)
        4
        >>> merged_read_elements([[4, 6, 8, 10]], 2, 4)  # 4 bytes in, not 8-byte aligned
        2
    """
    run = per_lane
    while run > 1:
        if run * elem <= 16 and all(
            lane[v] == lane[v - v % run] + (v % run) * elem and lane[v - v % run] % (run * elem) == 0
            for lane in addresses
            for v in range(per_lane)
        ):
            return run
        run //= 2
    return 1


def lane_addresses(
    offsets: Mapping[tuple[int, ...], int],
    elem: int,
    k_last: bool,
    mn0: int,
    k0: int,
    tile: int = TILE,
    per_lane: int = PER_LANE,
    base: int = 0,
) -> list[list[int]]:
    """Per lane of a wave64, the byte addresses of its operand elements of one MFMA tile.

    The tile's first element is logical ``(mn0, k0)``; lane ``l`` holds ``per_lane``
    consecutive K elements of row/column ``l % tile`` from ``per_lane * (l // tile)``
    (tile-layout's ``mfma_operand``). ``offsets``: ``element_offsets`` of the storage
    layout; ``k_last``: storage ``[MN][K]`` (else ``[K][MN]``).
    """
    lanes = []
    for lane in range(WAVE):
        mn, k = mn0 + lane % tile, k0 + per_lane * (lane // tile)
        coords = [(mn, k + v) if k_last else (k + v, mn) for v in range(per_lane)]
        lanes.append([base + offsets[c] * elem for c in coords])
    return lanes


def operand_reads(
    layout: Layout,
    dtype: str,
    operand: Operand,
    transposed: bool = False,
    base: int = 0,
    tile: int = TILE,
    per_lane: int = PER_LANE,
) -> list[LdsAccess]:
    """Every LDS access of the MFMA operand reads of a 2-D shared tile in ``layout``.

    ``operand``/``transposed`` as in ``T.gemm``: storage is ``[MN][K]`` for A and for B
    transposed, ``[K][MN]`` otherwise. ``base``: the buffer's byte offset in LDS (only
    ``base % 128`` matters). ``tile`` x ``tile`` MFMAs whose lane ``l`` holds ``per_lane``
    consecutive K elements of row/column ``l % tile`` from ``per_lane * (l // tile)``
    (16 and 4 for ``v_mfma_f32_16x16x16f16``; 32 and 4 for ``32x32x8``).
    """
    elem = dtype_bits(dtype) // 8
    shape = [int(e) for e in layout.get_input_shape()]
    if len(shape) != 2:
        raise ValueError(f"operand_reads takes a 2-D shared tile, got shape {shape}")
    offsets = element_offsets(layout)
    k_last = (operand == "A") != transposed
    mn_extent, k_extent = (shape[0], shape[1]) if k_last else (shape[1], shape[0])
    k_step = per_lane * WAVE // tile
    out: list[LdsAccess] = []
    for mn0 in range(0, mn_extent - tile + 1, tile):
        for k0 in range(0, k_extent - k_step + 1, k_step):
            lanes = lane_addresses(offsets, elem, k_last, mn0, k0, tile, per_lane, base)
            run = merged_read_elements(lanes, elem, per_lane)
            for v in range(0, per_lane, run):
                what = f"{operand} tile ({mn0}, {k0}) elements {v}..{v + run - 1}"
                out.append(LdsAccess(run * elem, tuple(lane[v] for lane in lanes), what))
    return out


@dataclasses.dataclass(frozen=True)
class LdsConflicts:
    """What ``lds_bank_conflicts`` found: the worst access and a count of the conflicting ones."""

    worst_extra: int
    """Ways of serialization beyond the unavoidable, worst access (0: conflict-free)."""
    worst_ways: int
    width: int
    """Bytes per lane of the accesses (8: ``ds_read_b64``, 2: ``ds_read_u16``)."""
    accesses: int
    conflicting: int
    worst: str

    @property
    def conflict_free(self) -> bool:
        return self.worst_extra == 0


def lds_bank_conflicts(reads: Sequence[LdsAccess]) -> LdsConflicts:
    """Bank conflicts of LDS accesses: of the MFMA gemm reading a shared operand when ``reads``
    are its ``operand_reads``.

    Example::

        >>> from tile.layout import make_row_major_layout, make_swizzled_layout
        >>> plain, swizzled = make_row_major_layout([64, 64]), make_swizzled_layout([64, 64], "float16")
        >>> lds_bank_conflicts(operand_reads(plain, "float16", "A")).worst_ways
        16
        >>> lds_bank_conflicts(operand_reads(swizzled, "float16", "A")).worst_ways
        2
    """
    costs = [access_cost(a) for a in reads]
    worst = max(range(len(reads)), key=lambda i: (costs[i].extra, costs[i].ways))
    return LdsConflicts(
        worst_extra=costs[worst].extra,
        worst_ways=costs[worst].ways,
        width=reads[worst].width,
        accesses=len(reads),
        conflicting=sum(c.extra > 0 for c in costs),
        worst=reads[worst].what,
    )


__all__ = [
    "LdsAccess",
    "LdsConflicts",
    "access_cost",
    "element_offsets",
    "group_cost",
    "lane_addresses",
    "lane_groups",
    "lds_bank_conflicts",
    "merged_read_elements",
    "operand_reads",
]
