"""``carver.arch.cdna``: the ``CDNA`` device (AMD)."""

from __future__ import annotations

from typing import Any

from ..._src.carver_arch import CDNA as CDNA


def is_cdna_arch(arch: Any) -> bool:
    """Whether ``arch`` is an AMD CDNA device."""
    return isinstance(arch, CDNA)


__all__ = ["CDNA", "is_cdna_arch"]
