"""Building the emulator: the runtime library, device libraries and kernel libraries.

The runtime (``runtime/*.cpp``) is compiled once per machine and compiler into
``libtile_simt-<hash>.so``; a registered device's native sources into
``libtile_simt_<device>-<hash>.so``; a kernel's generated source, with the device's include
folders first on the include path (so its ``#include "tile_cuda.h"`` finds the vendor's CPU
implementation) and ``HEADER_DIRS`` (this package's ``include/``, then tile-ir's ``tile_gpu.h``
folder) after them, into ``kernel-<hash>.so``. All are cached by the hash of everything that
goes into them under ``<TILE_CACHE_DIR>/simt``. The host compiler and the cache plumbing are
``tile.backends.cpu.toolchain``'s.
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
import subprocess
import tempfile
from collections.abc import Sequence

from tile.ir.gpu.headers import INCLUDE_DIR as GPU_INCLUDE_DIR

from .. import env
from ..toolchain import (
    accepts_flag,
    build_shared_library,
    cache_dir,
    compiler_identity,
    content_digest,
    find_host_compiler,
    is_built,
)
from ._device import EmulatedDevice, resolve_device
from .errors import SimtCompileError

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
INCLUDE_DIR = PACKAGE_DIR / "include"
HEADER_DIRS = (INCLUDE_DIR, GPU_INCLUDE_DIR)
"""The emulator's headers, then tile-ir's ``tile_gpu.h`` (fast math and casts every vendor
shares), which ``tile_simt_common.h`` includes: searched after a device's own folders."""
RUNTIME_DIR = PACKAGE_DIR / "runtime"
RUNTIME_SOURCES = ("simt_runtime.cpp", "simt_collectives.cpp", "simt_hopper.cpp")

CXX_STANDARD = "-std=c++17"
RUNTIME_FLAGS = ("-O2", "-fPIC", "-shared", "-pthread", CXX_STANDARD)
KERNEL_FLAGS = ("-O1", "-fPIC", "-shared", CXX_STANDARD, "-w", "-fno-strict-aliasing")
"""-O1: kernels are long unrolled straight-line code; -O2 costs seconds of compile for
little run time, since the emulator's time goes to fiber switches and collectives."""

CHECK_FLAGS = (
    "-g1",
    "-gdwarf-4",  # gcc 12's DWARF 5 line tables put an included file's first lines on the includer
    "-fsanitize=kernel-address",
    "--param=asan-instrumentation-with-call-threshold=0",
    "--param=asan-globals=0",
    "--param=asan-stack=0",
    "--param=asan-use-after-return=0",
)
"""TILE_EMU_CHECK=1: every load and store calls the runtime's __asan_*_noabort hooks (no ASan
runtime is linked; the emulator implements them) and line tables name the faulting line."""

POISON_FLAG = "-ftrivial-auto-var-init=pattern"
"""Uninitialised locals (a fragment never written) start as 0xfe bytes instead of whatever a
register or the stack held (gcc >= 12, clang >= 8; left out where the compiler lacks it)."""

DYNAMIC_SHARED_CAPACITY = 232448
"""Bytes of dynamic shared memory an emulated block can have (227 KiB, the sm_90 limit)."""


def cache_root() -> pathlib.Path:
    return cache_dir("simt")


def _header_texts() -> list[tuple[str, bytes]]:
    """The emulator's headers (``tile_simt.h``, ``tile_simt_dialect.h``, ...) and ``tile_gpu.h``:
    in every cache key."""
    return sorted(
        (str(p.relative_to(folder)), p.read_bytes()) for folder in HEADER_DIRS for p in folder.rglob("*.h")
    )


def _compile(cxx: str, args: list[str], output: pathlib.Path, what: str, include: pathlib.Path) -> None:
    """Build ``output`` (atomically for readers); a compiler error is a ``SimtCompileError``."""
    result = build_shared_library(cxx, args, output)
    if result.returncode != 0:
        messages = result.stderr.splitlines()
        errors = [line for line in messages if "error" in line] or messages
        shown = "\n".join(errors[:12])
        raise SimtCompileError(
            f"the host C++ compiler could not build {what}:\n{shown}",
            hint="the emulator's device header may lack an entry point this kernel uses; "
            "compile the kernel source by hand with -I " + str(include) + " to see every message",
        )


