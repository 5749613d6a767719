"""tile.lang.carver: hints from each backend's Capabilities, checked against hand computations."""

import dataclasses
import math

import numpy as np
import pytest

import tile.lang as tilelang
from tile.ir.backend import Capabilities, MmaInstruction, resolve_target
from tile.ir.errors import TileError
from tile.lang.carver import HintError, recommend_config, recommend_configs
from tile.lang.carver.arch import CDNA, CPU, CUDA, TileDevice, auto_infer_current_arch
from tile.lang.carver.roller.rasterization import NoRasterization
from tile.lang.carver.template import (
    ElementwiseTemplate,
    FlashAttentionTemplate,
    GEMVTemplate,
    GeneralReductionTemplate,
    MatmulTemplate,
)
from tile.lang.demo import matmul as paper_gemm

# Facts written down by hand from the vendors' documents (not read from the backends), so the
# expected numbers below are independent of the capability tables.
A100 = Capabilities(  # CUDA C++ Programming Guide, compute capability 8.0; A100 has 108 SMs
    warp_size=32,
    max_threads=1024,
    shared_bytes=163 * 1024,
    dtypes=frozenset({"float16", "float32", "int8"}),
    vector_bits=128,
    has_device=False,
    async_copy=True,
    mma_shapes=((16, 8, 16), (16, 8, 8), (16, 8, 32)),
    device_name="A100 (by hand)",
    compute_units=108,
    max_threads_per_unit=2048,
    registers_per_unit=65536,
    registers_per_thread=255,
    shared_bytes_per_unit=164 * 1024,
)
MI210 = Capabilities(  # CDNA2 ISA: 64 KB LDS, wave64, MFMA f32_16x16x16f16 / 32x32x8f16; MI210 has 104 CUs
    warp_size=64,
    max_threads=1024,
    shared_bytes=64 * 1024,
    dtypes=frozenset({"float16", "float32"}),
    vector_bits=128,
    has_device=False,
    mma_shapes=((16, 16, 16), (32, 32, 8)),
    mma_instructions=(
        MmaInstruction(16, 16, 16, "float16", "float32"),
        MmaInstruction(32, 32, 8, "float16", "float32"),
    ),
    device_name="MI210 (by hand)",
    compute_units=104,
    max_threads_per_unit=2048,
    registers_per_unit=131072,
    registers_per_thread=512,
    shared_bytes_per_unit=64 * 1024,
)
H100 = dataclasses.replace(
    A100,
    shared_bytes=227 * 1024,
    shared_bytes_per_unit=228 * 1024,
    compute_units=132,
    device_name="H100 (by hand)",
)


def _device(caps):
    return TileDevice.from_capabilities(caps)


def gemm(M, N, K, dtype="float16", acc="float32"):
    return MatmulTemplate(M=M, N=N, K=K, in_dtype=dtype, out_dtype=dtype, accum_dtype=acc)


def test_devices_carry_the_backends_capabilities():
    cpu = CPU()
    caps = resolve_target("cpu")[1].capabilities(resolve_target("cpu")[0])
    assert cpu.compute_max_core == caps.compute_units >= 1 and cpu.warp_size == 1 and not cpu.is_gpu
    assert cpu.cache_bytes == caps.cache_bytes and cpu.vector_bits == caps.vector_bits
    assert isinstance(auto_infer_current_arch(), TileDevice)


@pytest.mark.parametrize(
    ("cls", "spec", "by_hand"),
    [(CUDA, {"kind": "cuda", "arch": "sm_80"}, A100), (CDNA, {"kind": "hip", "arch": "gfx90a"}, MI210)],
)
def test_gpu_backends_report_the_facts_the_vendors_document(cls, spec, by_hand):
    try:
        device = cls(spec)
    except TileError:
        pytest.skip(f"no {spec['kind']} backend installed")
    hand = TileDevice.from_capabilities(by_hand)
    for name in (
        "compute_max_core",
        "warp_size",
        "smem_cap",
        "max_smem_usage",
        "reg_cap",
        "max_registers_per_thread",
        "max_threads_per_block",
        "max_threads_per_core",
    ):
        assert getattr(device, name) == getattr(hand, name), name
    assert set(hand.mma_shapes) <= set(device.mma_shapes)


def test_gemm_hints_fit_shared_memory_and_never_include_an_oversized_tile():
    mi = _device(MI210)  # 64 KB of LDS per workgroup
    hints = gemm(4096, 4096, 4096).with_arch(mi).recommend_hints(topk=1000)
    assert hints
    for h in hints:
        (bm, bn), bk, stages = h.block, h.rstep[0], h.pipeline_stage
        assert stages * (bm * bk + bk * bn) * 2 <= 64 * 1024, h.config
    # 256 x 256 x 128 in fp16 needs (256*128 + 128*256) x 2 B = 128 KB even single-buffered
    assert not any(h.block == [256, 256] and h.rstep == [128] for h in hints)
    # while on an H100 (227 KB per block) it fits with one stage, and is a candidate there
    h100 = _device(H100)
    fitting = [
        h
        for h in gemm(4096, 4096, 4096).with_arch(h100).recommend_hints(topk=10000)
        if h.block == [256, 128] and h.rstep == [128]
    ]
    # by hand: 4 or 3 stages of (256*128 + 128*128) x 2 B = 384 / 288 KB overflow 227 KB;
    # 2 stages (192 KB) fit
    assert fitting and all(h.pipeline_stage == 2 and h.facts["smem"] == 192 * 1024 for h in fitting)


