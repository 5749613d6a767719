"""Finding ``hipcc`` and ``amdclang++``, their versions, and the gfx targets they know.

Search order for each tool (first hit wins):

1. ``TILE_HIPCC`` / ``TILE_AMDCLANG``: the executable itself. When set, nothing
   else is searched.
2. ``TILE_ROCM_PATH``: a ROCm root. When set, nothing else is searched.
3. ``ROCM_PATH``, then ``HIP_PATH``: conventional roots.
4. The tool on ``PATH``.
5. ``/opt/rocm``.

Within a root, hipcc is ``bin/hipcc`` and amdclang++ is ``llvm/bin/amdclang++``
(or ``bin/amdclang++``, the ROCm 6 symlink). The tools are only ever run as
subprocesses; nothing imports a vendor SDK.

Which compiler builds a given gfx target is :func:`select_hip_compiler` (first that knows
the processor wins):

1. ROCm: ``amdclang++``, then a ROCm ``hipcc`` (one whose ``--version`` says "AMD clang")
   or the ``hipcc`` that ``TILE_HIPCC`` names (set: the user's choice, asked first);
2. a plain LLVM ``clang++`` with ``lld`` beside it: ``TILE_HIP_CLANG``, else ``clang++-N``
   on PATH, newest first (Debian bookworm: ``apt-get install clang-19 lld-19 llvm-19``). It builds
   without device libraries (``-nogpulib``), which tile's ``tile_hip.h`` never needs;
3. any other ``hipcc`` (Debian's: HIP 5.2 on clang 15, which knows gfx90a, not gfx942).

Example::

    >>> from tile.backends.rocm.toolchain import probe_amdclang
    >>> clang = probe_amdclang()       # None when there is no usable amdclang++
    >>> clang is None or clang.supports("gfx942") in (True, False)
    True
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tile.ir.toolchain import ToolVersion as ToolVersion
from tile.ir.toolchain import is_executable, run_tool
from tile.layout.env import EnvVar
from tile.layout.errors import TileError

from . import env
from .arch import RocmArch, parse_arch
from .errors import ToolchainError, ToolchainNotFoundError

_SYSTEM_ROCM_ROOTS: tuple[Path, ...] = (Path("/opt/rocm"),)
_RUN_TIMEOUT_S = 60.0

INSTALL_HINT = (
    "install ROCm (https://rocm.docs.amd.com/projects/install-on-linux/en/latest/), "
    "or point {explicit} at the executable or TILE_ROCM_PATH at a ROCm root"
)


@dataclasses.dataclass(frozen=True)
class _Tool:
    """How to find one ROCm tool."""

    exe: str
    explicit: EnvVar[Path | None]
    in_root: tuple[str, ...]


_HIPCC = _Tool("hipcc", env.TILE_HIPCC, ("bin/hipcc",))
_AMDCLANG = _Tool("amdclang++", env.TILE_AMDCLANG, ("llvm/bin/amdclang++", "bin/amdclang++"))


def _candidates(tool: _Tool) -> Iterator[tuple[str, Path]]:
    for var in (env.ROCM_PATH, env.HIP_PATH):
        root = var.get()
        if root is not None:
            for rel in tool.in_root:
                yield var.name, root / rel
    on_path = shutil.which(tool.exe)
    if on_path is not None:
        yield "PATH", Path(on_path)
    for root in _SYSTEM_ROCM_ROOTS:
        for rel in tool.in_root:
            yield str(root), root / rel


def _explicit(var: EnvVar[Path | None], exe: str) -> Path | None:
    """The executable ``var`` names (then the only place searched), or None when unset.

    Raises:
        ToolchainNotFoundError: ``var`` is set to something that is not an executable file.
    """
    explicit = var.get()
    if explicit is not None and not is_executable(explicit):
        raise ToolchainNotFoundError(
            f"{var.name}={str(explicit)!r} is not an executable file",
            hint=f"point {var.name} at {exe}, or unset it to search",
        )
    return explicit


def _locate(tool: _Tool) -> tuple[Path, str]:
    explicit = _explicit(tool.explicit, tool.exe)
    if explicit is not None:
        return explicit, tool.explicit.name
    root = env.TILE_ROCM_PATH.get()
    if root is not None:
        for rel in tool.in_root:
            if is_executable(root / rel):
                return root / rel, env.TILE_ROCM_PATH.name
        raise ToolchainNotFoundError(
            f"TILE_ROCM_PATH={str(root)!r} has no executable {' or '.join(tool.in_root)}",
            hint="point TILE_ROCM_PATH at a ROCm root, or unset it",
        )
    tried: list[str] = []
    for source, path in _candidates(tool):
        if is_executable(path):
            return path, source
        tried.append(f"{source} ({path})")
    where = "; ".join(tried) if tried else "nothing else to search"
    raise ToolchainNotFoundError(
        f"{tool.exe} was not found (searched: PATH, {where})",
        hint=INSTALL_HINT.format(explicit=tool.explicit.name),
    )


def locate_hipcc() -> tuple[Path, str]:
    """The hipcc to use and where it was found, without running it.

    Raises:
        ToolchainNotFoundError: no hipcc, or ``TILE_HIPCC`` / ``TILE_ROCM_PATH``
            is set and does not lead to an executable.
    """
    return _locate(_HIPCC)


def locate_amdclang() -> tuple[Path, str]:
    """The amdclang++ to use and where it was found, without running it.

    Raises:
        ToolchainNotFoundError: as :func:`locate_hipcc`, for ``TILE_AMDCLANG``.
    """
    return _locate(_AMDCLANG)


def hip_environment() -> dict[str, str]:
    """The environment every ROCm tool runs in: this process's, with ``HIP_PLATFORM=amd``.

    hipcc picks its platform from ``HIP_PLATFORM``; unset, Debian's hipcc chooses nvcc when
    one is on PATH. tile only ever wants the AMD (HIP-Clang) platform.
    """
    return {**os.environ, "HIP_PLATFORM": "amd"}


def _run(exe: Path, *args: str) -> str:
    """stdout and stderr together: clang prints some listings on stderr."""
    done = run_tool(
        [str(exe), *args],
        f"`{exe} {' '.join(args)}`",
        error=ToolchainError,
        timeout=_RUN_TIMEOUT_S,
        run_hint="check that the file is a working ROCm tool",
        failure_hint="check that the file is a working ROCm tool (ROCm 5.7 or newer)",
        env=hip_environment(),
    )
    return done.stdout + done.stderr


_HIP_VERSION = re.compile(r"HIP version:\s*(\d+)\.(\d+)(?:\.(\d+))?")
_CLANG_VERSION = re.compile(r"clang version\s*(\d+)\.(\d+)(?:\.(\d+))?")
_GFX = re.compile(r"\bgfx\d{1,2}[0-9a-f]{2}\b")


def _parse_version(pattern: re.Pattern[str], text: str, what: str) -> ToolVersion:
    match = pattern.search(text)
    if match is None:
        raise ToolchainError(
            f"could not find a version in the output of `{what} --version`",
            hint=f"check that this is AMD's {what}; its output began: {text[:200]!r}",
        )
    return ToolVersion(int(match[1]), int(match[2]), int(match[3] or 0))


def parse_hip_version(text: str) -> ToolVersion:
    """Read the HIP version from ``hipcc --version`` output.

    Raises:
        ToolchainError: the text names no HIP version.

    Example::

        >>> parse_hip_version("HIP version: 6.2.41133-dd7f95766")
        ToolVersion(major=6, minor=2, patch=41133)
    """
    return _parse_version(_HIP_VERSION, text, "hipcc")


def parse_clang_version(text: str) -> ToolVersion:
    """Read the clang version from ``amdclang++ --version`` output.

    Raises:
        ToolchainError: the text names no clang version.
    """
    return _parse_version(_CLANG_VERSION, text, "amdclang++")


def parse_supported_gfx(text: str) -> frozenset[str]:
    """The gfx processors named in ``--print-supported-cpus`` output.

    Example::

        >>> sorted(parse_supported_gfx("Available CPUs for this target:\\n\\tgfx90a\\n\\tgfx942\\n"))
        ['gfx90a', 'gfx942']
    """
    return frozenset(_GFX.findall(text))


@dataclasses.dataclass(frozen=True)
class Hipcc:
    """A located, working hipcc."""

    path: Path
    source: str
    hip_version: ToolVersion


@dataclasses.dataclass(frozen=True)
class AmdClang:
    """A located, working amdclang++ and the gfx processors it can target."""

    path: Path
    source: str
    version: ToolVersion
    processors: frozenset[str]

    def supports(self, spec: str | RocmArch) -> bool:
        """Whether this compiler can target ``spec``'s processor.

        Raises:
            ArchSpecError: ``spec`` is not a target ID.
        """
        return parse_arch(spec).processor in self.processors


def find_hipcc() -> Hipcc:
    """Locate hipcc and ask its HIP version.

    Raises:
        ToolchainNotFoundError: no hipcc was found.
        ToolchainError: hipcc was found but its answer could not be read.
    """
    path, source = locate_hipcc()
    return Hipcc(path, source, parse_hip_version(_run(path, "--version")))


def find_amdclang() -> AmdClang:
    """Locate amdclang++ and ask its version and the gfx processors it knows.

    Raises:
        ToolchainNotFoundError: no amdclang++ was found.
        ToolchainError: it was found but its answers could not be read.
    """
    path, source = locate_amdclang()
    version = parse_clang_version(_run(path, "--version"))
    listing = _run(path, "--target=amdgcn-amd-amdhsa", "--print-supported-cpus")
    processors = parse_supported_gfx(listing)
    if not processors:
        raise ToolchainError(
            f"`{path} --print-supported-cpus` for amdgcn listed no gfx processors",
            hint="check that this clang was built with the AMDGPU target (amdclang++)",
        )
    return AmdClang(path, source, version, processors)


def probe_hipcc() -> Hipcc | None:
    """Like :func:`find_hipcc`, but ``None`` instead of any error. For test skips."""
    try:
        return find_hipcc()
    except (TileError, OSError):
        return None


def probe_amdclang() -> AmdClang | None:
    """Like :func:`find_amdclang`, but ``None`` instead of any error. For test skips."""
    try:
        return find_amdclang()
    except (TileError, OSError):
        return None


# ---------------------------------------------------------------- choosing the HIP compiler

PLAIN_CLANG_VERSIONS = (21, 20, 19, 18, 17)
"""Versioned ``clang++-N`` searched on PATH, newest first (LLVM 17 added gfx942)."""

APT_PACKAGES = "clang-19 lld-19 llvm-19"
"""What ``apt-get install`` needs on Debian bookworm / Ubuntu 24.04 for gfx942 code objects
(llvm-19: llvm-objdump-19 / llvm-readelf-19, which know gfx942)."""

_PROBE_KERNEL = 'extern "C" __global__ void tile_probe() {}\n'


@dataclasses.dataclass(frozen=True)
class HipCompiler:
    """A compiler that turns a HIP file into an AMDGPU code object, and how to call it.

    ``kind`` is ``amdclang++`` (ROCm), ``hipcc`` (ROCm or Debian) or ``clang++`` (plain
    LLVM with lld, no device libraries).
    """

    kind: str
    path: Path
    source: str
    version: ToolVersion
    """The clang version under the driver."""
    device_libs: bool
    """Whether the ROCm device libraries (``__ocml_*``, ``__ockl_*``) are linked."""

    def describe(self) -> str:
        """One line for headers and errors, e.g. ``clang++ 19.1.7 (/usr/bin/clang++-19, lld, ...)``."""
        libs = "ROCm device libraries" if self.device_libs else "lld, no device libraries"
        return f"{self.kind} (clang {self.version}) at {self.path} [{self.source}; {libs}]"

    def command(self, arch: str, source: Path, output: Path, flags: tuple[str, ...]) -> list[str]:
        """The command line that compiles ``source`` to the plain ELF code object ``output``."""
        if self.kind == "hipcc":
            head = [str(self.path), "--genco", f"--offload-arch={arch}"]
            return [*head, *flags, "-o", str(output), str(source)]
        cmd = [str(self.path), "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "-c", *flags]
        if not self.device_libs:
            # tile_hip.h swaps the few HIP names that reach the device library for builtins.
            cmd += ["-nogpulib", "-DTILE_HIP_NO_DEVICE_LIBS"]
        return [*cmd, "-o", str(output), str(source)]


def _clang_processors(path: Path, *extra: str) -> frozenset[str]:
    listing = _run(path, "--target=amdgcn-amd-amdhsa", *extra, "--print-supported-cpus")
    return parse_supported_gfx(listing)


def _lld_beside(clang: Path) -> Path | None:
    """The lld a clang driver runs for amdgcn: ``lld`` / ``ld.lld`` in its own directory."""
    real = clang.resolve().parent
    for name in ("ld.lld", "lld"):
        if is_executable(real / name):
            return real / name
    return None


def _plain_clangs() -> Iterator[tuple[Path, str]]:
    explicit = _explicit(env.TILE_HIP_CLANG, "a clang++ (17 or newer)")
    if explicit is not None:
        yield explicit, env.TILE_HIP_CLANG.name
        return
    for major in PLAIN_CLANG_VERSIONS:
        found = shutil.which(f"clang++-{major}")
        if found is not None:
            yield Path(found), "PATH"


@functools.cache
def _plain_clang(path: Path, source: str) -> tuple[HipCompiler, frozenset[str]] | str:
    """A plain clang++ as a compiler and the processors it knows, or why it cannot be one."""
    if _lld_beside(path) is None:
        return f"{path}: no lld beside it (apt-get install {APT_PACKAGES})"
    try:
        version = parse_clang_version(_run(path, "--version"))
        processors = _clang_processors(path, "-nogpulib")
    except TileError as exc:
        return f"{path}: {str(exc).splitlines()[0]}"
    return HipCompiler("clang++", path, source, version, device_libs=False), processors


@functools.cache
def _hipcc_knows(path: Path, arch: str) -> str:
    """Empty when ``path`` (a hipcc) builds an empty kernel for ``arch``, else clang's error line."""
    with tempfile.TemporaryDirectory(prefix="tile-hipcc-probe-") as tmp:
        src, out = Path(tmp) / "probe.hip", Path(tmp) / "probe.co"
        src.write_text(_PROBE_KERNEL)
        try:
            _run(
                path, "--genco", f"--offload-arch={arch}", "--no-gpu-bundle-output", "-o", str(out), str(src)
            )
        except ToolchainError as exc:
            lines = [line for line in str(exc).splitlines() if "error" in line.lower()]
            return (lines[-1] if lines else str(exc)).strip()[:300]
    return ""


