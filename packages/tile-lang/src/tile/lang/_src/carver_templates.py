"""Ranked tile configs from a device's facts (TileLang's ``carver.template`` names).

Each template enumerates tile shapes, drops those the device cannot run, and ranks the
rest by a score stated in one formula, so a hint can be checked by hand:

* **fit** (hard): shared memory of a block <= ``smem_cap``; 32-bit registers of a thread
  <= ``max_registers_per_thread``; threads <= ``max_threads_per_block``; on a GPU every tile
  edge a matrix instruction covers is a multiple of its (m, n, k); on a CPU the inner tile
  edge is a multiple of the vector lanes and the working set fits the L2 cache.
* **waves**: ``tiles`` blocks run ``per_core`` at a time on each of ``compute_max_core``
  cores, ``per_core = min(max_threads_per_core // threads, max_smem_usage // smem,
  reg_cap // (threads * regs))`` on a GPU and 1 on a CPU; ``waves = ceil(tiles /
  (cores * per_core))`` and ``wave_efficiency = tiles / (waves * cores * per_core)``.
* **score** = ``wave_efficiency * reuse / padding``: ``padding`` is the work of the padded
  problem over the real one (>= 1), ``reuse`` the template's data-reuse term in (0, 1].

Registers a GEMM thread holds: ``ceil8(acc + operands + 32)`` with ``acc = bm * bn *
acc_bits / 32 / threads`` and ``operands = (warp_m + warp_n) * mma_k * in_bits / 32 /
warp_size`` (32 for addresses and indices; allocation is in steps of 8).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Iterable
from typing import Any

from tile.ir.errors import TileError

from .carver_arch import TileDevice, auto_infer_current_arch


class HintError(TileError):
    """A template was asked for hints it cannot give (a bad problem size or dtype)."""


class NoRasterization:
    """Blocks are visited in launch order."""

    def __repr__(self) -> str:
        return "NoRasterization()"


@dataclasses.dataclass(frozen=True)
class Rasterization2DRow:
    """Blocks are visited in panels of ``panel_width`` block rows (``T.use_swizzle``), so the
    blocks resident at one time share their operand panels in L2."""

    panel_width: int = 8


@dataclasses.dataclass
class Hint:
    """One recommended config (TileLang's roller ``Hint`` fields, and tile's).

    Attributes:
        block: the block tile (``[block_M, block_N]`` for a GEMM).
        warp: the tile of one warp (``[warp_M, warp_N]``; the block on a CPU).
        rstep: the reduction step (``[block_K]``).
        pipeline_stage: ``num_stages`` of the reduction loop.
        rasterization_plan: ``NoRasterization()`` or ``Rasterization2DRow(panel)``.
        use_tc: whether ``T.gemm`` maps onto matrix instructions.
        threads: threads of a block.
        score: the ranking score (see the module docstring).
        facts: how the score came about (shared bytes, registers, tiles, waves, ...).
        config: the keyword arguments of the matching kernel factory (``block_M``, ...).
    """

    block: list[int]
    warp: list[int]
    rstep: list[int]
    pipeline_stage: int
    threads: int
    score: float
    config: dict[str, Any]
    facts: dict[str, Any]
    use_tc: bool = False
    rasterization_plan: Any = dataclasses.field(default_factory=NoRasterization)


def dtype_bits(dtype: Any) -> int:
    """Bits of one element of ``dtype`` (``"float16"`` -> 16, ``"float8_e4m3fn"`` -> 8)."""
    text = str(dtype).removeprefix("torch.")
    if text == "bool":
        return 8
    match = re.search(r"(\d+)", text)
    if match is None:
        raise HintError(f"cannot tell the width of dtype {dtype!r}", hint="use a name like float16 or int8")
    return int(match.group(1))


@dataclasses.dataclass(frozen=True)
class Waves:
    tiles: int
    per_core: int
    waves: int
    efficiency: float


def waves(arch: TileDevice, tiles: int, threads: int, smem: int = 0, regs: int = 0) -> Waves | None:
    """How ``tiles`` blocks spread over the device (``None``: not even one block fits a core)."""
    if arch.is_gpu:
        limits = [arch.max_threads_per_core // threads]
        if smem:
            limits.append(arch.max_smem_usage // smem)
        if regs and arch.reg_cap:
            limits.append(arch.reg_cap // (threads * regs))
        per_core = min(limits)
    else:
        per_core = 1
    if per_core < 1 or tiles < 1:
        return None
    concurrent = arch.compute_max_core * per_core
    count = math.ceil(tiles / concurrent)
    return Waves(tiles, per_core, count, tiles / (count * concurrent))


def _ceil8(x: float) -> int:
    return int(math.ceil(x / 8.0) * 8)


def _padding(*pairs: tuple[int, int]) -> float:
    """Work of the padded problem over the real one: each ``(extent, tile)`` rounds up."""
    ratio = 1.0
    for extent, tile in pairs:
        ratio *= math.ceil(extent / tile) * tile / extent
    return ratio


def _scored_hint(
    spread: Waves,
    padding: float,
    reuse: float | None,
    *,
    block: list[int],
    warp: list[int],
    rstep: list[int],
    stages: int,
    threads: int,
    config: dict[str, Any],
    use_tc: bool = False,
    raster: Any = None,
    facts: dict[str, Any] | None = None,
) -> Hint:
    """A ``Hint`` scored ``wave efficiency * reuse / padding`` (no reuse term where ``reuse`` is
    None); its facts are ``facts`` plus how the spread, reuse and padding came out."""
    score = spread.efficiency / padding if reuse is None else spread.efficiency * reuse / padding
    all_facts = {
        **(facts or {}),
        "tiles": spread.tiles,
        "per_core": spread.per_core,
        "waves": spread.waves,
        "wave_efficiency": spread.efficiency,
    }
    if reuse is not None:
        all_facts["reuse"] = reuse
    all_facts["padding"] = padding
    return Hint(
        block=block,
        warp=warp,
        rstep=rstep,
        pipeline_stage=stages,
        threads=threads,
        score=score,
        config=config,
        facts=all_facts,
        use_tc=use_tc,
        rasterization_plan=NoRasterization() if raster is None else raster,
    )


def _l2_bytes(arch: TileDevice) -> int:
    caches = arch.cache_bytes
    return caches[1] if len(caches) > 1 else (caches[0] if caches else 1 << 20)


def _lanes(arch: TileDevice, bits: int) -> int:
    return max(1, arch.vector_bits // bits)


def mma_tile(arch: TileDevice, in_dtype: str) -> tuple[int, int, int] | None:
    """The smallest (m, n, k) the device's matrix instructions take ``in_dtype`` operands in:
    from the instruction list where the backend gives dtypes, else the shapes whose K row is
    32 bytes (mma.sync: k16 for 16-bit, k8 for tf32, k32 for 8-bit operands)."""
    caps = arch.capabilities
    shapes = [(i.m, i.n, i.k) for i in caps.mma_instructions if i.input_dtype == in_dtype]
    if not shapes and not caps.mma_instructions:
        shapes = [s for s in caps.mma_shapes if s[2] * dtype_bits(in_dtype) == 256]
    if not shapes:
        return None
    return min(s[0] for s in shapes), min(s[1] for s in shapes), min(s[2] for s in shapes)


def _warp_grid(bm: int, bn: int, warps: int, mma: tuple[int, int, int]) -> tuple[int, int] | None:
    """The warp tile of the most square split of the block among ``warps`` warps whose warp
    tile is a multiple of the instruction's (m, n)."""
    best = None
    for rows in (d for d in range(1, warps + 1) if warps % d == 0):
        cols = warps // rows
        if bm % rows or bn % cols:
            continue
        wm, wn = bm // rows, bn // cols
        if wm % mma[0] or wn % mma[1]:
            continue
        if best is None or abs(math.log2(wm / wn)) < abs(math.log2(best[0] / best[1])):
            best = (wm, wn)
    return best


