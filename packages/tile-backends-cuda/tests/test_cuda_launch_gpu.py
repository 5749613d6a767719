"""The launch semantics users rely on, on a real GPU (marked ``gpu``; skipped without one).

Their host-side twins, with the driver replaced, are in ``test_cuda_launch_plan.py``:
stream ordering against torch work on a side stream, CUDA-graph capture and replay, two
argument signatures in a row, a new data pointer with TMA, a launch error typed and
located, and the device taken from the tensors.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_cuda_compile import elementwise_kernel

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda.errors import CudaLaunchError

pytestmark = pytest.mark.gpu


def twice_kernel(block: int = 256) -> Any:
    """``Y = 2 X`` over a dynamic length N: one kernel for every length."""
    N = T.dynamic("N")

    @T.prim_func
    def twice(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = X[bx * block + i] * 2.0

    return twice


@pytest.fixture(scope="module")
def torch() -> Any:
    import torch

    return torch


def test_gpu_launch_follows_torchs_stream(torch: Any) -> None:
    add = tilelang.compile(elementwise_kernel(2048, 2048), out_idx=[-1], target={"kind": "cuda"})
    a = torch.randn(2048, 2048, device="cuda")
    add(a, a)  # the plan exists: the call below takes the fast path
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # the side stream is busy for a while ...
        x = a * 2  # ... before x is written: a kernel on another stream would read it too early
        out = add(x, x)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out, a * 4)


def test_gpu_cuda_graph_capture_and_replay(torch: Any) -> None:
    add = tilelang.compile(elementwise_kernel(1024, 1024), out_idx=[-1], target={"kind": "cuda"})
    a, b = (torch.randn(1024, 1024, device="cuda") for _ in range(2))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        add(a, b)  # warm-up on the capturing stream, as torch asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = add(a, b)
    a.copy_(torch.randn_like(a))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + b)


def test_gpu_two_argument_signatures_in_a_row(torch: Any) -> None:
    twice = tilelang.compile(twice_kernel(), out_idx=[-1], target={"kind": "cuda"})
    for length in [100, 4097, 100, 1 << 20]:
        x = torch.randn(length, device="cuda")
        torch.testing.assert_close(twice(x), 2 * x)


def test_gpu_tma_kernel_with_new_data_pointers(torch: Any) -> None:
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs sm_90")
    from tile.ops.gemm import matmul_kernel

    target = {"kind": "cuda", "arch": "sm_90a", "warp_specialize": "1"}
    func = matmul_kernel(256, 256, 256, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    gemm = tilelang.compile(func, out_idx=[-1], target=target)
    assert any(p.kind == "tensormap" for p in gemm.artifact.payload.recipe.params)
    for _ in range(3):  # new tensors each time: new pointers, new descriptors
        a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
        torch.testing.assert_close(gemm(a, b), a @ b, rtol=2e-2, atol=2e-1)
    a2 = a.clone()
    torch.testing.assert_close(gemm(a2, b), a @ b, rtol=2e-2, atol=2e-1)  # same shape, new address


def test_gpu_launch_error_is_typed_and_located(torch: Any) -> None:
    add = tilelang.compile(elementwise_kernel(256, 256), out_idx=[-1], target={"kind": "cuda"})
    launcher = add._fn
    a = torch.randn(256, 256, device="cuda")
    add(a, a)
    plan = next(iter(launcher._plans.values()))
    plan.block = (4096, 1, 1)  # more threads than a block may have: the driver refuses
    plan.launch = plan.function.bind(plan.grid, plan.block, plan.shared, plan.address)
    for binding in launcher._bindings:  # the native path's copy of the plan too
        for native in binding.table.plans:
            native.plan.block[0] = 4096
    with pytest.raises(CudaLaunchError, match=r"CUDA_ERROR_INVALID_VALUE.*kernel") as caught:
        add(a, a)
    assert caught.value.location is not None
    assert caught.value.location.filename.endswith("test_cuda_compile.py")


def test_gpu_device_comes_from_the_tensors(torch: Any) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    add = tilelang.compile(elementwise_kernel(512, 512), out_idx=[-1], target={"kind": "cuda"})
    with torch.cuda.device(0):
        a = torch.randn(512, 512, device="cuda:1")
        out = add(a, a)
        assert out.device == a.device and torch.cuda.current_device() == 0
    torch.testing.assert_close(out, a * 2)
