"""Locating hipcc / amdclang++ and reading their answers, with fake tools."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tile.backends.rocm import (
    ToolchainError,
    ToolchainNotFoundError,
    ToolVersion,
    find_amdclang,
    find_hipcc,
    probe_amdclang,
    probe_hipcc,
    toolchain,
)
from tile.layout.errors import TileError

REAL_AMDCLANG = probe_amdclang()
needs_amdclang = pytest.mark.skipif(REAL_AMDCLANG is None, reason="no amdclang++ found (probe)")

HIPCC_VERSION = """HIP version: 6.2.41133-dd7f95766
AMD clang version 18.0.0git (https://github.com/RadeonOpenCompute/llvm-project roc-6.2.0 24292)
Target: x86_64-unknown-linux-gnu
Thread model: posix
"""
CLANG_VERSION = "AMD clang version 18.0.0git (roc-6.2.0 24292)\nTarget: x86_64-unknown-linux-gnu\n"
CLANG_CPUS = "Available CPUs for this target:\n\n\tgfx908\n\tgfx90a\n\tgfx940\n\tgfx942\n\tgfx1100\n"


def write_fake(path: Path, version: str, cpus: str = "", cpus_on_stderr: bool = False) -> Path:
    """A shell script answering ``--version`` and ``--print-supported-cpus`` (builtins only)."""
    assert "'" not in version + cpus
    redirect = " >&2" if cpus_on_stderr else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        '  case "$arg" in\n'
        f"    --version) printf '%s' '{version}'; exit 0 ;;\n"
        f"    --print-supported-cpus) printf '%s' '{cpus}'{redirect}; exit 0 ;;\n"
        "  esac\n"
        "done\n"
        "echo unknown flags >&2; exit 2\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ROCm anywhere: variables unset, empty PATH, no /opt/rocm."""
    for name in ("TILE_HIPCC", "TILE_AMDCLANG", "TILE_ROCM_PATH", "ROCM_PATH", "HIP_PATH"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(toolchain, "_SYSTEM_ROCM_ROOTS", ())
    return tmp_path


def test_not_found_is_typed_with_install_hint(bare_env: Path) -> None:
    for find, var in ((find_hipcc, "TILE_HIPCC"), (find_amdclang, "TILE_AMDCLANG")):
        with pytest.raises(ToolchainNotFoundError) as info:
            find()
        assert isinstance(info.value, TileError)
        text = str(info.value)
        assert "install ROCm" in text and var in text and "TILE_ROCM_PATH" in text
    assert probe_hipcc() is None
    assert probe_amdclang() is None


def test_probes_never_raise_on_this_machine() -> None:
    # Whatever is installed here, a probe answers a tool or None.
    hipcc = probe_hipcc()
    assert hipcc is None or hipcc.hip_version.major >= 5


def test_rocm_root_layout(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = bare_env / "rocm-6.2.0"
    hipcc = write_fake(root / "bin" / "hipcc", HIPCC_VERSION)
    clang = write_fake(root / "llvm" / "bin" / "amdclang++", CLANG_VERSION, CLANG_CPUS)
    monkeypatch.setenv("ROCM_PATH", str(root))
    found = find_hipcc()
    assert (found.path, found.source, found.hip_version) == (hipcc, "ROCM_PATH", ToolVersion(6, 2, 41133))
    compiler = find_amdclang()
    assert (compiler.path, compiler.source) == (clang, "ROCM_PATH")
    assert compiler.version == ToolVersion(18, 0, 0)
    assert compiler.supports("gfx90a") and compiler.supports("gfx942:xnack-")
    assert not compiler.supports("gfx950")


def test_bin_amdclang_symlink_layout_and_stderr_listing(
    bare_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = bare_env / "rocm"
    clang = write_fake(root / "bin" / "amdclang++", CLANG_VERSION, CLANG_CPUS, cpus_on_stderr=True)
    monkeypatch.setenv("HIP_PATH", str(root))
    compiler = find_amdclang()
    assert (compiler.path, compiler.source) == (clang, "HIP_PATH")
    assert compiler.processors == {"gfx908", "gfx90a", "gfx940", "gfx942", "gfx1100"}


def test_precedence_and_strict_overrides(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = write_fake(bare_env / "pathdir" / "hipcc", HIPCC_VERSION)
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert toolchain.locate_hipcc() == (on_path, "PATH")

    conventional = write_fake(bare_env / "conv" / "bin" / "hipcc", HIPCC_VERSION)
    monkeypatch.setenv("ROCM_PATH", str(bare_env / "conv"))
    assert toolchain.locate_hipcc() == (conventional, "ROCM_PATH")

    mine = write_fake(bare_env / "mine" / "bin" / "hipcc", HIPCC_VERSION)
    monkeypatch.setenv("TILE_ROCM_PATH", str(bare_env / "mine"))
    assert toolchain.locate_hipcc() == (mine, "TILE_ROCM_PATH")

    exact = write_fake(bare_env / "exact" / "hipcc", HIPCC_VERSION)
    monkeypatch.setenv("TILE_HIPCC", str(exact))
    assert toolchain.locate_hipcc() == (exact, "TILE_HIPCC")

    monkeypatch.setenv("TILE_HIPCC", str(bare_env / "missing"))
    with pytest.raises(ToolchainNotFoundError, match="TILE_HIPCC"):
        toolchain.locate_hipcc()
    monkeypatch.delenv("TILE_HIPCC")
    monkeypatch.setenv("TILE_ROCM_PATH", str(bare_env / "nowhere"))
    with pytest.raises(ToolchainNotFoundError, match="TILE_ROCM_PATH"):
        toolchain.locate_hipcc()  # no silent fallback to ROCM_PATH


def test_system_root_is_searched_last(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hipcc = write_fake(bare_env / "opt-rocm" / "bin" / "hipcc", HIPCC_VERSION)
    monkeypatch.setattr(toolchain, "_SYSTEM_ROCM_ROOTS", (bare_env / "opt-rocm",))
    assert toolchain.locate_hipcc() == (hipcc, str(bare_env / "opt-rocm"))


def test_unreadable_answers_are_toolchain_errors(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    not_hip = write_fake(bare_env / "hipcc", "gcc (Debian 12.2.0) 12.2.0\n")
    monkeypatch.setenv("TILE_HIPCC", str(not_hip))
    with pytest.raises(ToolchainError, match="version"):
        find_hipcc()
    no_amdgpu = write_fake(bare_env / "clang", CLANG_VERSION, "Available CPUs for this target:\n")
    monkeypatch.setenv("TILE_AMDCLANG", str(no_amdgpu))
    with pytest.raises(ToolchainError, match="no gfx processors"):
        find_amdclang()
    assert probe_amdclang() is None


def test_crashing_tool(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = bare_env / "hipcc"
    broken.write_text("#!/bin/sh\necho nope >&2\nexit 4\n")
    broken.chmod(0o755)
    monkeypatch.setenv("TILE_HIPCC", str(broken))
    with pytest.raises(ToolchainError, match="status 4: nope"):
        find_hipcc()


def test_version_parsers() -> None:
    assert toolchain.parse_hip_version("HIP version: 5.7.31921-d1770ee1b") == ToolVersion(5, 7, 31921)
    assert toolchain.parse_clang_version("clang version 17.0.6") == ToolVersion(17, 0, 6)
    assert str(ToolVersion(6, 2)) == "6.2.0"
    with pytest.raises(ToolchainError):
        toolchain.parse_clang_version("nvcc: NVIDIA (R) Cuda compiler driver")


@needs_amdclang
def test_real_amdclang_knows_the_supported_processors() -> None:
    assert REAL_AMDCLANG is not None
    assert REAL_AMDCLANG.supports("gfx90a")
