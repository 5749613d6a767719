"""Environment variables read by the conformance suite."""

from __future__ import annotations

from tile.layout.env import EnvVar

HYPOTHESIS_PROFILE = EnvVar(
    "HYPOTHESIS_PROFILE",
    str,
    "dev",
    "hypothesis settings profile: ci (deterministic, CI), nightly (wide), dev (quick, default)",
)

TILE_DEVICE = EnvVar(
    "TILE_DEVICE",
    str,
    "",
    "where backends run kernels; the plugin sets it for the session from --tile-device "
    "(emu: the CPU emulator) when the backend declares that device in Capabilities.devices",
)

TILE_FUZZ_PROGRAMS = EnvVar(
    "TILE_FUZZ_PROGRAMS",
    int,
    0,
    "programs per backend/device for the program fuzzer's nightly run (`nox -s fuzz`, or pytest of "
    "test_fuzz_programs.py as if given --tile-fuzz=N); 0: the CI budget",
)
