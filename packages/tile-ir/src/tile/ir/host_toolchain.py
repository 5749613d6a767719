"""The host C/C++ toolchain every tile package builds native code with.

Three places compile C or C++ on the user's machine and cache the result by content: the
CPU backend's hand-written micro-kernels, the GPU emulator (its runtime, vendors' device
libraries and every emulated kernel) and the GPU layer's native launcher
(:mod:`tile.ir.gpu.native_launch`). All of them find the compiler (``TILE_CXX``, else
c++, g++, clang++ on PATH), name a build by the hash of everything that goes into it, keep
it under ``TILE_CACHE_DIR``, and move a finished library into place atomically and sealed
(checksummed, so a damaged cached library is rebuilt, never mapped), with the functions
below. tile-backends-cpu re-exports them as ``tile.backends.cpu.toolchain``.

Example::

    from tile.ir import host_toolchain
    cxx = host_toolchain.find_host_compiler()
    key = host_toolchain.content_digest(host_toolchain.compiler_identity(cxx), "-O2", source_bytes)
    out = host_toolchain.cache_dir("mylib") / f"libmine-{key}.so"
    if not host_toolchain.is_built(out):
        result = host_toolchain.build_shared_library(cxx, ["-O2", "-fPIC", "-shared", "mine.c"], out)
        assert result.returncode == 0, result.stderr
"""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import shutil
import subprocess

from . import env
from .errors import BackendError
from .sealed_files import build_shared_library as build_shared_library
from .sealed_files import is_sealed

_CANDIDATES = ("c++", "g++", "clang++")


class HostCompilerNotFoundError(BackendError):
    """No host C++ compiler (``TILE_CXX``, ``c++``, ``g++``, ``clang++``) to build native code with."""


def find_host_compiler() -> str:
    """The host C++ compiler: ``TILE_CXX``, else the first of c++, g++, clang++ on PATH.

    Raises:
        HostCompilerNotFoundError: none is installed.
    """
    configured = env.CXX.get().strip()
    if configured:
        found = shutil.which(configured) or (configured if os.access(configured, os.X_OK) else None)
        if not found:
            raise HostCompilerNotFoundError(
                f"TILE_CXX={configured!r} is not an executable C++ compiler",
                hint="point TILE_CXX at g++ or clang++, or unset it to search PATH",
            )
        return found
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise HostCompilerNotFoundError(
        "building native code (emulated GPU kernels, CPU micro-kernels) needs a host C++ compiler, "
        "and none was found",
        hint="install g++ or clang++ (e.g. apt-get install g++), or set TILE_CXX to one",
    )


@functools.cache
def compiler_identity(cxx: str) -> str:
    """``cxx``'s path and the first line of its ``--version``: part of every build's cache key.

    Raises:
        HostCompilerNotFoundError: ``cxx`` cannot run.
    """
    try:
        result = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        raise HostCompilerNotFoundError(
            f"the host C++ compiler {cxx} cannot run: {exc}",
            hint="set TILE_CXX to a working C++17 compiler (g++ or clang++)",
        ) from exc
    first = result.stdout.splitlines()[0] if result.stdout else ""
    return f"{cxx} {first}"


@functools.cache
def accepts_flag(cxx: str, flag: str) -> bool:
    """Whether ``cxx`` compiles an empty C++ translation unit with ``flag``."""
    try:
        result = subprocess.run(
            [cxx, flag, "-x", "c++", "-fsyntax-only", "-"],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError:
        return False
    return result.returncode == 0


def content_digest(*parts: bytes | str) -> str:
    """A 32-hex-digit hash of ``parts`` (each length-prefixed, so boundaries count)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


def cache_dir(name: str) -> pathlib.Path:
    """``<TILE_CACHE_DIR>/<name>``: where builds of one kind are cached (not created here)."""
    configured = env.CACHE_DIR.get().strip() or env.CACHE_DIR.default
    return pathlib.Path(os.path.expanduser(configured)).absolute() / name


def is_built(output: pathlib.Path) -> bool:
    """Whether ``output`` exists and matches the seal ``build_shared_library`` wrote (else rebuild it)."""
    return is_sealed(output)
