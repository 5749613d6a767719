"""Environment variables read by tile-lang."""

from __future__ import annotations

from tile.layout.env import EnvVar

DEFAULT_TARGET = EnvVar(
    "TILE_DEFAULT_TARGET",
    str,
    "",
    'target used where a kernel asks for "auto", e.g. cpu or {"kind": "cuda", "arch": "sm_90a"}',
)