def runtime_library() -> pathlib.Path:
    """The emulator's runtime shared library, built on first use and cached."""
    cxx = find_host_compiler()
    sources = [RUNTIME_DIR / name for name in RUNTIME_SOURCES]
    parts: list[bytes | str] = [compiler_identity(cxx), " ".join(RUNTIME_FLAGS)]
    parts += [p.read_bytes() for p in sources]
    parts += [p.read_bytes() for p in sorted(RUNTIME_DIR.glob("*.h"))]
    parts.append((INCLUDE_DIR / "tile_simt.h").read_bytes())
    path = cache_root() / f"libtile_simt-{content_digest(*parts)}.so"
    if not is_built(path):  # missing, damaged or truncated: rebuilt, never mapped
        args = [*RUNTIME_FLAGS, "-I", str(INCLUDE_DIR), "-I", str(RUNTIME_DIR), *map(str, sources)]
        _compile(cxx, args, path, "the emulator runtime", INCLUDE_DIR)
    return path


def device_library(device: EmulatedDevice | str) -> pathlib.Path | None:
    """The library of a device's native sources (None if it has none), built on first use and cached.

    It is linked against nothing: the runtime, loaded first with ``RTLD_GLOBAL``, provides
    the ``tile_simt_*`` symbols it calls, and kernels of the device find its symbols the same way.
    """
    device = resolve_device(device)
    if not device.native_sources:
        return None
    cxx = find_host_compiler()
    include = [arg for folder in (*device.include_dirs, *HEADER_DIRS) for arg in ("-I", str(folder))]
    parts: list[bytes | str] = [compiler_identity(cxx), " ".join(RUNTIME_FLAGS), device.name]
    parts += [p.read_bytes() for p in device.native_sources]
    for name, text in [*device.headers(), *_header_texts()]:
        parts += [name, text]
    path = cache_root() / f"libtile_simt_{device.name}-{content_digest(*parts)}.so"
    if not is_built(path):  # missing, damaged or truncated: rebuilt, never mapped
        args = [*RUNTIME_FLAGS, *include, *map(str, device.native_sources)]
        _compile(cxx, args, path, f"the native sources of device {device.name}", device.include_dirs[0])
    return path


_DYNAMIC_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:(?:__align__|alignas)\s*\(\s*\d+\s*\)\s*)*"
    r"((?:unsigned\s+|signed\s+)?[A-Za-z_]\w*)\s+(?:(?:__align__|alignas)\s*\(\s*\d+\s*\)\s*)*(\w+)\s*\[\s*\]\s*;"
)
_TYPE_SPELLING = {"uchar": "unsigned char", "ushort": "unsigned short", "uint": "unsigned int"}


def dynamic_shared_arrays(source: str) -> list[tuple[str, str]]:
    """``(element type, name)`` of each ``extern __shared__ T name[];`` in ``source``."""
    seen: dict[str, str] = {}
    for match in _DYNAMIC_SHARED.finditer(source):
        seen.setdefault(match.group(2), _TYPE_SPELLING.get(match.group(1), match.group(1)))
    return [(dtype, name) for name, dtype in seen.items()]


def defined_in(source: str, type_name: str) -> bool:
    """Whether ``source`` defines ``type_name`` itself (TVM's prelude defines ``nv_bfloat164``)."""
    name = re.escape(type_name)
    return re.search(rf"\busing\s+{name}\s*=|\b(?:struct|class)\s+{name}\b|\btypedef\b[^;]*\b{name}\s*;",
                     source) is not None


