"""Argument checks and kernel launches of every op, for numpy arrays and torch tensors alike.

``check_*`` raise ``OpArgumentError`` naming the argument, before anything is compiled; they
run on fake tensors too (torch.compile tracing), so they read only shapes, dtypes, devices.
``*_forward`` / ``*_backward`` pick the op's config for the target, compile (once per shape,
dtype and target) and launch; their outputs are of the inputs' kind (numpy or torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import mla as _mla
from .. import ssd as _ssd
from ..gemm import FP8_DTYPES, FP8_OUT_DTYPES, fp8_matmul_kernel, matmul_kernel
from ..norm import softmax_kernel
from . import quant as _dequant
from .configs import (
    accum_dtype,
    attention_bwd_fused,
    attention_config,
    column_warp_threads,
    decode_config,
    norm_bwd_config,
    row_config,
    target_capabilities,
)
from .decode import flash_decode_combine_kernel, flash_decode_split_kernel
from .errors import bad_argument
from .flash import (
    flash_bwd_dkdv_kernel,
    flash_bwd_dq_kernel,
    flash_bwd_fused_kernel,
    flash_bwd_preprocess_kernel,
    flash_fwd_kernel,
)
from .norms import (
    norm_bwd_kernel,
    norm_fwd_kernel,
    softmax_bwd_kernel,
)
from .runtime import check_array, check_same, check_shape, compiled, dtype_name, is_torch

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")


def _rows(x: Any) -> tuple[int, int]:
    n = int(x.shape[-1])
    m = 1
    for s in x.shape[:-1]:
        m *= int(s)
    return m, n


def _reshape(x: Any, shape: Sequence[int]) -> Any:
    return x.reshape(tuple(shape))


# --- matmul -----------------------------------------------------------------------------


def check_matmul(a: Any, b: Any, out_dtype: str | None = None) -> None:
    """``out_dtype``: the dtype name of C, ``None`` for the default (see ``matmul_out_dtype``)."""
    check_array("matmul", "a", a, ndim=(2, 3, 4), dtypes=FLOAT_DTYPES + FP8_DTYPES)
    # an fp8 b may be column-major: the fp8 kernel reads its transpose in place
    fp8 = dtype_name(a) in FP8_DTYPES
    check_array("matmul", "b", b, ndim=2, dtypes=FLOAT_DTYPES + FP8_DTYPES, any_strides=fp8)
    check_same("matmul", ("a", "b"), (a, b))
    if int(a.shape[-1]) != int(b.shape[0]):
        raise bad_argument(
            "matmul",
            "b",
            f"has {int(b.shape[0])} rows but a has {int(a.shape[-1])} columns",
            "matmul computes (..., K) @ (K, N)",
        )
    matmul_out_dtype(dtype_name(a), out_dtype)


def matmul_out_dtype(dtype: str, out_dtype: str | None) -> str:
    """The dtype of ``matmul``'s C for ``dtype`` operands: fp8 products are stored as bfloat16
    (default), float16 or float32; other products in their operands' dtype."""
    if dtype in FP8_DTYPES:
        if out_dtype is None:
            return FP8_OUT_DTYPES[0]
        if out_dtype not in FP8_OUT_DTYPES:
            hint = f"an fp8 product is stored as {', '.join(FP8_OUT_DTYPES)}"
            raise bad_argument("matmul", "out_dtype", f"is {out_dtype}", hint)
        return out_dtype
    if out_dtype not in (None, dtype):
        raise bad_argument(
            "matmul",
            "out_dtype",
            f"is {out_dtype} for {dtype} operands",
            f"a {dtype} product is stored as {dtype}: drop out_dtype (it is for fp8 operands)",
        )
    return dtype


