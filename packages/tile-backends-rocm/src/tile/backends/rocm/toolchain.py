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

Example::

    >>> from tile.backends.rocm.toolchain import probe_amdclang
    >>> clang = probe_amdclang()       # None when there is no usable amdclang++
    >>> clang is None or clang.supports("gfx942") in (True, False)
    True
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
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


def _locate(tool: _Tool) -> tuple[Path, str]:
    explicit = tool.explicit.get()
    if explicit is not None:
        if not is_executable(explicit):
            raise ToolchainNotFoundError(
                f"{tool.explicit.name}={str(explicit)!r} is not an executable file",
                hint=f"point {tool.explicit.name} at {tool.exe}, or unset it to search",
            )
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
