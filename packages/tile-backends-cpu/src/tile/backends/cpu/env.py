"""Environment variables read by the CPU backend."""

from __future__ import annotations

from tile.layout.env import EnvVar

NUM_THREADS = EnvVar(
    "TILE_CPU_NUM_THREADS",
    int,
    0,
    "worker threads that run a kernel's blocks; "
    "0 uses one per physical core this process may run on (TVM_NUM_THREADS, when set, wins)",
)

MCPU = EnvVar(
    "TILE_CPU_MCPU",
    str,
    "",
    "LLVM CPU name to generate code for (e.g. znver4, skylake-avx512); empty detects the host",
)

TVM_NUM_THREADS = EnvVar(
    "TVM_NUM_THREADS",
    int,
    0,
    "read by the TVM runtime itself; when set, it wins over TILE_CPU_NUM_THREADS",
)

CXX = EnvVar(
    "TILE_CXX",
    str,
    "",
    "host C++ compiler the GPU emulator (tile.backends.cpu.simt) builds kernels with; "
    "empty searches PATH for c++, g++ and clang++",
)

CACHE_DIR = EnvVar(
    "TILE_CACHE_DIR",
    str,
    "~/.cache/tile",
    "directory of the on-disk kernel cache (the GPU emulator keeps its shared libraries under <dir>/simt)",
)