def check_fp8_target(dtype: str, target: str) -> None:
    """fp8 operands need a target that computes with them (``Capabilities.dtypes``: CUDA sm_89+
    on its fp8 tensor cores, the CPU through exact conversions): anything else is an error
    naming ``a``, before any compile."""
    resolved, caps = target_capabilities(target)
    if dtype not in caps.dtypes:
        raise bad_argument(
            "matmul",
            "a",
            f"has dtype {dtype}, which target {resolved} does not compute with",
            "fp8 matmul runs on CUDA sm_89 and newer (fp8 tensor cores) and on the CPU; elsewhere "
            "cast the operands to bfloat16 or float16 first",
        )


def _contiguous(x: Any) -> Any:
    return x.contiguous() if is_torch(x) else np.ascontiguousarray(x)


def fp8_matmul_forward(a: Any, b: Any, out_dtype: str | None, target: str) -> Any:
    """``matmul`` of fp8 operands. The kernel reads B's transpose (N, K), K-contiguous as 8-bit
    tensor cores need: a column-major B (the ``.t()`` of an (N, K) weight) is that array, read in
    place; a row-major B is transposed into a copy first (K * N bytes per call; an in-kernel
    transposition through shared memory cost a barrier per byte row)."""
    from ..gemm import gemm_config

    dtype = dtype_name(a)
    check_fp8_target(dtype, target)
    m, k = _rows(a)
    n = int(b.shape[1])
    config = gemm_config(m, n, k, dtype, target)
    out = matmul_out_dtype(dtype, out_dtype)
    kernel = compiled(fp8_matmul_kernel, (-1,), target, m, n, k, dtype, out, config)
    return _reshape(kernel(_reshape(a, (m, k)), _contiguous(b.T)), (*a.shape[:-1], n))


def matmul_forward(a: Any, b: Any, target: str, out_dtype: str | None = None) -> Any:
    from ..gemm import gemm_config

    if dtype_name(a) in FP8_DTYPES:
        return fp8_matmul_forward(a, b, out_dtype, target)
    m, k = _rows(a)
    n = int(b.shape[1])
    dtype = dtype_name(a)
    config = gemm_config(m, n, k, dtype, target)
    kernel = compiled(matmul_kernel, (-1,), target, m, n, k, dtype, accum_dtype(dtype), tiling=config)
    return _reshape(kernel(_reshape(a, (m, k)), b), (*a.shape[:-1], n))


# --- softmax ----------------------------------------------------------------------------


def check_softmax(x: Any, dim: int) -> None:
    check_array("softmax", "x", x, dtypes=FLOAT_DTYPES)
    if len(x.shape) == 0 or not -len(x.shape) <= dim < len(x.shape):
        raise bad_argument(
            "softmax", "dim", f"is {dim}, outside the {len(x.shape)} dimensions of x", "pass an axis of x"
        )
    if dim % len(x.shape) != len(x.shape) - 1:
        raise bad_argument(
            "softmax",
            "dim",
            f"is {dim}; tile's softmax reduces the last axis only",
            "move the axis last (x.movedim(dim, -1).contiguous()) and pass dim=-1",
        )


def softmax_forward(x: Any, target: str) -> Any:
    m, n = _rows(x)
    dtype = dtype_name(x)
    tiling = row_config(target_capabilities(target)[1], m, n)
    kernel = compiled(softmax_kernel, (-1,), target, m, n, dtype, accum_dtype(dtype), tiling=tiling)
    return _reshape(kernel(_reshape(x, (m, n))), x.shape)


def softmax_backward(dy: Any, y: Any, target: str) -> Any:
    m, n = _rows(y)
    dtype = dtype_name(y)
    tiling = row_config(target_capabilities(target)[1], m, n)
    kernel = compiled(softmax_bwd_kernel, (-1,), target, m, n, dtype, accum_dtype(dtype), tiling)
    return _reshape(kernel(_reshape(dy, (m, n)), _reshape(y, (m, n))), y.shape)


# --- RMSNorm / LayerNorm ---------------------------------------------------------------


