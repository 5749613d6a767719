"""Compile-only twins of the ops' kernels for the GPU backends: every forward and backward
kernel of ``tile.ops`` builds for CUDA (sm_75, sm_80, sm_90a) and HIP (gfx90a) with the tiling its
config function picks from those targets' capabilities. Needs the backends installed (skips
otherwise) and their compilers; minutes of nvcc/hipcc, so behind ``--run-slow``."""

from __future__ import annotations

import pytest

import tile.lang as tilelang
from tile.ir.backend import resolve_target
from tile.ir.errors import TileError
from tile.ops._src.configs import attention_config, decode_config, dequant_config, norm_bwd_config, row_config
from tile.ops._src.decode import flash_decode_combine_kernel, flash_decode_split_kernel
from tile.ops._src.flash import (
    flash_bwd_dkdv_kernel,
    flash_bwd_dq_kernel,
    flash_bwd_preprocess_kernel,
    flash_fwd_kernel,
)
from tile.ops._src.norms import (
    layer_norm_bwd_kernel,
    layer_norm_fwd_kernel,
    rms_norm_bwd_kernel,
    rms_norm_fwd_kernel,
    softmax_bwd_kernel,
)
from tile.ops._src.quant import dequant_gemm_kernel, dequant_gemv_kernel

TARGETS = {
    "sm_75": {"kind": "cuda", "arch": "sm_75"},  # T4: 64 KB of shared memory, no cp.async
    "sm_80": {"kind": "cuda", "arch": "sm_80"},
    "sm_90a": {"kind": "cuda", "arch": "sm_90a"},
    "gfx90a": {"kind": "hip", "arch": "gfx90a"},
}


def _kernels(caps):
    att = attention_config(caps, 128, 128, 64, "float16")
    problem = (1, 4, 2, 128, 128, 64, True, 0.125, "float16", "float32", att)
    rows = row_config(caps, 64, 256)
    dec = decode_config(caps, 4, 512, 64, "float16")  # 8 heads over 2 KV heads, one token
    decode = ((1, 8, 2, 1, 512, 64), 0.125, False)
    yield "flash_fwd", flash_fwd_kernel(*problem), [-2, -1]
    yield "flash_bwd_preprocess", flash_bwd_preprocess_kernel(*problem), [-1]
    yield "flash_bwd_dkdv", flash_bwd_dkdv_kernel(*problem), [-2, -1]
    yield "flash_bwd_dq", flash_bwd_dq_kernel(*problem), [-1]
    yield "flash_decode_split", flash_decode_split_kernel(*decode, "float16", "float32", dec), [-2, -1]
    yield "flash_decode_combine", flash_decode_combine_kernel(decode[0], "float16", "float32", dec), [-1]
    norm = ("float16", "float32", rows)
    bwd = ("float16", "float32", norm_bwd_config(caps, 64, 256))
    yield "rms_norm_fwd", rms_norm_fwd_kernel(64, 256, 1e-6, *norm), [-2, -1]
    yield "rms_norm_bwd", rms_norm_bwd_kernel(64, 256, *bwd), [-2, -1]
    yield "layer_norm_fwd", layer_norm_fwd_kernel(64, 256, 1e-5, *norm), [-3, -2, -1]
    yield "layer_norm_bwd", layer_norm_bwd_kernel(64, 256, *bwd), [-3, -2, -1]
    yield "softmax_bwd", softmax_bwd_kernel(64, 256, *norm), [-1]
    gemv = ("float16", "float32", dequant_config(caps, 1))
    gemm = ("float16", "float32", dequant_config(caps, 64))
    yield "dequant_gemv", dequant_gemv_kernel(256, 512, "int4", 128, True, True, *gemv), [-1]
    yield "dequant_gemm", dequant_gemm_kernel(64, 256, 512, "nf4", 128, True, False, *gemm), [-1]


@pytest.mark.slow
@pytest.mark.parametrize("target", list(TARGETS.values()), ids=list(TARGETS))
def test_every_kernel_compiles_for_gpu_targets(target):
    try:
        resolved, manifest = resolve_target(target)
    except TileError:
        pytest.skip(f"no backend for {target['kind']} installed")
    caps = manifest.capabilities(resolved)
    failed = []
    for name, func, out_idx in _kernels(caps):
        try:
            kernel = tilelang.compile(func, out_idx=out_idx, target=target)
        except TileError as exc:
            failed.append(f"{name}: {str(exc).splitlines()[0]}")
            continue
        assert kernel.get_kernel_source(), name
    assert not failed, failed
