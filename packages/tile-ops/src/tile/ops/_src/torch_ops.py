"""``torch.ops.tile.*``: every op as a torch custom op with a fake (meta) kernel and, where it has
one, a backward.

Importing this module registers the ops (``import tile.ops`` does when torch is installed).
Each public op takes the positional arguments of its ``tile.ops`` function. The ops whose
backward needs more than their inputs and output (FlashAttention's log-sum-exp, the norms'
row statistics) are thin ``CompositeImplicitAutograd`` wrappers over a private
``_<name>_fwd`` op that returns those too and carries the autograd formula, so that
``torch.compile`` traces through to the op that saves them.

The implementations run on any device: the target comes from the tensors' device through
the backend plug-ins. They accept any strides (a non-contiguous input is copied): in a
compiled graph strides are the compiler's choice, not the caller's.

(No ``from __future__ import annotations`` here: ``torch.library`` reads the annotations.)
"""

from typing import Any

import torch
from torch import Tensor

from . import run
from .configs import accum_dtype
from .errors import bad_argument
from .runtime import dtype_name, target_for

LIB = torch.library.Library("tile", "FRAGMENT")


def _c(x: Tensor) -> Tensor:
    return x.contiguous()


def _acc(x: Tensor) -> torch.dtype:
    return getattr(torch, accum_dtype(dtype_name(x)))


def _rows(x: Tensor) -> int:
    return x.numel() // x.shape[-1] if x.dim() else 1


# --- matmul -----------------------------------------------------------------------------


def _out_name(out_dtype: torch.dtype | None) -> str | None:
    return None if out_dtype is None else str(out_dtype).removeprefix("torch.")


@torch.library.custom_op("tile::matmul", mutates_args=())
def matmul(a: Tensor, b: Tensor, out_dtype: torch.dtype | None = None) -> Tensor:
    out = _out_name(out_dtype)
    run.check_matmul(a, b, out)
    # b as given to an fp8 matmul: it reads a column-major b in place
    return run.matmul_forward(_c(a), b if dtype_name(b) in run.FP8_DTYPES else _c(b), target_for(a), out)


@matmul.register_fake
def _(a: Tensor, b: Tensor, out_dtype: torch.dtype | None = None) -> Tensor:
    run.check_matmul(a, b, _out_name(out_dtype))
    dtype = getattr(torch, run.matmul_out_dtype(dtype_name(a), _out_name(out_dtype)))
    return a.new_empty((*a.shape[:-1], b.shape[1]), dtype=dtype)


def _matmul_setup(ctx, inputs, output):  # type: ignore[no-untyped-def]
    ctx.save_for_backward(*inputs[:2])


def _matmul_backward(ctx, grad):  # type: ignore[no-untyped-def]
    a, b = ctx.saved_tensors
    if dtype_name(a) in run.FP8_DTYPES:
        raise bad_argument("matmul", "a", f"is {dtype_name(a)}: an fp8 matmul has no backward",
                           "compute gradients through a bfloat16 matmul")
    grad = grad.contiguous()
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = torch.ops.tile.matmul(grad, b.t().contiguous())
    if ctx.needs_input_grad[1]:
        k, n = b.shape
        grad_b = torch.ops.tile.matmul(a.reshape(-1, k).t().contiguous(), grad.reshape(-1, n))
    return grad_a, grad_b, None


matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)


# --- softmax ----------------------------------------------------------------------------


@torch.library.custom_op("tile::softmax", mutates_args=())
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    run.check_softmax(x, dim)
    return run.softmax_forward(_c(x), target_for(x))


@softmax.register_fake
def _(x: Tensor, dim: int = -1) -> Tensor:
    run.check_softmax(x, dim)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("tile::_softmax_bwd", mutates_args=())
def _softmax_bwd(grad: Tensor, y: Tensor) -> Tensor:
    return run.softmax_backward(_c(grad), _c(y), target_for(y))


@_softmax_bwd.register_fake
def _(grad: Tensor, y: Tensor) -> Tensor:
    return torch.empty_like(y, memory_format=torch.contiguous_format)


def _softmax_setup(ctx, inputs, output):  # type: ignore[no-untyped-def]
    ctx.save_for_backward(output)


def _softmax_backward(ctx, grad):  # type: ignore[no-untyped-def]
    (y,) = ctx.saved_tensors
    return torch.ops.tile._softmax_bwd(grad, y), None


softmax.register_autograd(_softmax_backward, setup_context=_softmax_setup)


# --- RMSNorm ----------------------------------------------------------------------------