@dataclasses.dataclass
class BaseTemplate:
    """A computation whose configs the carver recommends; ``with_arch`` picks the device."""

    def __post_init__(self) -> None:
        self._arch: TileDevice | None = None

    def with_arch(self, arch: TileDevice) -> BaseTemplate:
        self._arch = arch
        return self

    @property
    def arch(self) -> TileDevice:
        if self._arch is None:
            self._arch = auto_infer_current_arch()
        return self._arch

    def get_hardware_aware_configs(self, arch: TileDevice | None = None, topk: int = 10) -> list[Hint]:
        if arch is not None:
            self._arch = arch
        ranked = sorted(self._candidates(self.arch), key=lambda h: (-h.score, *self._tie_break(h)))
        return ranked[: max(0, topk)]

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        """The ``topk`` best configs for this device, best first."""
        return self.get_hardware_aware_configs(topk=topk)

    def _candidates(self, arch: TileDevice) -> Iterable[Hint]:
        raise NotImplementedError

    def _tie_break(self, hint: Hint) -> tuple[Any, ...]:
        """Among equal scores: more resident blocks per core, more stages, fewer threads, bigger tiles."""
        return (-hint.facts.get("per_core", 1), -hint.pipeline_stage, hint.threads, [-x for x in hint.block])

    @staticmethod
    def _positive(**sizes: Any) -> None:
        for name, value in sizes.items():
            if not isinstance(value, int) or value < 1:
                raise HintError(
                    f"{name} must be a positive int, got {value!r}", hint="pass the problem's sizes"
                )