def test_gemm_tiles_are_multiples_of_the_matrix_instruction():
    a100 = _device(A100)
    for dtype, k in (("float16", 16), ("int8", 32), ("float32", 8)):  # mma.sync m16n8k{16,32,8}
        hints = gemm(2048, 2048, 2048, dtype, "int32" if dtype == "int8" else "float32").with_arch(a100)
        for h in hints.recommend_hints(topk=1000):
            (bm, bn), (wm, wn), bk = h.block, h.warp, h.rstep[0]
            assert bm % 16 == 0 and bn % 8 == 0 and bk % k == 0 and h.use_tc
            assert wm % 16 == 0 and wn % 8 == 0 and bm % wm == 0 and bn % wn == 0
            assert (bm // wm) * (bn // wn) * 32 == h.threads
    mi = _device(MI210)
    for h in gemm(2048, 2048, 2048).with_arch(mi).recommend_hints(topk=1000):
        assert h.block[0] % 16 == 0 and h.block[1] % 16 == 0 and h.rstep[0] % 16 == 0  # MFMA 16x16x16
        assert h.threads % 64 == 0  # wave64


def test_gemm_waves_and_occupancy_match_a_hand_computation():
    a100 = _device(A100)
    hints = gemm(4096, 4096, 4096).with_arch(a100).recommend_hints(topk=1000)
    h = next(
        h
        for h in hints
        if h.config == {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 4, "threads": 128}
    )
    # by hand: 4 warps as 2 x 2 -> 64 x 64 warp tiles; accumulators 128*128 fp32 / 128 threads = 128
    # registers, operands (64 + 64) * 16 * 16 bits / 32 / 32 lanes = 32, +32 -> 192
    assert h.warp == [64, 64] and h.facts["registers"] == 192
    # shared: 4 stages x (128*32 + 32*128) x 2 B = 64 KB;
    # blocks per SM: min(2048/128, 164 KB/64 KB, 65536/(128*192)) = 2
    assert h.facts["smem"] == 65536 and h.facts["per_core"] == 2
    # 32 x 32 = 1024 tiles over 108 SMs x 2 = 216 slots: 5 waves, 1024 / 1080 busy
    assert h.facts["tiles"] == 1024 and h.facts["waves"] == 5
    assert h.facts["wave_efficiency"] == pytest.approx(1024 / 1080)
    assert h.score == pytest.approx(1024 / 1080)  # full reuse, no padding
    scores = [x.score for x in hints]
    assert scores == sorted(scores, reverse=True)


def test_a_small_gemm_prefers_tiles_that_fill_the_device():
    a100 = _device(A100)
    top = gemm(256, 256, 4096).with_arch(a100).recommend_hints(topk=1)[0]
    # 128 x 128 tiles give 4 blocks for 108 SMs; the top hint spreads wider
    assert top.facts["tiles"] > 4 and top.facts["wave_efficiency"] > 4 / 108


def test_cpu_gemm_hints_use_whole_vectors_fit_l2_and_count_waves_over_cores():
    cpu = CPU()
    lanes = cpu.vector_bits // 32
    l2 = (
        cpu.cache_bytes[1]
        if len(cpu.cache_bytes) > 1
        else (cpu.cache_bytes[0] if cpu.cache_bytes else 1 << 20)
    )
    hints = gemm(1000, 1000, 1000, "float32", "float32").with_arch(cpu).recommend_hints(topk=1000)
    assert hints
    for h in hints:
        (bm, bn), bk = h.block, h.rstep[0]
        assert bn % lanes == 0 and (bm * bk + bk * bn) * 4 + bm * bn * 4 <= l2
        tiles = math.ceil(1000 / bm) * math.ceil(1000 / bn)
        assert h.facts["waves"] == math.ceil(tiles / cpu.compute_max_core)
        assert isinstance(h.rasterization_plan, NoRasterization)


def test_cpu_gemm_hints_on_amx_are_whole_2x2_tile_blocks():
    """With the CPU backend's AMX product (16 x 16 x 32 bf16), bf16 blocks are multiples of 32 x 32
    (two accumulator tiles each way) and of 32 along K; float32 gemms keep the vector rules."""
    amx = MmaInstruction(16, 16, 32, "bfloat16", "float32")
    caps = dataclasses.replace(CPU().capabilities, mma_instructions=(amx,))
    cpu = _device(caps)
    hints = gemm(2048, 2048, 2048, "bfloat16", "float32").with_arch(cpu).recommend_hints(topk=1000)
    assert hints and all(h.use_tc for h in hints)
    blocks = {(h.block[0], h.block[1], h.rstep[0]) for h in hints}
    assert all(bm % 32 == 0 and bn % 32 == 0 and bk % 32 == 0 for bm, bn, bk in blocks)
    plain = _device(dataclasses.replace(caps, mma_instructions=()))
    without = gemm(2048, 2048, 2048, "bfloat16", "float32").with_arch(plain).recommend_hints(topk=1000)
    assert any(h.block[0] == 16 for h in without) and not any(h.use_tc for h in without)
    fp32 = gemm(2048, 2048, 2048, "float32", "float32").with_arch(cpu).recommend_hints(topk=1000)
    assert fp32 and not any(h.use_tc for h in fp32)


def test_other_templates_respect_their_limits():
    a100 = _device(A100)
    for h in (
        FlashAttentionTemplate(batch_size=2, num_heads=8, head_dim=128, seq_length=2048)
        .with_arch(a100)
        .recommend_hints(topk=100)
    ):
        bm, bn = h.block
        assert (bm * 128 + 2 * h.pipeline_stage * bn * 128) * 2 <= a100.smem_cap
        assert (bm // (h.threads // 32)) % 16 == 0 and bn % 8 == 0
        assert h.facts["tiles"] == math.ceil(2048 / bm) * 8 * 2
    for h in GEMVTemplate(N=8192, K=4096).with_arch(a100).recommend_hints(topk=100):
        assert h.pipeline_stage * (h.rstep[0] + h.rstep[0] * h.block[0]) * 2 <= a100.smem_cap
    reduction = GeneralReductionTemplate(structure="SR", shape=[4096, 8192], dtype="float32")
    for h in reduction.with_arch(a100).recommend_hints(topk=100):
        assert h.facts["registers"] <= 255 and h.threads <= 1024
    for h in (
        ElementwiseTemplate(shape=[4096, 4096], dtype="float32").with_arch(CPU()).recommend_hints(topk=100)
    ):
        assert h.config["block_N"] % (CPU().vector_bits // 32) == 0
    with pytest.raises(HintError, match="structure"):
        GeneralReductionTemplate(structure="SX", shape=[4, 4]).with_arch(a100).recommend_hints()


def test_recommend_config_is_a_working_config_for_the_papers_gemm():
    config = recommend_config("matmul", "cpu", M=192, N=160, K=96, in_dtype="float32", accum_dtype="float32")
    assert set(config) == {"block_M", "block_N", "block_K", "num_stages", "threads"}
    func = paper_gemm(192, 160, 96, dtype="float32", accum_dtype="float32", **config)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    a = np.random.default_rng(0).random((192, 96), dtype=np.float32)
    b = np.random.default_rng(1).random((96, 160), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4)
    assert len(recommend_configs("matmul", "cpu", topk=3, M=64, N=64, K=64)) == 3
    with pytest.raises(HintError, match="no hint template"):
        recommend_config("conv", "cpu")


def test_arch_submodules_parse_compute_capabilities_as_nvcc_spells_them():
    from tile.lang.carver import matmul_analysis
    from tile.lang.carver.arch import cdna, cpu, cuda
    from tile.lang.carver.arch.driver import cuda_driver

    by_hand = {"sm_70": 70, "90": 90, "sm_90a": 90, "sm_100a": 100, "sm_120f": 120, "sm_89": 89}
    for name, version in by_hand.items():
        assert cuda.check_sm_version(name) == version, name
    for name in ("gfx942", "sm_", "", "sm_sm_90", "xsm_90", "sm_90_sm_80", "90sm_", "sm_90ab"):
        assert cuda.check_sm_version(name) == -1, name
    assert matmul_analysis.check_sm_version is cuda.check_sm_version
    hopper = CUDA({"kind": "cuda", "arch": "sm_90a"})
    ampere = CUDA({"kind": "cuda", "arch": "sm_80"})
    assert hopper.sm_version == 90 and ampere.sm_version == 80
    assert cuda.is_hopper_arch(hopper) and not cuda.is_ampere_arch(hopper) and cuda.has_mma_support(hopper)
    assert cuda.is_ampere_arch(ampere) and not cuda.is_ada_arch(ampere) and not cuda.is_volta_arch(ampere)
    assert not cuda.has_mma_support(CPU()) and cpu.is_cpu_arch(CPU()) and not cdna.is_cdna_arch(CPU())
    assert cuda_driver.get_num_sms() > 0  # the CUDA target's facts without a GPU
    import ctypes.util

    if ctypes.util.find_library("cuda") is None:
        with pytest.raises(TileError, match="CUDA driver"):
            cuda_driver.get_persisting_l2_cache_max_size()