@torch.library.custom_op("tile::_rms_norm_fwd", mutates_args=())
def _rms_norm_fwd(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    run.check_norm("rms_norm", x, weight, eps=eps)
    return run.rms_norm_forward(_c(x), _c(weight), eps, target_for(x))


@_rms_norm_fwd.register_fake
def _(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    run.check_norm("rms_norm", x, weight, eps=eps)
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(_rows(x), dtype=_acc(x))


@torch.library.custom_op("tile::_rms_norm_bwd", mutates_args=())
def _rms_norm_bwd(grad: Tensor, x: Tensor, weight: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor]:
    dx, dw = run.rms_norm_backward(_c(grad), _c(x), _c(weight), rstd, target_for(x))
    return dx, dw.to(weight.dtype)


@_rms_norm_bwd.register_fake
def _(grad: Tensor, x: Tensor, weight: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(weight)


def _rms_norm_setup(ctx, inputs, output):  # type: ignore[no-untyped-def]
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])


def _rms_norm_backward(ctx, grad, _grad_rstd):  # type: ignore[no-untyped-def]
    x, weight, rstd = ctx.saved_tensors
    dx, dw = torch.ops.tile._rms_norm_bwd(grad, x, weight, rstd)
    return dx, dw, None


_rms_norm_fwd.register_autograd(_rms_norm_backward, setup_context=_rms_norm_setup)

LIB.define("rms_norm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor")


def _rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    return torch.ops.tile._rms_norm_fwd(x, weight, eps)[0]


LIB.impl("rms_norm", _rms_norm, "CompositeImplicitAutograd")


# --- LayerNorm --------------------------------------------------------------------------


@torch.library.custom_op("tile::_layer_norm_fwd", mutates_args=())
def _layer_norm_fwd(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    run.check_norm("layer_norm", x, weight, bias, eps=eps)
    return run.layer_norm_forward(_c(x), _c(weight), _c(bias), eps, target_for(x))


@_layer_norm_fwd.register_fake
def _(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    run.check_norm("layer_norm", x, weight, bias, eps=eps)
    stats = x.new_empty(_rows(x), dtype=_acc(x))
    return torch.empty_like(x, memory_format=torch.contiguous_format), stats, torch.empty_like(stats)


@torch.library.custom_op("tile::_layer_norm_bwd", mutates_args=())
def _layer_norm_bwd(
    grad: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    dx, dw, db = run.layer_norm_backward(_c(grad), _c(x), _c(weight), mean, rstd, target_for(x))
    return dx, dw.to(weight.dtype), db.to(weight.dtype)


@_layer_norm_bwd.register_fake
def _(grad: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return (
        torch.empty_like(x, memory_format=torch.contiguous_format),
        torch.empty_like(weight),
        torch.empty_like(weight),
    )


def _layer_norm_setup(ctx, inputs, output):  # type: ignore[no-untyped-def]
    x, weight, _bias, _ = inputs
    ctx.save_for_backward(x, weight, output[1], output[2])


def _layer_norm_backward(ctx, grad, _grad_mean, _grad_rstd):  # type: ignore[no-untyped-def]
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dw, db = torch.ops.tile._layer_norm_bwd(grad, x, weight, mean, rstd)
    return dx, dw, db, None


_layer_norm_fwd.register_autograd(_layer_norm_backward, setup_context=_layer_norm_setup)

LIB.define("layer_norm(Tensor x, Tensor weight, Tensor bias, float eps=1e-05) -> Tensor")


def _layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    return torch.ops.tile._layer_norm_fwd(x, weight, bias, eps)[0]


LIB.impl("layer_norm", _layer_norm, "CompositeImplicitAutograd")


# --- FlashAttention ---------------------------------------------------------------------


@torch.library.custom_op("tile::_flash_attention_fwd", mutates_args=())
def _flash_attention_fwd(
    q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None
) -> tuple[Tensor, Tensor]:
    run.check_attention("flash_attention", q, k, v, scale)
    return run.flash_attention_forward(_c(q), _c(k), _c(v), causal, scale, target_for(q))


@_flash_attention_fwd.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None) -> tuple[Tensor, Tensor]:
    run.check_attention("flash_attention", q, k, v, scale)
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty(
        q.shape[:-1], dtype=_acc(q)
    )


@torch.library.custom_op("tile::_flash_attention_bwd", mutates_args=())
def _flash_attention_bwd(
    grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, causal: bool, scale: float | None
) -> tuple[Tensor, Tensor, Tensor]:
    return run.flash_attention_backward(
        _c(grad), _c(q), _c(k), _c(v), _c(out), _c(lse), causal, scale, target_for(q)
    )


@_flash_attention_bwd.register_fake
def _(
    grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, causal: bool, scale: float | None
) -> tuple[Tensor, Tensor, Tensor]:
    fresh = torch.contiguous_format
    return (
        torch.empty_like(q, memory_format=fresh),
        torch.empty_like(k, memory_format=fresh),
        torch.empty_like(v, memory_format=fresh),
    )


def _flash_attention_setup(ctx, inputs, output):  # type: ignore[no-untyped-def]
    q, k, v, causal, scale = inputs
    ctx.causal, ctx.scale = causal, scale
    ctx.save_for_backward(q, k, v, *output)


def _flash_attention_backward(ctx, grad, _grad_lse):  # type: ignore[no-untyped-def]
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.tile._flash_attention_bwd(grad, q, k, v, out, lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


_flash_attention_fwd.register_autograd(_flash_attention_backward, setup_context=_flash_attention_setup)

LIB.define("flash_attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None) -> Tensor")


def _flash_attention(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None
) -> Tensor:
    return torch.ops.tile._flash_attention_fwd(q, k, v, causal, scale)[0]


LIB.impl("flash_attention", _flash_attention, "CompositeImplicitAutograd")


# --- forward-only ops -------------------------------------------------------------------


def flash_decode_eager(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None
) -> Tensor:
    """The implementation of ``torch.ops.tile.flash_decode`` (see ``dequant_matmul_eager``)."""
    run.check_attention("flash_decode", q, k, v, scale)
    return run.flash_decode_forward(_c(q), _c(k), _c(v), causal, scale, target_for(q))


flash_decode = torch.library.custom_op("tile::flash_decode", flash_decode_eager, mutates_args=())


@flash_decode.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float | None = None) -> Tensor:
    run.check_attention("flash_decode", q, k, v, scale)
    return torch.empty_like(q, memory_format=torch.contiguous_format)


def mla_decode_eager(q: Tensor, q_pe: Tensor, kv: Tensor, k_pe: Tensor) -> Tensor:
    """The implementation of ``torch.ops.tile.mla_decode`` (see ``dequant_matmul_eager``)."""
    run.check_mla_decode(q, q_pe, kv, k_pe)
    return run.mla_decode_forward(_c(q), _c(q_pe), _c(kv), _c(k_pe), target_for(q))


mla_decode = torch.library.custom_op("tile::mla_decode", mla_decode_eager, mutates_args=())


@mla_decode.register_fake
def _(q: Tensor, q_pe: Tensor, kv: Tensor, k_pe: Tensor) -> Tensor:
    run.check_mla_decode(q, q_pe, kv, k_pe)
    return torch.empty_like(q, memory_format=torch.contiguous_format)


def dequant_matmul_eager(
    a: Tensor,
    b_packed: Tensor,
    scale: Tensor | None = None,
    zeros: Tensor | None = None,
    fmt: str = "int4",
    group_size: int = 128,
) -> Tensor:
    """The implementation of ``torch.ops.tile.dequant_matmul`` (``tile.ops.dequant_matmul``
    calls it directly for plain eager tensors, ``api._plain_eager``)."""
    run.check_dequant(a, b_packed, scale, zeros, fmt, group_size)
    return run.dequant_matmul_forward(
        _c(a),
        _c(b_packed),
        None if scale is None else _c(scale),
        None if zeros is None else _c(zeros),
        fmt,
        group_size,
        target_for(a),
    )


dequant_matmul = torch.library.custom_op("tile::dequant_matmul", dequant_matmul_eager, mutates_args=())


@dequant_matmul.register_fake
def _(a: Tensor, b_packed: Tensor, *options: Any) -> Tensor:
    # the dispatcher passes every argument of the schema positionally, defaults filled in
    run.check_dequant(a, b_packed, *options)
    return a.new_empty((a.shape[0], b_packed.shape[0]))


@torch.library.custom_op("tile::chunk_state", mutates_args=())
def chunk_state(B: Tensor, x: Tensor, dt: Tensor, dA_cumsum: Tensor) -> Tensor:
    run.check_ssd("chunk_state", x, B, dt, dA_cumsum)
    return run.chunk_state_forward(_c(B), _c(x), _c(dt), _c(dA_cumsum), target_for(x))


@chunk_state.register_fake
def _(B: Tensor, x: Tensor, dt: Tensor, dA_cumsum: Tensor) -> Tensor:
    run.check_ssd("chunk_state", x, B, dt, dA_cumsum)
    batch, _, nheads, headdim = x.shape
    return x.new_empty((batch, dt.shape[2], nheads, headdim, B.shape[3]), dtype=torch.float32)


@torch.library.custom_op("tile::chunk_scan", mutates_args=())
def chunk_scan(
    cb: Tensor, x: Tensor, dt: Tensor, dA_cumsum: Tensor, C: Tensor, prev_states: Tensor, D: Tensor
) -> Tensor:
    run.check_ssd("chunk_scan", x, C, dt, dA_cumsum)
    return run.chunk_scan_forward(
        _c(cb), _c(x), _c(dt), _c(dA_cumsum), _c(C), _c(prev_states), _c(D), target_for(x)
    )


@chunk_scan.register_fake
def _(
    cb: Tensor, x: Tensor, dt: Tensor, dA_cumsum: Tensor, C: Tensor, prev_states: Tensor, D: Tensor
) -> Tensor:
    run.check_ssd("chunk_scan", x, C, dt, dA_cumsum)
    return torch.empty_like(x, memory_format=torch.contiguous_format)