def _gemm_reuse(bm: int, bn: int, bk: int, in_bits: int) -> float:
    return min(1.0, bm * bn / (bm + bn) / 64) * min(1.0, bk * in_bits / 8 / 64)


TILES = (16, 32, 64, 128, 256)


@dataclasses.dataclass
class MatmulTemplate(BaseTemplate):
    """``C[M, N] = A[M, K] @ B[K, N]``: configs for ``tile.ops.gemm.matmul_kernel`` and the
    paper's GEMM (``block_M``, ``block_N``, ``block_K``, ``num_stages``, ``threads``).

    ``reuse = min(1, bm * bn / (bm + bn) / 64) * min(1, bk * in_bytes / 64)``: the
    multiply-adds per loaded element of a block (full from a 128 x 128 tile on), times the
    share of a K step that is not loop overhead (full from 64-byte rows of A on).
    """

    M: int = 0
    N: int = 0
    K: int = 0
    trans_A: bool = False
    trans_B: bool = True
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False

    def _candidates(self, arch: TileDevice) -> Iterable[Hint]:
        self._positive(M=self.M, N=self.N, K=self.K)
        in_bits, acc_bits = dtype_bits(self.in_dtype), dtype_bits(self.accum_dtype)
        if arch.is_gpu:
            yield from self._gpu(arch, in_bits, acc_bits)
        else:
            yield from self._cpu(arch, in_bits, acc_bits)

    def _gpu(self, arch: TileDevice, in_bits: int, acc_bits: int) -> Iterable[Hint]:
        mma = mma_tile(arch, str(self.in_dtype))
        unit = mma or (1, 1, 1)
        stage_choices = (4, 3, 2) if arch.async_copy else (2, 1)
        for bm, bn, bk, warps in itertools.product(TILES, TILES, (16, 32, 64, 128), (4, 8)):
            threads = warps * arch.warp_size
            if threads > arch.max_threads_per_block or bm % unit[0] or bn % unit[1] or bk % unit[2]:
                continue
            grid = _warp_grid(bm, bn, warps, unit)
            if grid is None:
                continue
            wm, wn = grid
            acc = bm * bn * acc_bits / 32 / threads
            operands = (wm + wn) * unit[2] * in_bits / 32 / arch.warp_size
            regs = _ceil8(acc + operands + 32)
            if arch.max_registers_per_thread and regs > arch.max_registers_per_thread:
                continue
            stages = next(
                (s for s in stage_choices if s * (bm * bk + bk * bn) * in_bits // 8 <= arch.smem_cap), None
            )
            if stages is None:
                continue
            smem = stages * (bm * bk + bk * bn) * in_bits // 8
            tiles = math.ceil(self.M / bm) * math.ceil(self.N / bn)
            spread = waves(arch, tiles, threads, smem, regs)
            if spread is None:
                continue
            reuse = _gemm_reuse(bm, bn, bk, in_bits)
            padding = _padding((self.M, bm), (self.N, bn), (self.K, bk))
            yield self._hint(
                [bm, bn],
                [wm, wn],
                bk,
                stages,
                threads,
                spread,
                reuse,
                padding,
                mma is not None,
                smem=smem,
                registers=regs,
            )

    def _cpu(self, arch: TileDevice, in_bits: int, acc_bits: int) -> Iterable[Hint]:
        lanes = _lanes(arch, acc_bits)
        l2 = _l2_bytes(arch)
        widths = sorted({lanes * f for f in (1, 2, 4, 8, 16) if lanes * f <= 256})
        # AMX (a CPU backend's matrix instruction): blocks of 2 x 2 accumulator tiles
        unit = mma_tile(arch, str(self.in_dtype))
        for bm, bn, bk in itertools.product(TILES, widths, (32, 64, 128, 256)):
            if unit and (bm % (2 * unit[0]) or bn % (2 * unit[1]) or bk % unit[2]):
                continue
            working = (bm * bk + bk * bn) * in_bits // 8 + bm * bn * acc_bits // 8
            if working > l2:
                continue
            tiles = math.ceil(self.M / bm) * math.ceil(self.N / bn)
            spread = waves(arch, tiles, 1)
            assert spread is not None
            reuse = _gemm_reuse(bm, bn, bk, in_bits)
            padding = _padding((self.M, bm), (self.N, bn), (self.K, bk))
            yield self._hint(
                [bm, bn], [bm, bn], bk, 2, 128, spread, reuse, padding, unit is not None, working_set=working
            )

    def _hint(
        self,
        block: list[int],
        warp: list[int],
        bk: int,
        stages: int,
        threads: int,
        spread: Waves,
        reuse: float,
        padding: float,
        use_tc: bool,
        **facts: Any,
    ) -> Hint:
        raster: Any = Rasterization2DRow(8) if spread.waves > 1 and self.arch.is_gpu else NoRasterization()
        config = {"block_M": block[0], "block_N": block[1], "block_K": bk}
        config.update(num_stages=stages, threads=threads)
        return _scored_hint(
            spread, padding, reuse, block=block, warp=warp, rstep=[bk], stages=stages, threads=threads,
            config=config, use_tc=use_tc, raster=raster, facts=facts,
        )  # fmt: skip


@dataclasses.dataclass
class GEMVTemplate(BaseTemplate):
    """``y[1, N] = x[1, K] @ W[K, N]``: configs for ``tile.ops.gemv.gemv_kernel`` (``block_N``,
    ``block_K``, ``num_stages``, ``threads``). ``reuse = min(1, block_N * in_bytes / 512)``:
    a block reads rows of W at least 512 bytes long (whole 128-byte lines for 4 warps)."""

    N: int = 0
    K: int = 0
    trans_B: bool = True
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False

    def _candidates(self, arch: TileDevice) -> Iterable[Hint]:
        self._positive(N=self.N, K=self.K)
        in_bytes = dtype_bits(self.in_dtype) / 8
        acc_bits = dtype_bits(self.accum_dtype)
        widths = (64, 128, 256, 512, 1024, 2048, 4096)
        for bn, bk, threads in itertools.product(widths, (8, 16, 32, 64), (64, 128, 256)):
            if arch.is_gpu:
                if threads > arch.max_threads_per_block or threads % arch.warp_size or bn < threads:
                    continue
                stages = 2 if arch.async_copy else 1
                smem = int(stages * (bk + bk * bn) * in_bytes)
                regs = _ceil8(bn / threads * acc_bits / 32 + 32)
                if smem > arch.smem_cap or (
                    arch.max_registers_per_thread and regs > arch.max_registers_per_thread
                ):
                    continue
                spread = waves(arch, math.ceil(self.N / bn), threads, smem, regs)
                facts: dict[str, Any] = {"smem": smem, "registers": regs}
            else:
                if threads != 128 or bn % _lanes(arch, acc_bits):
                    continue
                stages, working = 2, int(bk * bn * in_bytes)
                if working > _l2_bytes(arch) // 2:
                    continue
                spread = waves(arch, math.ceil(self.N / bn), 1)
                facts = {"working_set": working}
            if spread is None:
                continue
            reuse = min(1.0, bn * in_bytes / 512)
            padding = _padding((self.N, bn), (self.K, bk))
            config = {"block_N": bn, "block_K": bk, "num_stages": stages, "threads": threads}
            yield _scored_hint(
                spread, padding, reuse, block=[bn], warp=[bn], rstep=[bk], stages=stages, threads=threads,
                config=config, facts=facts,
            )  # fmt: skip


def _rows_cols(shape: Any) -> tuple[int, int]:
    dims = [int(d) for d in shape]
    if not dims:
        raise HintError("shape is empty", hint="pass the tensor's shape, e.g. shape=[4096, 4096]")
    return math.prod(dims[:-1]) if len(dims) > 1 else 1, dims[-1]


@dataclasses.dataclass
class ElementwiseTemplate(BaseTemplate):
    """An elementwise op over ``shape`` (leading dims flattened into rows): configs for
    ``tile.ops.elementwise`` kernels (``block_M``, ``block_N``; 128 threads). ``reuse`` is
    ``min(1, block_N * bytes / 128)`` on a GPU (a row of a block fills a 128-byte line) and 1
    on a CPU, where a block's three tiles must fit the L1 cache."""

    shape: Any = None
    dtype: str = "float16"

    def _candidates(self, arch: TileDevice) -> Iterable[Hint]:
        rows, cols = _rows_cols(self.shape or ())
        self._positive(rows=rows, cols=cols)
        nbytes = dtype_bits(self.dtype) / 8
        threads = 128
        for bm, bn in itertools.product((1, 2, 4, 8, 16, 32, 64), (32, 64, 128, 256, 512, 1024)):
            per_thread = bm * bn / threads
            if arch.is_gpu:
                if per_thread < 16 / nbytes / 2 or per_thread > 64:  # at least a half 16-byte vector
                    continue
                regs = _ceil8(2 * per_thread * max(nbytes, 4) / 4 + 32)
                spread = waves(arch, math.ceil(rows / bm) * math.ceil(cols / bn), threads, 0, regs)
                reuse = min(1.0, bn * nbytes / 128)
            else:
                l1 = arch.cache_bytes[0] if arch.cache_bytes else 32 << 10
                if bn % _lanes(arch, int(nbytes * 8)) or 3 * bm * bn * nbytes > l1:
                    continue
                spread = waves(arch, math.ceil(rows / bm) * math.ceil(cols / bn), 1)
                reuse = 1.0
            if spread is None:
                continue
            padding = _padding((rows, bm), (cols, bn))
            yield _scored_hint(
                spread, padding, reuse, block=[bm, bn], warp=[bm, bn], rstep=[], stages=1, threads=threads,
                config={"block_M": bm, "block_N": bn},
            )

    def _tie_break(self, hint: Hint) -> tuple[Any, ...]:
        return (-hint.block[0] * hint.block[1],)


@dataclasses.dataclass
class GeneralReductionTemplate(BaseTemplate):
    """A reduction over the ``R`` dims of ``shape`` (``structure`` like ``"SR"``: spatial then
    reduced dims), a block holding whole rows: configs for ``tile.ops.norm`` kernels
    (``block_M`` rows, ``threads``). A GPU block's rows live in registers; a CPU block's in L2."""

    structure: Any = "SR"
    shape: Any = None
    dtype: str = "float16"

    def _candidates(self, arch: TileDevice) -> Iterable[Hint]:
        kinds = list(self.structure)
        dims = [int(d) for d in self.shape or ()]
        if len(kinds) != len(dims) or set(kinds) - {"S", "R"} or "R" not in kinds:
            raise HintError(
                f"structure {self.structure!r} does not describe shape {dims}",
                hint="one letter per dim: S (kept) or R (reduced), e.g. structure='SR'",
            )
        rows = math.prod(d for d, k in zip(dims, kinds, strict=True) if k == "S")
        cols = math.prod(d for d, k in zip(dims, kinds, strict=True) if k == "R")
        for bm, threads in itertools.product((1, 2, 4, 8, 16, 32, 64), (32, 64, 128, 256, 512, 1024)):
            if arch.is_gpu:
                if threads > arch.max_threads_per_block or threads % arch.warp_size:
                    continue
                regs = _ceil8(bm * cols / threads + 32)  # the rows in float32 registers
                if arch.max_registers_per_thread and regs > arch.max_registers_per_thread:
                    continue
                spread = waves(arch, math.ceil(rows / bm), threads, 0, regs)
                facts: dict[str, Any] = {"registers": regs}
            else:
                if threads != 128 or bm * cols * 4 > _l2_bytes(arch):
                    continue
                spread = waves(arch, math.ceil(rows / bm), 1)
                facts = {"working_set": bm * cols * 4}
            if spread is None:
                continue
            padding = _padding((rows, bm))
            yield _scored_hint(
                spread, padding, None, block=[bm], warp=[bm], rstep=[cols], stages=1, threads=threads,
                config={"block_M": bm, "threads": threads}, facts=facts,
            )  # fmt: skip

    def _tie_break(self, hint: Hint) -> tuple[Any, ...]:
        return (-hint.block[0], -hint.threads)


@dataclasses.dataclass
class FlashAttentionTemplate(BaseTemplate):
    """FlashAttention forward: configs for ``tile.ops.attention.flash_attention_kernel``
    (``block_M`` queries, ``block_N`` keys, ``num_stages``, ``threads``). Warps split a
    block's query rows (each warp owns whole rows), so ``block_M / warps`` is a multiple of
    the instruction's m; ``reuse = min(1, block_M / 128)``: K and V are read once per block."""

    batch_size: int = 1
    num_heads: int = 1
    head_dim: int = 64
    seq_length: int = 1
    seq_kv_length: int = 0
    is_causal: bool = False
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float32"

    def _candidates(self, arch: TileDevice) -> Iterable[Hint]:
        self._positive(
            batch_size=self.batch_size,
            num_heads=self.num_heads,
            head_dim=self.head_dim,
            seq_length=self.seq_length,
        )
        in_bits, acc_bits, dim = dtype_bits(self.in_dtype), dtype_bits(self.accum_dtype), self.head_dim
        kv = self.seq_kv_length or self.seq_length
        mma = mma_tile(arch, str(self.in_dtype)) if arch.is_gpu else None
        unit = mma or (1, 1, 1)
        for bm, bn, warps in itertools.product((32, 64, 128, 256), (32, 64, 128), (4, 8)):
            stages = 2 if arch.async_copy else 1
            if arch.is_gpu:
                threads = warps * arch.warp_size
                if threads > arch.max_threads_per_block or (bm // warps) % unit[0] or bm % warps:
                    continue
                if bn % unit[1] or dim % unit[2] or bn % unit[2]:
                    continue
                smem = (bm * dim + 2 * stages * bn * dim) * in_bits // 8
                regs = _ceil8(
                    (bm * bn + bm * dim) * acc_bits / 32 / threads + bm * bn * in_bits / 32 / threads + 32
                )
                if smem > arch.smem_cap or (
                    arch.max_registers_per_thread and regs > arch.max_registers_per_thread
                ):
                    continue
                tiles = math.ceil(self.seq_length / bm) * self.num_heads * self.batch_size
                spread = waves(arch, tiles, threads, smem, regs)
                facts: dict[str, Any] = {"smem": smem, "registers": regs}
            else:
                threads, stages = 128, 1
                if warps != 4:
                    continue
                working = (bm * dim + 2 * bn * dim) * in_bits // 8 + (bm * bn + bm * dim) * acc_bits // 8
                if working > _l2_bytes(arch):
                    continue
                tiles = math.ceil(self.seq_length / bm) * self.num_heads * self.batch_size
                spread = waves(arch, tiles, 1)
                facts = {"working_set": working}
            if spread is None:
                continue
            reuse = min(1.0, bm / 128)
            padding = _padding((self.seq_length, bm), (kv, bn))
            config = {"block_M": bm, "block_N": bn, "num_stages": stages, "threads": threads}
            yield _scored_hint(
                spread, padding, reuse, block=[bm, bn], warp=[bm // warps, bn], rstep=[bn], stages=stages,
                threads=threads, config=config, use_tc=mma is not None, facts=facts,
            )  # fmt: skip


_TEMPLATES: dict[str, type[BaseTemplate]] = {
    "matmul": MatmulTemplate,
    "gemv": GEMVTemplate,
    "elementwise": ElementwiseTemplate,
    "reduction": GeneralReductionTemplate,
    "flash_attention": FlashAttentionTemplate,
}


def recommend_configs(op: str, target: Any = "auto", topk: int = 8, **problem: Any) -> list[dict[str, Any]]:
    """The ``topk`` best configs for ``op`` on ``target``, best first, as kernel keyword arguments.

    ``op`` is ``"matmul"`` (``M, N, K, in_dtype, accum_dtype``), ``"gemv"`` (``N, K, ...``),
    ``"elementwise"`` (``shape, dtype``), ``"reduction"`` (``structure, shape, dtype``) or
    ``"flash_attention"`` (``batch_size, num_heads, head_dim, seq_length, is_causal, in_dtype``):
    the fields of the matching template. The result is a ready ``configs=`` list for
    ``@autotune``.

    Example::

        >>> from tile.lang.carver import recommend_configs
        >>> sorted(recommend_configs("matmul", "cpu", M=1024, N=1024, K=1024,
        ...                          in_dtype="float32", accum_dtype="float32")[0])
        ['block_K', 'block_M', 'block_N', 'num_stages', 'threads']
    """
    template = _TEMPLATES.get(op)
    if template is None:
        raise HintError(
            f"no hint template for op {op!r}", hint=f"ops with templates: {', '.join(_TEMPLATES)}"
        )
    try:
        instance = template(**problem)
    except TypeError as exc:
        fields = [f.name for f in dataclasses.fields(template)]
        raise HintError(f"{op}: {exc}", hint=f"{template.__name__} takes {', '.join(fields)}") from None
    arch = TileDevice(target)
    return [hint.config for hint in instance.with_arch(arch).recommend_hints(topk)]


def recommend_config(op: str, target: Any = "auto", **problem: Any) -> dict[str, Any]:
    """The best config for ``op`` on ``target`` (see ``recommend_configs``); a ``HintError``
    when no config fits the device."""
    configs = recommend_configs(op, target, topk=1, **problem)
    if not configs:
        raise HintError(
            f"no {op} config fits {TileDevice(target).name} for {problem}",
            hint="check the sizes and dtypes; smaller dtypes and dims fit more devices",
        )
    return configs[0]
