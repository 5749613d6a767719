"""Locating hipcc / amdclang++ and reading their answers, with fake tools."""

from __future__ import annotations

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
from tile.testsupport.toolchain import bare_toolchain_env, write_failing_tool, write_fake_tool

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
    """A shell script answering ``--version`` and ``--print-supported-cpus``."""
    stderr = ("--print-supported-cpus",) if cpus_on_stderr else ()
    return write_fake_tool(path, {"--version": version, "--print-supported-cpus": cpus}, stderr)


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ROCm anywhere: variables unset, empty PATH, no /opt/rocm."""
    names = ("TILE_HIPCC", "TILE_AMDCLANG", "TILE_HIP_CLANG", "TILE_ROCM_PATH", "ROCM_PATH", "HIP_PATH")
    bare_toolchain_env(monkeypatch, tmp_path, names)
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
    broken = write_failing_tool(bare_env / "hipcc", "nope", 4)
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


# ---------------------------------------------------------------- which compiler builds which arch

DEBIAN_CLANG19 = "Debian clang version 19.1.7 (3~deb12u1)\nTarget: x86_64-pc-linux-gnu\n"
CLANG19_CPUS = "Available CPUs for this target:\n\n\tgfx90a\n\tgfx940\n\tgfx942\n\tgfx950\n"


def fake_plain_clang(root: Path, cpus: str = CLANG19_CPUS, lld: bool = True) -> Path:
    """``<root>/llvm-19/bin/clang++`` (with ``ld.lld`` beside it) and ``<root>/bin/clang++-19``
    linking to it, as Debian's clang-19 / lld-19 packages lay them out."""
    real = write_fake(root / "llvm-19" / "bin" / "clang++", DEBIAN_CLANG19, cpus)
    if lld:
        write_fake(real.parent / "ld.lld", "LLD 19.1.7\n")
    link = root / "bin" / "clang++-19"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(real)
    return link


