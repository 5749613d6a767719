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
    return name or GENERIC_CPU


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


@functools.cache
def last_level_cache_bytes() -> int:
    """Size of the largest data or unified cache the kernel's CPU reports (Linux sysfs).

    ``DEFAULT_LLC_BYTES`` where sysfs does not say.
    """
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
