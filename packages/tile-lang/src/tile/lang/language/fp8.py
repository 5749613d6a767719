"""``tile.lang.language.fp8``: which 8-bit float dtypes the current device uses.

NVIDIA GPUs and the OCP formats use ``float8_e4m3fn``/``float8_e5m2``; AMD CDNA3 (gfx94x)
uses the FNUZ variants (no negative zero, one NaN), gfx950 the OCP ones. The answer
follows the torch build here: a ROCm build of torch reports the GPU's gfx arch.
"""

from __future__ import annotations

import sys
from typing import Any

from tile.ir.errors import TileTypeError

FORMATS = ("e4m3", "e5m2")


class Fp8FormatError(TileTypeError):
    """An fp8 format name other than "e4m3" or "e5m2"."""


def _rocm_arch() -> str | None:
    """The gfx arch of ROCm device 0 when torch is a ROCm build, ``""`` without a device, else None."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch.version, "hip", None) is None:
        return None
    try:
        return str(torch.cuda.get_device_properties(0).gcnArchName) if torch.cuda.is_available() else ""
    except (RuntimeError, AssertionError, AttributeError):
        return ""


def determine_fp8_type(fp8_format: str = "e4m3") -> str:
    """The dtype name for ``fp8_format`` ("e4m3" or "e5m2") on this machine's device.

    Example::

        >>> determine_fp8_type("e5m2")   # CPU or NVIDIA
        'float8_e5m2'
    """
    if fp8_format not in FORMATS:
        raise Fp8FormatError(f"unknown fp8 format {fp8_format!r}", hint='pass "e4m3" or "e5m2"')
    arch = _rocm_arch()
    ocp = arch is None or arch.startswith("gfx950")
    if fp8_format == "e4m3":
        return "float8_e4m3fn" if ocp else "float8_e4m3fnuz"
    return "float8_e5m2" if ocp else "float8_e5m2fnuz"


def determine_torch_fp8_type(fp8_format: str = "e4m3") -> Any:
    """The ``torch.dtype`` of ``determine_fp8_type(fp8_format)``."""
    import torch

    return getattr(torch, determine_fp8_type(fp8_format))


__all__ = ["Fp8FormatError", "determine_fp8_type", "determine_torch_fp8_type"]
