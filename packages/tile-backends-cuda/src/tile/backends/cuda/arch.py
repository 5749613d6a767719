"""CUDA architectures: parsing arch specs, and what each supported arch can do.

An arch spec names a real SM architecture (``sm_80``, ``sm_90a``); tile accepts the
spellings people actually type, and answers with a frozen :class:`CudaArch`.
:func:`capabilities` returns the frozen :class:`CudaCapabilities` row for it: plain
data that the compiler, the op library and the test skips all read, so nothing
outside this backend needs to ask "is this sm_90a?".

Sources (anchors are stable, section numbers move between releases):

* CPG: NVIDIA *CUDA C++ Programming Guide*, "Compute Capabilities", the table
  "Technical Specifications per Compute Capability"
  (``https://docs.nvidia.com/cuda/cuda-c-programming-guide/#compute-capabilities``).
* PTX: NVIDIA *PTX ISA*, the "Target ISA notes" of each instruction
  (``https://docs.nvidia.com/cuda/parallel-thread-execution/``).

Example::

    >>> from tile.backends.cuda.arch import parse_arch, capabilities
    >>> arch = parse_arch("sm80")
    >>> arch.name, arch.compute_capability
    ('sm_80', (8, 0))
    >>> capabilities("sm_90a").wgmma, capabilities("sm_90").wgmma
    (True, False)
    >>> capabilities("sm_86").shared_bytes_per_block
    101376
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from .errors import ArchSpecError, UnsupportedArchError

KiB = 1024

ArchVariant = Literal["", "a", "f"]
"""``""`` portable, ``"a"`` arch-specific (``sm_90a``), ``"f"`` family-specific."""

ACCEPTED_FORMS = ("sm_90a", "sm_80", "sm80", "80", "8.0", "9.0a")
"""Examples of every spelling :func:`parse_arch` accepts, shown in its error."""

# sm_<major><minor><variant>, with "sm_" / "sm" optional: "sm_80", "sm80", "80",
# "sm_100a". The minor is always one digit, so "100" is 10.0 and "90" is 9.0.
_SM_FORM = re.compile(r"(?:sm_?)?(?P<major>[1-9]\d?)(?P<minor>\d)(?P<variant>[af]?)")
# The compute-capability spelling used by nvidia-smi and TORCH_CUDA_ARCH_LIST.
_CC_FORM = re.compile(r"(?P<major>[1-9]\d?)\.(?P<minor>\d)(?P<variant>[af]?)")
_VARIANTS: dict[str, ArchVariant] = {"": "", "a": "a", "f": "f"}


@dataclasses.dataclass(frozen=True, order=True)
class CudaArch:
    """One SM architecture, e.g. ``CudaArch(9, 0, "a")`` for ``sm_90a``."""

    major: int
    minor: int
    variant: ArchVariant = ""

    @property
    def name(self) -> str:
        """The nvcc spelling, e.g. ``sm_90a``."""
        return f"sm_{self.major}{self.minor}{self.variant}"

    @property
    def virtual_name(self) -> str:
        """The matching virtual (PTX) arch, e.g. ``compute_90a``."""
        return f"compute_{self.major}{self.minor}{self.variant}"

    @property
    def compute_capability(self) -> tuple[int, int]:
        """``(major, minor)``; the variant does not change the compute capability."""
        return (self.major, self.minor)

    def __str__(self) -> str:
        return self.name


def parse_arch(spec: str | CudaArch) -> CudaArch:
    """Parse an arch spec such as ``"sm_80"``, ``"sm80"``, ``"80"``, ``"8.0"`` or ``"sm_90a"``.

    Parsing only checks the spelling; :func:`capabilities` says whether tile
    supports the arch.

    Raises:
        ArchSpecError: ``spec`` is not spelled in an accepted form.

    Example::

        >>> parse_arch("SM_90A")
        CudaArch(major=9, minor=0, variant='a')
    """
    if isinstance(spec, CudaArch):
        return spec
    if not isinstance(spec, str):
        raise ArchSpecError(
            f"a CUDA arch spec must be a string, got {type(spec).__name__}",
            hint=_forms_hint(),
        )
    text = spec.strip().lower()
    match = _SM_FORM.fullmatch(text) or _CC_FORM.fullmatch(text)
    if match is None:
        raise ArchSpecError(f"{spec!r} is not a CUDA arch spec", hint=_forms_hint())
    return CudaArch(int(match["major"]), int(match["minor"]), _VARIANTS[match["variant"]])


def _forms_hint() -> str:
    forms = ", ".join(repr(form) for form in ACCEPTED_FORMS)
    supported = ", ".join(arch.name for arch in SUPPORTED_ARCHS)
    return f"write the arch like one of {forms}; tile supports {supported}"


@dataclasses.dataclass(frozen=True)
class MmaInstr:
    """One warp-level ``mma.sync`` shape and operand type (PTX "Warp-level MMA").

    ``input_dtype`` is the storage dtype of A and B; ``ptx_type`` is the operand
    type the instruction reads them as (``.tf32`` reads float32 storage).
    """

    m: int
    n: int
    k: int
    input_dtype: str
    ptx_type: str
    accumulator_dtypes: tuple[str, ...]

    @property
    def shape_name(self) -> str:
        """``m16n8k16`` style name."""
        return f"m{self.m}n{self.n}k{self.k}"


# The mma.sync shapes tile lowers to (float64 T.gemm also issues m8n8k4 f64, DMMA, through
# gemm.MMA_KINDS). PTX also has smaller/older ones (m8n8k4,
# m16n8k8 f16, ...); they are left out until a lowering uses them.
_MMA_F16 = MmaInstr(16, 8, 16, "float16", ".f16", ("float32", "float16"))
_MMA_BF16 = MmaInstr(16, 8, 16, "bfloat16", ".bf16", ("float32",))
_MMA_TF32 = MmaInstr(16, 8, 8, "float32", ".tf32", ("float32",))
_MMA_S8 = MmaInstr(16, 8, 32, "int8", ".s8", ("int32",))
_MMA_U8 = MmaInstr(16, 8, 32, "uint8", ".u8", ("int32",))
# PTX: mma with .e4m3/.e5m2 operands requires sm_89 or higher.
_MMA_E4M3 = MmaInstr(16, 8, 32, "float8_e4m3fn", ".e4m3", ("float32",))
_MMA_E5M2 = MmaInstr(16, 8, 32, "float8_e5m2", ".e5m2", ("float32",))

_MMA_SM80 = (_MMA_F16, _MMA_BF16, _MMA_TF32, _MMA_S8, _MMA_U8)
# Turing (sm_75) has mma.m16n8k8 .f16 and mma.m8n8k16 .s8/.u8 (PTX: sm_75+), no bf16 or tf32
# tensor cores: tile's header issues the m16n8k16 f16 form as two m16n8k8 and the m16n8k32
# int8 forms as four m8n8k16, on the same fragments. bfloat16 and float32 T.gemm run on FMA.
_MMA_SM75 = (_MMA_F16, _MMA_S8, _MMA_U8)
_MMA_SM89 = (*_MMA_SM80, _MMA_E4M3, _MMA_E5M2)

_DTYPES_SM80 = frozenset(
    {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
     "uint64", "float16", "bfloat16", "float32", "float64"}
)  # fmt: skip
# PTX: cvt to/from .e4m3x2/.e5m2x2 requires sm_89 or higher.
_DTYPES_SM89 = _DTYPES_SM80 | {"float8_e4m3fn", "float8_e5m2"}


@dataclasses.dataclass(frozen=True)
class CudaCapabilities:
    """What one SM architecture offers. Sizes are bytes; 1 KB in the CPG is 1024 B."""

    arch: CudaArch
    products: tuple[str, ...]
    """Example parts with this arch (informational)."""
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    """32-bit registers per SM (and the most one block may use)."""
    max_registers_per_thread: int
    shared_bytes_per_sm: int
    shared_bytes_per_block: int
    """Largest dynamic shared memory of one block, after the kernel opts in with
    ``cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, ...)``.
    It is 1 KB below ``shared_bytes_per_sm``: the CPG reserves 1 KB per block."""
    shared_bytes_per_block_static: int
    """Largest static (or not opted-in) shared memory of one block."""
    shared_banks: int
    ldmatrix: bool
    """``ldmatrix`` (PTX: sm_75+)."""
    stmatrix: bool
    """``stmatrix`` (PTX: sm_90+)."""
    async_copy: bool
    """``cp.async`` global->shared with commit/wait groups (PTX: sm_80+)."""
    mbarrier: bool
    """``mbarrier`` objects in shared memory (PTX: sm_80+)."""
    mbarrier_tx: bool
    """``mbarrier.expect_tx`` transaction counts, needed by TMA (PTX: sm_90+)."""
    tma: bool
    """``cp.async.bulk.tensor`` with a tensor map (PTX: sm_90+)."""
    clusters: bool
    """Thread-block clusters and distributed shared memory (sm_90+)."""
    wgmma: bool
    """``wgmma.mma_async`` (PTX: sm_90a only; plain sm_90 has none)."""
    mma: tuple[MmaInstr, ...]
    dtypes: frozenset[str]
    """Dtypes with native load/store/convert support (fp8: sm_89+)."""

    @property
    def mma_shapes(self) -> frozenset[tuple[int, int, int]]:
        """The ``(m, n, k)`` shapes in :attr:`mma`."""
        return frozenset((instr.m, instr.n, instr.k) for instr in self.mma)

    def mma_for(self, input_dtype: str) -> tuple[MmaInstr, ...]:
        """The ``mma.sync`` forms whose A/B operands have ``input_dtype``."""
        return tuple(instr for instr in self.mma if instr.input_dtype == input_dtype)


def _row(
    arch: CudaArch,
    products: tuple[str, ...],
    *,
    max_threads_per_sm: int,
    max_blocks_per_sm: int,
    shared_kib_per_sm: int,
    mma: tuple[MmaInstr, ...],
    dtypes: frozenset[str],
    reserved_kib_per_block: int = 1,
) -> CudaCapabilities:
    hopper = arch.major >= 9
    ampere = arch.major >= 8
    return CudaCapabilities(
        arch=arch,
        products=products,
        warp_size=32,
        max_threads_per_block=1024,
        max_threads_per_sm=max_threads_per_sm,
        max_blocks_per_sm=max_blocks_per_sm,
        registers_per_sm=64 * KiB,
        max_registers_per_thread=255,
        shared_bytes_per_sm=shared_kib_per_sm * KiB,
        shared_bytes_per_block=(shared_kib_per_sm - reserved_kib_per_block) * KiB,
        shared_bytes_per_block_static=48 * KiB,
        shared_banks=32,
        ldmatrix=True,
        stmatrix=hopper,
        async_copy=ampere,
        mbarrier=ampere,
        mbarrier_tx=hopper,
        tma=hopper,
        clusters=hopper,
        wgmma=arch.variant == "a" and arch.compute_capability == (9, 0),
        mma=mma,
        dtypes=dtypes,
    )


# CPG "Technical Specifications per Compute Capability":
#   CC   threads/SM  blocks/SM  shared/SM  shared/block (opt-in)
#   7.5  1024        16          64 KB      64 KB (no per-block reservation before 8.x)
#   8.0  2048        32         164 KB     163 KB
#   8.6  1536        16         100 KB      99 KB
#   8.9  1536        24         100 KB      99 KB
#   9.0  2048        32         228 KB     227 KB
# Common to all five: warp 32, 1024 threads/block, 64 K 32-bit registers per SM
# and per block, 255 registers per thread, 48 KB static shared memory per block.
_SM75 = CudaArch(7, 5)
_SM80 = CudaArch(8, 0)
_SM86 = CudaArch(8, 6)
_SM89 = CudaArch(8, 9)
_SM90 = CudaArch(9, 0)
_SM90A = CudaArch(9, 0, "a")

_TABLE: dict[CudaArch, CudaCapabilities] = {
    _SM75: _row(
        _SM75, ("T4", "RTX 2080 Ti", "Quadro RTX 8000"), max_threads_per_sm=1024, max_blocks_per_sm=16,
        shared_kib_per_sm=64, mma=_MMA_SM75, dtypes=_DTYPES_SM80, reserved_kib_per_block=0,
    ),
    _SM80: _row(
        _SM80, ("A100", "A30"), max_threads_per_sm=2048, max_blocks_per_sm=32,
        shared_kib_per_sm=164, mma=_MMA_SM80, dtypes=_DTYPES_SM80,
    ),
    _SM86: _row(
        _SM86, ("RTX 3090", "A10", "A40"), max_threads_per_sm=1536, max_blocks_per_sm=16,
        shared_kib_per_sm=100, mma=_MMA_SM80, dtypes=_DTYPES_SM80,
    ),
    _SM89: _row(
        _SM89, ("RTX 4090", "L4", "L40S"), max_threads_per_sm=1536, max_blocks_per_sm=24,
        shared_kib_per_sm=100, mma=_MMA_SM89, dtypes=_DTYPES_SM89,
    ),
    _SM90: _row(
        _SM90, ("H100", "H200"), max_threads_per_sm=2048, max_blocks_per_sm=32,
        shared_kib_per_sm=228, mma=_MMA_SM89, dtypes=_DTYPES_SM89,
    ),
    _SM90A: _row(
        _SM90A, ("H100", "H200"), max_threads_per_sm=2048, max_blocks_per_sm=32,
        shared_kib_per_sm=228, mma=_MMA_SM89, dtypes=_DTYPES_SM89,
    ),
}  # fmt: skip

CAPABILITIES: Mapping[CudaArch, CudaCapabilities] = MappingProxyType(_TABLE)
"""Every arch tile supports, read-only."""

SUPPORTED_ARCHS: tuple[CudaArch, ...] = tuple(sorted(_TABLE))


def capabilities(spec: str | CudaArch) -> CudaCapabilities:
    """The capability row of a supported arch.

    Raises:
        ArchSpecError: ``spec`` is not spelled in an accepted form.
        UnsupportedArchError: the arch is well formed but tile has no table for it.

    Example::

        >>> capabilities("89").dtypes >= {"float8_e4m3fn", "float8_e5m2"}
        True
    """
    arch = parse_arch(spec)
    try:
        return _TABLE[arch]
    except KeyError:
        supported = ", ".join(a.name for a in SUPPORTED_ARCHS)
        raise UnsupportedArchError(
            f"tile has no capability table for CUDA arch {arch.name}",
            hint=f"target one of {supported}",
        ) from None
