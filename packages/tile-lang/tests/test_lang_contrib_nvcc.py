"""``tile.lang.contrib.nvcc``: compute versions of CUDA targets, written out by hand per arch."""

from __future__ import annotations

import pytest

from tile.ir.errors import TargetError
from tile.lang.contrib import nvcc


@pytest.mark.parametrize(
    ("arch", "version"),
    [
        ("sm_70", "7.0"),
        ("sm_80", "8.0"),
        ("sm_86", "8.6"),
        ("sm_89", "8.9"),
        ("sm_90a", "9.0"),
        ("sm_100a", "10.0"),
    ],
)
def test_compute_version_of_an_explicit_target(arch, version):
    assert nvcc.get_target_compute_version({"kind": "cuda", "arch": arch}) == version


def test_default_target_decides_without_an_argument(monkeypatch):
    monkeypatch.setenv("TILE_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_86"}')
    assert nvcc.get_target_compute_version() == "8.6"


def test_parse_and_arch_suffix():
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert nvcc.parse_compute_version("10.0") == (10, 0)
    assert [nvcc.get_target_arch(v) for v in ("7.5", "8.0", "9.0", (10, 0))] == ["75", "80", "90a", "100a"]
    with pytest.raises(TargetError, match="not a compute version"):
        nvcc.parse_compute_version("sm_80")


def test_a_cpu_target_has_no_compute_version():
    with pytest.raises(TargetError, match="not a CUDA target"):
        nvcc.get_target_compute_version("cpu")
