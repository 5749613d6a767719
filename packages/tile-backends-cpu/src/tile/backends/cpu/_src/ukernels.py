"""Hand-written C micro-kernels the CPU lowering calls where generated code cannot reach.

TVM cannot give LLVM the ``<32 x bfloat>`` operands of ``vdpbf16ps`` (its bf16
legalization turns every bf16 vector into float32), so bf16 x bf16 -> float32 tile
products call ``tile_bf16_gemm_f32acc`` from ``ukernels/bf16_gemm.c`` instead (or, where
``prepack_b`` packed B once per launch, ``tile_bf16_pack_b_group`` and
``tile_bf16_gemm_f32acc_packed_b``). On a CPU with AMX-BF16 the same entry points
multiply on AMX tiles: the library probes the CPU and asks Linux for the tile state
(``arch_prctl``) once per process when it is loaded, and stays on AVX-512 BF16 where
either is missing or ``TILE_CPU_AMX=0`` (``amx_in_use``). The
library is compiled on first use with the host compiler (``TILE_CXX`` or the first of
c++, g++, clang++ on PATH) into ``<TILE_CACHE_DIR>/ukernels/``, named by the hash of the
source, the flags and the compiler's identity, and loaded with ``RTLD_GLOBAL`` so that
the JIT-compiled kernel and a cached ``kernel.so`` resolve the symbol from it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import pathlib

from tile.ir import host_toolchain as host
from tile.ir.errors import BackendError

from .. import env
from .host import cpu_flags

UKERNEL_DIR = pathlib.Path(__file__).resolve().parent.parent / "ukernels"
SOURCE = UKERNEL_DIR / "bf16_gemm.c"
BF16_GEMM_SYMBOL = "tile_bf16_gemm_f32acc"
BF16_PACKED_GEMM_SYMBOL = "tile_bf16_gemm_f32acc_packed_b"
BF16_PACK_B_SYMBOL = "tile_bf16_pack_b_group"
BF16_STORE_C_SYMBOL = "tile_bf16_store_c"
AMX_SETUP_SYMBOL = "tile_bf16_amx_setup"
AMX_APPLIES_SYMBOL = "tile_bf16_gemm_uses_amx"
FLAGS = (
    "-x", "c", "-std=gnu11", "-O3", "-mavx512f", "-mavx512bw", "-mavx512bf16",
    "-fno-strict-aliasing", "-fPIC", "-shared",
)
STREAM_STORE_SYMBOL = "tile_stream_store"
STREAM_SOURCE = UKERNEL_DIR / "stream_store.c"
STREAM_FLAGS = ("-x", "c", "-std=gnu11", "-O2", "-fno-strict-aliasing", "-fPIC", "-shared")
"""Baseline x86-64 flags: the stream stores are SSE2, so the library runs on every x86-64 CPU."""


@dataclasses.dataclass(frozen=True)
class Library:
    """One C source built into ``<cache>/ukernels/lib<name>-<hash>.so``."""

    name: str
    source: pathlib.Path
    flags: tuple[str, ...]
    symbols: tuple[str, ...]


BF16_GEMM = Library(
    "tile_bf16_gemm",
    SOURCE,
    FLAGS,
    (BF16_GEMM_SYMBOL, BF16_PACKED_GEMM_SYMBOL, BF16_PACK_B_SYMBOL, BF16_STORE_C_SYMBOL),
)
STREAM = Library("tile_stream", STREAM_SOURCE, STREAM_FLAGS, (STREAM_STORE_SYMBOL,))
LIBRARIES = (BF16_GEMM, STREAM)
SYMBOLS = tuple(s for lib in LIBRARIES for s in lib.symbols)
"""Every entry point of every library."""
UKERNEL_FILE = "ukernels.txt"
"""Written next to a cached kernel.so that calls a micro-kernel: the libraries to load first."""


class UkernelBuildError(BackendError):
    """The host compiler could not build (or the loader could not open) a C micro-kernel library."""


def cache_root() -> pathlib.Path:
    return host.cache_dir("ukernels")


def _build(cxx: str, lib: Library, output: pathlib.Path) -> None:
    result = host.build_shared_library(cxx, [*lib.flags, str(lib.source)], output)
    if result.returncode != 0:
        shown = "\n".join(result.stderr.splitlines()[:12])
        raise UkernelBuildError(
            f"the host compiler {cxx} could not build the micro-kernel library {lib.name}:\n{shown}",
            hint="it needs AVX-512 BF16 support (GCC >= 10, clang >= 9; AMX with GCC >= 11, clang >= 12); "
            "set TILE_CXX to such a "
            "compiler, or TILE_CPU_BF16_UKERNEL=0 to use the generated-code path",
        )


@functools.cache
def _load(path: str) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise UkernelBuildError(
            f"cannot load the micro-kernel library {path}: {exc}",
            hint="remove it (it is rebuilt on next use) or set TILE_CPU_BF16_UKERNEL=0",
        ) from exc
    if hasattr(lib, AMX_SETUP_SYMBOL):  # before any kernel calls it: AMX on or off for this process
        getattr(lib, AMX_SETUP_SYMBOL)(int(env.AMX.get()))
    return lib


def library(lib: Library) -> pathlib.Path:
    """Build (once per source, flags and compiler) and globally load ``lib``.

    Raises:
        HostCompilerNotFoundError: no host compiler is installed.
        UkernelBuildError: it did not compile or load.
    """
    cxx = host.find_host_compiler()
    key = host.content_digest(host.compiler_identity(cxx), " ".join(lib.flags), lib.source.read_bytes())
    path = cache_root() / f"lib{lib.name}-{key}.so"
    if not host.is_built(path):  # missing, damaged or truncated: rebuilt, never mapped
        _build(cxx, lib, path)
    _load(str(path))
    return path


def bf16_gemm_library() -> pathlib.Path:
    """The bf16 GEMM library (``library(BF16_GEMM)``)."""
    return library(BF16_GEMM)


def _library_of(symbol: str) -> Library:
    for lib in LIBRARIES:
        if symbol in lib.symbols:
            return lib
    raise UkernelBuildError(f"a cached kernel needs the unknown micro-kernel {symbol!r}")


@functools.cache
def _bf16_gemm_available() -> bool:
    try:
        bf16_gemm_library()
    except BackendError:
        return False
    return True


def use_bf16_gemm_ukernel() -> bool:
    """Whether bf16 tile products should call the C micro-kernel on this host.

    False when ``TILE_CPU_BF16_UKERNEL=0``, when the CPU lacks AVX-512 BF16 or when the
    library cannot be built (the generated-code path is used then).
    """
    if not env.BF16_UKERNEL.get():
        return False
    flags = cpu_flags()
    if not {"avx512_bf16", "avx512bw", "avx512f"} <= flags:
        return False
    return _bf16_gemm_available()


def amx_in_use() -> bool:
    """Whether bf16 tile products run on AMX tiles in this process.

    Re-reads ``TILE_CPU_AMX`` (and applies it to the loaded library); False where the
    micro-kernel is not used, the CPU has no AMX-BF16 or Linux refused the tile state.
    """
    if not use_bf16_gemm_ukernel():
        return False
    lib = _load(str(bf16_gemm_library()))
    return bool(getattr(lib, AMX_SETUP_SYMBOL)(int(env.AMX.get())))


def amx_applies(m: int, n: int, k: int) -> bool:
    """Whether the micro-kernel runs an ``m x n x k`` product on AMX (``amx_in_use`` and big enough)."""
    if not amx_in_use():
        return False
    lib = _load(str(bf16_gemm_library()))
    return bool(getattr(lib, AMX_APPLIES_SYMBOL)(m, n, k))


@functools.cache
def _stream_available() -> bool:
    try:
        library(STREAM)
    except BackendError:
        return False
    return True


def use_stream_stores() -> bool:
    """Whether kernels may call ``tile_stream_store`` (an x86-64 host whose compiler builds it)."""
    return "sse2" in cpu_flags() and _stream_available()


def load_for_kernel(directory: pathlib.Path) -> None:
    """Load the micro-kernel libraries a cached kernel needs (``UKERNEL_FILE``).

    Each line names a symbol and the library it was linked against; that library is
    loaded directly when it still exists (no compiler run on a cache hit), else rebuilt.
    """
    listed = directory / UKERNEL_FILE
    if not listed.exists():
        return
    for line in listed.read_text().splitlines():
        symbol, _, path = line.partition(" ")
        lib = _library_of(symbol)
        if path and pathlib.Path(path).exists():
            _load(path)
        else:
            library(lib)


def library_lines(llvm_source: str) -> str:
    """``UKERNEL_FILE``'s text for a kernel: one ``symbol library-path`` line per micro-kernel it calls."""
    lines = [f"{s} {library(_library_of(s))}" for s in used_symbols(llvm_source)]
    return "".join(line + "\n" for line in lines)


def used_symbols(llvm_source: str) -> list[str]:
    """The micro-kernel symbols a kernel's LLVM IR calls."""
    return [s for s in SYMBOLS if f"@{s}(" in llvm_source]
