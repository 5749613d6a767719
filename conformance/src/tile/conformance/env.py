"""Environment variables read by the conformance suite."""

from __future__ import annotations

from tile.layout.env import EnvVar

HYPOTHESIS_PROFILE = EnvVar(
    "HYPOTHESIS_PROFILE",
    str,
    "dev",
    "hypothesis settings profile: ci (deterministic, CI), nightly (wide), dev (quick, default)",
)
