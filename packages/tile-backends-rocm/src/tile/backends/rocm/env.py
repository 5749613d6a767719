"""The environment variables the ROCm backend reads.

``TILE_*`` variables win over the conventional ``ROCM_PATH`` / ``HIP_PATH`` so that
tile can be pointed at a ROCm install without disturbing other tools.

Example::

    >>> from tile.backends.rocm import env
    >>> env.TILE_ROCM_PATH.name
    'TILE_ROCM_PATH'
"""

from __future__ import annotations

from pathlib import Path

from tile.layout.env import EnvVar


def parse_optional_path(text: str) -> Path | None:
    """An empty value means unset; anything else is a path (``~`` expanded)."""
    text = text.strip()
    return Path(text).expanduser() if text else None


TILE_HIPCC: EnvVar[Path | None] = EnvVar(
    "TILE_HIPCC",
    parse_optional_path,
    None,
    "path of the hipcc executable tile uses; when set, no other place is searched",
)
TILE_AMDCLANG: EnvVar[Path | None] = EnvVar(
    "TILE_AMDCLANG",
    parse_optional_path,
    None,
    "path of the amdclang++ executable tile uses; when set, no other place is searched",
)
TILE_ROCM_PATH: EnvVar[Path | None] = EnvVar(
    "TILE_ROCM_PATH",
    parse_optional_path,
    None,
    "ROCm install root for tile (hipcc is <root>/bin/hipcc); wins over ROCM_PATH",
)
ROCM_PATH: EnvVar[Path | None] = EnvVar(
    "ROCM_PATH",
    parse_optional_path,
    None,
    "conventional ROCm install root, searched after the TILE_* variables",
)
HIP_PATH: EnvVar[Path | None] = EnvVar(
    "HIP_PATH",
    parse_optional_path,
    None,
    "conventional HIP root (older installs; <root>/bin/hipcc), searched after ROCM_PATH",
)


def parse_device(text: str) -> str:
    """``emu`` runs kernels under the CPU emulator; empty or ``gpu`` on the GPU."""
    value = text.strip().lower()
    if value not in ("", "gpu", "emu"):
        raise ValueError(f"expected 'emu' or 'gpu', got {text!r}")
    return value


TILE_DEVICE: EnvVar[str] = EnvVar(
    "TILE_DEVICE",
    parse_device,
    "",
    "where kernels built for a HIP target run: 'emu' runs the generated HIP source on the CPU "
    "(tile.backends.cpu.simt, wave64) with numpy arrays and CPU torch tensors; empty or 'gpu' "
    "launches on a ROCm device",
)
