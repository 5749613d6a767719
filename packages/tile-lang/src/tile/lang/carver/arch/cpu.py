"""``carver.arch.cpu``: the ``CPU`` device (the CPU backend)."""

from __future__ import annotations

from typing import Any

from ..._src.carver_arch import CPU as CPU


def is_cpu_arch(arch: Any) -> bool:
    """Whether ``arch`` is the host CPU."""
    return isinstance(arch, CPU)


__all__ = ["CPU", "is_cpu_arch"]
