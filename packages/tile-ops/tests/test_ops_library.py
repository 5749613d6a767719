import numpy as np
import pytest

from tile.ops.elementwise import add, scale
from tile.ops.gemm import matmul


@pytest.mark.parametrize("shape", [(1, 1), (37, 150), (64, 64)])
def test_add_matches_numpy(shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype("float32")
    b = rng.standard_normal(shape).astype("float32")
    np.testing.assert_array_equal(add(a, b, target="cpu"), a + b)


def test_scale_float16():
    a = np.random.default_rng(1).standard_normal((33, 65)).astype("float16")
    np.testing.assert_array_equal(scale(a, 0.5, target="cpu"), a * np.float16(0.5))


@pytest.mark.parametrize("mnk", [(64, 64, 64), (70, 33, 45)])
def test_matmul_float32(mnk):
    m, n, k = mnk
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    np.testing.assert_allclose(matmul(a, b, target="cpu"), a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_float16_accumulates_in_float32():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 300)).astype("float16")
    b = rng.standard_normal((300, 24)).astype("float16")
    ref = (a.astype("float32") @ b.astype("float32")).astype("float16")
    np.testing.assert_allclose(matmul(a, b, target="cpu"), ref, rtol=2e-3, atol=2e-2)


def test_matmul_rejects_mismatched_inner_dims():
    with pytest.raises(ValueError):
        matmul(np.zeros((4, 5), "float32"), np.zeros((6, 4), "float32"))


def test_gemm_config_by_capabilities_and_shape():
    from tile.ir.backend import Capabilities
    from tile.ops.gemm import GemmConfig, gemm_config, gemm_config_for

    def caps(mma_shapes, shared_kib, async_copy=True):
        return Capabilities(warp_size=32, max_threads=1024, shared_bytes=shared_kib * 1024,
                            dtypes=frozenset(), vector_bits=128, has_device=False,
                            mma_shapes=mma_shapes, async_copy=async_copy)

    hopper = caps(((64, 256, 16), (16, 8, 16)), 227)  # a warpgroup MMA, 227 KiB a block
    ampere = caps(((16, 8, 16),), 163)
    assert gemm_config_for(hopper, 4096, 4096, 4096, "float16") == GemmConfig(128, 256, 64, 3, 256, panel=8)
    assert str(gemm_config_for(hopper, 4096, 4096, 4096, "bfloat16")) == "128x256x64:3:256:8"
    # too narrow for a 128x256 tile, or 4-byte inputs (3 stages of them overflow shared memory)
    assert gemm_config_for(hopper, 4096, 128, 4096, "float16") == GemmConfig(128, 128, 32, 3, 128)
    assert gemm_config_for(hopper, 4096, 4096, 4096, "float32") == GemmConfig()
    assert gemm_config_for(ampere, 4096, 4096, 4096, "float16") == GemmConfig(128, 128, 32, 3, 128)
    # the wide tile's three stages (144 KiB) need the on-chip memory to hold them
    assert gemm_config_for(caps(((64, 256, 16),), 100), 4096, 4096, 4096, "float16") == GemmConfig(
        128, 128, 32, 3, 128
    )
    # MMA without asynchronous copies (gfx90a) keeps the small tile
    mfma = caps(((16, 16, 16),), 64, async_copy=False)
    assert gemm_config_for(mfma, 4096, 4096, 4096, "float16") == GemmConfig()
    assert gemm_config_for(hopper, 32, 4096, 4096, "float16") == GemmConfig()
    assert gemm_config(4096, 4096, 4096, "float16", "cpu") == GemmConfig()


def test_gemm_config_of_a_cpu_with_a_bf16_matrix_unit():
    from tile.ir.backend import Capabilities, MmaInstruction
    from tile.ops.gemm import GemmConfig, gemm_config_for

    def cpu(instructions, cores=2):
        return Capabilities(warp_size=1, max_threads=1024, shared_bytes=1 << 24, dtypes=frozenset(),
                            vector_bits=512, has_device=True, thread_binding=False, compute_units=cores,
                            mma_instructions=instructions)

    amx = cpu((MmaInstruction(16, 16, 32, "bfloat16", "float32"),))
    assert gemm_config_for(amx, 2048, 2048, 2048, "bfloat16") == GemmConfig(128, 128, 32, 3, 128)
    # two blocks for two cores
    assert gemm_config_for(amx, 256, 128, 64, "bfloat16") == GemmConfig(128, 128, 32, 3, 128)
    # fewer 128x128 blocks than cores, no matrix unit for the dtype, or none at all: the small tile
    assert gemm_config_for(amx, 128, 128, 2048, "bfloat16") == GemmConfig()
    assert gemm_config_for(cpu(amx.mma_instructions, cores=8), 256, 256, 64, "bfloat16") == GemmConfig()
    assert gemm_config_for(amx, 2048, 2048, 2048, "float16") == GemmConfig()
    assert gemm_config_for(cpu(()), 2048, 2048, 2048, "bfloat16") == GemmConfig()


def test_cpu_bf16_matmul_takes_the_capabilities_tile_and_matches_numpy():
    import ml_dtypes

    from tile.backends.cpu._src.backend import matrix_instructions
    from tile.ops.gemm import GemmConfig, gemm_config

    M, N, K = 256, 384, 96
    expected_tile = GemmConfig(128, 128, 32, 3, 128) if matrix_instructions() else GemmConfig()
    assert gemm_config(M, N, K, "bfloat16", "cpu") == expected_tile  # 128x128 where the CPU has AMX-BF16
    rng = np.random.default_rng(2)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    out = np.asarray(matmul(a, b, target="cpu")).astype(np.float32)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-2, atol=1e-2)
