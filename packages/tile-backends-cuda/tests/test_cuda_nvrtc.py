"""NVRTC from PyPI compiles the same kernels as nvcc (``TILE_CUDA_COMPILER=nvrtc``, or no nvcc).

Skips cleanly when the wheels are absent (``nvidia-cuda-nvrtc`` + ``cuda-bindings``, and
the device headers of ``nvidia-cuda-runtime``/``nvidia-cuda-crt``/``nvidia-cuda-cccl``).
The SASS of NVRTC's cubins is read with the same cuobjdump as nvcc's and checked for
the instructions the issue asks for; where nvcc is present too, both compilers' cubins
hold the same tensor-core instructions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tile.backends.cuda._src import nvrtc


def _headers() -> list[Path] | None:
    try:
        return nvrtc.header_dirs()
    except Exception:
        return None


HAVE_NVRTC = nvrtc.available() is not None and _headers() is not None
pytestmark = pytest.mark.skipif(not HAVE_NVRTC, reason=f"NVRTC wheels not installed: {nvrtc.INSTALL_HINT}")


@pytest.fixture
def use_nvrtc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TILE_CUDA_COMPILER", "nvrtc")
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))


def _gemm(arch: str) -> Any:
    import tile.lang as tilelang
    from tile.ops.gemm import matmul_kernel

    func = matmul_kernel(512, 512, 512, block_M=128, block_N=128, block_K=32, num_stages=3)
    return tilelang.compile(func, target={"kind": "cuda", "arch": arch}).artifact.payload


def _opcodes(sass: str) -> list[str]:
    return re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.x]*)", sass, re.M)


def _needs_cuobjdump() -> None:
    from tile.backends.cuda._src.compiler import find_cuobjdump
    from tile.backends.cuda.errors import ToolchainNotFoundError

    try:
        find_cuobjdump()
    except ToolchainNotFoundError:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")


@pytest.mark.parametrize(
    ("arch", "wanted"),
    [
        ("sm_80", ("HMMA.16816.F32", "LDSM", "LDGSTS")),
        ("sm_90a", ("HGMMA.64x128x16.F32", "UTMALDG", "SYNCS")),
    ],
)
def test_nvrtc_cubin_has_the_expected_sass(use_nvrtc: None, arch: str, wanted: tuple[str, ...]) -> None:
    from tile.backends.cuda._src.compiler import compiler_choice

    assert compiler_choice() == "nvrtc"
    _needs_cuobjdump()
    binary = _gemm(arch)
    assert binary.cubin[:4] == b"\x7fELF"
    assert f".target {arch}" in binary.ptx  # the PTX for the driver's JIT comes from the same compile
    stats = binary.stats  # ptxas' report, read from NVRTC's program log
    assert 0 < stats.registers <= 255 and stats.spills == 0, stats
    ops = _opcodes(binary.sass())
    for prefix in wanted:
        assert any(op.startswith(prefix) for op in ops), prefix


def test_nvrtc_and_nvcc_emit_the_same_tensor_core_code(
    use_nvrtc: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tile.backends.cuda import probe_nvcc

    if probe_nvcc() is None:
        pytest.skip("no nvcc to compare with")
    _needs_cuobjdump()
    via_nvrtc = _gemm("sm_80")
    monkeypatch.setenv("TILE_CUDA_COMPILER", "nvcc")
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "other"))
    via_nvcc = _gemm("sm_80")
    assert via_nvrtc.source == via_nvcc.source
    tensor = ("HMMA", "LDSM", "LDGSTS")
    count = [sorted(op for op in _opcodes(b.sass()) if op.startswith(tensor)) for b in (via_nvrtc, via_nvcc)]
    assert count[0] == count[1] and count[0]


def test_auto_falls_back_to_nvrtc_without_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tile.backends.cuda._src.compiler import compiler_choice
    from tile.backends.cuda.errors import ToolchainNotFoundError

    monkeypatch.setenv("TILE_NVCC", str(tmp_path / "no-nvcc-here"))  # TILE_NVCC: nowhere else is searched
    monkeypatch.delenv("TILE_CUDA_COMPILER", raising=False)
    assert compiler_choice() == "nvrtc"
    monkeypatch.setenv("TILE_CUDA_COMPILER", "nvcc")
    with pytest.raises(ToolchainNotFoundError):
        compiler_choice()


def test_nvrtc_errors_are_typed() -> None:
    from tile.backends.cuda.errors import ToolchainError

    source = '#include "tile_cuda.h"\nextern "C" __global__ void k(float* x) { x[0] = undefined_name; }\n'
    with pytest.raises(ToolchainError, match="undefined_name") as info:
        nvrtc.compile_program(source, "sm_80", nvrtc.header_dirs())
    assert info.value.hint
    with pytest.raises(ToolchainError, match="cannot compile for sm_12"):
        nvrtc.compile_program(source, "sm_12", nvrtc.header_dirs())


def test_a_malformed_compiler_choice_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from tile.backends.cuda._src.compiler import compiler_choice
    from tile.layout.errors import EnvironmentVariableError

    monkeypatch.setenv("TILE_CUDA_COMPILER", "clang")
    with pytest.raises(EnvironmentVariableError, match="TILE_CUDA_COMPILER"):
        compiler_choice()
