"""Mamba-2 SSD kernels (tile.ops.ssd) on the CUDA backend under the CPU emulator, against numpy.

Two regressions found by examples/mamba2_chunk_{state,scan}.py:

* a ``T.Pipelined`` loop of one iteration (chunk_size == block_K) became a cp.async ring
  whose guards pin the step to one value; TVM's buffer compaction then sized the ring
  buffers by the step variable outside its loop and CUDA codegen failed ("k_step has
  been used before definition"). Such a loop is now left unpipelined.
* on sm_90a, TVM merges dynamic shared buffers smallest first, aligned to their element
  size only, so a 128B-swizzled wgmma tile landed at 512 mod 1024 bytes behind two
  256-byte vectors and every wgmma read the wrong elements (the hardware, and the
  emulator, swizzle by absolute address). Every dynamic shared buffer of a kernel with
  swizzled tiles is now a whole number of swizzle periods long.
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
from tile.backends.cuda._src.emulation import EmulatedCudaKernel
from tile.ops.ssd import chunk_scan_kernel, chunk_state_kernel
from tile.testsupport.markers import needs_host_cxx

pytestmark = [
    needs_host_cxx,
]


@pytest.fixture(autouse=True)
def emulate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")
    monkeypatch.setenv("TILE_CACHE", "0")  # the bugs were in code generation: always build


def _target(arch: str) -> dict[str, str]:
    return {"kind": "cuda", "arch": arch}


def _inputs(batch, seqlen, nheads, ngroups, headdim, dstate, chunk, seed=0):
    rng = np.random.default_rng(seed)
    nchunks = seqlen // chunk
    x = rng.standard_normal((batch, seqlen, nheads, headdim)).astype("float16")
    B = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype("float16")
    C = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype("float16")
    dt = (rng.random((batch, nheads, nchunks, chunk)) * 0.1 + 0.01).astype("float32")
    A = -(rng.random(nheads) + 0.5).astype("float32")
    dA = np.cumsum(dt * A[None, :, None, None], axis=-1).astype("float32")
    return x, B, C, dt, dA


def _chunked(t, chunk, heads_of_group=None):
    out = t.astype("float64").reshape(t.shape[0], t.shape[1] // chunk, chunk, *t.shape[2:])
    return out if heads_of_group is None else out[:, :, :, heads_of_group]


def _state_ref(B, x, dt, dA):
    chunk, nheads, ngroups = dt.shape[-1], x.shape[2], B.shape[2]
    group = np.arange(nheads) // (nheads // ngroups)
    weight = np.exp(dA[..., -1:] - dA) * dt
    return np.einsum("bhcs,bcshp,bcshn->bchpn", weight, _chunked(x, chunk), _chunked(B, chunk, group))


def _scan_ref(cb, C, x, dt, dA, prev_states, D):
    chunk, nheads, ngroups = dt.shape[-1], x.shape[2], C.shape[2]
    group = np.arange(nheads) // (nheads // ngroups)
    Cc = _chunked(C, chunk, group)
    inter = np.einsum("bclhn,bchpn->bclhp", Cc, prev_states) * np.exp(dA).transpose(0, 2, 3, 1)[..., None]
    causal = np.tril(np.ones((chunk, chunk), bool))
    decay = np.where(causal, np.exp(dA[..., :, None] - dA[..., None, :]), 0) * dt[..., None, :]
    weights = cb.astype("float64")[:, :, group].transpose(0, 2, 1, 3, 4) * decay  # (b, h, c, l, s)
    intra = np.einsum("bhcls,bcshp->bclhp", weights, _chunked(x, chunk))
    return (inter + intra).reshape(x.shape) + D[:, None] * x.astype("float64")


def _run_state(arch: str, chunk: int, block: int) -> None:
    batch, nheads, ngroups, seqlen = 1, 2, 1, 2 * chunk
    func = chunk_state_kernel(
        batch, nheads, ngroups, seqlen, chunk, block, block, block_M=block, block_N=block, block_K=block
    )
    kernel = tilelang.compile(func, out_idx=[-1], target=_target(arch))
    assert isinstance(kernel._fn, EmulatedCudaKernel)
    x, B, _, dt, dA = _inputs(batch, seqlen, nheads, ngroups, block, block, chunk)
    states = kernel(B, x, dt, dA)
    np.testing.assert_allclose(states, _state_ref(B, x, dt, dA), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_mamba_chunk_state_single_step_pipeline_builds_and_matches(arch):
    # chunk_size == block_K: the T.Pipelined loop has one iteration (codegen failed before)
    _run_state(arch, chunk=32, block=32)


def test_cuda_mamba_chunk_state_wgmma_tile_behind_small_shared_vectors():
    # sm_90a, 64x64 fp16 tiles (128B swizzle, wgmma) after two 256-byte float vectors
    _run_state("sm_90a", chunk=64, block=64)


def test_cuda_mamba_chunk_scan_sm90a_matches_numpy():
    batch, nheads, ngroups, chunk, headdim, dstate = 1, 2, 1, 64, 64, 64
    seqlen = 2 * chunk
    func = chunk_scan_kernel(batch, nheads, ngroups, seqlen, chunk, headdim, dstate)
    kernel = tilelang.compile(func, out_idx=[-1], target=_target("sm_90a"))
    source = kernel.get_kernel_source("cuda")
    assert "tile_wgmma_m64n64k16" in source  # the wgmma path this regression is about
    x, B, C, dt, dA = _inputs(batch, seqlen, nheads, ngroups, headdim, dstate, chunk, seed=1)
    rng = np.random.default_rng(2)
    nchunks = seqlen // chunk
    prev_states = rng.standard_normal((batch, nchunks, nheads, headdim, dstate)).astype("float32")
    D = rng.standard_normal(nheads).astype("float32")
    cb = np.einsum("bclgn,bcsgn->bcgls", _chunked(C, chunk), _chunked(B, chunk)).astype("float16")
    out = kernel(cb, x, dt, dA, C, prev_states, D)
    want = _scan_ref(cb, C, x, dt, dA, prev_states.astype("float16").astype("float64"), D)
    np.testing.assert_allclose(out.astype("float64"), want, rtol=2e-2, atol=5e-2)