def check_norm(op: str, x: Any, weight: Any, bias: Any = None, eps: float = 1e-6) -> None:
    check_array(op, "x", x, dtypes=FLOAT_DTYPES)
    if len(x.shape) == 0:
        raise bad_argument(op, "x", "is a scalar", "pass (..., N) rows")
    n = int(x.shape[-1])
    names, arrays = ["x", "weight"], [x, weight]
    check_array(op, "weight", weight, ndim=1)
    if bias is not None:
        check_array(op, "bias", bias, ndim=1)
        names.append("bias")
        arrays.append(bias)
    check_same(op, names, arrays)
    for name, t in zip(names[1:], arrays[1:], strict=True):
        if int(t.shape[0]) != n:
            raise bad_argument(
                op,
                name,
                f"has shape {tuple(t.shape)}; x has rows of {n}",
                f"pass a ({n},) {name}: one per element of x's last axis",
            )
    if not eps > 0:
        raise bad_argument(op, "eps", f"is {eps}", "pass a small positive eps, e.g. 1e-6")


def norm_forward(x: Any, params: tuple[Any, ...], eps: float, target: str) -> tuple[Any, ...]:
    """RMSNorm (``params = (weight,)``): ``(y, rstd)``; LayerNorm (``(weight, bias)``):
    ``(y, mean, rstd)``."""
    m, n = _rows(x)
    dtype = dtype_name(x)
    tiling = row_config(target_capabilities(target)[1], m, n)
    centered = len(params) == 2
    outputs = (-3, -2, -1) if centered else (-2, -1)
    args = (m, n, float(eps), dtype, accum_dtype(dtype), tiling)
    kernel = compiled(norm_fwd_kernel, outputs, target, *args, centered=centered)
    y, *stats = kernel(_reshape(x, (m, n)), *params)
    return (_reshape(y, x.shape), *stats)


def norm_backward(dy: Any, x: Any, weight: Any, stats: tuple[Any, ...], target: str) -> tuple[Any, ...]:
    """RMSNorm (``stats = (rstd,)``): ``(dx, dw)``; LayerNorm (``(mean, rstd)``): ``(dx, dw, db)``."""
    m, n = _rows(x)
    dtype = dtype_name(x)
    tiling = norm_bwd_config(target_capabilities(target)[1], m, n)
    centered = len(stats) == 2
    outputs = (-3, -2, -1) if centered else (-2, -1)
    acc = accum_dtype(dtype)
    kernel = compiled(norm_bwd_kernel, outputs, target, m, n, dtype, acc, tiling, centered=centered)
    dx, *partials = kernel(_reshape(dy, (m, n)), _reshape(x, (m, n)), weight, *stats)
    return (_reshape(dx, x.shape), *(partial.sum(0) for partial in partials))


def rms_norm_forward(x: Any, weight: Any, eps: float, target: str) -> tuple[Any, Any]:
    y, rstd = norm_forward(x, (weight,), eps, target)
    return y, rstd


def rms_norm_backward(dy: Any, x: Any, weight: Any, rstd: Any, target: str) -> tuple[Any, Any]:
    dx, dw = norm_backward(dy, x, weight, (rstd,), target)
    return dx, dw


def layer_norm_forward(x: Any, weight: Any, bias: Any, eps: float, target: str) -> tuple[Any, Any, Any]:
    y, mean, rstd = norm_forward(x, (weight, bias), eps, target)
    return y, mean, rstd


def layer_norm_backward(
    dy: Any, x: Any, weight: Any, mean: Any, rstd: Any, target: str
) -> tuple[Any, Any, Any]:
    dx, dw, db = norm_backward(dy, x, weight, (mean, rstd), target)
    return dx, dw, db


# --- attention --------------------------------------------------------------------------


