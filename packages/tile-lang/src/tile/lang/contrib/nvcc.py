"""Compute-capability helpers under TileLang's ``tilelang.contrib.nvcc`` names.

The version is read from the CUDA target tile compiles for: the ``target`` given, else
``TILE_DEFAULT_TARGET`` where it names a CUDA target, else the CUDA backend's default arch
(TileLang asks the GPU it finds). Compiling and linking with nvcc is the CUDA backend's work
(``tile.backends.cuda``); those functions are not here.

Example::

    >>> get_target_compute_version({"kind": "cuda", "arch": "sm_90a"})
    '9.0'
    >>> parse_compute_version("8.6"), get_target_arch("9.0")
    ((8, 6), '90a')
"""

from __future__ import annotations

import re
from typing import Any

from tile.ir.errors import TargetError

__all__ = ["get_target_arch", "get_target_compute_version", "parse_compute_version"]

_ARCH = re.compile(r"sm_(\d+?)(\d)[af]?")


def get_target_compute_version(target: Any = None) -> str:
    """``"major.minor"`` of the CUDA arch ``target`` (a target spec, default ``"cuda"``) names."""
    from .._src.cuda_driver import cuda_target_here
    from .._src.jit import _pick_target

    if target is None:  # where "auto" is not a CUDA target, the CUDA backend's default arch
        resolved = cuda_target_here()
    else:
        spec = target if isinstance(target, str | dict) or hasattr(target, "to_json") else str(target)
        resolved, _ = _pick_target(spec)
    arch = str(getattr(resolved, "arch", None) or "")
    match = _ARCH.fullmatch(arch)
    if getattr(resolved, "kind", None) != "cuda" or match is None:
        raise TargetError(
            f"get_target_compute_version: {resolved} is not a CUDA target with an sm_XY arch",
            hint='pass a CUDA target such as {"kind": "cuda", "arch": "sm_90a"} or set TILE_DEFAULT_TARGET',
        )
    return f"{match.group(1)}.{match.group(2)}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``."""
    parts = str(compute_version).split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise TargetError(
            f"parse_compute_version: {compute_version!r} is not a compute version",
            hint='write it as "major.minor", e.g. "8.0"',
        )
    return int(parts[0]), int(parts[1])


def get_target_arch(compute_version: str | tuple[int, int]) -> str:
    """The arch suffix nvcc takes: ``"80"`` for 8.0; 9.0 and later add ``a`` (``"90a"``)."""
    if isinstance(compute_version, str):
        major, minor = parse_compute_version(compute_version)
    else:
        major, minor = compute_version
    return f"{major}{minor}" + ("a" if major >= 9 else "")