def test_plain_clang_builds_gfx942_without_device_libraries(
    bare_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = fake_plain_clang(bare_env)
    monkeypatch.setenv("PATH", str(link.parent))
    chosen = toolchain.select_hip_compiler("gfx942:xnack-")
    assert (chosen.kind, chosen.path, chosen.version) == ("clang++", link, ToolVersion(19, 1, 7))
    assert not chosen.device_libs and "no device libraries" in chosen.describe()
    cmd = chosen.command("gfx942", Path("k.hip"), Path("k.co"), ("-O3",))
    assert cmd[:5] == [str(link), "-x", "hip", "--offload-arch=gfx942", "--cuda-device-only"]
    assert "-nogpulib" in cmd and "-DTILE_HIP_NO_DEVICE_LIBS" in cmd and cmd[-3:] == ["-o", "k.co", "k.hip"]


def test_rocm_amdclang_wins_where_it_knows_the_arch(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = fake_plain_clang(bare_env)
    amd = write_fake(bare_env / "rocm" / "llvm" / "bin" / "amdclang++", CLANG_VERSION, CLANG_CPUS)
    monkeypatch.setenv("PATH", str(link.parent))
    monkeypatch.setenv("ROCM_PATH", str(bare_env / "rocm"))
    chosen = toolchain.select_hip_compiler("gfx942")
    assert (chosen.kind, chosen.path, chosen.device_libs) == ("amdclang++", amd, True)
    assert "-nogpulib" not in chosen.command("gfx942", Path("k.hip"), Path("k.co"), ())
    # ROCm 6.2's clang lists no gfx950: the plain clang-19 builds it
    assert toolchain.select_hip_compiler("gfx950").path == link


def test_no_compiler_for_the_arch_names_the_packages(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ToolchainNotFoundError) as info:
        toolchain.select_hip_compiler("gfx942")
    text = str(info.value)
    assert "gfx942" in text and "apt-get install clang-19 lld-19" in text and "clang++-N" in text
    assert toolchain.probe_hip_compiler("gfx942") is None
    # a clang-19 without lld is passed over, and the error says why
    link = fake_plain_clang(bare_env / "nolld", lld=False)
    monkeypatch.setenv("PATH", str(link.parent))
    with pytest.raises(ToolchainNotFoundError, match="no lld beside it"):
        toolchain.select_hip_compiler("gfx942")


def test_a_clang_that_knows_other_archs_is_passed_over(
    bare_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = fake_plain_clang(bare_env, cpus="Available CPUs for this target:\n\tgfx90a\n")
    monkeypatch.setenv("PATH", str(link.parent))
    assert toolchain.select_hip_compiler("gfx90a").path == link
    with pytest.raises(ToolchainNotFoundError, match="knows no gfx942"):
        toolchain.select_hip_compiler("gfx942")
    monkeypatch.setenv("TILE_HIP_CLANG", str(bare_env / "missing"))
    with pytest.raises(ToolchainNotFoundError, match="TILE_HIP_CLANG"):
        toolchain.select_hip_compiler("gfx90a")  # set: the only place searched


def test_this_machine_builds_gfx90a_and_says_with_what() -> None:
    chosen = toolchain.probe_hip_compiler("gfx90a")
    if chosen is None:
        pytest.skip("no HIP compiler here (apt-get install clang-19 lld-19, or hipcc)")
    assert chosen.kind in ("amdclang++", "hipcc", "clang++") and str(chosen.path) in chosen.describe()


def test_a_kernel_that_calls_printf_needs_device_libraries(
    bare_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = fake_plain_clang(bare_env)
    monkeypatch.setenv("PATH", str(link.parent))
    assert toolchain.select_hip_compiler("gfx942").path == link
    with pytest.raises(ToolchainNotFoundError, match="no device libraries, and the kernel calls printf"):
        toolchain.select_hip_compiler("gfx942", device_libs=True)
    amd = write_fake(bare_env / "rocm" / "llvm" / "bin" / "amdclang++", CLANG_VERSION, CLANG_CPUS)
    monkeypatch.setenv("ROCM_PATH", str(bare_env / "rocm"))
    assert toolchain.select_hip_compiler("gfx942", device_libs=True).path == amd


def fake_building_hipcc(path: Path, version: str, archs: str) -> Path:
    """A hipcc that answers ``--version`` and "builds" (writes the -o file) for ``archs`` only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"case \"$*\" in *--version*) printf '%s' '{version}'; exit 0 ;; esac\n"
        'out=""; prev=""; arch=""\n'
        'for a in "$@"; do [ "$prev" = "-o" ] && out="$a"\n'
        '  case "$a" in --offload-arch=*) arch="${a#*=}";; esac; prev="$a"; done\n'
        f'case " {archs} " in *" $arch "*) : > "$out"; exit 0 ;; esac\n'
        "echo \"clang: error: invalid target ID '$arch'\" >&2; exit 1\n"
    )
    path.chmod(0o755)
    return path


DEBIAN_HIPCC = "HIP version: 5.2.21153-0\nDebian clang version 15.0.6\n"


def test_debian_hipcc_comes_after_a_plain_clang_unless_named(
    bare_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = fake_plain_clang(bare_env)
    hipcc = fake_building_hipcc(bare_env / "bin" / "hipcc", DEBIAN_HIPCC, "gfx90a")
    monkeypatch.setenv("PATH", str(link.parent))
    assert toolchain.select_hip_compiler("gfx90a").path == link  # clang-19 before Debian's hipcc
    monkeypatch.setenv("TILE_HIPCC", str(hipcc))
    chosen = toolchain.select_hip_compiler("gfx90a")  # named: the user's choice
    assert (chosen.kind, chosen.path, chosen.version) == ("hipcc", hipcc, ToolVersion(15, 0, 6))
    assert toolchain.select_hip_compiler("gfx942").path == link  # it cannot build gfx942
