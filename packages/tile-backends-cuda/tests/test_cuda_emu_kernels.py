"""CUDA kernels for sm_80 run under the CPU emulator (TILE_DEVICE=emu) against numpy.

The kernel's generated CUDA source, unchanged, is compiled by the host C++ compiler
against the emulator's tile_cuda.h: the mma.sync + ldmatrix + cp.async ring of the
paper GEMM, warp-shuffle reductions, predicated tails and atomics run as they would
on the GPU, and the results are compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_cuda_compile import atomic_rows_kernel, elementwise_kernel

import tile.lang as tilelang
from tile.backends.cuda._src.emulation import EmulatedCudaKernel
from tile.lang._src.cache import KernelCacheWarning
from tile.ops.gemm import matmul_kernel
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.testsupport.markers import needs_host_cxx, needs_nvcc

pytestmark = [needs_host_cxx, pytest.mark.emu]
SM80 = {"kind": "cuda", "arch": "sm_80"}


def paper_gemm(m: int, n: int, k: int) -> tilelang.JITKernel:
    func = matmul_kernel(m, n, k, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    return tilelang.compile(func, out_idx=[-1], target=SM80)


@pytest.mark.parametrize("shape", [(256, 256, 256), (200, 136, 72)])
def test_paper_gemm_matches_numpy(shape):
    m, n, k = shape
    kernel = paper_gemm(m, n, k)
    assert isinstance(kernel._fn, EmulatedCudaKernel) and kernel.device == "cpu"
    source = kernel.get_kernel_source("cuda")
    for call in ("tile_mma_m16n8k16_f16_f32", "tile_ldmatrix_x4", "tile_cp_async_16", "tile_cp_async_wait"):
        assert call in source
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = kernel(a, b)
    want = a.astype(np.float32) @ b.astype(np.float32)
    # fp32 accumulation, one fp16 rounding at the end: within an fp16 ulp of the fp32 product
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-3, atol=2e-2)


def test_torch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    kernel = paper_gemm(128, 128, 64)
    a = torch.randn(128, 64, dtype=torch.float16)
    b = torch.randn(64, 128, dtype=torch.float16)
    c = kernel(a, b)
    assert isinstance(c, torch.Tensor) and c.device.type == "cpu"
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-3, atol=2e-2)


def test_elementwise_with_ragged_tiles():
    kernel = tilelang.compile(elementwise_kernel(300, 200), out_idx=[-1], target=SM80)
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((300, 200)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(kernel(a, b), a + b)


def test_softmax_rows():
    kernel = tilelang.compile(softmax_kernel(100, 256), out_idx=[-1], target=SM80)
    x = (np.random.default_rng(2).standard_normal((100, 256)) * 3).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(kernel(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_rms_norm_rows():
    kernel = tilelang.compile(rms_norm_kernel(100, 256), out_idx=[-1], target=SM80)
    rng = np.random.default_rng(3)
    w = rng.standard_normal(256).astype(np.float32)
    x = rng.standard_normal((100, 256)).astype(np.float32)
    got = kernel(x, w)
    want = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_atomic_row_sums_across_blocks():
    kernel = tilelang.compile(atomic_rows_kernel(64, 256), target=SM80)
    x = np.random.default_rng(4).standard_normal((64, 256)).astype(np.float32)
    out = np.zeros(64, np.float32)
    kernel(x, out)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_device_selection_is_typed():
    from tile.backends.cuda import env
    from tile.layout.errors import EnvironmentVariableError

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TILE_DEVICE", "tpu")
        with pytest.raises(EnvironmentVariableError, match="TILE_DEVICE"):
            env.TILE_DEVICE.get()


def test_emulation_needs_no_nvcc(monkeypatch, tmp_path):
    # a machine without the CUDA toolkit: the artifact has the source and no cubin
    from tile.backends.cuda import probe_nvcc
    from tile.ir.errors import BackendError

    monkeypatch.setenv("TILE_NVCC", str(tmp_path / "no-such-nvcc"))
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    assert probe_nvcc() is None
    func = matmul_kernel(128, 128, 64, block_M=128, block_N=128, block_K=32, num_stages=2, threads=128)
    kernel = tilelang.compile(func, out_idx=[-1], target=SM80)
    assert kernel.artifact.payload.cubin == b""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(kernel(a, b).astype(np.float32), want, rtol=2e-3, atol=2e-2)
    with pytest.raises(BackendError, match="without nvcc"):
        kernel.artifact.payload.sass()


@needs_nvcc
def test_emulation_can_leave_out_the_nvcc_check(monkeypatch, tmp_path):
    # TILE_EMU_VENDOR_COMPILE=0: nvcc is installed but not run (the cubin is only a check under
    # the emulator); the result is the same, and a later build that wants the check does not
    # take the cubin-less cache entry
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")
    func = elementwise_kernel(70, 90, block_M=32, block_N=32)
    kernel = tilelang.compile(func, out_idx=[-1], target=SM80)
    assert kernel.artifact.payload.cubin == b""
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((70, 90)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(kernel(a, b), a + b)
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "1")
    with pytest.warns(KernelCacheWarning, match="TILE_EMU_VENDOR_COMPILE=0"):
        checked = tilelang.compile(func, out_idx=[-1], target=SM80)
    assert checked.artifact.payload.cubin[:4] == b"\x7fELF"
    np.testing.assert_array_equal(checked(a, b), a + b)


def test_bfloat16_kernel_with_tvm_tensor_arguments():
    # bfloat16 arrays reach the kernel as TVM tensors (numpy has no bfloat16); the
    # generated source uses TVM's bfloat16 preamble (max through __hgt) and paired types
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import tile.lang.language as T

    @T.prim_func
    def bf16_max(
        A: T.Tensor((256,), "bfloat16"), B: T.Tensor((256,), "bfloat16"), C: T.Tensor((256,), "bfloat16")
    ):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                C[bx * 128 + i] = T.max(A[bx * 128 + i], B[bx * 128 + i])

    kernel = tilelang.compile(bf16_max, out_idx=[-1], target=SM80)
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal(256).astype(ml_dtypes.bfloat16) for _ in range(2))
    out = kernel(a, b)
    got = np.asarray(out.numpy() if hasattr(out, "numpy") else out)
    np.testing.assert_array_equal(
        got.astype(np.float32), np.maximum(a.astype(np.float32), b.astype(np.float32))
    )
