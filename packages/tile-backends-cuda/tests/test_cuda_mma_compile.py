"""The paper GEMM compiles for sm_80 through the whole CUDA backend, on tensor cores.

Compile-only (nvcc + nvdisasm, no GPU): the cubin of ``tile.ops.gemm.matmul_kernel``
(fp16, 128x128x32 tiles, 3 stages, 128 threads) must not spill and its SASS must
contain HMMA and LDSM. The GPU twin runs it on torch tensors against torch.matmul.
Both skip while the CUDA backend is not installed as a ``tile.backends`` plug-in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from _cuda_sass import HAVE_TOOLS, SKIP_REASON

import tile.backends.cuda._src.gemm  # noqa: F401  (the rule, until the backend imports it itself)
from tile.ir.backend import available_backends

HAVE_BACKEND = any("cuda" in m.target_kinds for m in available_backends().values())
pytestmark = [
    pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON),
    pytest.mark.skipif(not HAVE_BACKEND, reason="the CUDA backend plug-in is not installed"),
]


def _compile(m: int, n: int, k: int, arch: str = "sm_80") -> Any:
    import tile.lang as tilelang
    from tile.ops.gemm import matmul_kernel

    func = matmul_kernel(m, n, k, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    return tilelang.compile(func, target={"kind": "cuda", "arch": arch})


@pytest.fixture(scope="module")
def paper_gemm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # A private kernel cache: the compile must really run through this lowering.
    old = os.environ.get("TILE_CACHE_DIR")
    os.environ["TILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield _compile(1024, 1024, 1024)
    finally:
        if old is None:
            del os.environ["TILE_CACHE_DIR"]
        else:
            os.environ["TILE_CACHE_DIR"] = old


def test_paper_gemm_uses_tensor_cores_without_spills(paper_gemm: Any) -> None:
    binary = paper_gemm.artifact.payload
    assert binary.stats.spill_stores == 0 and binary.stats.spill_loads == 0, binary.stats
    sass = binary.sass()
    # 2x2 warps of 64x64: 32 m16n8k16 per k16 step, two steps per 32-wide K tile.
    assert len(re.findall(r"\bHMMA\.16816\.F32\b", sass)) == 64
    assert re.search(r"\bLDSM\.16\.M88\.4\b", sass) and re.search(r"\bLDSM\.16\.MT88\.4\b", sass)
    assert re.search(r"\bBAR\.SYNC", sass), "shared tiles are read by ldmatrix only after a barrier"


def test_paper_gemm_epilogue_stores_pairs_of_halves(paper_gemm: Any) -> None:
    # An mma accumulator holds two adjacent columns per thread (then a jump of 8): the
    # epilogue writes each pair as one 32-bit store, 128 halves per thread in 64 STG.E.
    sass = paper_gemm.artifact.payload.sass()
    assert re.findall(r"\bSTG\.E[\w.]*", sass) == ["STG.E"] * 64


def test_ragged_gemm_epilogue_keeps_half_stores_it_cannot_align(tmp_path: Any) -> None:
    # N = 1023: a row starts at an odd element, so no pair store is provably 4-byte aligned;
    # a misaligned vector store faults on a GPU, so every store stays 16-bit.
    old = os.environ.get("TILE_CACHE_DIR")
    os.environ["TILE_CACHE_DIR"] = str(tmp_path)
    try:
        kernel = _compile(256, 1023, 256)
    finally:
        if old is None:
            del os.environ["TILE_CACHE_DIR"]
        else:
            os.environ["TILE_CACHE_DIR"] = old
    stores = set(re.findall(r"\bSTG\.E[\w.]*", kernel.artifact.payload.sass()))
    assert stores == {"STG.E.U16"}, stores
    assert "half2*)(C" not in kernel.get_kernel_source()


@pytest.mark.gpu
def test_paper_gemm_matches_torch_matmul_on_the_gpu(paper_gemm: Any) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16, generator=gen)
    c = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
    paper_gemm(a, b, c)
    torch.cuda.synchronize()
    ref = (a.float() @ b.float()).half()
    torch.testing.assert_close(c, ref, rtol=2e-2, atol=2e-1)
