"""Environment variables read by the CPU backend."""

from __future__ import annotations

from tile.ir.env import CACHE_DIR as CACHE_DIR  # TILE_CACHE_DIR and TILE_CXX: tile.ir.host_toolchain's
from tile.ir.env import CXX as CXX
from tile.layout.env import EnvVar, parse_bool

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

BF16_UKERNEL = EnvVar(
    "TILE_CPU_BF16_UKERNEL",
    parse_bool,
    True,
    "bf16 T.gemm with a float32 accumulator calls the packaged C micro-kernel (vdpbf16ps, built "
    "with the host compiler on first use) where the CPU has AVX-512 BF16; 0 keeps the generated-code path",
)

AMX = EnvVar(
    "TILE_CPU_AMX",
    parse_bool,
    True,
    "the bf16 micro-kernel multiplies on AMX tiles where the CPU has AMX-BF16 and Linux grants the "
    "process the tile state (checked at run time); 0 keeps it on AVX-512 BF16",
)

EMU_SEED = EnvVar(
    "TILE_EMU_SEED",
    int,
    0,
    "GPU emulator: nonzero shuffles the order in which a block's threads start and wake after each "
    "barrier (seeded, reproducible per worker), to expose order-dependent bugs; 0 keeps round-robin order",
)

EMU_PCH = EnvVar(
    "TILE_EMU_PCH",
    parse_bool,
    True,
    "GPU emulator: compile kernels against a GCC precompiled form of the device header, built once per "
    "compiler, flags and header contents in the cache (about half of a kernel's compile is parsing that "
    "header); 0 parses it every time",
)

EMU_CHECK = EnvVar(
    "TILE_EMU_CHECK",
    parse_bool,
    False,
    "GPU emulator: build kernels with an access check on every load and store (out-of-bounds global "
    "and shared accesses, shared-memory races within a barrier epoch), reported with the kernel line; "
    "slower, so off by default",
)

CHECK = EnvVar(
    "TILE_CHECK",
    parse_bool,
    False,
    "checked kernels everywhere (TILE_EMU_CHECK is its alias for the GPU emulator): the emulator "
    "builds kernels with access and race checks when either is set",
)