def check_attention(op: str, q: Any, k: Any, v: Any, scale: float | None) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_array(op, name, t, ndim=4, dtypes=FLOAT_DTYPES)
    check_same(op, ("q", "k", "v"), (q, k, v))
    batch, heads, _, dim = (int(s) for s in q.shape)
    if tuple(k.shape) != tuple(v.shape):
        raise bad_argument(
            op,
            "v",
            f"has shape {tuple(v.shape)} but k has {tuple(k.shape)}",
            "k and v are (batch, kv_heads, seq_kv, dim) of one shape",
        )
    kb, kv_heads, _, kd = (int(s) for s in k.shape)
    if kb != batch or kd != dim:
        raise bad_argument(
            op,
            "k",
            f"has shape {tuple(k.shape)}, which does not match q {tuple(q.shape)}",
            "q is (batch, heads, seq_q, dim); k and v (batch, kv_heads, seq_kv, dim), "
            "SDPA's layout (transpose (batch, seq, heads, dim) tensors with .transpose(1, 2))",
        )
    if heads % kv_heads:
        raise bad_argument(
            op,
            "k",
            f"has {kv_heads} heads, which do not divide q's {heads} heads",
            "for grouped-query attention kv_heads must divide heads",
        )
    if scale is not None and not math.isfinite(scale):
        raise bad_argument(op, "scale", f"is {scale}", "pass a finite softmax scale or None (1/sqrt(dim))")


def _attention_args(q: Any, k: Any, scale: float | None) -> tuple[tuple[int, ...], float]:
    """``((batch, heads, kv_heads, seq_q, seq_kv, dim), sm_scale)``: the leading arguments of
    every attention kernel and the softmax scale."""
    batch, heads, seq_q, dim = (int(s) for s in q.shape)
    kv_heads, seq_kv = int(k.shape[1]), int(k.shape[2])
    sm_scale = float(scale) if scale is not None else 1.0 / math.sqrt(dim)
    return (batch, heads, kv_heads, seq_q, seq_kv, dim), sm_scale


def _flash_args(q: Any, k: Any, causal: bool, scale: float | None, target: str) -> tuple[Any, ...]:
    """The arguments of the FlashAttention forward and backward kernels, with the tiling
    ``attention_config`` picks for ``target``."""
    dims, sm_scale = _attention_args(q, k, scale)
    dtype = dtype_name(q)
    tiling = attention_config(target_capabilities(target)[1], dims[3], dims[4], dims[5], dtype)
    return (*dims, bool(causal), sm_scale, dtype, accum_dtype(dtype), tiling)


def flash_attention_forward(
    q: Any, k: Any, v: Any, causal: bool, scale: float | None, target: str
) -> tuple[Any, Any]:
    kernel = compiled(flash_fwd_kernel, (-2, -1), target, *_flash_args(q, k, causal, scale, target))
    out, lse = kernel(q, k, v)
    return out, lse


