"""The public ops of ``import tile.ops``.

Each takes numpy arrays or torch tensors. Torch tensors go through the op's
``torch.ops.tile.<name>`` custom op (same positional arguments), so autograd and
``torch.compile`` see it; numpy arrays run the kernels directly. The decoding ops
(``dequant_matmul``, ``flash_decode``, ``mla_decode``) run their implementation without the
custom op's dispatch on plain eager tensors, where nothing could tell (``_plain_eager``).
Arguments are checked (layout, dtype, shapes, devices) before anything is compiled; a bad one
raises ``tile.ops.OpArgumentError`` naming it.

Backends: CPU tensors and numpy arrays run on the CPU backend; tensors on a GPU run on
the backend the plug-ins offer for it (``target="auto"``). ``target=`` (keyword) picks a
backend for numpy arrays explicitly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import run
from .errors import bad_argument
from .runtime import is_torch, target_for


def _dtype_text(dtype: Any) -> str | None:
    """``dtype`` (a name, a numpy or torch dtype, or None) as its name (``"bfloat16"``)."""
    if dtype is None or isinstance(dtype, str):
        return dtype
    text = str(dtype)
    return text.removeprefix("torch.") if text.startswith("torch.") else np.dtype(dtype).name


def _torch_dtype(dtype: Any) -> Any:
    """``dtype`` as a torch dtype (or None) for the custom op."""
    import torch

    name = _dtype_text(dtype)
    if name is not None and not isinstance(getattr(torch, name, None), torch.dtype):
        raise bad_argument("matmul", "out_dtype", f"is {name}, not a torch dtype", "pass torch.bfloat16, ...")
    return None if name is None else getattr(torch, name)


def _torch_ops() -> Any:
    """``torch.ops.tile`` (``import tile.ops`` registered it: a torch tensor means torch is installed)."""
    import torch

    return torch.ops.tile


def _plain_eager(*tensors: Any) -> bool:
    """Whether a call on these tensors may run the op's implementation without torch's dispatch.

    ``torch.ops.tile.<name>`` goes through torch's custom-op machinery (autograd wrapper,
    redispatch, a dynamo-disabled frame): about 100 us a call on a 2-core host, more than a
    decoding step's GEMV kernel. A forward-only op skips it when nothing can observe the
    difference: not under ``torch.compile``, ``torch.jit`` tracing or functorch transforms, no
    torch function or dispatch mode active, every tensor a plain ``torch.Tensor`` (not a fake,
    meta or other subclass tensor) that does not require grad. Otherwise the call takes the op.
    """
    import torch

    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
        return False
    if torch._C._are_functorch_transforms_active():
        return False
    for t in tensors:
        if t is None:
            continue
        if type(t) is not torch.Tensor or t.requires_grad or t.device.type == "meta":
            return False
    return True


def matmul(a: Any, b: Any, *, out_dtype: Any = None, target: str | None = None) -> Any:
    """``a @ b`` for a (..., K) and b (K, N) of one dtype: float32, float16, bfloat16 (float32
    accumulation) or float64 (float64 accumulation), stored in that dtype. Differentiable (the
    gradients are matmuls).

    fp8 operands (``torch.float8_e4m3fn`` or ``float8_e5m2``) accumulate in float32 and are
    stored as ``out_dtype``: bfloat16 (default), float16 or float32. They run on targets that
    compute with fp8 (``Capabilities.dtypes``): CUDA sm_89 and sm_90a on fp8 tensor cores
    (mma.sync, wgmma), and the CPU through exact conversions; anywhere else (sm_80, ROCm) is an
    ``OpArgumentError`` naming ``a`` before any compile. Not differentiable. A b whose transpose
    is contiguous (``w.t()`` of an (N, K) weight, as ``torch._scaled_mm`` takes it) is read in
    place; a row-major b is first copied transposed (keep fp8 weights as (N, K) to skip that).

    Example::

        >>> import numpy as np, tile.ops
        >>> float(tile.ops.matmul(np.ones((2, 3), "float32"), np.ones((3, 4), "float32"))[1, 2])
        3.0
    """
    if is_torch(a) and target is None:
        return _torch_ops().matmul(a, b, _torch_dtype(out_dtype))
    out = _dtype_text(out_dtype)
    run.check_matmul(a, b, out)
    return run.matmul_forward(a, b, target_for(a, target), out)


def softmax(x: Any, dim: int = -1, *, target: str | None = None) -> Any:
    """Softmax along ``dim`` (the last axis: other axes are an error naming ``dim``) of a
    float32/float16/bfloat16/float64 array of any rank; accumulates in float32 (float64 for
    float64). Differentiable (a tile backward kernel).

    Example::

        >>> import numpy as np, tile.ops
        >>> float(tile.ops.softmax(np.zeros((2, 4), "float32"))[1, 3])
        0.25
    """
    if is_torch(x) and target is None:
        return _torch_ops().softmax(x, dim)
    run.check_softmax(x, dim)
    return run.softmax_forward(x, target_for(x, target))


def rms_norm(x: Any, weight: Any, eps: float = 1e-6, *, target: str | None = None) -> Any:
    """RMSNorm over the last axis: ``x / sqrt(mean(x**2) + eps) * weight``; x (..., N), weight (N,),
    one float dtype; float32 statistics (float64 for float64). Differentiable in x and weight
    (tile backward kernels).

    Example::

        >>> import numpy as np, tile.ops
        >>> round(float(tile.ops.rms_norm(np.full((1, 4), 3.0, "float32"), np.ones(4, "float32"))[0, 0]), 4)
        1.0
    """
    if is_torch(x) and target is None:
        return _torch_ops().rms_norm(x, weight, eps)
    run.check_norm("rms_norm", x, weight, eps=eps)
    return run.rms_norm_forward(x, weight, eps, target_for(x, target))[0]


def layer_norm(x: Any, weight: Any, bias: Any, eps: float = 1e-5, *, target: str | None = None) -> Any:
    """LayerNorm over the last axis: ``(x - mean) / sqrt(var + eps) * weight + bias``; x (..., N),
    weight and bias (N,), one float dtype. Differentiable in x, weight and bias (tile kernels).

    Example::

        >>> import numpy as np, tile.ops
        >>> x = np.array([[1.0, 3.0]], "float32"); w = np.ones(2, "float32"); b = np.zeros(2, "float32")
        >>> [round(float(v), 3) for v in tile.ops.layer_norm(x, w, b)[0]]
        [-1.0, 1.0]
    """
    if is_torch(x) and target is None:
        return _torch_ops().layer_norm(x, weight, bias, eps)
    run.check_norm("layer_norm", x, weight, bias, eps=eps)
    return run.layer_norm_forward(x, weight, bias, eps, target_for(x, target))[0]


def flash_attention(
    q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None, *, target: str | None = None
) -> Any:
    """``softmax(scale * q @ k^T [+ causal mask]) @ v`` in SDPA's layout: q (batch, heads, seq_q, dim),
    k and v (batch, kv_heads, seq_kv, dim) with kv_heads dividing heads (GQA; MQA with one),
    one float dtype; ``scale`` defaults to ``1/sqrt(dim)``; ``causal`` is SDPA's ``is_causal``
    (query i sees keys j <= i). Differentiable in q, k, v (FlashAttention-2 backward kernels).

    Example::

        >>> import numpy as np, tile.ops
        >>> q = np.zeros((1, 2, 5, 16), "float32"); v = np.ones((1, 1, 5, 16), "float32")
        >>> float(tile.ops.flash_attention(q, q[:, :1], v, causal=True)[0, 1, 4, 3])
        1.0
    """
    if is_torch(q) and target is None:
        return _torch_ops().flash_attention(q, k, v, causal, scale)
    run.check_attention("flash_attention", q, k, v, scale)
    return run.flash_attention_forward(q, k, v, causal, scale, target_for(q, target))[0]


def flash_decode(
    q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None, *, target: str | None = None
) -> Any:
    """Attention for one or a few query tokens against a long key/value cache, split over the
    cache (flash-decoding); layout, dtypes and GQA as ``flash_attention``. With ``causal`` the
    queries are the cache's last ``seq_q`` positions (token s sees keys j <= seq_kv - seq_q + s).
    Forward only.

    Example::

        >>> import numpy as np, tile.ops
        >>> q = np.zeros((1, 4, 1, 16), "float32"); kv = np.ones((1, 2, 300, 16), "float32")
        >>> float(tile.ops.flash_decode(q, kv, kv)[0, 3, 0, 0])
        1.0
    """
    if is_torch(q) and target is None:
        if _plain_eager(q, k, v):
            from .torch_ops import flash_decode_eager

            return flash_decode_eager(q, k, v, causal, scale)
        return _torch_ops().flash_decode(q, k, v, causal, scale)
    run.check_attention("flash_decode", q, k, v, scale)
    return run.flash_decode_forward(q, k, v, causal, scale, target_for(q, target))


def mla_decode(q: Any, q_pe: Any, kv: Any, k_pe: Any, *, target: str | None = None) -> Any:
    """One multi-head latent attention decoding step (FlashMLA): q (B, H, D), q_pe (B, H, P),
    kv (B, S, KH, D) (keys' no-PE part and values), k_pe (B, S, KH, P); KH divides H;
    float32/float16/bfloat16. Returns (B, H, D). Forward only."""
    if is_torch(q) and target is None:
        if _plain_eager(q, q_pe, kv, k_pe):
            from .torch_ops import mla_decode_eager

            return mla_decode_eager(q, q_pe, kv, k_pe)
        return _torch_ops().mla_decode(q, q_pe, kv, k_pe)
    run.check_mla_decode(q, q_pe, kv, k_pe)
    return run.mla_decode_forward(q, q_pe, kv, k_pe, target_for(q, target))


def dequant_matmul(
    a: Any,
    b_packed: Any,
    scale: Any = None,
    zeros: Any = None,
    fmt: str = "int4",
    group_size: int = 128,
    *,
    target: str | None = None,
) -> Any:
    """``a @ dequant(b).T`` for activations a (M, K) (float32/float16/bfloat16) and low-bit weights
    b_packed (N, K // codes_per_byte) uint8 (``tile.ops.pack_codes``); see ``tile.ops.quant`` for the
    formats (int4, int2, nf4, fp4), their group ``scale`` (N, K // group_size) and ``zeros``.
    One activation row (decode) runs a GEMV kernel that streams the packed weights once.
    Forward only."""
    if is_torch(a) and target is None:
        if _plain_eager(a, b_packed, scale, zeros):
            from .torch_ops import dequant_matmul_eager

            return dequant_matmul_eager(a, b_packed, scale, zeros, fmt, group_size)
        return _torch_ops().dequant_matmul(a, b_packed, scale, zeros, fmt, group_size)
    run.check_dequant(a, b_packed, scale, zeros, fmt, group_size)
    return run.dequant_matmul_forward(a, b_packed, scale, zeros, fmt, group_size, target_for(a, target))


def chunk_state(B: Any, x: Any, dt: Any, dA_cumsum: Any, *, target: str | None = None) -> Any:
    """Mamba-2 SSD per-chunk states (batch, nchunks, nheads, headdim, dstate), float32; see
    ``tile.ops.ssd`` for the layouts. Forward only."""
    if is_torch(x) and target is None:
        return _torch_ops().chunk_state(B, x, dt, dA_cumsum)
    run.check_ssd("chunk_state", x, B, dt, dA_cumsum)
    return run.chunk_state_forward(B, x, dt, dA_cumsum, target_for(x, target))


def chunk_scan(
    cb: Any, x: Any, dt: Any, dA_cumsum: Any, C: Any, prev_states: Any, D: Any, *, target: str | None = None
) -> Any:
    """Mamba-2 SSD outputs (batch, seqlen, nheads, headdim) from the states entering each chunk;
    see ``tile.ops.ssd`` for the layouts. Forward only."""
    if is_torch(x) and target is None:
        return _torch_ops().chunk_scan(cb, x, dt, dA_cumsum, C, prev_states, D)
    run.check_ssd("chunk_scan", x, C, dt, dA_cumsum)
    return run.chunk_scan_forward(cb, x, dt, dA_cumsum, C, prev_states, D, target_for(x, target))