@functools.cache
def _hipcc_compiler(path: Path, source: str) -> tuple[HipCompiler, bool]:
    """hipcc as a compiler, and whether it is ROCm's (its clang says "AMD clang")."""
    text = _run(path, "--version")
    version = parse_clang_version(text) if _CLANG_VERSION.search(text) else parse_hip_version(text)
    return HipCompiler("hipcc", path, source, version, device_libs=True), "AMD clang" in text


def select_hip_compiler(arch: str | RocmArch, device_libs: bool = False) -> HipCompiler:
    """The compiler that builds ``arch``'s code objects here (module docstring: the order).

    ``device_libs``: the kernel needs ROCm's device libraries (``printf`` is
    ``__ockl_printf_*``), so a plain clang, which has none, is passed over.

    Raises:
        ToolchainNotFoundError: nothing installed can build ``arch``; the message lists what
            was tried and why each was passed over, the hint what to install.
        ArchSpecError: ``arch`` is not a target ID.
    """
    processor = parse_arch(arch).processor
    passed: list[str] = []
    try:
        clang = find_amdclang()
        if processor in clang.processors:
            return HipCompiler("amdclang++", clang.path, clang.source, clang.version, device_libs=True)
        passed.append(f"{clang.path}: knows no {processor}")
    except TileError:
        pass  # no ROCm: the usual case, not worth a line
    hipcc: tuple[HipCompiler, bool] | None = None
    try:
        hipcc = _hipcc_compiler(*locate_hipcc())
    except TileError as exc:
        passed.append(str(exc).splitlines()[0])
    first = hipcc is not None and (hipcc[1] or hipcc[0].source == env.TILE_HIPCC.name)
    if hipcc is not None and first:
        why = _hipcc_knows(hipcc[0].path, processor)
        if not why:
            return hipcc[0]
        passed.append(f"{hipcc[0].path}: {why}")
    plain = 0
    try:
        for path, source in _plain_clangs():
            plain += 1
            found = _plain_clang(path, source)
            if isinstance(found, str):
                passed.append(found)
            elif device_libs:
                passed.append(f"{path}: no device libraries, and the kernel calls printf (__ockl_printf_*)")
            elif processor in found[1]:
                return found[0]
            else:
                passed.append(f"{path}: knows no {processor}")
    except TileError as exc:
        passed.append(str(exc).splitlines()[0])
    if not plain:
        versions = f"{PLAIN_CLANG_VERSIONS[-1]}..{PLAIN_CLANG_VERSIONS[0]}"
        passed.append(f"no clang++-N (N = {versions}) on PATH, {env.TILE_HIP_CLANG.name} unset")
    if hipcc is not None and not first:
        why = _hipcc_knows(hipcc[0].path, processor)
        if not why:
            return hipcc[0]
        passed.append(f"{hipcc[0].path} (clang {hipcc[0].version}): {why}")
    raise ToolchainNotFoundError(
        f"no installed compiler can build AMD GPU code objects for {processor} (tried: {'; '.join(passed)})",
        hint=f"apt-get install {APT_PACKAGES} (Debian bookworm, Ubuntu 24.04), or install ROCm "
        f"(amdclang++), or point {env.TILE_HIP_CLANG.name} at a clang++ 17+ with lld beside it",
    )


def probe_hip_compiler(arch: str | RocmArch, device_libs: bool = False) -> HipCompiler | None:
    """Like :func:`select_hip_compiler`, but ``None`` instead of any error. For test skips."""
    try:
        return select_hip_compiler(arch, device_libs)
    except (TileError, OSError):
        return None
