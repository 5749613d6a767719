"""Arch-spec parsing and the capability table of the CUDA backend."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tile.backends.cuda import (
    CAPABILITIES,
    SUPPORTED_ARCHS,
    ArchSpecError,
    CudaArch,
    UnsupportedArchError,
    capabilities,
    parse_arch,
)
from tile.layout.errors import TileError


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("sm_80", CudaArch(8, 0)),
        ("sm_86", CudaArch(8, 6)),
        ("sm_89", CudaArch(8, 9)),
        ("sm_90a", CudaArch(9, 0, "a")),
        ("sm_90", CudaArch(9, 0)),
        ("80", CudaArch(8, 0)),
        ("sm80", CudaArch(8, 0)),
        ("SM_90A", CudaArch(9, 0, "a")),
        (" sm_86 ", CudaArch(8, 6)),
        ("8.9", CudaArch(8, 9)),
        ("9.0a", CudaArch(9, 0, "a")),
        ("sm_100a", CudaArch(10, 0, "a")),
        ("120", CudaArch(12, 0)),
        ("sm_120f", CudaArch(12, 0, "f")),
    ],
)
def test_parse_accepted_forms(spec: str, expected: CudaArch) -> None:
    assert parse_arch(spec) == expected


@pytest.mark.parametrize(
    "spec", ["", "sm_", "sm_8", "compute_80", "sm_80b", "gfx90a", "sm_080", "8", "sm-80"]
)
def test_parse_rejects_with_typed_error_naming_the_forms(spec: str) -> None:
    with pytest.raises(ArchSpecError) as info:
        parse_arch(spec)
    assert isinstance(info.value, TileError)
    text = str(info.value)
    assert repr(spec) in text
    for form in ("'sm_90a'", "'sm80'", "'80'"):
        assert form in text
    assert "sm_80" in text and "sm_90a" in text  # the supported list


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(ArchSpecError):
        parse_arch(80)  # type: ignore[arg-type]


def test_parse_passes_an_arch_through() -> None:
    arch = CudaArch(8, 6)
    assert parse_arch(arch) is arch


@given(
    major=st.integers(1, 99),
    minor=st.integers(0, 9),
    variant=st.sampled_from(["", "a", "f"]),
)
def test_name_round_trips(major: int, minor: int, variant: str) -> None:
    arch = parse_arch(f"sm_{major}{minor}{variant}")
    assert (arch.major, arch.minor, arch.variant) == (major, minor, variant)
    assert parse_arch(arch.name) == arch
    assert parse_arch(str(arch)) == arch
    assert arch.virtual_name == f"compute_{major}{minor}{variant}"


def test_supported_archs_are_the_table() -> None:
    assert [a.name for a in SUPPORTED_ARCHS] == ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"]
    assert set(CAPABILITIES) == set(SUPPORTED_ARCHS)
    with pytest.raises(TypeError):
        CAPABILITIES[CudaArch(7, 0)] = CAPABILITIES[CudaArch(8, 0)]  # type: ignore[index]


@pytest.mark.parametrize("spec", ["sm_70", "sm_72", "sm_100a", "sm_80a"])
def test_unsupported_arch_is_typed(spec: str) -> None:
    with pytest.raises(UnsupportedArchError, match="sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a"):
        capabilities(spec)


def test_rows_are_frozen() -> None:
    caps = capabilities("sm_80")
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.warp_size = 64  # type: ignore[misc]


# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability".
@pytest.mark.parametrize(
    ("spec", "per_block", "per_sm", "threads_per_sm"),
    [
        ("sm_75", 64 * 1024, 64 * 1024, 1024),  # Turing: no per-block reservation
        ("sm_80", 163 * 1024, 164 * 1024, 2048),
        ("sm_86", 99 * 1024, 100 * 1024, 1536),
        ("sm_89", 99 * 1024, 100 * 1024, 1536),
        ("sm_90", 227 * 1024, 228 * 1024, 2048),
        ("sm_90a", 227 * 1024, 228 * 1024, 2048),
    ],
)
def test_shared_memory_and_threads(spec: str, per_block: int, per_sm: int, threads_per_sm: int) -> None:
    caps = capabilities(spec)
    assert caps.shared_bytes_per_block == per_block
    assert caps.shared_bytes_per_sm == per_sm
    assert caps.max_threads_per_sm == threads_per_sm
    assert caps.shared_bytes_per_block_static == 48 * 1024
    assert caps.warp_size == 32
    assert caps.max_threads_per_block == 1024
    assert caps.max_registers_per_thread == 255
    assert caps.registers_per_sm == 65536
    assert caps.shared_banks == 32


def test_sm80_shared_bytes_is_166912() -> None:
    assert capabilities("80").shared_bytes_per_block == 166912


def test_async_features_by_arch() -> None:
    flags = {
        arch.name: (c.async_copy, c.mbarrier, c.mbarrier_tx, c.tma, c.wgmma, c.stmatrix)
        for arch, c in CAPABILITIES.items()
    }
    assert flags == {
        "sm_75": (False, False, False, False, False, False),  # cp.async and mbarrier are sm_80+
        "sm_80": (True, True, False, False, False, False),
        "sm_86": (True, True, False, False, False, False),
        "sm_89": (True, True, False, False, False, False),
        "sm_90": (True, True, True, True, False, True),
        "sm_90a": (True, True, True, True, True, True),
    }


def test_mma_shapes() -> None:
    base = {(16, 8, 16), (16, 8, 8), (16, 8, 32)}
    for arch, caps in CAPABILITIES.items():
        if arch.name == "sm_75":
            continue  # below

        assert caps.mma_shapes == base
        f16 = caps.mma_for("float16")
        assert [i.shape_name for i in f16] == ["m16n8k16"]
        assert f16[0].accumulator_dtypes == ("float32", "float16")
        assert [i.shape_name for i in caps.mma_for("bfloat16")] == ["m16n8k16"]
        assert [(i.shape_name, i.ptx_type) for i in caps.mma_for("float32")] == [("m16n8k8", ".tf32")]
        for int_dtype, ptx in (("int8", ".s8"), ("uint8", ".u8")):
            (instr,) = caps.mma_for(int_dtype)
            assert (instr.shape_name, instr.ptx_type) == ("m16n8k32", ptx)
            assert instr.accumulator_dtypes == ("int32",)


@pytest.mark.parametrize("fp8", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_only_from_sm89(fp8: str) -> None:
    has = {arch.name: fp8 in c.dtypes and bool(c.mma_for(fp8)) for arch, c in CAPABILITIES.items()}
    assert has == {
        "sm_75": False, "sm_80": False, "sm_86": False, "sm_89": True, "sm_90": True, "sm_90a": True
    }
    (instr,) = capabilities("sm_89").mma_for(fp8)
    assert instr.shape_name == "m16n8k32"
    assert instr.accumulator_dtypes == ("float32",)


def test_every_mma_dtype_is_a_storage_dtype() -> None:
    for caps in CAPABILITIES.values():
        for instr in caps.mma:
            assert instr.input_dtype in caps.dtypes
            assert set(instr.accumulator_dtypes) <= caps.dtypes


def test_turing_has_the_f16_and_int8_forms_only() -> None:
    # sm_75 issues m16n8k16 f16 as two mma.m16n8k8 and m16n8k32 int8 as four mma.m8n8k16 (the
    # header); it has no bfloat16 or tf32 tensor cores, so those T.gemm run on FMA
    caps = capabilities("sm_75")
    assert [(i.shape_name, i.input_dtype) for i in caps.mma] == [
        ("m16n8k16", "float16"), ("m16n8k32", "int8"), ("m16n8k32", "uint8")
    ]
    assert caps.mma_for("bfloat16") == () and caps.mma_for("float32") == ()
    assert caps.ldmatrix and not caps.async_copy and not caps.mbarrier
