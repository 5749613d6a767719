"""Capability markers: the one place tests ask what this machine can do.

Every probe is cheap, cached and never raises; a missing capability skips the test with a
reason that says what to install. Backend toolchains (nvcc, hipcc) are asked through the
backend's own public probe, imported lazily, so this module depends on no tile package.
"""

from __future__ import annotations

import functools
import importlib
import shutil
from collections.abc import Callable

import pytest

HOST_CXX = ("c++", "g++", "clang++")
HOST_CC = ("cc", "gcc", "clang")


@functools.cache
def first_tool(*names: str) -> str | None:
    """The path of the first of ``names`` on PATH, or None."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def needs_tool(*names: str, why: str = "") -> pytest.MarkDecorator:
    """Skip unless one of ``names`` is on PATH."""
    reason = f"needs {' or '.join(names)} on PATH" + (f" ({why})" if why else "")
    return pytest.mark.skipif(first_tool(*names) is None, reason=reason)


def _probe(module: str, function: str) -> Callable[[], object]:
    def run() -> object:
        try:
            return getattr(importlib.import_module(module), function)()
        except Exception:  # a probe never raises: anything wrong means "not available"
            return None

    return run


@functools.cache
def nvcc_path() -> object:
    """nvcc as the CUDA backend finds it (TILE_NVCC, PATH, CUDA_HOME), or None."""
    return _probe("tile.backends.cuda.toolchain", "probe_nvcc")()


@functools.cache
def hipcc_path() -> object:
    """hipcc as the ROCm backend finds it, or None."""
    return _probe("tile.backends.rocm.toolchain", "probe_hipcc")()


@functools.cache
def hip_compiler(arch: str) -> object:
    """The compiler the ROCm backend would build ``arch`` (``"gfx942"``) with, or None."""
    try:
        return importlib.import_module("tile.backends.rocm.toolchain").probe_hip_compiler(arch)
    except Exception:  # a probe never raises
        return None


def needs_hip_compiler(arch: str) -> pytest.MarkDecorator:
    """Skip unless a compiler here builds AMD code objects for ``arch`` (ROCm, clang++-17+ with lld,
    or Debian's hipcc for the archs clang 15 knows)."""
    return pytest.mark.skipif(
        hip_compiler(arch) is None,
        reason=f"no compiler here builds {arch} code objects "
        "(apt-get install clang-19 lld-19 llvm-19, or ROCm)",
    )


@functools.cache
def installed_backends() -> frozenset[str]:
    """Names in the ``tile.backends`` entry-point group (nothing is imported)."""
    from importlib.metadata import entry_points

    return frozenset(ep.name for ep in entry_points(group="tile.backends"))


def needs_backend(name: str) -> pytest.MarkDecorator:
    """Skip unless the backend distribution ``name`` is installed (e.g. ``"cuda"``)."""
    return pytest.mark.skipif(
        name not in installed_backends(),
        reason=f"the {name!r} backend is not installed (pip install ./packages/tile-backends-{name})",
    )


needs_host_cxx = needs_tool(*HOST_CXX, why="the CPU emulator and native helpers need a host C++ compiler")
needs_host_cc = needs_tool(*HOST_CC, why="a host C compiler")
needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc not found (install the CUDA toolkit)")
needs_cuobjdump = pytest.mark.skipif(
    _probe("tile.backends.cuda._src.compiler", "find_cuobjdump")() is None,
    reason="cuobjdump not found, so no SASS to read (pip install nvidia-cuda-cuobjdump)",
)
needs_hipcc = pytest.mark.skipif(hipcc_path() is None, reason="hipcc not found (apt-get install hipcc)")
