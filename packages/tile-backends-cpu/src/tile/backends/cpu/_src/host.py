"""Host CPU facts: LLVM CPU name and vector width (cached; never raises)."""

from __future__ import annotations

import functools
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
