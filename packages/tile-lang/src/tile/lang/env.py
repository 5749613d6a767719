"""Environment variables read by tile-lang."""

from __future__ import annotations

from tile.layout.env import EnvVar, parse_bool

DEFAULT_TARGET = EnvVar(
    "TILE_DEFAULT_TARGET",
    str,
    "",
    'target used where a kernel asks for "auto", e.g. cpu or {"kind": "cuda", "arch": "sm_90a"}',
)

CACHE = EnvVar(
    "TILE_CACHE",
    parse_bool,
    True,
    "whether compiled kernels are stored in and loaded from the on-disk cache (0 disables it)",
)

CACHE_DIR = EnvVar(
    "TILE_CACHE_DIR",
    str,
    "~/.cache/tile",
    "directory of the on-disk kernel cache",
)
