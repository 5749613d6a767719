"""AMD GPU architectures: parsing gfx target IDs, and what each supported one can do.

A target ID names a gfx processor plus optional feature settings, as in LLVM's
*AMDGPUUsage* "Target ID" (``gfx90a``, ``gfx942:sramecc+:xnack-``). tile parses it
into a frozen :class:`RocmArch`; :func:`capabilities` returns the frozen
:class:`RocmCapabilities` row: plain data read by the compiler, the op library
and the test skips.

Sources:

* AMC: AMD *Matrix Instruction Calculator*
  (``https://github.com/ROCm/amd_matrix_instruction_calculator``), the instruction
  lists and ``--detail-instruction`` output for CDNA2 and CDNA3; it follows the
  *AMD Instinct MI200 (CDNA2) ISA* and *AMD Instinct MI300 (CDNA3) ISA* reference
  guides, chapter "Matrix Arithmetic Instructions".
* ROC: ROCm docs, *GPU hardware specifications*
  (``https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html``): wavefront
  size 64, LDS 64 KiB per CU on MI250X (gfx90a) and MI300X/MI300A (gfx942); and
  *Local data share (LDS)* in the ROCm Compute Profiler docs: 32 banks of 4 bytes.
* HIP: ROCm *HIP programming guide*, hardware implementation: at most 1024
  threads per block; a block's LDS allocation is at most 64 KiB.
* LLVM: *AMDGPUUsage* (``https://llvm.org/docs/AMDGPUUsage.html``): target IDs,
  processors, and global->LDS ("LDS DMA") loads.

Example::

    >>> from tile.backends.rocm.arch import parse_arch, capabilities
    >>> parse_arch("gfx942:xnack-").target_id
    'gfx942:xnack-'
    >>> caps = capabilities("gfx90a")
    >>> caps.family, caps.wave_size, caps.lds_bytes_per_block
    ('CDNA2', 64, 65536)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from types import MappingProxyType

from .errors import ArchSpecError, UnsupportedArchError

KiB = 1024

ACCEPTED_FORMS = ("gfx90a", "gfx942", "gfx90a:xnack-", "gfx942:sramecc+:xnack-")
"""Examples of every spelling :func:`parse_arch` accepts, shown in its error."""

KNOWN_FEATURES = ("sramecc", "xnack")
"""The target-ID features LLVM defines (AMDGPUUsage, "Target Features")."""

# gfx<major><minor><stepping>: major is decimal (9, 10, 11, 12), minor and stepping
# are one hex digit each: gfx90a, gfx942, gfx1100.
_PROCESSOR = re.compile(r"gfx\d{1,2}[0-9a-f]{2}")
_FEATURE = re.compile(r"(?P<name>[a-z]+)(?P<setting>[+-])")


@dataclasses.dataclass(frozen=True)
class RocmArch:
    """A gfx processor and its explicit feature settings (``{"xnack": False}`` for ``xnack-``)."""

    processor: str
    features: tuple[tuple[str, bool], ...] = ()
    """Sorted ``(name, on)`` pairs; a feature not listed is "any"."""

    @property
    def name(self) -> str:
        """The processor, e.g. ``gfx942``."""
        return self.processor

    @property
    def target_id(self) -> str:
        """The LLVM target ID, e.g. ``gfx942:sramecc+:xnack-``."""
        settings = "".join(f":{name}{'+' if on else '-'}" for name, on in self.features)
        return self.processor + settings

    def __str__(self) -> str:
        return self.target_id


def parse_arch(spec: str | RocmArch) -> RocmArch:
    """Parse a gfx target ID such as ``"gfx90a"`` or ``"gfx942:sramecc+:xnack-"``.

    Parsing only checks the spelling; :func:`capabilities` says whether tile
    supports the processor.

    Raises:
        ArchSpecError: ``spec`` is not a target ID, or names a feature twice or
            one LLVM does not define.

    Example::

        >>> parse_arch("GFX90A:xnack+")
        RocmArch(processor='gfx90a', features=(('xnack', True),))
    """
    if isinstance(spec, RocmArch):
        return spec
    if not isinstance(spec, str):
        raise ArchSpecError(
            f"an AMD GPU arch spec must be a string, got {type(spec).__name__}",
            hint=_forms_hint(),
        )
    processor, *settings = spec.strip().lower().split(":")
    if _PROCESSOR.fullmatch(processor) is None:
        raise ArchSpecError(f"{spec!r} is not an AMD GPU target ID", hint=_forms_hint())
    features: dict[str, bool] = {}
    for setting in settings:
        match = _FEATURE.fullmatch(setting)
        if match is None or match["name"] not in KNOWN_FEATURES:
            raise ArchSpecError(
                f"{setting!r} in {spec!r} is not a target feature setting",
                hint=f"write features as ':name+' or ':name-' with name one of "
                f"{', '.join(KNOWN_FEATURES)}; {_forms_hint()}",
            )
        if match["name"] in features:
            raise ArchSpecError(f"feature {match['name']!r} is set twice in {spec!r}", hint=_forms_hint())
        features[match["name"]] = match["setting"] == "+"
    return RocmArch(processor, tuple(sorted(features.items())))


def _forms_hint() -> str:
    forms = ", ".join(repr(form) for form in ACCEPTED_FORMS)
    return f"write the arch like one of {forms}; tile supports {', '.join(SUPPORTED_ARCHS)}"


@dataclasses.dataclass(frozen=True)
class MfmaInstr:
    """One MFMA instruction, single block, without CBSZ/ABID/BLGP modifiers."""

    mnemonic: str
    m: int
    n: int
    k: int
    input_dtype: str
    accumulator_dtype: str

    @property
    def shape_name(self) -> str:
        """``16x16x16`` style name, as in the mnemonic."""
        return f"{self.m}x{self.n}x{self.k}"


# The single-block MFMAs tile lowers to (AMC instruction lists). The ISAs also have
# f32, f64, xf32 and multi-block 4x4 forms; they are left out until a lowering
# uses them. CDNA3 renamed the CDNA2 mnemonics (16x16x16f16 -> 16x16x16_f16,
# ..._bf16_1k -> ..._bf16) and replaced the int8 K=16/K=8 forms by K=32/K=16.
_MFMA_CDNA2 = (
    MfmaInstr("v_mfma_f32_16x16x16f16", 16, 16, 16, "float16", "float32"),
    MfmaInstr("v_mfma_f32_32x32x8f16", 32, 32, 8, "float16", "float32"),
    MfmaInstr("v_mfma_f32_16x16x16bf16_1k", 16, 16, 16, "bfloat16", "float32"),
    MfmaInstr("v_mfma_f32_32x32x8bf16_1k", 32, 32, 8, "bfloat16", "float32"),
    MfmaInstr("v_mfma_i32_16x16x16i8", 16, 16, 16, "int8", "int32"),
    MfmaInstr("v_mfma_i32_32x32x8i8", 32, 32, 8, "int8", "int32"),
)
# CDNA3 fp8 is the "fnuz" encoding (no negative zero, one NaN); the OCP e4m3fn /
# e5m2 formats arrive with gfx950 and are not these.
_MFMA_CDNA3 = (
    MfmaInstr("v_mfma_f32_16x16x16_f16", 16, 16, 16, "float16", "float32"),
    MfmaInstr("v_mfma_f32_32x32x8_f16", 32, 32, 8, "float16", "float32"),
    MfmaInstr("v_mfma_f32_16x16x16_bf16", 16, 16, 16, "bfloat16", "float32"),
    MfmaInstr("v_mfma_f32_32x32x8_bf16", 32, 32, 8, "bfloat16", "float32"),
    MfmaInstr("v_mfma_i32_16x16x32_i8", 16, 16, 32, "int8", "int32"),
    MfmaInstr("v_mfma_i32_32x32x16_i8", 32, 32, 16, "int8", "int32"),
    MfmaInstr("v_mfma_f32_16x16x32_fp8_fp8", 16, 16, 32, "float8_e4m3fnuz", "float32"),
    MfmaInstr("v_mfma_f32_32x32x16_fp8_fp8", 32, 32, 16, "float8_e4m3fnuz", "float32"),
    MfmaInstr("v_mfma_f32_16x16x32_bf8_bf8", 16, 16, 32, "float8_e5m2fnuz", "float32"),
    MfmaInstr("v_mfma_f32_32x32x16_bf8_bf8", 32, 32, 16, "float8_e5m2fnuz", "float32"),
)

_DTYPES_CDNA2 = frozenset(
    {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
     "uint64", "float16", "bfloat16", "float32", "float64"}
)  # fmt: skip
_DTYPES_CDNA3 = _DTYPES_CDNA2 | {"float8_e4m3fnuz", "float8_e5m2fnuz"}


@dataclasses.dataclass(frozen=True)
class RocmCapabilities:
    """What one gfx processor offers. Sizes are bytes."""

    arch: RocmArch
    family: str
    """``CDNA2`` or ``CDNA3``."""
    products: tuple[str, ...]
    """Example parts with this processor (informational)."""
    wave_size: int
    max_threads_per_block: int
    lds_bytes_per_block: int
    """Largest LDS (shared memory) allocation of one workgroup."""
    lds_bytes_per_cu: int
    lds_banks: int
    lds_bank_bytes: int
    lds_dma: bool
    """Global->LDS loads that bypass VGPRs (``buffer_load_* ... lds``, LDS DMA): "global_load_lds
    or buffer/global_load instructions with the lds flag are LDS DMA loads" (LLVM AMDGPUUsage),
    and LLVM 15 has ``llvm.amdgcn.raw.buffer.load.lds`` for gfx9 (IntrinsicsAMDGPU.td), which
    hipcc compiles for gfx90a to ``buffer_load_dword ... offen lds`` (tested). The ROCm backend
    lowers global->LDS ``T.copy`` to it (``_src/lds_dma.py``) where this is true."""
    lds_dma_max_bytes_per_lane: int
    """Widest LDS DMA load per lane: dword on gfx90a/gfx942 (dwordx3/x4 are gfx950 only, LLVM
    ``GCNSubtarget::hasLDSLoadB96_B128()``; gpu-isa-facts §9)."""
    mfma: tuple[MfmaInstr, ...]
    dtypes: frozenset[str]
    """Dtypes with native load/store/convert support (fp8 fnuz: CDNA3)."""

    @property
    def mfma_shapes(self) -> frozenset[tuple[int, int, int]]:
        """The ``(m, n, k)`` shapes in :attr:`mfma`."""
        return frozenset((instr.m, instr.n, instr.k) for instr in self.mfma)

    def mfma_for(self, input_dtype: str) -> tuple[MfmaInstr, ...]:
        """The MFMAs whose A/B operands have ``input_dtype``."""
        return tuple(instr for instr in self.mfma if instr.input_dtype == input_dtype)


def _row(
    processor: str,
    family: str,
    products: tuple[str, ...],
    mfma: tuple[MfmaInstr, ...],
    dtypes: frozenset[str],
) -> RocmCapabilities:
    return RocmCapabilities(
        arch=RocmArch(processor),
        family=family,
        products=products,
        wave_size=64,
        max_threads_per_block=1024,
        lds_bytes_per_block=64 * KiB,
        lds_bytes_per_cu=64 * KiB,
        lds_banks=32,
        lds_bank_bytes=4,
        lds_dma=True,
        lds_dma_max_bytes_per_lane=4,
        mfma=mfma,
        dtypes=dtypes,
    )


_TABLE: dict[str, RocmCapabilities] = {
    "gfx90a": _row("gfx90a", "CDNA2", ("MI210", "MI250", "MI250X"), _MFMA_CDNA2, _DTYPES_CDNA2),
    "gfx942": _row("gfx942", "CDNA3", ("MI300X", "MI300A", "MI325X"), _MFMA_CDNA3, _DTYPES_CDNA3),
}

CAPABILITIES: Mapping[str, RocmCapabilities] = MappingProxyType(_TABLE)
"""Every processor tile supports, by name, read-only."""

SUPPORTED_ARCHS: tuple[str, ...] = tuple(sorted(_TABLE))


def capabilities(spec: str | RocmArch) -> RocmCapabilities:
    """The capability row of a supported processor; feature settings do not change it.

    Raises:
        ArchSpecError: ``spec`` is not a target ID.
        UnsupportedArchError: the processor is well formed but tile has no table for it.

    Example::

        >>> [i.mnemonic for i in capabilities("gfx942").mfma_for("int8")]
        ['v_mfma_i32_16x16x32_i8', 'v_mfma_i32_32x32x16_i8']
    """
    arch = parse_arch(spec)
    try:
        row = _TABLE[arch.processor]
    except KeyError:
        raise UnsupportedArchError(
            f"tile has no capability table for AMD GPU {arch.processor}",
            hint=f"target one of {', '.join(SUPPORTED_ARCHS)}",
        ) from None
    return dataclasses.replace(row, arch=arch) if arch.features else row
