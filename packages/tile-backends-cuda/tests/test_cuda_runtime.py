"""Launching: typed errors without a GPU, the kernel cache, and (marked gpu) real launches."""

from __future__ import annotations

import numpy as np
import pytest
from test_cuda_compile import atomic_rows_kernel, elementwise_kernel

import tile.lang as tilelang
from tile.backends.cuda import CudaDeviceUnavailableError, device_present
from tile.ir.gpu import evaluate, python_expr
from tile.lang.errors import KernelArgumentError
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.testsupport.markers import needs_nvcc

SM80 = {"kind": "cuda", "arch": "sm_80"}


def test_launch_expressions_round_trip():
    from tvm import tirx

    m = tirx.Var("M", "int32")
    expr = tirx.floordiv(m + 127, 128) * 2 + tirx.floormod(m, 3)
    assert evaluate(python_expr(expr), {"M": 1000}) == (1000 + 127) // 128 * 2 + 1000 % 3


def test_target_without_arch_follows_the_device(monkeypatch):
    from tile.backends.cuda._src import backend
    from tile.ir.target import Target

    monkeypatch.setattr(backend, "_device_arch", lambda: "sm_90a")
    assert backend.arch_of(Target(kind="cuda")) == "sm_90a"
    assert backend.capabilities(Target(kind="cuda")).shared_bytes > 200 * 1024  # sm_90a's, not sm_80's
    assert backend.arch_of(Target(kind="cuda", arch="sm_80")) == "sm_80"  # a named arch wins
    # resolved once, up front: every pass and the cache key see the arch the kernel is built for
    from tile.ir.backend import resolve_target

    assert resolve_target({"kind": "cuda"})[0] == Target(kind="cuda", arch="sm_90a")
    monkeypatch.setattr(backend, "_device_arch", lambda: None)
    assert backend.arch_of(Target(kind="cuda")) == "sm_80"
    # float32 T.gemm on sm_80+ runs on tf32 tensor cores: the conformance references know it
    assert backend.capabilities(Target(kind="cuda", arch="sm_80")).float32_gemm == "tfloat32"
    assert resolve_target({"kind": "cuda"})[0] == Target(kind="cuda", arch="sm_80")


@needs_nvcc
def test_host_arrays_without_a_device_are_a_typed_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    kernel = tilelang.compile(elementwise_kernel(256, 256), out_idx=[-1], target=SM80)
    a = np.zeros((256, 256), "float32")
    with pytest.raises(KernelArgumentError, match="cuda device"):
        kernel(a, a)


@needs_nvcc
@pytest.mark.skipif(device_present(), reason="a CUDA device is present")
def test_launch_without_a_device_is_a_clear_error(monkeypatch):
    kernel = tilelang.compile(elementwise_kernel(256, 256), target=SM80)
    launcher = kernel._fn
    # the arguments pass their checks (as torch CUDA tensors would); the driver is missing
    monkeypatch.setattr(launcher, "check_arguments", lambda args: ({}, 0))
    with pytest.raises(CudaDeviceUnavailableError, match="no CUDA driver or device"):
        launcher(object(), object(), object())


@needs_nvcc
def test_cache_stores_and_restores_the_cubin(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    first = tilelang.compile(elementwise_kernel(128, 128), target=SM80)
    cubins = list(tmp_path.rglob("kernel.cubin"))
    assert len(cubins) == 1 and cubins[0].read_bytes() == first.artifact.payload.cubin
    from tile.backends.cuda._src import backend

    calls = []
    monkeypatch.setattr(backend, "compile_cubin", lambda *a: calls.append(a))
    second = tilelang.compile(elementwise_kernel(128, 128), target=SM80)
    assert not calls  # restored from the cache, not recompiled
    assert second.artifact.payload.cubin == first.artifact.payload.cubin
    assert second.artifact.payload.recipe == first.artifact.payload.recipe
    assert second.get_kernel_source("cuda") == first.get_kernel_source("cuda")


# ----------------------------------------------------------------------------- on a GPU
@pytest.fixture
def torch_cuda():
    import torch

    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1024, 1024), (1000, 777)])
def test_gpu_elementwise(torch_cuda, shape):
    torch = torch_cuda
    kernel = tilelang.compile(elementwise_kernel(*shape), out_idx=[-1], target={"kind": "cuda"})
    a, b = (torch.randn(shape, device="cuda") for _ in range(2))
    torch.testing.assert_close(kernel(a, b), a + b)


@pytest.mark.gpu
def test_gpu_softmax_and_rms_norm(torch_cuda):
    torch = torch_cuda
    x = torch.randn(1024, 512, device="cuda") * 3
    soft = tilelang.compile(softmax_kernel(1024, 512), out_idx=[-1], target={"kind": "cuda"})
    torch.testing.assert_close(soft(x), torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
    w = torch.randn(512, device="cuda")
    norm = tilelang.compile(rms_norm_kernel(1024, 512), out_idx=[-1], target={"kind": "cuda"})
    ref = x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(norm(x, w), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_atomic_row_sums(torch_cuda):
    torch = torch_cuda
    x = torch.randn(256, 512, device="cuda")
    kernel = tilelang.compile(atomic_rows_kernel(256, 512), target={"kind": "cuda"})
    out = torch.zeros(256, device="cuda")
    kernel(x, out)
    torch.testing.assert_close(out, x.sum(dim=1), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_gpu_numpy_arrays_are_copied_to_the_device_and_back(torch_cuda):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((300, 200)).astype("float32") for _ in range(2))
    returned = tilelang.compile(elementwise_kernel(300, 200), out_idx=[-1], target={"kind": "cuda"})
    out = returned(a, b)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, a + b)
    in_place = tilelang.compile(elementwise_kernel(300, 200), target={"kind": "cuda"})
    c = np.zeros_like(a)
    assert in_place(a, b, c) is None
    np.testing.assert_array_equal(c, a + b)  # the kernel's write reached the caller's array


@pytest.mark.gpu
def test_gpu_target_without_arch_takes_the_device_arch(torch_cuda):
    from tile.backends.cuda._src.backend import _device_arch

    kernel = tilelang.compile(elementwise_kernel(64, 64), out_idx=[-1], target={"kind": "cuda"})
    assert kernel.artifact.payload.arch == _device_arch()
