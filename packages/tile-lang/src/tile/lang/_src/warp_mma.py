"""Warp matrix instructions written by hand (expert tier, CUDA sm_80+): ``T.ptx_ldmatrix``
and ``T.ptx_mma``, with TileLang's argument conventions.

Each thread names its own registers: ``ldmatrix`` gives every lane one 16-byte row
address and fills the warp's registers with 8x8 matrices of 16-bit elements;
``mma.sync`` multiplies the fragments the 32 lanes hold together (PTX "Warp-level Matrix
Instructions"). They lower to the CUDA backend's device helpers (``tile_ldmatrix_x*``,
``tile_mma_*``, which the CPU emulator also implements); a target without them refuses the
kernel at the call (``Capabilities.warp_matrix_calls``, checked by ``check_resources``).

Example (one m16n8k16 product; A_local/B_local/C_local are per-thread arrays)::

    T.ptx_ldmatrix(False, 4, T.access_ptr(A_shared[tx % 16, tx // 16 * 8]), T.access_ptr(A_local[0]))
    T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32",
              A_local.data, 0, B_local.data, 0, C_local.data, 0, False)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.ir.expr import TensorLoad  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.annotations import WARP_MATRIX_CALLS
from tile.layout import dtype_bits

from ..errors import TileTypeError
from .compat_wgmma import _buffer_of_data
from .session import record_thread_atomic


@dataclasses.dataclass(frozen=True)
class MmaForm:
    """One ``mma.sync`` form of the CUDA backend's device header."""

    helper: str
    operand: str  # element type of A and B buffers
    accumulator: str  # element type of C


MMA_FORMS: dict[tuple[str, str, str], MmaForm] = {
    ("m16n8k16", "fp16", "fp32"): MmaForm("tile_mma_m16n8k16_f16_f32", "float16", "float32"),
    ("m16n8k16", "fp16", "fp16"): MmaForm("tile_mma_m16n8k16_f16_f16", "float16", "float16"),
    ("m16n8k16", "bf16", "fp32"): MmaForm("tile_mma_m16n8k16_bf16_f32", "bfloat16", "float32"),
    ("m16n8k32", "int8", "int32"): MmaForm("tile_mma_m16n8k32_s8_s32", "int8", "int32"),
    ("m16n8k32", "uint8", "int32"): MmaForm("tile_mma_m16n8k32_u8_s32", "uint8", "int32"),
    ("m16n8k8", "tf32", "fp32"): MmaForm("tile_mma_m16n8k8_tf32_f32", "float32", "float32"),
}
"""``(shape, A/B type, C type)`` -> the helper; types as PTX abbreviates them."""

_ABBREVIATIONS = {
    "float16": "fp16", "f16": "fp16", "bfloat16": "bf16", "float32": "fp32", "f32": "fp32",
    "s8": "int8", "u8": "uint8", "s32": "int32", "tfloat32": "tf32", "custom[tfloat32]": "tf32",
}  # fmt: skip


def _abbreviation(dtype: Any) -> str:
    name = str(dtype)
    return _ABBREVIATIONS.get(name, name)


def _static_bool(value: Any, what: str) -> bool:
    if isinstance(value, bool | int):
        return bool(value)
    if isinstance(value, tirx.IntImm):
        return bool(value.value)
    raise TileTypeError(f"{what} must be a constant", hint="pass True or False (T.bool(False) also works)")


def _flat_offset(buffer: Any, indices: Any) -> Any:
    offset: Any = tirx.const(0, "int32")
    for index, extent in zip(indices, buffer.shape, strict=True):
        offset = offset * extent + index
    return offset


def _element_of(value: Any, what: str) -> tuple[Any, Any]:
    """``(X, flat offset)`` for ``T.access_ptr(X[...])``, an element ``X[...]`` or a buffer ``X``."""
    if isinstance(value, ir.Call) and getattr(value.op, "name", "") == "tirx.address_of":
        value = value.args[0]
    if isinstance(value, TensorLoad):
        return value.source, _flat_offset(value.source, value.indices)
    if tirx.is_buffer_var(value):
        return value, tirx.const(0, "int32")
    raise TileTypeError(
        f"{what} takes T.access_ptr(X[...]), an element X[...] or a buffer, got {type(value).__name__}",
        hint="write e.g. T.access_ptr(A_shared[row, col])",
    )


def _data_element(data: Any, offset: Any, dtype: str | None, what: str) -> tuple[Any, Any]:
    """``(X, offset)`` for ``X.data`` (or ``X``) and an element offset, checking ``X``'s type."""
    buffer = _buffer_of_data(data)
    if not tirx.is_buffer_var(buffer):
        raise TileTypeError(
            f"{what} takes a buffer's data (X.data) and an element offset, got {type(data).__name__}",
            hint="pass A_local.data, 0 (TileLang's convention) for the buffer A_local",
        )
    if dtype is not None and str(buffer.dtype) != dtype:
        raise TileTypeError(
            f"{what}: buffer {buffer.name} holds {buffer.dtype}, the instruction reads {dtype}",
            hint=f"allocate {buffer.name} with dtype {dtype!r}, or name the instruction form of its type",
        )
    return buffer, offset


