"""Finding ``nvcc``, asking its version, and which architectures it can target.

Search order (first hit wins):

1. ``TILE_NVCC``: the nvcc executable itself. When set, nothing else is searched.
2. ``TILE_CUDA_HOME``: a toolkit root; nvcc is ``<root>/bin/nvcc``. When set,
   nothing else is searched.
3. ``CUDA_HOME``, then ``CUDA_PATH``: conventional toolkit roots.
4. ``nvcc`` on ``PATH``.
5. The PyPI wheel ``nvidia-cuda-nvcc`` in any ``sys.path`` entry:
   ``nvidia/cu13/bin/nvcc`` (CUDA 13 wheels) or ``nvidia/cuda_nvcc/bin/nvcc``
   (CUDA 12 wheels, ``nvidia-cuda-nvcc-cu12``).
6. The usual install roots ``/usr/local/cuda`` and ``/opt/cuda``.

Nothing here imports a vendor SDK; nvcc is only ever run as a subprocess.

Example::

    >>> from tile.backends.cuda.toolchain import NvccVersion, probe_nvcc
    >>> nvcc = probe_nvcc()            # None when there is no usable nvcc
    >>> nvcc is None or nvcc.version >= NvccVersion(11, 0)
    True
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from tile.ir.toolchain import ToolVersion, is_executable, run_tool
from tile.layout.errors import TileError

from . import env
from .arch import CudaArch, parse_arch
from .errors import ToolchainError, ToolchainNotFoundError

_EXE = "nvcc.exe" if os.name == "nt" else "nvcc"
_SYSTEM_CUDA_HOMES: tuple[Path, ...] = (Path("/usr/local/cuda"), Path("/opt/cuda"))
# Layouts of the nvidia-cuda-nvcc wheels, relative to a site-packages directory.
_WHEEL_GLOBS = ("nvidia/cu[0-9]*/bin/" + _EXE, "nvidia/cuda_nvcc/bin/" + _EXE)
_RUN_TIMEOUT_S = 60.0

INSTALL_HINT = (
    "install the CUDA Toolkit (https://developer.nvidia.com/cuda-downloads) or "
    "`pip install nvidia-cuda-nvcc`, or point TILE_NVCC at an nvcc executable or "
    "TILE_CUDA_HOME at a toolkit root"
)

# Arch-specific ("a", sm_90a) and family-specific ("f") targets need a new enough
# nvcc: sm_90a arrived with CUDA 12.0, family targets with CUDA 12.9.
_VARIANT_MIN_VERSION = {"a": (12, 0), "f": (12, 9)}


@dataclasses.dataclass(frozen=True, order=True)
class NvccVersion(ToolVersion):
    """An nvcc version, e.g. ``NvccVersion(13, 0, 88)`` for ``V13.0.88``."""


_FULL_VERSION = re.compile(r"\bV(\d+)\.(\d+)\.(\d+)")
_RELEASE_VERSION = re.compile(r"\brelease (\d+)\.(\d+)")


def parse_nvcc_version(text: str) -> NvccVersion:
    """Read the version from ``nvcc --version`` output.

    Raises:
        ToolchainError: the text names no version.

    Example::

        >>> parse_nvcc_version("Cuda compilation tools, release 13.0, V13.0.88")
        NvccVersion(major=13, minor=0, patch=88)
    """
    full = _FULL_VERSION.search(text)
    if full is not None:
        return NvccVersion(int(full[1]), int(full[2]), int(full[3]))
    release = _RELEASE_VERSION.search(text)
    if release is not None:
        return NvccVersion(int(release[1]), int(release[2]))
    raise ToolchainError(
        "could not find a version in the output of `nvcc --version`",
        hint=f"check that this is NVIDIA's nvcc; its output began: {text[:200]!r}",
    )


def parse_gpu_arch_list(text: str) -> frozenset[CudaArch]:
    """Read the virtual archs from ``nvcc --list-gpu-arch`` output.

    Example::

        >>> sorted(a.name for a in parse_gpu_arch_list("compute_75 compute_90"))
        ['sm_75', 'sm_90']
    """
    archs = {
        parse_arch(token.removeprefix("compute_")) for token in re.findall(r"\bcompute_\d+[af]?\b", text)
    }
    return frozenset(archs)


@dataclasses.dataclass(frozen=True)
class NvccToolchain:
    """A located, working nvcc."""

    path: Path
    source: str
    """Where it was found, e.g. ``"PATH"`` or ``"CUDA_HOME"``."""
    version: NvccVersion
    virtual_archs: frozenset[CudaArch]
    """What ``nvcc --list-gpu-arch`` reports (portable archs only on nvcc 13)."""

    def supports(self, spec: str | CudaArch) -> bool:
        """Whether this nvcc can compile for ``spec``.

        nvcc lists only portable archs (``compute_90``); an arch-specific target
        (``sm_90a``) is accepted when its portable base is listed and nvcc is new
        enough for the suffix. Arch-specific targets exist from sm_90 on.

        Raises:
            ArchSpecError: ``spec`` is not spelled in an accepted form.
        """
        arch = parse_arch(spec)
        if arch in self.virtual_archs:
            return True
        if not arch.variant or arch.major < 9:
            return False
        base = CudaArch(arch.major, arch.minor)
        minimum = NvccVersion(*_VARIANT_MIN_VERSION[arch.variant])
        return base in self.virtual_archs and self.version >= minimum


def _candidates() -> Iterator[tuple[str, Path]]:
    """``(source, path)`` pairs in search order; paths may not exist."""
    for var in (env.CUDA_HOME, env.CUDA_PATH):
        root = var.get()
        if root is not None:
            yield var.name, root / "bin" / _EXE
    on_path = shutil.which("nvcc")
    if on_path is not None:
        yield "PATH", Path(on_path)
    for entry in sys.path:
        site = Path(entry or ".")
        for pattern in _WHEEL_GLOBS:
            for hit in sorted(site.glob(pattern), reverse=True):
                yield "nvidia-cuda-nvcc wheel", hit
    for root in _SYSTEM_CUDA_HOMES:
        yield str(root), root / "bin" / _EXE


def locate_nvcc() -> tuple[Path, str]:
    """The nvcc to use and where it was found, without running it.

    Raises:
        ToolchainNotFoundError: no nvcc in any searched place, or ``TILE_NVCC`` /
            ``TILE_CUDA_HOME`` is set and does not lead to an executable.
    """
    explicit = env.TILE_NVCC.get()
    if explicit is not None:
        if not is_executable(explicit):
            raise ToolchainNotFoundError(
                f"TILE_NVCC={str(explicit)!r} is not an executable file",
                hint="point TILE_NVCC at the nvcc executable, or unset it to search",
            )
        return explicit, env.TILE_NVCC.name
    home = env.TILE_CUDA_HOME.get()
    if home is not None:
        nvcc = home / "bin" / _EXE
        if not is_executable(nvcc):
            raise ToolchainNotFoundError(
                f"TILE_CUDA_HOME={str(home)!r} has no executable bin/{_EXE}",
                hint="point TILE_CUDA_HOME at a CUDA toolkit root, or unset it",
            )
        return nvcc, env.TILE_CUDA_HOME.name
    tried: list[str] = []
    for source, path in _candidates():
        if is_executable(path):
            return path, source
        tried.append(f"{source} ({path})")
    where = "; ".join(tried) if tried else "nothing to search"
    raise ToolchainNotFoundError(f"nvcc was not found (searched: PATH, {where})", hint=INSTALL_HINT)


def _run(nvcc: Path, flag: str) -> str:
    return run_tool(
        [str(nvcc), flag],
        f"`{nvcc} {flag}`",
        error=ToolchainError,
        timeout=_RUN_TIMEOUT_S,
        run_hint="check that the file is a working nvcc (TILE_NVCC picks another)",
        failure_hint="this nvcc may be too old; tile needs CUDA 11.0 or newer",
    ).stdout


def find_nvcc() -> NvccToolchain:
    """Locate nvcc and ask it its version and archs.

    Raises:
        ToolchainNotFoundError: no nvcc was found.
        ToolchainError: nvcc was found but its answers could not be read.
    """
    path, source = locate_nvcc()
    version = parse_nvcc_version(_run(path, "--version"))
    archs = parse_gpu_arch_list(_run(path, "--list-gpu-arch"))
    if not archs:
        raise ToolchainError(
            f"`{path} --list-gpu-arch` listed no compute_XX architectures",
            hint="check that this is NVIDIA's nvcc, CUDA 11.0 or newer",
        )
    return NvccToolchain(path=path, source=source, version=version, virtual_archs=archs)


def probe_nvcc() -> NvccToolchain | None:
    """Like :func:`find_nvcc`, but ``None`` instead of any error. For test skips."""
    try:
        return find_nvcc()
    except (TileError, OSError):
        return None
