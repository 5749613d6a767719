"""The CPU backend's part of target "auto": host memory, and the LLVM CPU name it compiles for."""

from __future__ import annotations

from tile.backends.cpu._src.host import with_bf16_features
from tile.ir.backend import target_for_device


def test_host_memory_goes_to_the_cpu_backend() -> None:
    target, manifest = target_for_device(1, 0)  # DLPack kDLCPU, device 0
    assert (target.kind, manifest.name) == ("cpu", "cpu")


def test_a_host_with_bf16_gets_an_llvm_cpu_with_bf16() -> None:
    # a Sapphire Rapids guest that LLVM names rocketlake (cpuinfo flags as such a host shows them)
    spr = frozenset({"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
    assert with_bf16_features("rocketlake", spr) == "sapphirerapids"
    assert with_bf16_features("icelake-server", frozenset({"avx512f", "avx512_bf16"})) == "cooperlake"
    # names that already carry bf16, hosts without it, and other vendors are left alone
    assert with_bf16_features("sapphirerapids", spr) == "sapphirerapids"
    assert with_bf16_features("rocketlake", frozenset({"avx512f"})) == "rocketlake"
    assert with_bf16_features("znver4", frozenset({"avx512_bf16"})) == "znver4"
