"""``T.ptr`` parameters on CUDA targets (TileLang's language/ptr tests).

A tensor made over a pointer parameter (``A = T.make_tensor(a_ptr, (m, k), dtype)``) is
passed as the caller's address: the launch recipe names the pointer parameter, not the
tensor, and takes a tensor, an array or an integer address (``x.data_ptr()``). Tables of
pointers (``T.Tensor([G], T.ptr)``) are int64 tensors the kernel reads its addresses from.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda._src.runtime import CudaKernel
from tile.backends.cuda.errors import CudaLaunchError
from tile.ir.gpu import KernelParam, LaunchRecipe
from tile.ir.gpu.testing import RecordingDriver
from tile.testsupport.markers import needs_host_cxx

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(1906)


def pointer_gemm(block: int = 32) -> object:
    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, n: T.int32, k: T.int32):
        A = T.make_tensor(a_ptr, (m, k), "float16")
        B = T.make_tensor(b_ptr, (n, k), "float16")
        C = T.make_tensor(c_ptr, (m, n), "float32")
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block), "float16")
            B_shared = T.alloc_shared((block, block), "float16")
            C_local = T.alloc_fragment((block, block), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block), num_stages=2):
                T.copy(A[by * block, ko * block], A_shared)
                T.copy(B[bx * block, ko * block], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block, bx * block])

    return main


@needs_host_cxx
def test_a_tensor_made_over_a_pointer_takes_tensors_and_addresses_on_the_emulator(monkeypatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")  # nvcc (where installed) compiles the source too
    kernel = tilelang.compile(pointer_gemm(), target={"kind": "cuda", "arch": "sm_80"})
    m, n, k = 64, 96, 64
    a = torch.from_numpy(RNG.standard_normal((m, k)).astype("float16"))
    b = torch.from_numpy(RNG.standard_normal((n, k)).astype("float16"))
    want = a.float().numpy() @ b.float().numpy().T
    c = torch.zeros(m, n)
    kernel(a, b, c, m, n, k)  # TileLang's tvm_ffi form: the tensors themselves
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-3, atol=1e-3)
    d = torch.zeros(m, n)
    kernel(a.data_ptr(), b.data_ptr(), d.data_ptr(), m, n, k)  # its cython form: addresses
    np.testing.assert_allclose(d.numpy(), want, rtol=1e-3, atol=1e-3)


@needs_host_cxx
def test_a_table_of_pointers_on_the_emulator(monkeypatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_EMU_VENDOR_COMPILE", "0")

    @T.prim_func
    def gather(src_ptrs: T.Tensor([3], T.ptr), out: T.Tensor([3, 64], "float16")):
        with T.Kernel(3, threads=32) as bx:
            src = T.make_tensor(src_ptrs[bx], (64,), "float16")
            for i in T.Parallel(64):
                out[bx, i] = src[i]

    sources = [torch.from_numpy(RNG.standard_normal(64).astype("float16")) for _ in range(3)]
    table = torch.tensor([s.data_ptr() for s in sources], dtype=torch.int64)
    out = torch.empty(3, 64, dtype=torch.float16)
    tilelang.compile(gather, target="cuda")(table, out)
    np.testing.assert_array_equal(out.numpy(), torch.stack(sources).numpy())


def grouped_gemm(sizes: list[int], n: int, k: int, block: int = 16) -> object:
    """TileLang's grouped GEMM over pointer tables: block ``bx`` finds its group by a scan of
    the groups' first blocks into a ``T.alloc_var``, then makes its tensors from that group's
    addresses (C_g = A_g @ B_g, A_g of sizes[g] rows)."""
    groups, rows = len(sizes), max(sizes)
    blocks = sum(-(-size // block) for size in sizes)

    @T.prim_func
    def main(
        a_ptrs: T.Tensor([groups], T.ptr),
        b_ptrs: T.Tensor([groups], T.ptr),
        c_ptrs: T.Tensor([groups], T.ptr),
        first_blocks: T.Tensor([groups], T.int32),
    ):
        with T.Kernel(blocks, T.ceildiv(n, block), threads=32) as (bx, by):
            A_shared = T.alloc_shared((block, block), "float16")
            B_shared = T.alloc_shared((block, block), "float16")
            C_local = T.alloc_fragment((block, block), "float32")
            group = T.alloc_var(dtype=T.int32)
            first = T.alloc_var(dtype=T.int32)
            group = 0
            first = 0
            for g in range(groups):
                group = T.if_then_else(bx >= first_blocks[g], g, group)
                first = T.if_then_else(bx >= first_blocks[g], first_blocks[g], first)
            m_start = (bx - first) * block
            A = T.make_tensor(a_ptrs[group], (rows, k), "float16")
            B = T.make_tensor(b_ptrs[group], (k, n), "float16")
            C = T.make_tensor(c_ptrs[group], (rows, n), "float16")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block), num_stages=1):
                T.copy(A[m_start, ko * block], A_shared)
                T.copy(B[ko * block, by * block], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[m_start, by * block])

    return main


@needs_host_cxx
@pytest.mark.parametrize(
    "target",
    [
        {"kind": "cuda", "arch": "sm_80"},
        {"kind": "cuda", "arch": "sm_90a"},
        {"kind": "hip", "arch": "gfx90a"},
        "cpu",
    ],
    ids=["sm_80", "sm_90a", "gfx90a", "cpu"],
)
def test_a_grouped_gemm_over_pointer_tables(monkeypatch, target) -> None:
    # two shared tiles and a group index in a T.alloc_var: TVM's shared-memory merge refused the
    # load of the index in the bound address ("Load memory in places other than store")
    if isinstance(target, dict):
        if target["kind"] == "hip":
            pytest.importorskip("tile.backends.rocm")
        monkeypatch.setenv("TILE_DEVICE", "emu")
    sizes, n, k, block = [8, 12, 17], 32, 32, 16
    kernel = tilelang.compile(grouped_gemm(sizes, n, k, block), target=target)
    rows = max(sizes)
    a = [torch.zeros(rows, k, dtype=torch.float16) for _ in sizes]
    b = [torch.from_numpy(RNG.standard_normal((k, n)).astype("float16")) for _ in sizes]
    c = [torch.full((rows, n), 7.0, dtype=torch.float16) for _ in sizes]
    for buf, size in zip(a, sizes, strict=True):
        buf[:size] = torch.from_numpy(RNG.standard_normal((size, k)).astype("float16"))
    first_blocks = np.cumsum([0] + [-(-size // block) for size in sizes[:-1]]).astype("int32")

    def table(tensors: list) -> object:
        return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64)

    kernel(table(a), table(b), table(c), torch.from_numpy(first_blocks))
    for size, a_g, b_g, c_g in zip(sizes, a, b, c, strict=True):
        want = a_g[:size].float().numpy() @ b_g.float().numpy()
        np.testing.assert_allclose(c_g[:size].float().numpy(), want, rtol=1e-2, atol=1e-2)


def test_the_launcher_passes_an_address_as_the_pointer_parameter() -> None:
    driver = RecordingDriver(device_type="cpu")
    recipe = LaunchRecipe(
        "k", (KernelParam("scalar", "x_ptr", "handle"), KernelParam("tensor", "Y", "float32"),
              KernelParam("scalar", "n", "int32")), ("1", "1", "1"), ("32", "1", "1"), "0",
    )  # fmt: skip
    params = [("x_ptr", "T.handle", None), ("Y", "float32", (8,)), ("n", "int32", None)]
    kernel = CudaKernel(b"cubin", recipe, params, driver=driver)
    x, y = torch.zeros(8), torch.zeros(8)
    kernel(ctypes.c_void_p(x.data_ptr()), y, 8)  # as tile.lang passes a T.ptr argument
    kernel(x.data_ptr() + 16, y, 8)  # an integer address
    words = [launch.words for launch in driver.launches()]
    assert words == [(x.data_ptr(), y.data_ptr(), 8), (x.data_ptr() + 16, y.data_ptr(), 8)]
    with pytest.raises(CudaLaunchError, match=r"argument x_ptr is a T.ptr, got a str"):
        kernel("0x1000", y, 8)
