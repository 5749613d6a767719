"""gfx target-ID parsing and the capability table of the ROCm backend."""

from __future__ import annotations

import dataclasses

import pytest

from tile.backends.rocm import (
    CAPABILITIES,
    SUPPORTED_ARCHS,
    ArchSpecError,
    RocmArch,
    UnsupportedArchError,
    capabilities,
    parse_arch,
)
from tile.layout.errors import TileError


@pytest.mark.parametrize(
    ("spec", "processor", "features", "target_id"),
    [
        ("gfx90a", "gfx90a", (), "gfx90a"),
        ("gfx942", "gfx942", (), "gfx942"),
        (" GFX942 ", "gfx942", (), "gfx942"),
        ("gfx90a:xnack-", "gfx90a", (("xnack", False),), "gfx90a:xnack-"),
        (
            "gfx942:xnack+:sramecc-",
            "gfx942",
            (("sramecc", False), ("xnack", True)),
            "gfx942:sramecc-:xnack+",
        ),
        ("gfx1100", "gfx1100", (), "gfx1100"),
    ],
)
def test_parse_target_ids(
    spec: str, processor: str, features: tuple[tuple[str, bool], ...], target_id: str
) -> None:
    arch = parse_arch(spec)
    assert (arch.processor, arch.features) == (processor, features)
    assert arch.target_id == str(arch) == target_id
    assert arch.name == processor
    assert parse_arch(arch.target_id) == arch


@pytest.mark.parametrize(
    "spec",
    ["", "gfx", "gfx9", "90a", "sm_80", "gfx90a:", "gfx90a:xnack", "gfx90a:foo+", "gfx90a:xnack+:xnack-"],
)
def test_parse_rejects_with_typed_error_naming_the_forms(spec: str) -> None:
    with pytest.raises(ArchSpecError) as info:
        parse_arch(spec)
    assert isinstance(info.value, TileError)
    text = str(info.value)
    assert "'gfx90a'" in text and "'gfx942:sramecc+:xnack-'" in text


def test_parse_rejects_non_strings_and_passes_arches_through() -> None:
    with pytest.raises(ArchSpecError):
        parse_arch(942)  # type: ignore[arg-type]
    arch = RocmArch("gfx942")
    assert parse_arch(arch) is arch


def test_table() -> None:
    assert SUPPORTED_ARCHS == ("gfx90a", "gfx942")
    assert set(CAPABILITIES) == set(SUPPORTED_ARCHS)
    assert capabilities("gfx90a").family == "CDNA2"
    assert capabilities("gfx942").family == "CDNA3"
    assert "MI250X" in capabilities("gfx90a").products
    assert "MI300X" in capabilities("gfx942").products
    with pytest.raises(dataclasses.FrozenInstanceError):
        capabilities("gfx942").wave_size = 32  # type: ignore[misc]


@pytest.mark.parametrize("spec", ["gfx908", "gfx950", "gfx1100"])
def test_unsupported_is_typed(spec: str) -> None:
    with pytest.raises(UnsupportedArchError, match="gfx90a, gfx942"):
        capabilities(spec)


@pytest.mark.parametrize("spec", SUPPORTED_ARCHS)
def test_common_limits(spec: str) -> None:
    caps = capabilities(spec)
    assert caps.wave_size == 64
    assert caps.max_threads_per_block == 1024
    assert caps.lds_bytes_per_block == caps.lds_bytes_per_cu == 65536
    assert (caps.lds_banks, caps.lds_bank_bytes) == (32, 4)
    assert caps.lds_dma and caps.lds_dma_max_bytes_per_lane == 4


def test_features_keep_the_row_but_name_the_target() -> None:
    plain = capabilities("gfx942")
    tuned = capabilities("gfx942:xnack-")
    assert tuned.arch.target_id == "gfx942:xnack-"
    assert dataclasses.replace(tuned, arch=plain.arch) == plain


def test_mfma_f16_bf16_shapes() -> None:
    for caps in CAPABILITIES.values():
        for dtype in ("float16", "bfloat16"):
            assert {(i.m, i.n, i.k) for i in caps.mfma_for(dtype)} == {(16, 16, 16), (32, 32, 8)}
            assert {i.accumulator_dtype for i in caps.mfma_for(dtype)} == {"float32"}


def test_mfma_int8_shapes_differ_between_cdna2_and_cdna3() -> None:
    cdna2 = capabilities("gfx90a").mfma_for("int8")
    cdna3 = capabilities("gfx942").mfma_for("int8")
    assert [(i.mnemonic, i.shape_name) for i in cdna2] == [
        ("v_mfma_i32_16x16x16i8", "16x16x16"),
        ("v_mfma_i32_32x32x8i8", "32x32x8"),
    ]
    assert [(i.mnemonic, i.shape_name) for i in cdna3] == [
        ("v_mfma_i32_16x16x32_i8", "16x16x32"),
        ("v_mfma_i32_32x32x16_i8", "32x32x16"),
    ]
    assert {i.accumulator_dtype for i in (*cdna2, *cdna3)} == {"int32"}


@pytest.mark.parametrize("fp8", ["float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_fp8_fnuz_only_on_cdna3(fp8: str) -> None:
    assert fp8 not in capabilities("gfx90a").dtypes
    assert not capabilities("gfx90a").mfma_for(fp8)
    assert fp8 in capabilities("gfx942").dtypes
    assert {i.shape_name for i in capabilities("gfx942").mfma_for(fp8)} == {"16x16x32", "32x32x16"}
    for caps in CAPABILITIES.values():  # the OCP encodings are gfx950's, not these
        assert "float8_e4m3fn" not in caps.dtypes


def test_mnemonics_name_their_shape() -> None:
    for caps in CAPABILITIES.values():
        assert caps.mfma_shapes == {(i.m, i.n, i.k) for i in caps.mfma}
        for instr in caps.mfma:
            assert instr.shape_name in instr.mnemonic
            assert instr.input_dtype in caps.dtypes
