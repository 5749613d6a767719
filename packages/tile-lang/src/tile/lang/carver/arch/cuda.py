"""``carver.arch.cuda``: the ``CUDA`` device and the compute-capability checks of TileLang's carver.

``check_sm_version("sm_90a")`` is 90: an arch name is ``sm_`` then the capability's digits and
at most one feature-set letter (``sm_90a``, ``sm_100a``, ``sm_120f``), or the digits alone;
anything else (``gfx942``, ``sm_sm_90``) is -1. The predicates read a device's ``sm_version``.

Example::

    >>> check_sm_version("sm_100a"), check_sm_version("gfx90a")
    (100, -1)
"""

from __future__ import annotations

from typing import Any

from ..._src.carver_arch import CUDA as CUDA
from ..._src.carver_arch import check_sm_version as check_sm_version


def _version(arch: Any) -> int:
    return int(getattr(arch, "sm_version", -1)) if isinstance(arch, CUDA) else -1


def is_cuda_arch(arch: Any) -> bool:
    """Whether ``arch`` is an NVIDIA device."""
    return isinstance(arch, CUDA)


def is_volta_arch(arch: Any) -> bool:
    """sm_70 up to (not including) sm_80: Volta and Turing."""
    return 70 <= _version(arch) < 80


def is_ampere_arch(arch: Any) -> bool:
    """sm_80 up to sm_89 (sm_80, sm_86, sm_87)."""
    return 80 <= _version(arch) < 89


def is_ada_arch(arch: Any) -> bool:
    """sm_89."""
    return _version(arch) == 89


def is_hopper_arch(arch: Any) -> bool:
    """sm_90 (sm_90a)."""
    return 90 <= _version(arch) < 100


def has_mma_support(arch: Any) -> bool:
    """Whether the device has ``mma.sync`` with 16-bit inputs in the m16n8k16 shape (sm_80 on)."""
    return _version(arch) >= 80


__all__ = [
    "CUDA",
    "check_sm_version",
    "has_mma_support",
    "is_ada_arch",
    "is_ampere_arch",
    "is_cuda_arch",
    "is_hopper_arch",
    "is_volta_arch",
]
