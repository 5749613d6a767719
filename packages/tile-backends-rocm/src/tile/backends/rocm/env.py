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

from tile.ir.env import TILE_DEVICE as TILE_DEVICE
from tile.ir.env import parse_optional_path
from tile.layout.env import EnvVar

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
TILE_HIP_CLANG: EnvVar[Path | None] = EnvVar(
    "TILE_HIP_CLANG",
    parse_optional_path,
    None,
    "path of a plain LLVM clang++ (17 or newer, lld beside it) that builds HIP code objects "
    "without ROCm's device libraries; when set, no versioned clang++-N is searched",
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
