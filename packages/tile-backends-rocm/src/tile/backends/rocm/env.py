"""The environment variables the ROCm backend reads: where hipcc, amdclang++ or a plain clang++
is (``TILE_*`` first, then the conventional ``ROCM_PATH`` / ``HIP_PATH``; see
:func:`tile.ir.env.path_variable`), and ``TILE_DEVICE``."""

from __future__ import annotations

from tile.ir.env import EMU_VENDOR_COMPILE as EMU_VENDOR_COMPILE
from tile.ir.env import TILE_DEVICE as TILE_DEVICE
from tile.ir.env import path_variable

TILE_HIPCC = path_variable(
    "TILE_HIPCC",
    "path of the hipcc executable tile uses; when set, no other place is searched",
)
TILE_AMDCLANG = path_variable(
    "TILE_AMDCLANG",
    "path of the amdclang++ executable tile uses; when set, no other place is searched",
)
TILE_HIP_CLANG = path_variable(
    "TILE_HIP_CLANG",
    "path of a plain LLVM clang++ (17 or newer, lld beside it) that builds HIP code objects "
    "without ROCm's device libraries; when set, no versioned clang++-N is searched",
)
TILE_ROCM_PATH = path_variable(
    "TILE_ROCM_PATH",
    "ROCm install root for tile (hipcc is <root>/bin/hipcc); wins over ROCM_PATH",
)
ROCM_PATH = path_variable(
    "ROCM_PATH",
    "conventional ROCm install root, searched after the TILE_* variables",
)
HIP_PATH = path_variable(
    "HIP_PATH",
    "conventional HIP root (older installs; <root>/bin/hipcc), searched after ROCM_PATH",
)
