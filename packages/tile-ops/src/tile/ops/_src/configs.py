"""How each op tiles its kernels on a target: one small function per op, returning the
``Tiling`` the op's kernel factories take (``tiled`` gives a factory its keyword form).

Each reads only the target's ``Capabilities`` (on-chip memory, threads per block) and the
problem's sizes, never the target's name or arch, so a new backend gets a working tiling
from the data it advertises. These functions are where a hint generator plugs in: when
``tile.lang.carver`` (hints ranked per device) and the tuning cache land, each
``*_config`` asks them first for ``(op, shapes, dtype, target)`` and keeps its current
body as the fallback for targets the carver has no hint for.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

from tile.ir.backend import Capabilities, resolve_target
from tile.ir.target import Target

from .errors import bad_argument

DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


@functools.cache
def target_capabilities(target: str) -> tuple[Target, Capabilities]:
    """The concrete target ``target`` resolves to, and what it can do."""
    resolved, manifest = resolve_target(target)
    return resolved, manifest.capabilities(resolved)


def accum_dtype(dtype: str) -> str:
    """float64 inputs accumulate in float64 (gradchecks); everything else in float32."""
    return "float64" if dtype == "float64" else "float32"


def _fit_tile(extent: int, largest: int, smallest: int = 16) -> int:
    """The power-of-two tile in [smallest, largest] closest above ``extent`` (no wasted blocks)."""
    tile = smallest
    while tile < extent and tile < largest:
        tile *= 2
    return tile


MMA_ROWS = 16
"""Rows of the smallest matrix-instruction tile (mma.sync m16, MFMA 16x16): a gemm whose warps
split the rows (``GemmWarpPolicy.FullRow``) gives each warp a multiple of this many."""


@dataclasses.dataclass(frozen=True)
class Tiling:
    """How a kernel tiles its problem: what the ``*_config`` functions pick for a target and
    every kernel factory of tile.ops takes, as one value (hashable: compiled kernels are cached
    on it). ``block_M`` rows (queries, output rows, rows of a row-wise kernel), ``block_N``
    columns (keys, output columns) and ``block_K`` reduction steps per block, ``num_stages``
    copies in flight in a pipelined loop, ``threads`` per block, and ``panel``: blocks visited
    in panels of that many block rows (0: row by row). A kernel ignores what it does not tile.
    """

    block_M: int = 64
    block_N: int = 64
    block_K: int = 32
    num_stages: int = 1
    threads: int = 128
    panel: int = 0


def check_tiling(op: str, tiling: Tiling) -> None:
    """Every field of ``tiling`` is a whole number, positive (``panel``: at least 0)."""
    for field in dataclasses.fields(tiling):
        value = getattr(tiling, field.name)
        least = 0 if field.name == "panel" else 1
        try:
            whole = operator.index(value)
        except TypeError:
            whole = None
        if whole is None or whole < least:
            raise bad_argument(op, field.name, f"is {value!r}", f"pass a whole number of at least {least}")


def tiled(**defaults: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make ``factory(*problem, tiling)`` a kernel factory that also takes its tiling as
    parameters: ``defaults`` names the ``Tiling`` fields the kernel tiles by, in the order they
    follow the problem's parameters, with the values a caller who names none gets. The
    factory's signature lists them (``help`` shows them, and the autotuner checks its configs'
    keys against them), so ``factory(..., block_M=128)`` works as it reads, positionally too;
    ``factory(..., tiling=config)`` passes a config function's ``Tiling`` whole. The tiling is
    checked (``check_tiling``) before the kernel is built."""

    def wrap(factory: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(factory)
        problem = [p for p in own.parameters.values() if p.name != "tiling"]
        Parameter = inspect.Parameter
        fields = [Parameter(name, Parameter.POSITIONAL_OR_KEYWORD, default=value, annotation=int)
                  for name, value in defaults.items()]
        whole = Parameter("tiling", Parameter.KEYWORD_ONLY, default=None, annotation="Tiling | None")
        signature = own.replace(parameters=[*problem, *fields, whole])
        op = factory.__name__

        @functools.wraps(factory)
        def make(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            named = [name for name in defaults if name in bound.arguments]
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            tiling = arguments.pop("tiling")
            chosen = {name: arguments.pop(name) for name in defaults}
            if tiling is None:
                tiling = Tiling(**chosen)
            elif named:
                raise bad_argument(op, named[0], "is given with tiling=", "pass the tiling one way only")
            check_tiling(op, tiling)
            return factory(**arguments, tiling=tiling)

        make.__signature__ = signature  # type: ignore[attr-defined]
        return make

    return wrap


ROW_VECTOR_BYTES = 1024
"""What one shared row vector (the backward's LSE and Delta tiles) is counted as: backends pad
shared buffers (gfx90a's dK/dV kernel of 64-row float32 tiles, dim 32: 34816 bytes of dynamic
LDS for 32768 of tiles and two 256-byte rows)."""


def attention_shared_bytes(block_M: int, block_N: int, dim: int, itemsize: int, stages: int) -> int:
    """On-chip bytes of the FlashAttention backward's dK/dV kernel, the largest of the family:
    the Q, dO, K and V tiles (once per pipeline stage: the forward pipelines K and V, the
    backward kernels Q and dO, or K and V), its LSE and Delta rows, and
    its two (block_N, block_M) probability tiles, which a target whose matrix instructions
    cannot read them from registers stages in shared memory as gemm operands."""
    tiles = (2 * block_M + 2 * block_N) * dim * itemsize * stages
    return tiles + 2 * block_M * block_N * itemsize + 2 * ROW_VECTOR_BYTES


def attention_config(caps: Capabilities, seq_q: int, seq_kv: int, dim: int, dtype: str) -> Tiling:
    """Query and key tiles of up to 64 rows, halved until the backward's tiles fit in the
    target's shared memory (``attention_shared_bytes``); two pipeline stages where copies are
    asynchronous."""
    itemsize = DTYPE_BYTES.get(dtype, 4)
    block_M, block_N = _fit_tile(seq_q, 64), _fit_tile(seq_kv, 64)
    stages = 2 if caps.async_copy else 1
    budget = caps.shared_bytes
    while block_N > 16 and attention_shared_bytes(block_M, block_N, dim, itemsize, stages) > budget:
        block_M, block_N = max(16, block_M // 2), block_N // 2
    return Tiling(block_M, block_N, num_stages=stages, threads=_row_warp_threads(caps, block_M))


def attention_bwd_fused(
    caps: Capabilities, cfg: Tiling, blocks: int, groups: int, seq_q: int, dim: int
) -> int:
    """How many blocks each of the ``blocks`` = batch * KV heads gets when the FlashAttention
    backward runs as one kernel (``flash_bwd_fused_kernel``: five tile products per step
    instead of seven, dQ summed in each block's memory), or 0 for the two-kernel backward.

    One kernel on targets that run a block on one thread (no thread binding), with the
    ``groups`` query heads of a KV head split over the fewest blocks (a divisor of
    ``groups``, its ``head_splits``) for which a block's (heads * seq_q, dim) float32 dQ
    accumulator takes at most half a core's second-level cache and all blocks give every
    compute unit at least two: MQA with one batch is one KV head, which unsplit would be one
    block on one core."""
    if caps.thread_binding or not caps.cache_bytes:
        return 0
    rows = -(-seq_q // cfg.block_M) * cfg.block_M
    second_level = caps.cache_bytes[min(1, len(caps.cache_bytes) - 1)]
    for splits in (d for d in range(1, groups + 1) if groups % d == 0):
        fits = groups // splits * rows * dim * 4 <= second_level // 2
        if fits and blocks * splits >= 2 * caps.compute_units:
            return splits
    return 0


def _row_warp_threads(caps: Capabilities, rows: int) -> int:
    """Threads for a tile of ``rows`` query rows whose gemms split the rows over the warps
    (``GemmWarpPolicy.FullRow``): up to 128, at most one warp per ``MMA_ROWS`` rows, so every
    warp gets whole instruction tiles (more would leave the gemms without a matrix-instruction
    layout, and the row statistics shared by two accumulators of different widths without one
    binding). Targets without thread binding keep 128."""
    threads = min(128, caps.max_threads)
    if caps.thread_binding and caps.warp_size > 1:
        threads = min(threads, caps.warp_size * max(1, rows // MMA_ROWS))
    return threads


def column_warp_threads(caps: Capabilities, *widths: int) -> int:
    """Threads for tiles whose gemms split the columns over the warps (``GemmWarpPolicy.FullCol``,
    MLA decoding): up to 256, at most one warp per column tile of the narrowest matrix
    instruction in the narrowest of the accumulators' ``widths``, so every warp holds whole
    instruction tiles of each accumulator and they all keep the rows' statistics alike."""
    threads = min(256, caps.max_threads)
    if caps.thread_binding and caps.warp_size > 1 and caps.mma_shapes:
        columns = min(n for _, n, _ in caps.mma_shapes)
        threads = min(threads, caps.warp_size * max(1, min(widths) // columns))
    return threads


def row_config(caps: Capabilities, M: int, N: int) -> Tiling:
    """Row-wise kernels (norms, softmax): ``block_M`` whole rows per block, as many (up to 16)
    as keep a few (block_M, N) fp32 row tiles on chip."""
    block_M = _fit_tile(M, 16, smallest=1)
    while block_M > 1 and 4 * block_M * N * 4 > caps.shared_bytes:
        block_M //= 2
    return Tiling(block_M, threads=min(128, caps.max_threads))


PARTIAL_BYTES = 4 << 20
"""At most this many bytes of per-block weight-gradient partial sums per norm backward."""


def norm_bwd_config(caps: Capabilities, M: int, N: int) -> Tiling:
    """A norm backward: ``block_M`` rows per block (walked one at a time), the rows split over
    8 blocks per compute unit (blocks of equal work, and spare ones for a core that another
    process slows), fewer blocks where their (blocks, N) partial sums would pass
    ``PARTIAL_BYTES``; ``row_config``'s threads."""
    blocks = min(M, 8 * max(1, caps.compute_units), max(1, PARTIAL_BYTES // (4 * N)))
    return Tiling(-(-M // blocks), threads=row_config(caps, M, N).threads)


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
    """Split-KV decoding: ``num_splits`` key ranges of ``block_N``-row tiles per (batch, KV head),
    ``block_H`` query rows per split block on ``split_threads`` threads; ``threads`` and
    ``block_R`` rows per block for the combine kernel."""

    block_N: int
    num_splits: int
    threads: int
    block_H: int = 16
    split_threads: int = 128
    block_R: int = 16
    """Rows per block of the combine kernel."""


def decode_config(caps: Capabilities, rows: int, seq_kv: int, dim: int, dtype: str) -> DecodeConfig:
    """Key tiles like attention's; up to 16 splits of at least 4 tiles each, none empty.

    The split kernel's row tile (``block_H``: the query rows sharing a KV head, 16 to 64) is
    split over its warps by rows, so both of its gemms keep every row in one warp and the row
    softmax between them needs no exchange: one warp per ``MMA_ROWS`` rows. More warps than
    that would leave each warp less than one instruction tile of rows, and the gemms without
    a matrix-instruction layout."""
    block_N = _fit_tile(seq_kv, 64)
    tiles = -(-seq_kv // block_N)
    wanted = max(1, min(16, tiles // 4))
    per_split = -(-tiles // wanted)
    block_H = _fit_tile(rows, 64)
    threads = min(128, caps.max_threads)
    return DecodeConfig(block_N, -(-tiles // per_split), threads, block_H, _row_warp_threads(caps, block_H))


def dequant_config(caps: Capabilities, M: int, K: int = 0, group_size: int = 0, bits: int = 4) -> Tiling:
    """Dequantized GEMM: ``block_M`` the activation rows rounded up to a power of two in 16..64,
    64 weight rows (output columns) per block, one stage (each step dequantizes its tile in
    registers first). One row runs the GEMV body, which reads ``block_N``, ``threads`` and
    ``block_K`` (codes per step: one group of ``group_size`` here).

    Targets that run a block on one thread (no thread binding) get ``gemv_rows_config``'s
    GEMV tiling when ``K`` and ``group_size`` are given."""
    if M == 1 and K and group_size and not caps.thread_binding and caps.cache_bytes:
        return gemv_rows_config(caps, K, group_size, bits)
    threads = min(128, caps.max_threads)
    return Tiling(_fit_tile(M, 64), 64, block_K=group_size or 32, num_stages=1, threads=threads)


def gemv_rows_config(caps: Capabilities, K: int, group_size: int, bits: int) -> Tiling:
    """The dequantized GEMV on a target that runs a block on one core: each block streams
    whole weight rows. A step of one group reads ``group_size * bits / 8`` bytes of each of the
    block's rows and then jumps a row ahead: the hardware prefetchers see dozens of short
    streams, and the 4096 x 4096 int4 GEMV (64-byte pieces of 2 KiB rows) ran at 0.6 GB/s on a
    Zen 3 core. Here a step covers as many groups as divide K while the step's float32
    activations take at most half the second-level cache (every row of the block reads them),
    so a block's rows are one contiguous range of memory when the step is all of K; a block
    holds a power of two of rows (4 to 64) whose packed bytes fill about the first-level cache.
    """
    groups = max(1, K // group_size)
    second_level = caps.cache_bytes[min(1, len(caps.cache_bytes) - 1)]
    fitting = (g for g in range(2, groups + 1) if groups % g == 0 and g * group_size * 4 <= second_level // 2)
    per_step = max(fitting, default=1)
    row_bytes = max(1, K * bits // 8)
    rows = 4
    while rows < 64 and rows * 2 * row_bytes <= caps.cache_bytes[0]:
        rows *= 2
    return Tiling(1, rows, block_K=per_step * group_size, num_stages=1, threads=min(rows, caps.max_threads))
