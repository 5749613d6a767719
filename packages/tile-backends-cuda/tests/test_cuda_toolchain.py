"""Locating nvcc and reading its answers, with fake nvcc scripts and the real one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tile.backends.cuda import (
    NvccVersion,
    ToolchainError,
    ToolchainNotFoundError,
    find_nvcc,
    probe_nvcc,
    toolchain,
)
from tile.backends.cuda.arch import CudaArch
from tile.layout.errors import TileError
from tile.testsupport.markers import needs_nvcc
from tile.testsupport.toolchain import bare_toolchain_env, write_failing_tool, write_fake_tool

NVCC_12_4_VERSION = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Tue_Feb_27_16:19:38_PST_2024
Cuda compilation tools, release 12.4, V12.4.99
Build cuda_12.4.r12.4/compiler.33961263_0
"""
NVCC_12_4_ARCHS = (
    "compute_50 compute_52 compute_60 compute_70 compute_75 compute_80 compute_86 compute_89 compute_90\n"
)


def write_fake_nvcc(path: Path, version: str = NVCC_12_4_VERSION, archs: str = NVCC_12_4_ARCHS) -> Path:
    """A shell script that answers like nvcc to the two flags tile uses."""
    return write_fake_tool(path, {"--version": version, "--list-gpu-arch": archs})


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No nvcc anywhere: every variable unset, empty PATH and sys.path, no system roots."""
    bare_toolchain_env(monkeypatch, tmp_path, ("TILE_NVCC", "TILE_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    monkeypatch.setattr(toolchain, "_SYSTEM_CUDA_HOMES", ())
    return tmp_path


def test_parse_version_full_and_release_only() -> None:
    assert toolchain.parse_nvcc_version(NVCC_12_4_VERSION) == NvccVersion(12, 4, 99)
    assert toolchain.parse_nvcc_version("Cuda compilation tools, release 11.8") == NvccVersion(11, 8)
    assert str(NvccVersion(13, 0, 88)) == "13.0.88"
    with pytest.raises(ToolchainError):
        toolchain.parse_nvcc_version("clang version 18")


def test_parse_arch_list_keeps_variants() -> None:
    archs = toolchain.parse_gpu_arch_list("compute_75\ncompute_90\ncompute_90a\ncompute_100\n")
    assert archs == {CudaArch(7, 5), CudaArch(9, 0), CudaArch(9, 0, "a"), CudaArch(10, 0)}


def test_not_found_is_typed_with_install_hint(bare_env: Path) -> None:
    with pytest.raises(ToolchainNotFoundError) as info:
        find_nvcc()
    assert isinstance(info.value, TileError)
    text = str(info.value)
    assert "pip install nvidia-cuda-nvcc" in text
    assert "TILE_NVCC" in text and "TILE_CUDA_HOME" in text
    assert probe_nvcc() is None


def test_tile_nvcc_wins_and_is_strict(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = write_fake_nvcc(bare_env / "tools" / "nvcc")
    other = write_fake_nvcc(bare_env / "home" / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(other.parent.parent))
    monkeypatch.setenv("TILE_NVCC", str(fake))
    found = find_nvcc()
    assert (found.path, found.source) == (fake, "TILE_NVCC")
    assert found.version == NvccVersion(12, 4, 99)
    monkeypatch.setenv("TILE_NVCC", str(bare_env / "missing"))
    with pytest.raises(ToolchainNotFoundError, match="TILE_NVCC"):
        find_nvcc()  # no silent fallback to CUDA_HOME


def test_tile_cuda_home_beats_cuda_home(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = write_fake_nvcc(bare_env / "mine" / "bin" / "nvcc")
    write_fake_nvcc(bare_env / "theirs" / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(bare_env / "theirs"))
    monkeypatch.setenv("TILE_CUDA_HOME", str(bare_env / "mine"))
    assert toolchain.locate_nvcc() == (mine, "TILE_CUDA_HOME")
    monkeypatch.setenv("TILE_CUDA_HOME", str(bare_env / "nowhere"))
    with pytest.raises(ToolchainNotFoundError, match="TILE_CUDA_HOME"):
        toolchain.locate_nvcc()


def test_search_order(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel_site = bare_env / "site"
    wheel = write_fake_nvcc(wheel_site / "nvidia" / "cu13" / "bin" / "nvcc")
    sys.path.append(str(wheel_site))
    assert toolchain.locate_nvcc() == (wheel, "nvidia-cuda-nvcc wheel")

    on_path = write_fake_nvcc(bare_env / "pathdir" / "nvcc")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert toolchain.locate_nvcc() == (on_path, "PATH")

    cuda_path = write_fake_nvcc(bare_env / "cp" / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_PATH", str(bare_env / "cp"))
    assert toolchain.locate_nvcc() == (cuda_path, "CUDA_PATH")

    cuda_home = write_fake_nvcc(bare_env / "ch" / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(bare_env / "ch"))
    assert toolchain.locate_nvcc() == (cuda_home, "CUDA_HOME")


def test_cuda12_wheel_layout(bare_env: Path) -> None:
    wheel = write_fake_nvcc(bare_env / "site12" / "nvidia" / "cuda_nvcc" / "bin" / "nvcc")
    sys.path.append(str(bare_env / "site12"))
    assert toolchain.locate_nvcc() == (wheel, "nvidia-cuda-nvcc wheel")


def test_system_root_is_last(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = write_fake_nvcc(bare_env / "usr-local-cuda" / "bin" / "nvcc")
    monkeypatch.setattr(toolchain, "_SYSTEM_CUDA_HOMES", (bare_env / "usr-local-cuda",))
    assert toolchain.locate_nvcc()[0] == nvcc


def test_supports_with_fake_nvcc_12_4(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_NVCC", str(write_fake_nvcc(bare_env / "nvcc")))
    nvcc = find_nvcc()
    assert nvcc.supports("sm_70") and nvcc.supports("sm_80") and nvcc.supports("sm_90a")
    assert not nvcc.supports("sm_100")
    assert not nvcc.supports("sm_90f")  # family targets need CUDA 12.9
    assert not nvcc.supports("sm_80a")  # no arch-specific sm_80 exists


def test_old_nvcc_cannot_target_sm90a(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = write_fake_nvcc(
        bare_env / "nvcc",
        version="Cuda compilation tools, release 11.8, V11.8.89\n",
        archs="compute_80 compute_86 compute_89 compute_90\n",
    )
    monkeypatch.setenv("TILE_NVCC", str(fake))
    nvcc = find_nvcc()
    assert nvcc.supports("sm_90") and not nvcc.supports("sm_90a")


def test_broken_nvcc_is_a_toolchain_error(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = write_failing_tool(bare_env / "nvcc", "boom", 3)
    monkeypatch.setenv("TILE_NVCC", str(broken))
    with pytest.raises(ToolchainError, match="status 3: boom"):
        find_nvcc()
    assert probe_nvcc() is None


def test_malformed_env_value_is_typed(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_NVCC", "   ")  # blank means unset
    with pytest.raises(ToolchainNotFoundError, match="nvcc was not found"):
        find_nvcc()


@needs_nvcc
def test_real_nvcc_answers() -> None:
    real = probe_nvcc()
    assert real is not None
    assert real.version >= NvccVersion(11, 0)
    assert real.virtual_archs
    assert real.supports("sm_80")
    if real.version >= NvccVersion(12, 0):
        assert real.supports("sm_90a")
    if real.version >= NvccVersion(13, 0):
        # CUDA 13 dropped the Maxwell, Pascal and Volta targets.
        assert not real.supports("sm_70")
        assert not real.supports("sm_60")