def wrapper_source(
    kernel_name: str, device: EmulatedDevice, shared: list[tuple[str, str]], source: str = ""
) -> str:
    """The translation unit around a kernel source: dynamic shared memory and the entry thunk.

    A dynamic shared array of a type the kernel source defines (TVM declares a vector-typed
    one, ``extern __shared__ nv_bfloat164 W[]``, with the type from its own prelude) is
    defined after the source: the kernel's block-scope ``extern`` declaration names it first.
    """

    def definition(dtype: str, name: str) -> str:
        size = f"{DYNAMIC_SHARED_CAPACITY} / sizeof({dtype})"
        return f"thread_local alignas(1024) {dtype} {name}[{size}];"

    late = [(dtype, name) for dtype, name in shared if defined_in(source, dtype)]
    lines = [
        f"// Emulation wrapper of {kernel_name} for the device {device.name} (tile.backends.cpu.simt).",
        *([device.preamble.rstrip("\n")] if device.preamble else []),
        f'#include "{device.header}"',
        "#include <stddef.h>",
        "#include <string.h>",
        "#include <type_traits>",
        "#include <utility>",
        "",
        "// Dynamic shared memory: one copy per OS thread, i.e. per running block.",
    ]
    lines += [definition(dtype, name) for dtype, name in shared if (dtype, name) not in late]
    lines += [
        "",
        '#include "kernel.cu"',
        "",
        *[definition(dtype, name) for dtype, name in late],
        "namespace {",
        "// Not instrumented under TILE_EMU_CHECK: reading the argument array is the launcher's business.",
        "template <typename... P, size_t... I>",
        "__attribute__((no_sanitize_address))",
        "void tile_simt_invoke(void (*kernel)(P...), void** args, std::index_sequence<I...>) {",
        "  kernel(*static_cast<std::remove_reference_t<P>*>(args[I])...);",
        "}",
        "template <typename... P>",
        "__attribute__((no_sanitize_address))",
        "void tile_simt_invoke(void (*kernel)(P...), void** args) {",
        "  tile_simt_invoke(kernel, args, std::index_sequence_for<P...>{});",
        "}",
        "}  // namespace",
        "",
        'extern "C" int tile_simt_kernel_abi(void) { return TILE_SIMT_ABI_VERSION; }',
        'extern "C" __attribute__((no_sanitize_address)) void tile_simt_kernel_entry(void** args) {',
        f"  tile_simt_invoke(&{kernel_name}, args);",
        "}",
        "// Shared memory starts as NaN bytes in every block, as a read of unwritten data should show.",
        'extern "C" void tile_simt_kernel_block_begin(unsigned long long bytes) {',
        f"  if (bytes > {DYNAMIC_SHARED_CAPACITY}) bytes = {DYNAMIC_SHARED_CAPACITY};",
    ]
    for _, name in shared:
        lines.append(f"  memset((void*){name}, 0xff, (size_t)bytes);")
    if shared:  # the first dynamic array is the shared window wgmma descriptors address
        lines.append(f"  tile_simt_set_shared_window((void*){shared[0][1]}, bytes);")
        lines.append(f"  tile_simt_set_shared_capacity({DYNAMIC_SHARED_CAPACITY});")
    lines += ["  (void)bytes;", "}", ""]
    return "\n".join(lines)


_STATIC_SHARED = re.compile(
    r"^([ \t]+__shared__\s+[^;{}=]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*;)", re.MULTILINE
)


def poison_static_shared(source: str) -> str:
    """Each block-scope ``__shared__`` declaration also registers its storage with the runtime,
    on the same line (line numbers stay the generated source's): the first thread of a block
    to pass it fills it with 0xff bytes, so a read of unwritten static shared memory sees NaN
    bytes, not what the previous block on this OS thread left there."""
    return _STATIC_SHARED.sub(r"\1 tile_simt_shared_static((void*)&\2, sizeof(\2));", source)


_SOUND_HEADERS: set[pathlib.Path] = set()
"""Precompiled headers this process has verified against their seals (18 MB each: once)."""