def flash_attention_backward(
    dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, causal: bool, scale: float | None, target: str
) -> tuple[Any, Any, Any]:
    args = _flash_args(q, k, causal, scale, target)
    preprocess = compiled(flash_bwd_preprocess_kernel, (-1,), target, *args)
    delta = preprocess(out, dout)
    batch, heads, kv_heads, seq_q, _, dim, *_, tiling = args
    caps = target_capabilities(target)[1]
    splits = int(attention_bwd_fused(caps, tiling, batch * kv_heads, heads // kv_heads, seq_q, dim))
    if splits:
        fused = compiled(flash_bwd_fused_kernel, (-3, -2, -1), target, *args, head_splits=splits)
        dq, dk, dv = fused(q, k, v, dout, lse, delta)
        if splits > 1:  # each split's share of dK and dV, in the accumulator's type
            dk, dv = (_summed_like(part, k) for part in (dk, dv))
        return dq, dk, dv
    dkdv = compiled(flash_bwd_dkdv_kernel, (-2, -1), target, *args)
    dq_kernel = compiled(flash_bwd_dq_kernel, (-1,), target, *args)
    dk, dv = dkdv(q, k, v, dout, lse, delta)
    dq = dq_kernel(q, k, v, dout, lse, delta)
    return dq, dk, dv


def _summed_like(parts: Any, like: Any) -> Any:
    """``parts`` summed over its first axis, in ``like``'s dtype (numpy or torch alike)."""
    total = parts.sum(0)
    return total.to(like.dtype) if is_torch(total) else total.astype(like.dtype)


def flash_decode_forward(q: Any, k: Any, v: Any, causal: bool, scale: float | None, target: str) -> Any:
    dims, sm_scale = _attention_args(q, k, scale)
    batch, heads, kv_heads, seq_q, seq_kv, dim = dims
    dtype = dtype_name(q)
    acc = accum_dtype(dtype)
    rows = heads // kv_heads * seq_q
    cfg = decode_config(target_capabilities(target)[1], rows, seq_kv, dim, dtype)
    causal = bool(causal)
    split = compiled(flash_decode_split_kernel, (-2, -1), target, dims, sm_scale, causal, dtype, acc, cfg)
    combine = compiled(flash_decode_combine_kernel, (-1,), target, dims, dtype, acc, cfg)
    partial_out, partial_lse = split(_reshape(q, (batch, kv_heads, rows, dim)), k, v)
    out = combine(
        _reshape(partial_out, (batch, heads * seq_q, cfg.num_splits, dim)),
        _reshape(partial_lse, (batch, heads * seq_q, cfg.num_splits)),
    )
    return _reshape(out, (batch, heads, seq_q, dim))


# --- MLA decode, dequantized GEMM, SSD (forward only) ------------------------------------


def check_mla_decode(q: Any, q_pe: Any, kv: Any, k_pe: Any) -> None:
    op = "mla_decode"
    check_array(op, "q", q, ndim=3, dtypes=("float32", "float16", "bfloat16"))
    check_array(op, "q_pe", q_pe, ndim=3)
    check_array(op, "kv", kv, ndim=4)
    check_array(op, "k_pe", k_pe, ndim=4)
    check_same(op, ("q", "q_pe", "kv", "k_pe"), (q, q_pe, kv, k_pe))
    batch, heads, dim = (int(s) for s in q.shape)
    _, seq, kv_heads, _ = (int(s) for s in kv.shape)
    pe = int(q_pe.shape[-1])
    layout = "q (B, H, D), q_pe (B, H, P), kv (B, S, KH, D), k_pe (B, S, KH, P)"
    check_shape(op, "q_pe", q_pe, (batch, heads, pe), layout)
    check_shape(op, "kv", kv, (batch, seq, kv_heads, dim), layout)
    check_shape(op, "k_pe", k_pe, (batch, seq, kv_heads, pe), layout)
    if heads % kv_heads:
        raise bad_argument(
            op, "kv", f"has {kv_heads} heads, which do not divide q's {heads}", "kv_heads must divide heads"
        )


def mla_decode_forward(q: Any, q_pe: Any, kv: Any, k_pe: Any, target: str) -> Any:
    batch, heads, dim = (int(s) for s in q.shape)
    _, seq, kv_heads, _ = (int(s) for s in kv.shape)
    groups = heads // kv_heads
    block_H = min(64, groups)
    while groups % block_H:
        block_H //= 2
    caps = target_capabilities(target)[1]
    block_N = decode_config(caps, groups, seq, dim, dtype_name(q)).block_N
    kernel = compiled(
        _mla.flash_mla_decode_kernel,
        (-1,),
        target,
        batch,
        heads,
        kv_heads,
        seq,
        dim,
        int(q_pe.shape[-1]),
        block_N,
        block_H,
        dtype_name(q),
        threads=column_warp_threads(caps, block_N, dim),
    )
    return kernel(q, q_pe, kv, k_pe)


def check_ssd(op: str, x: Any, bc: Any, dt: Any, dA_cumsum: Any) -> None:
    check_array(op, "x", x, ndim=4, dtypes=("float32", "float16"))
    check_array(op, "B" if op == "chunk_state" else "C", bc, ndim=4)
    check_array(op, "dt", dt, ndim=4, dtypes=("float32",))
    check_array(op, "dA_cumsum", dA_cumsum, ndim=4, dtypes=("float32",))
    batch, seqlen, nheads, _ = (int(s) for s in x.shape)
    ngroups = int(bc.shape[2])
    chunk = int(dt.shape[3])
    if nheads % ngroups:
        raise bad_argument(
            op,
            "B" if op == "chunk_state" else "C",
            f"has {ngroups} groups, which do not divide x's {nheads} heads",
            "ngroups must divide nheads",
        )
    if seqlen % chunk:
        raise bad_argument(
            op,
            "dt",
            f"has chunks of {chunk}, which do not divide seqlen {seqlen}",
            "pad the sequence to a multiple of chunk_size",
        )
    want = (batch, nheads, seqlen // chunk, chunk)
    for name, t in (("dt", dt), ("dA_cumsum", dA_cumsum)):
        check_shape(op, name, t, want, "(batch, nheads, nchunks, chunk_size)")


def ssd_block(chunk: int) -> int:
    return min(64, chunk)


def chunk_state_forward(B: Any, x: Any, dt: Any, dA_cumsum: Any, target: str) -> Any:
    return _ssd.chunk_state(B, x, dt, dA_cumsum, block=ssd_block(int(dt.shape[3])), target=target)


def chunk_scan_forward(
    cb: Any, x: Any, dt: Any, dA_cumsum: Any, C: Any, prev_states: Any, D: Any, target: str
) -> Any:
    return _ssd.chunk_scan(
        cb, x, dt, dA_cumsum, C, prev_states, D, block=ssd_block(int(dt.shape[3])), target=target
    )


def check_dequant(a: Any, b_packed: Any, scale: Any, zeros: Any, fmt: str, group_size: int) -> None:
    op = "dequant_matmul"
    if fmt not in _dequant.FORMATS:
        raise bad_argument(op, "fmt", f"is {fmt!r}", f"use one of {', '.join(_dequant.FORMATS)}")
    check_array(op, "a", a, ndim=2, dtypes=("float32", "float16", "bfloat16"))
    check_array(op, "b_packed", b_packed, ndim=2, dtypes=("uint8",))
    k = int(a.shape[1])
    per_byte = _dequant.CODES_PER_BYTE[fmt]
    n = int(b_packed.shape[0])
    if k % per_byte or int(b_packed.shape[1]) != k // per_byte:
        raise bad_argument(
            op,
            "b_packed",
            f"has shape {tuple(b_packed.shape)}; {fmt} packs {per_byte} codes a "
            f"byte, so a's K = {k} needs (N, {k // per_byte})",
            "pack with tile.ops.pack_codes",
        )
    if group_size <= 0 or k % group_size or group_size % per_byte:
        raise bad_argument(
            op,
            "group_size",
            f"is {group_size}; it must divide K = {k} and be a multiple of {per_byte}",
            "pick a group size that divides K (32, 64, 128)",
        )
    for name, t, allowed in (("scale", scale, True), ("zeros", zeros, fmt in _dequant.ZERO_FORMATS)):
        if t is None:
            if name == "scale" and fmt in _dequant.SCALE_REQUIRED:
                raise bad_argument(
                    op, "scale", "is missing", f"{fmt} weights need a (N, K // group_size) scale"
                )
            continue
        if not allowed:
            raise bad_argument(
                op, name, f"is given, but {fmt} weights have no zero points", "pass zeros=None"
            )
        check_array(op, name, t, ndim=2)
        check_same(op, ("a", name), (a, t))
        check_shape(op, name, t, (n, k // group_size), "one value per (row of b, group of group_size in K)")
    if is_torch(a) and is_torch(b_packed) and a.device != b_packed.device:
        raise bad_argument(
            op,
            "b_packed",
            f"is on {b_packed.device} but a is on {a.device}",
            "move the tensors to one device",
        )


def dequant_matmul_forward(
    a: Any, b_packed: Any, scale: Any, zeros: Any, fmt: str, group_size: int, target: str
) -> Any:
    return _dequant.run_dequant_matmul(a, b_packed, scale, zeros, fmt, group_size, target)
