"""Host CPU facts: LLVM CPU name and vector width (cached; never raises)."""

from __future__ import annotations

import functools
import os
import pathlib

from .. import env

GENERIC_CPU = "generic"


@functools.cache
def host_cpu() -> str:
    """The LLVM name of the host CPU (``TILE_CPU_MCPU`` wins); ``"generic"`` if unknown."""
    override = env.MCPU.get()
    if override:
        return override
    try:
        from tvm.target import codegen  # type: ignore[import-untyped]

        name = str(codegen.llvm_get_system_cpu())
    except Exception:
        return GENERIC_CPU
    return with_bf16_features(name or GENERIC_CPU, cpu_flags())


# AVX-512 CPU names whose LLVM feature set has no AVX512_BF16.
AVX512_WITHOUT_BF16 = frozenset(
    {"skylake-avx512", "cascadelake", "cannonlake", "icelake-client", "icelake-server", "tigerlake",
     "rocketlake"}
)


def with_bf16_features(name: str, flags: frozenset[str]) -> str:
    """``name``, or an LLVM CPU with the bf16 instructions the host reports.

    Under a hypervisor that hides the CPU model LLVM guesses the name from the features it
    sees; a Sapphire Rapids host came out as ``rocketlake`` (no AVX512_BF16), and LLVM then
    aborted the process legalizing bf16 vector conversions ("Do not know how to split the
    result of this operator") in generated bf16 GEMMs. With the host's own bf16 features
    LLVM emits vcvtneps2bf16 and compiles them.
    """
    if name in AVX512_WITHOUT_BF16 and "avx512_bf16" in flags:
        return "sapphirerapids" if "amx_bf16" in flags else "cooperlake"
    return name


@functools.cache
def llvm_cpu_has(feature: str, cpu: str | None = None) -> bool:
    """Whether LLVM's model of ``cpu`` (default: ``host_cpu()``, the CPU kernels are generated
    for) has ``feature`` (an LLVM feature name such as ``"avx512bf16"``); False if unknown."""
    try:
        import tvm  # type: ignore[import-untyped]
        from tvm.target import codegen  # type: ignore[import-untyped]

        target = tvm.target.Target({"kind": "llvm", "mcpu": cpu or host_cpu()})
        return feature in codegen.llvm_get_cpu_features(target)
    except Exception:
        return False


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The ``flags`` of ``/proc/cpuinfo`` (empty where that file does not exist)."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def vector_bits() -> int:
    """Width of the widest SIMD register the host offers."""
    flags = cpu_flags()
    if "avx512f" in flags:
        return 512
    if "avx2" in flags or "avx" in flags:
        return 256
    return 128


DEFAULT_LLC_BYTES = 32 << 20

LLC_BYTES_PER_CORE = 12 << 20
"""The most last-level cache per core of any x86 part (AMD's 3D V-Cache server parts: 1152 MiB
over 96 cores): what one core can count on at best, whatever sysfs reports for the whole cache."""


@functools.cache
def last_level_cache_bytes() -> int:
    """The last-level cache this process can count on: the largest data or unified cache the
    kernel's CPU reports (Linux sysfs), at most ``LLC_BYTES_PER_CORE`` per core it may run on.

    A guest of a hypervisor sees the host's whole cache (480 MiB for the 2 cores of this
    project's machines), which all the host's other cores share. ``DEFAULT_LLC_BYTES`` where
    sysfs does not say.
    """
    return min(_reported_llc_bytes(), LLC_BYTES_PER_CORE * core_count())


def _reported_llc_bytes() -> int:
    best = 0
    for index in pathlib.Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or DEFAULT_LLC_BYTES


@functools.cache
def data_cache_bytes() -> tuple[int, ...]:
    """Sizes of the data/unified caches of cpu0 by level, L1d first (Linux sysfs; empty elsewhere)."""
    by_level: dict[int, int] = {}
    for index in pathlib.Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text().strip())
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            by_level[level] = int(digits) * scale
    return tuple(by_level[level] for level in sorted(by_level))


def core_count() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