@functools.cache
def _is_gcc(cxx: str) -> bool:
    """Whether ``cxx`` is GCC (clang neither writes nor looks for a ``.gch`` beside a header)."""
    try:
        done = subprocess.run([cxx, "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "#define __GNUC__ " in done.stdout and "#define __clang__ " not in done.stdout


def _device_header_texts(device: EmulatedDevice) -> list[tuple[str, bytes]]:
    """Every header a kernel for ``device`` can include: the device's and the emulator's."""
    return [*device.headers(), *_header_texts()]


def precompiled_header(
    cxx: str, flags: Sequence[str], device: EmulatedDevice, headers: list[tuple[str, bytes]] | None = None
) -> pathlib.Path | None:
    """A folder holding a copy of ``device.header`` and its GCC precompiled form for ``flags``,
    built once into the cache; searched first, it saves a kernel's compile the header's parse
    (about half of it for a small kernel). ``headers``: :func:`_device_header_texts`, where the
    caller has read them already. ``None`` where it does not apply: ``TILE_EMU_PCH=0``, a
    compiler other than GCC, a device with a preamble (macros the header reads before it), or
    a build that failed (the kernel is then compiled without one).
    """
    if not env.EMU_PCH.get() or device.preamble or not _is_gcc(cxx):
        return None
    header = next(f / device.header for f in device.include_dirs if (f / device.header).is_file())
    parts: list[bytes | str] = [compiler_identity(cxx), " ".join(flags), device.header]
    for name, text in _device_header_texts(device) if headers is None else headers:
        parts += [name, text]
    folder = cache_root() / "pch" / content_digest(*parts)[:32]
    copy, compiled = folder / device.header, folder / f"{device.header}.gch"
    if compiled in _SOUND_HEADERS or is_built(compiled):
        _SOUND_HEADERS.add(compiled)
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".h", delete=False) as staged:
        staged.write(header.read_bytes())
    pathlib.Path(staged.name).replace(copy)  # atomic for a reader in another process
    search = [arg for path in (*device.include_dirs, *HEADER_DIRS) for arg in ("-I", str(path))]
    compile_only = [flag for flag in flags if flag != "-shared"]
    result = build_shared_library(cxx, [*compile_only, *search, "-x", "c++-header", str(copy)], compiled)
    if result.returncode != 0:
        return None
    _SOUND_HEADERS.add(compiled)
    return folder


def kernel_library(
    source: str,
    kernel_name: str,
    device: EmulatedDevice | str,
    checked: bool | None = None,
    include_dirs: Sequence[pathlib.Path] = (),
) -> pathlib.Path:
    """Compile a GPU kernel's source (unchanged) for the emulator; cached by content.

    ``device`` (an ``EmulatedDevice`` or a registered device's name) gives the device header
    the source is compiled against. ``checked`` (default ``TILE_CHECK`` or its alias
    ``TILE_EMU_CHECK``) builds it with an access check on every load and store
    (out-of-bounds global and shared accesses, shared-memory races). ``include_dirs`` go on
    the include path after the device's folders and the emulator's ``HEADER_DIRS`` (a backend's
    extra headers: CUTLASS for the CUDA backend's ``impl="cute"`` gemm); their paths and the
    ``.h`` files in their top two levels are part of the cache key, as are every header of
    the device and of this package and the device's native sources.

    Raises:
        HostCompilerNotFoundError: no host C++ compiler.
        SimtDeviceError: ``device`` names no registered device.
        SimtCompileError: the compiler rejected the source.
    """
    device = resolve_device(device)
    cxx = find_host_compiler()
    if checked is None:  # TILE_CHECK, or its alias TILE_EMU_CHECK
        checked = env.EMU_CHECK.get() or env.CHECK.get()
    flags = [*KERNEL_FLAGS, *(CHECK_FLAGS if checked else ())]
    if accepts_flag(cxx, POISON_FLAG):
        flags.append(POISON_FLAG)
    source = poison_static_shared(source)
    wrapper = wrapper_source(kernel_name, device, dynamic_shared_arrays(source), source)
    parts: list[bytes | str] = [compiler_identity(cxx), " ".join(flags), wrapper, source]
    headers = _device_header_texts(device)
    for name, text in headers:
        parts += [name, text]
    parts += [p.read_bytes() for p in device.native_sources]
    for folder in include_dirs:
        parts.append(str(folder))
        for header in sorted([*folder.glob("*.h"), *folder.glob("*/*.h")]):
            parts += [str(header.relative_to(folder)), header.read_bytes()]
    key = content_digest(*parts)
    path = cache_root() / "kernels" / key[:2] / f"kernel-{key}.so"
    if is_built(path):  # else missing, damaged or truncated: rebuilt, never mapped
        return path
    with tempfile.TemporaryDirectory(prefix="tile-simt-") as work:
        folder = pathlib.Path(work)
        (folder / "kernel.cu").write_text(source)
        (folder / "wrapper.cpp").write_text(wrapper)
        search = [*device.include_dirs, *HEADER_DIRS, *include_dirs, folder]
        # a backend's extra include folders could shadow what the precompiled header holds
        pch = None if include_dirs else precompiled_header(cxx, flags, device, headers)
        args = [*flags, *[arg for path in search for arg in ("-I", str(path))], str(folder / "wrapper.cpp")]
        what = f"the kernel {kernel_name}"
        if pch is not None:
            try:
                _compile(cxx, ["-I", str(pch), *args], path, what, device.include_dirs[0])
                return path
            except SimtCompileError:
                pass  # compiled again without it: an error is then the kernel's own, and says so
        _compile(cxx, args, path, what, device.include_dirs[0])
    return path
