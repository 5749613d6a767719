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

OUTPUT_POOL_BYTES = EnvVar(
    "TILE_OUTPUT_POOL_BYTES",
    int,
    1 << 30,
    "bytes of memory of dropped large CPU outputs kept for reuse by later outputs (0 disables the pool)",
)


def _traceback_mode(text: str) -> str:
    mode = text.strip().lower() or "short"
    if mode not in ("short", "full"):
        raise ValueError(f"expected short or full, got {text!r}")
    return mode


TRACEBACK = EnvVar(
    "TILE_TRACEBACK",
    _traceback_mode,
    "short",
    "short: a TileError's traceback shows only the user's frames (tile, TVM and parser frames hidden); "
    "full: every frame",
)
