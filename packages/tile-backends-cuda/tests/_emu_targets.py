"""The two GPU targets the emulator tests compile one kernel for: CUDA sm_80 and ROCm gfx90a."""

from __future__ import annotations

from typing import Any

import pytest

import tile.lang as tilelang

TARGETS = [
    pytest.param({"kind": "cuda", "arch": "sm_80"}, id="cuda-sm_80"),
    pytest.param({"kind": "hip", "mcpu": "gfx90a"}, id="rocm-gfx90a"),
]


def compile_for(func: Any, target: dict[str, str]) -> Any:
    """``func`` compiled for ``target``, its last parameter the output (skipped without ROCm)."""
    if target["kind"] == "hip":
        pytest.importorskip("tile.backends.rocm")
    return tilelang.compile(func, out_idx=[-1], target=target)
