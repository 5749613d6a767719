"""bf16 T.gemm through the packaged C micro-kernel (vdpbf16ps): numerics, the kernel cache, the fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from _cpu_gemm_support import gemm_tile_kernel, k_loop_gemm, pinned_gemm_rule, run_bf16_product

import tile.lang as tilelang
from tile.backends.cpu._src import lowering as _cpu_rules  # noqa: F401  (registers the CPU gemm rule)
from tile.backends.cpu._src import ukernels

needs_ukernel = pytest.mark.skipif(
    not ukernels.use_bf16_gemm_ukernel(),
    reason="no AVX-512 BF16 on this CPU, or no host compiler to build the micro-kernel",
)


def tile_gemm(M, N, K, trans_a, trans_b, clear_accum):
    """One block: C_frag = C, then T.gemm on bf16 tiles copied to shared memory."""
    return gemm_tile_kernel(M, N, K, trans_a, trans_b, "ss", "bfloat16", clear_accum)


def check(kernel, M, N, K, trans_a, trans_b, clear_accum, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(ml_dtypes.bfloat16)
    c = rng.standard_normal((M, N)).astype(np.float32)
    out = c.copy()
    kernel(a, b, out)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)  # the bf16-rounded inputs, exactly
    expected = (a32.T if trans_a else a32).astype(np.float64) @ (b32.T if trans_b else b32)
    if not clear_accum:
        expected = expected + c
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=2e-5 * max(K, 1))


@pytest.fixture
def ukernel_rule(request, monkeypatch):
    """The CPU gemm rule with ``ukernel`` pinned (``_cpu_gemm_support.pinned_gemm_rule``)."""
    with pinned_gemm_rule(monkeypatch, ukernel=request.param):
        yield request.param


def calls_ukernel(kernel) -> bool:
    return f"@{ukernels.BF16_GEMM_SYMBOL}(" in kernel.artifact.sources["llvm"]


@needs_ukernel
@pytest.mark.parametrize("ukernel_rule", [True], indirect=True)
@pytest.mark.parametrize(
    "M,N,K,trans_a,trans_b,clear_accum",
    [
        (7, 33, 5, False, False, False),
        (13, 70, 31, True, False, False),
        (9, 17, 34, False, True, True),
        (6, 64, 2, True, True, False),
        (130, 100, 33, False, True, False),
        (64, 128, 300, False, False, True),  # more than one K chunk of the kernel
        (1, 96, 64, False, False, False),
    ],
)
def test_ukernel_matches_numpy(ukernel_rule, M, N, K, trans_a, trans_b, clear_accum):
    kernel = tilelang.compile(tile_gemm(M, N, K, trans_a, trans_b, clear_accum), target="cpu")
    assert calls_ukernel(kernel)
    check(kernel, M, N, K, trans_a, trans_b, clear_accum)


@needs_ukernel
@pytest.mark.parametrize("ukernel_rule", [None], indirect=True)
def test_default_rule_uses_ukernel_for_the_paper_gemm(ukernel_rule):
    from tile.ops.gemm import matmul_kernel

    kernel = tilelang.compile(
        matmul_kernel(192, 160, 96, dtype="bfloat16", accum_dtype="float32", block_M=128, block_N=128,
                      block_K=32, num_stages=3),
        out_idx=[-1], target="cpu",
    )
    assert calls_ukernel(kernel)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((192, 96)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((96, 160)).astype(ml_dtypes.bfloat16)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    out = np.asarray(kernel(a, b)).astype(np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("ukernel_rule", [False], indirect=True)
def test_forced_fallback_uses_generated_code(ukernel_rule):
    kernel = tilelang.compile(tile_gemm(13, 40, 19, False, True, False), target="cpu")
    assert not calls_ukernel(kernel)
    check(kernel, 13, 40, 19, False, True, False)


def test_env_switch_turns_the_ukernel_off(monkeypatch):
    monkeypatch.setenv("TILE_CPU_BF16_UKERNEL", "0")
    assert not ukernels.use_bf16_gemm_ukernel()
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = tilelang.compile(tile_gemm(8, 32, 16, False, False, True), target="cpu")
    assert not calls_ukernel(kernel)
    check(kernel, 8, 32, 16, False, False, True)


def test_missing_compiler_is_a_clear_error(monkeypatch, tmp_path):
    from tile.backends.cpu.simt.errors import HostCompilerNotFoundError

    monkeypatch.setenv("TILE_CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    with pytest.raises(HostCompilerNotFoundError, match="TILE_CXX"):
        ukernels.bf16_gemm_library()


_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, ml_dtypes
    sys.path.insert(0, {here!r})
    import tile.lang as tilelang
    from test_cpu_bf16_ukernel import tile_gemm, check, calls_ukernel
    kernel = tilelang.compile(tile_gemm(24, 48, 40, False, False, False), target="cpu")
    check(kernel, 24, 48, 40, False, False, False)
    print("UKERNEL" if calls_ukernel(kernel) else "GENERATED")
    """
)