def _span(element: tuple[Any, Any], nbytes: int, access: str) -> Any:
    """A pointer to ``nbytes`` from ``buffer[offset]`` that says what it touches
    (``tvm_access_ptr``): TVM's barrier insertion and shared-memory merging see the
    instruction's reads and writes, and the shared-layout pass remaps the offset."""
    buffer, offset = element
    extent = max(1, nbytes * 8 // dtype_bits(str(buffer.dtype)))
    return buffer.access_ptr(access, offset=offset, extent=extent)


def _issue(helper: str, *args: Any) -> None:
    record_thread_atomic("a warp matrix instruction", WARP_MATRIX_CALLS)
    B.evaluate(tirx.call_extern("void", helper, *args))


def _ldmatrix_helper(trans: Any, num: Any) -> str:
    if num not in (1, 2, 4) and not (isinstance(num, tirx.IntImm) and num.value in (1, 2, 4)):
        raise TileTypeError(
            f"T.ptx_ldmatrix loads 1, 2 or 4 matrices, got {num!r}",
            hint="pass num = 4 for a 16x16 A tile, 2 for a 16x8 B tile",
        )
    count = int(num)
    return f"tile_ldmatrix_x{count}" + ("_trans" if _static_bool(trans, "T.ptx_ldmatrix's trans") else "")


def ptx_ldmatrix(*args: Any) -> None:
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: lane ``l < 8 * num`` gives
    the address of row ``l % 8`` of matrix ``l // 8``; register ``q`` of every lane receives
    matrix ``q`` (lane ``l``: row ``l // 4``, elements ``2 (l % 4)`` and ``+1``; with
    ``trans``, column ``l // 4``, rows ``2 (l % 4)`` and ``+1``).

    Two spellings, as in TileLang: ``T.ptx_ldmatrix(trans, num, src_ptr, dst_ptr)`` with
    ``T.access_ptr`` addresses, and TVM's ``T.ptx_ldmatrix(dtype, trans, num, ".b16",
    local.data, local_offset, shared.data, shared_offset)`` with element offsets.
    """
    if len(args) == 4:
        trans, num, source, destination = args
        src, dst = _element_of(source, "T.ptx_ldmatrix"), _element_of(destination, "T.ptx_ldmatrix")
    elif len(args) == 8:
        dtype, trans, num, kind, local, local_offset, shared, shared_offset = args
        if str(kind) != ".b16":
            raise TileTypeError(
                f"T.ptx_ldmatrix loads .b16 elements, got {kind!r}", hint='pass ".b16" (16-bit elements)'
            )
        dst = _data_element(local, local_offset, None, "T.ptx_ldmatrix")
        src = _data_element(shared, shared_offset, None, "T.ptx_ldmatrix")
        local_type, shared_type = str(dst[0].dtype), str(src[0].dtype)
        if len({str(dtype), local_type, shared_type}) != 1:
            raise TileTypeError(
                f"T.ptx_ldmatrix: dtype {dtype}, registers of {local_type} and shared memory of "
                f"{shared_type} differ",
                hint="the register buffer, the shared buffer and the dtype argument must agree",
            )
    else:
        raise TileTypeError(
            f"T.ptx_ldmatrix takes 4 arguments (trans, num, src_ptr, dst_ptr) or TVM's 8, got {len(args)}",
            hint="write T.ptx_ldmatrix(False, 4, T.access_ptr(A_shared[r, c]), T.access_ptr(A_local[0]))",
        )
    helper = _ldmatrix_helper(trans, num)
    _issue(helper, _span(dst, 4 * int(num), "w"), _span(src, 16, "r"))


def ptx_mma(
    dtype: Any, shape: str, A_layout: str, B_layout: str, A_dtype: str, B_dtype: str, C_dtype: str,
    multiplicand_a: Any, a_index: Any, multiplicand_b: Any, b_index: Any, accumulator: Any, c_index: Any,
    saturate: Any = False, operator: Any = None,
) -> None:  # fmt: skip
    """``mma.sync.aligned.{shape}.row.col``: ``C[c_index:] += A[a_index:] * B[b_index:]``
    over the warp's fragments (PTX "Matrix Fragments for mma.m16n8k*"), each operand a
    buffer's data (``X.data``) and an element offset, as TileLang and TVM write it.

    Forms: m16n8k16 fp16 -> fp32/fp16, bf16 -> fp32; m16n8k32 int8/uint8 -> int32;
    m16n8k8 tf32 -> fp32.
    """
    a_type, b_type, c_type = (_abbreviation(t) for t in (A_dtype, B_dtype, C_dtype))
    form = MMA_FORMS.get((str(shape), a_type, c_type))
    if form is None or a_type != b_type:
        forms = ", ".join(f"{s} {a} x {a} -> {c}" for s, a, c in MMA_FORMS)
        raise TileTypeError(
            f"T.ptx_mma: {shape} {A_dtype} x {B_dtype} -> {C_dtype} is not a form tile issues",
            hint=f"use one of: {forms}; or T.gemm, which picks the instruction",
        )
    if (str(A_layout), str(B_layout)) != ("row", "col"):
        raise TileTypeError(
            f"T.ptx_mma: layouts {A_layout}/{B_layout}; these shapes exist as row/col only",
            hint='pass "row", "col" (load a transposed operand with T.ptx_ldmatrix(trans=True))',
        )
    if _static_bool(saturate, "T.ptx_mma's saturate") or operator is not None:
        raise TileTypeError(
            "T.ptx_mma: tile issues no .satfinite or bit-operator (xor/and) forms",
            hint="pass saturate=False and no operator",
        )
    if str(dtype) != form.accumulator:
        raise TileTypeError(
            f"T.ptx_mma: dtype {dtype} but the accumulators are {form.accumulator}",
            hint=f"pass {form.accumulator!r} first",
        )
    c = _data_element(accumulator, c_index, form.accumulator, "T.ptx_mma")
    a = _data_element(multiplicand_a, a_index, form.operand, "T.ptx_mma")
    b = _data_element(multiplicand_b, b_index, form.operand, "T.ptx_mma")
    c_bytes = 4 * dtype_bits(form.accumulator) // 8
    # every form: A is four 32-bit registers a lane, B two, C four elements
    _issue(form.helper, _span(c, c_bytes, "rw"), _span(a, 16, "r"), _span(b, 8, "r"))
