"""Environment variables read by tile-lang."""

from __future__ import annotations

from tile.layout.env import EnvVar, parse_bool

DEFAULT_TARGET = EnvVar(
    "TILE_DEFAULT_TARGET",
    str,
    "",
    'target used where a kernel asks for "auto", and under the emulator for its kind alone '
    '("cuda" takes this arch), e.g. cpu or {"kind": "cuda", "arch": "sm_90a"}',
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

CHECK = EnvVar(
    "TILE_CHECK",
    parse_bool,
    False,
    "build checked kernels: every global and shared access is bounds-checked on the CPU backend, and "
    "under the GPU emulator everything TILE_EMU_CHECK turns on; a violation raises a typed error naming "
    "the tensor, the block and the line of the kernel",
)

EMU_CHECK = EnvVar(
    "TILE_EMU_CHECK",
    parse_bool,
    False,
    "alias of TILE_CHECK (its older name, from when only the emulator had checks)",
)


def checking() -> bool:
    """Whether ``TILE_CHECK`` (or its alias ``TILE_EMU_CHECK``) asks for checked kernels."""
    return CHECK.get() or EMU_CHECK.get()

AUTOTUNE = EnvVar(
    "TILE_AUTOTUNE",
    str,
    "on",
    "autotuning: on (tune unless the tuning cache has the answer), off (the cached best or the "
    "first config, nothing benchmarked), force (re-tune, ignoring the cache), functional (the first "
    "config that compiles and passes the check wins, nothing timed: for TILE_DEVICE=emu)",
)

AUTOTUNE_EXECUTOR = EnvVar(
    "TILE_AUTOTUNE_EXECUTOR",
    str,
    "local",
    "where autotuning compiles and benchmarks candidates: local (a process pool on this machine) "
    "or ray (the Ray cluster at RAY_ADDRESS, a local one when unset)",
)

AUTOTUNE_WORKERS = EnvVar(
    "TILE_AUTOTUNE_WORKERS",
    int,
    0,
    "processes that compile autotuning candidates in parallel (0: one per CPU core this process may use)",
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
