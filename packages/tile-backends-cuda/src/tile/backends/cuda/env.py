"""The environment variables the CUDA backend reads: where nvcc is (``TILE_*`` first, then the
conventional ``CUDA_HOME`` / ``CUDA_PATH``; see :func:`tile.ir.env.path_variable`), which compiler
builds cubins, warp specialization on sm_90a, and ``TILE_DEVICE``."""

from __future__ import annotations

from tile.ir.env import EMU_VENDOR_COMPILE as EMU_VENDOR_COMPILE
from tile.ir.env import TILE_DEVICE as TILE_DEVICE
from tile.ir.env import choice_parser, path_variable
from tile.layout.env import EnvVar
from tile.layout.env import parse_bool as parse_flag

TILE_NVCC = path_variable(
    "TILE_NVCC",
    "path of the nvcc executable tile uses; when set, no other place is searched",
)
TILE_CUDA_HOME = path_variable(
    "TILE_CUDA_HOME",
    "CUDA toolkit root for tile (nvcc is <root>/bin/nvcc); wins over CUDA_HOME",
)
CUDA_HOME = path_variable(
    "CUDA_HOME",
    "conventional CUDA toolkit root, searched after TILE_NVCC and TILE_CUDA_HOME",
)
CUDA_PATH = path_variable(
    "CUDA_PATH",
    "conventional CUDA toolkit root (set by the Windows and conda installers)",
)


def parse_optional_flag(text: str) -> bool | None:
    """Like ``tile.layout.env.parse_bool`` (1/true/yes/on, 0/false/no/off), but an empty
    value means unset (``None``: the default applies)."""
    return parse_flag(text) if text.strip() else None


TILE_CUDA_WARP_SPECIALIZE: EnvVar[bool | None] = EnvVar(
    "TILE_CUDA_WARP_SPECIALIZE",
    parse_optional_flag,
    None,
    "sm_90a T.Pipelined loops load whole 2-D tiles with TMA into an mbarrier ring, issued by an extra "
    "producer warpgroup; on by default where a loop qualifies. 0 turns it off for every kernel, 1 "
    "forces the default; a kernel's own setting wins over it: the pass config "
    '{"tl.disable_warp_specialized": True} or the target option {"warp_specialize": "0"/"1"}',
)


parse_compiler = choice_parser(("nvcc", "nvrtc", "auto"), empty="auto")
"""``nvcc``, ``nvrtc``, or ``auto`` (also empty): nvcc when found, else NVRTC."""


TILE_CUDA_COMPILER: EnvVar[str] = EnvVar(
    "TILE_CUDA_COMPILER",
    parse_compiler,
    "auto",
    "what compiles CUDA source to a cubin: 'nvcc', 'nvrtc' (the nvidia-cuda-nvrtc + cuda-bindings "
    "wheels), or 'auto' (nvcc when found, else NVRTC)",
)