@needs_ukernel
def test_cache_round_trip_in_fresh_processes(tmp_path):
    env = {**os.environ, "TILE_CACHE_DIR": str(tmp_path), "TILE_CACHE": "1"}
    env.pop("TILE_CPU_BF16_UKERNEL", None)
    code = _CHILD.format(here=os.path.dirname(__file__))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "UKERNEL" in first.stdout
    entries = list((tmp_path / "v1").rglob(ukernels.UKERNEL_FILE))
    assert entries, "the cached kernel does not record its micro-kernel library"
    # A new process loads kernel.so (undefined symbol) after loading the micro-kernel library.
    second = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr
    assert "UKERNEL" in second.stdout and "KernelCacheWarning" not in second.stderr
    # The micro-kernel library was removed: the cache hit rebuilds it before loading kernel.so.
    for lib in (tmp_path / "ukernels").glob("*.so"):
        lib.unlink()
    third = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert third.returncode == 0, third.stderr
    assert "UKERNEL" in third.stdout and "KernelCacheWarning" not in third.stderr
    assert list((tmp_path / "ukernels").glob("*.so"))


def run_k_loop(M, N, K, block, trans_b):
    kernel = tilelang.compile(k_loop_gemm(M, N, K, block, block, block, trans_b=trans_b), target="cpu")
    run_bf16_product(kernel, M, N, K, trans_b, seed=2)
    return kernel


def ukernel_calls(kernel) -> list[list[str]]:
    """The arguments of the micro-kernel calls in the kernel's TIR (split at top-level commas)."""
    lines = kernel.artifact.sources["tir"].splitlines()
    calls = []
    for line in lines:
        if ukernels.BF16_GEMM_SYMBOL not in line:
            continue
        text = line.split(ukernels.BF16_GEMM_SYMBOL + '", ', 1)[1]
        args, depth, current = [], 0, ""
        for ch in text:
            if ch == "," and depth == 0:
                args.append(current.strip())
                current = ""
                continue
            depth += (ch in "([") - (ch in ")]")
            if depth < 0:
                break
            current += ch
        calls.append([*args, current.strip()])
    return calls


def folded_k(kernel) -> list[str]:
    """The K extents of the micro-kernel calls in the kernel's TIR."""
    return [args[2] for args in ukernel_calls(kernel)]


def accumulates(kernel) -> list[str]:
    """The ``accumulate`` flags (the last argument) of the micro-kernel calls in the kernel's TIR."""
    return [args[-1] for args in ukernel_calls(kernel)]


@needs_ukernel
@pytest.mark.parametrize("trans_b", [False, True])
def test_staging_k_loop_folds_into_one_call(monkeypatch, trans_b):
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = run_k_loop(64, 96, 160, 32, trans_b)
    assert folded_k(kernel) == ["160"]


@needs_ukernel
def test_tail_tiles_keep_the_k_loop(monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = run_k_loop(64, 64, 80, 32, False)  # the last K tile is partial: copies zero-fill it
    assert folded_k(kernel) == ["32"]
    assert accumulates(kernel) == ["1"]  # the T.clear stays: every K step adds to the fragment


@needs_ukernel
def test_clear_before_a_folded_loop_becomes_the_calls_clear(monkeypatch):
    """T.clear(C_f) before the folded K loop: one call that starts from zero, no zeroing loop. Six blocks
    share the fragment's storage, so an accumulation onto the previous block's values would show."""
    monkeypatch.setenv("TILE_CACHE", "0")
    kernel = run_k_loop(64, 96, 160, 32, False)
    assert folded_k(kernel) == ["160"] and accumulates(kernel) == ["0"]
    tir = kernel.artifact.sources["tir"]
    block_body_before_call = tir.split(ukernels.BF16_GEMM_SYMBOL)[0].split("for block")[1]
    assert "C_f[" not in block_body_before_call  # no store into the fragment before the call


@needs_ukernel
@pytest.mark.parametrize("value", [0.0, 1.5])
def test_only_a_zero_fill_becomes_the_calls_clear(monkeypatch, value):
    monkeypatch.setenv("TILE_CACHE", "0")
    M, N, K = 64, 64, 128
    kernel = tilelang.compile(k_loop_gemm(M, N, K, 32, 32, 32, init=value), target="cpu")
    assert folded_k(kernel) == [str(K)] and accumulates(kernel) == ["0" if value == 0 else "1"]
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    out = np.full((M, N), np.nan, np.float32)
    kernel(a, b, out)
    expected = value + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=2e-5 * K)


def test_no_fold_without_the_ukernel(monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "0")
    monkeypatch.setenv("TILE_CPU_BF16_UKERNEL", "0")
    kernel = run_k_loop(64, 64, 96, 32, False)
    assert folded_k(kernel) == []
