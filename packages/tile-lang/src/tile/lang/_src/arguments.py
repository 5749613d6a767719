"""Checking and converting the arguments of a compiled kernel call.

Arrays go to the kernel without a copy through DLPack (numpy arrays directly, CPU
torch tensors through ``__dlpack__``). Generated code may assume aligned data (the
backend's ``Capabilities.param_alignment``, at least the element size), so a less
aligned input is staged through an aligned copy (and copied back, since kernels may
write their inputs).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import sys
from typing import Any

import numpy as np

from tile.ir.errors import SourceLocation
from tile.ir.gpu.launch import memory_span
from tile.ir.packed import packed_view, subbyte_bits

from ..errors import KernelArgumentError
from .output_pool import pooled_bytes

ALIGNMENT = 64


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter: a tensor (shape entries are ints or symbolic names) or a scalar."""

    name: str
    dtype: str
    shape: tuple[int | str, ...] | None  # None for a scalar
    strides: tuple[int | str, ...] | None = None  # T.StridedTensor's element strides; None: row-major

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def describe(self) -> str:
        if self.shape is None:
            return f"{self.name}: {self.dtype}"
        if self.strides is not None:
            return f"{self.name}: StridedTensor({list(self.shape)}, {list(self.strides)}, {self.dtype})"
        return f"{self.name}: Tensor({list(self.shape)}, {self.dtype})"


def param_specs(func: Any) -> list[ParamSpec]:
    """The parameters of a parsed ``PrimFunc``."""
    from tvm import tirx  # type: ignore[import-untyped]

    specs = []
    for param in func.params:
        if tirx.is_buffer_var(param):
            shape = tuple(_dim(d) for d in param.shape)
            strides = tuple(_dim(d) for d in param.strides) if len(param.strides) else None
            specs.append(ParamSpec(str(param.name), str(param.dtype), shape, strides))
        else:
            specs.append(ParamSpec(str(param.name), str(param.ty), None))
    return specs


def _dim(d: Any) -> int | str:
    return int(d.value) if hasattr(d, "value") else str(d)


def is_torch_tensor(value: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


@functools.cache
def torch_installed() -> bool:
    """Whether torch can be imported (outputs of a call with no array argument are then torch
    tensors, as TileLang returns them)."""
    return importlib.util.find_spec("torch") is not None


def is_numpy_array(value: object) -> bool:
    return isinstance(value, np.ndarray)


def _dtype_name(value: Any) -> str:
    if is_torch_tensor(value):
        return str(value.dtype).removeprefix("torch.")
    return str(value.dtype)


def aligned_empty(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An uninitialised C-contiguous numpy array whose data is 64-byte aligned."""
    dt = _numpy_dtype(dtype)
    count = int(np.prod(shape)) if shape else 1
    nbytes = count * dt.itemsize
    if nbytes >= LARGE_OUTPUT_BYTES:
        return pooled_bytes(nbytes).view(dt).reshape(shape)
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset : offset + nbytes].view(dt).reshape(shape)


def _numpy_dtype(dtype: str) -> np.dtype[Any]:
    """numpy's dtype for ``dtype``; bfloat16 and the float8 types come from ml_dtypes."""
    import ml_dtypes  # type: ignore[import-untyped]

    extended = getattr(ml_dtypes, dtype, None)
    if extended is not None:
        return np.dtype(extended)
    return np.dtype(dtype)


def _dlpack_view(array: np.ndarray) -> Any:
    """A zero-copy tensor for a numpy array of an ml_dtypes type (bfloat16, float8_*).

    numpy's DLPack export only knows its built-in types, so the bytes go through
    an unsigned-int view and the tensor is re-typed on the TVM side.
    """
    import tvm_ffi  # type: ignore[import-untyped]

    raw = array.view(np.dtype(f"uint{8 * array.dtype.itemsize}"))
    return tvm_ffi.from_dlpack(raw)._create_view(array.shape, str(array.dtype))  # type: ignore[attr-defined]


def dim_value(spec: ParamSpec, dim: int | str, bindings: dict[str, int]) -> int | None:
    """The value of one dim given the bound symbolic dims (``None`` if it cannot be known).

    A symbolic dim is a name (``"M"``) or an integer expression of names
    (``"M * 2"``, ``"K // 2"``), as TVM prints it.
    """
    if isinstance(dim, int):
        return dim
    if dim in bindings:
        return bindings[dim]
    if dim.isidentifier():
        return None
    try:
        return _eval_dim(ast.parse(dim, mode="eval").body, bindings)
    except (SyntaxError, KeyError, ValueError, ZeroDivisionError):
        return None


_INT_OPS: dict[type, Any] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Div: lambda a, b: int(a / b),
}


def _eval_dim(node: ast.expr, bindings: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return bindings[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_dim(node.operand, bindings)
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        op = _INT_OPS[type(node.op)]
        return int(op(_eval_dim(node.left, bindings), _eval_dim(node.right, bindings)))
    raise ValueError(ast.dump(node))


LARGE_OUTPUT_BYTES = 1 << 20
"""Outputs from this size on are allocated through numpy (see ``torch_cpu_empty``)."""


def torch_cpu_empty(shape: tuple[int, ...], torch_dtype: Any) -> Any:
    """An uninitialised contiguous CPU torch tensor, allocated through numpy when large.

    numpy asks the kernel for transparent huge pages on large allocations and torch's
    CPU allocator does not: the first write of a fresh 64 MiB output took 80 ms from
    ``torch.empty`` and 23 ms from numpy memory on this project's machines, more than
    the kernels that fill it. The tensor owns the numpy buffer (``torch.from_numpy``),
    whose memory is recycled for later outputs once nothing references it
    (``output_pool``): a fresh mapping is zeroed by the OS on first touch, a recycled one
    is not.
    """
    import torch

    count = 1
    for d in shape:
        count *= int(d)
    nbytes = count * int(torch_dtype.itemsize)
    if nbytes < LARGE_OUTPUT_BYTES:
        return torch.empty(shape, dtype=torch_dtype)
    return torch.from_numpy(pooled_bytes(nbytes)).view(torch_dtype).reshape(shape)


def allocate_output(spec: ParamSpec, bindings: dict[str, int], like_torch: bool, device: str = "cpu") -> Any:
    dims = [dim_value(spec, d, bindings) for d in spec.shape or ()]
    shape = tuple(d for d in dims if d is not None)
    if len(shape) != len(dims):
        raise KernelArgumentError(f"cannot size output {spec.name}{list(spec.shape or ())} from {bindings}")
    dtype, bits = spec.dtype, subbyte_bits(spec.dtype)
    if bits and shape:  # a sub-byte output is its packed storage (tile.ir.packed): uint8 bytes
        per_byte = 8 // bits
        shape, dtype = (*shape[:-1], -(-shape[-1] // per_byte)), "uint8"
    if like_torch:
        import torch

        if device == "cpu":
            return torch_cpu_empty(shape, getattr(torch, dtype))
        return torch.empty(shape, dtype=getattr(torch, dtype), device=device)
    return aligned_empty(shape, dtype)


class ArgumentChecker:
    """Checks a call's arguments against the kernel's parameters before the call."""

    def __init__(
        self, kernel_name: str, specs: list[ParamSpec], location: SourceLocation | None, device: str = "cpu"
    ) -> None:
        self.device = device  # "cpu", or the torch device type a GPU backend's kernel runs on
        self.kernel_name = kernel_name
        self.specs = specs
        self.location = location

    def _fail(self, message: str, hint: str) -> KernelArgumentError:
        signature = ", ".join(s.describe() for s in self.specs)
        return KernelArgumentError(
            f"{message} (kernel {self.kernel_name}({signature}))", hint=hint, location=self.location
        )

    def check_tensor(self, index: int, spec: ParamSpec, value: Any, bindings: dict[str, int]) -> None:
        if self.device != "cpu":
            if not is_torch_tensor(value) or value.device.type != self.device:
                where = value.device if is_torch_tensor(value) else f"the host ({type(value).__name__})"
                raise self._fail(
                    f"argument {spec.name} is on {where}, this kernel runs on a {self.device} device",
                    f"pass a torch tensor on the device, e.g. torch.as_tensor(x, device='{self.device}')",
                )
        elif is_torch_tensor(value):
            if value.device.type != "cpu":
                raise self._fail(
                    f"argument {spec.name} is on device {value.device}, this kernel runs on the CPU",
                    "move the tensor with .cpu() or compile for a GPU target",
                )
        elif not isinstance(value, np.ndarray):
            raise self._fail(
                f"argument {spec.name} must be a numpy array or torch tensor, got {type(value).__name__}",
                "convert it with np.asarray(...)",
            )
        dtype = _dtype_name(value)
        shape = tuple(int(d) for d in value.shape)
        if dtype != spec.dtype:
            packed = packed_view(spec.dtype, dtype, shape)
            if packed is None:
                hint = f"convert it, e.g. x.astype('{spec.dtype}') or x.to(torch.{spec.dtype})"
                bits = subbyte_bits(spec.dtype)
                if bits:
                    hint = f"pass its packed storage: a uint8 tensor, {8 // bits} codes per byte"
                raise self._fail(f"argument {spec.name} has dtype {dtype}, expected {spec.dtype}", hint)
            shape = packed[0]
        assert spec.shape is not None
        ok = len(shape) == len(spec.shape)
        if ok:
            for got, want in zip(shape, spec.shape, strict=True):
                if isinstance(want, int):
                    ok = ok and got == want
                elif not want.isidentifier():
                    continue  # an expression of other dims: the compiled entry checks it
                elif bindings.setdefault(want, got) != got:
                    ok = False
        if not ok:
            raise self._fail(
                f"argument {spec.name} has shape {list(shape)}, expected {list(spec.shape)}",
                "pass a tensor of the shape the kernel was compiled for, or compile another kernel",
            )
        if spec.strides is not None:
            self._check_strides(spec, value, bindings)
            return
        contiguous = value.is_contiguous() if is_torch_tensor(value) else value.flags.c_contiguous
        if not contiguous:
            raise self._fail(
                f"argument {spec.name} is not contiguous (row-major)",
                "pass np.ascontiguousarray(x) or x.contiguous()",
            )

    def _check_strides(self, spec: ParamSpec, value: Any, bindings: dict[str, int]) -> None:
        """A ``T.StridedTensor`` argument: its element strides are the declared ones."""
        got = element_strides(value)
        packed = packed_view(spec.dtype, _dtype_name(value), tuple(value.shape), got)
        if packed is not None:
            got = packed[1] or ()
        assert spec.strides is not None
        ok = len(got) == len(spec.strides)
        for have, want in zip(got, spec.strides, strict=False):
            if isinstance(want, int):
                ok = ok and have == want
            elif want.isidentifier():
                ok = ok and bindings.setdefault(want, have) == have
            else:
                ok = ok and dim_value(spec, want, bindings) in (None, have)
        if not ok:
            raise self._fail(
                f"argument {spec.name} has element strides {list(got)}, the kernel declares "
                f"{list(spec.strides)}",
                "pass a view with the declared strides, or declare them symbolic: "
                "T.StridedTensor((M, N), (s0, 1), dtype) with s0 = T.dynamic('s0')",
            )


def element_strides(value: Any) -> tuple[int, ...]:
    """A numpy array's or torch tensor's strides in elements (``()``: not whole elements)."""
    if is_torch_tensor(value):
        return tuple(int(s) for s in value.stride())
    if any(int(s) % value.itemsize for s in value.strides):
        return ()
    return tuple(int(s) // value.itemsize for s in value.strides)


def logical_layout(declared: str, value: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(shape, element strides)`` of an argument for a ``declared`` parameter: its own, or
    the logical ones of a sub-byte parameter's packed storage (``tile.ir.packed``)."""
    shape, strides = tuple(int(d) for d in value.shape), element_strides(value)
    packed = packed_view(declared, _dtype_name(value), shape, strides)
    if packed is None:
        return shape, strides
    return packed[0], packed[1] or ()


def _row_major_view(value: Any) -> Any:
    """A contiguous torch tensor with its strides made row-major (the same elements).

    torch calls a tensor contiguous whatever the strides of its size-1 dims, and of every
    dim of an empty one (``torch.randn(512, 0)`` has strides ``(1, 1)``); the compiled entry
    checks them against the row-major ones ("expected to be compact array"). TileLang takes
    such tensors, and no element's address changes: a size-1 dim's index is always 0, an
    empty tensor has no element.
    """
    shape, strides, step = tuple(value.shape), [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= int(dim)
    compact = tuple(reversed(strides))
    if tuple(value.stride()) == compact or not value.is_contiguous():
        return value
    return value.as_strided(shape, compact)


def stage_aligned(value: Any, alignment: int = ALIGNMENT) -> tuple[Any, Any | None]:
    """``(argument to pass, array to copy back into value after the call or None)``.

    ``value`` is staged when its data is not ``alignment``-byte aligned (nor its
    element size, whichever is larger). A non-contiguous ``value`` (a ``T.StridedTensor``
    argument: the kernel indexes it through its strides) is staged with the same strides, in
    an aligned allocation of its span.
    """
    if is_torch_tensor(value):
        if value.numel() == 0:
            return _row_major_view(value), None
        align = max(alignment, value.element_size())
        if value.data_ptr() % align == 0:
            return _row_major_view(value), None
        torch = __import__("torch")
        if value.is_contiguous():
            staged = value.clone(memory_format=torch.contiguous_format)
        else:  # torch's allocators align a new storage to at least 64 bytes
            staged = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device)
            staged.copy_(value)
        return staged, staged
    align = max(alignment, value.dtype.itemsize)
    if value.ctypes.data % align == 0 or value.size == 0:
        staged, back = value, None
    elif value.flags.c_contiguous or any(s < 0 for s in value.strides):
        staged = aligned_empty(value.shape, str(value.dtype))
        staged[...] = value
        back = staged
    else:
        steps = [s // value.itemsize for s in value.strides]
        flat = aligned_empty((memory_span(value.shape, steps, 1),), str(value.dtype))
        staged = np.lib.stride_tricks.as_strided(flat, value.shape, value.strides)
        staged[...] = value
        back = staged
    if staged.dtype.type.__module__ == "ml_dtypes" and staged.size:  # numpy cannot DLPack-export these
        return _dlpack_view(staged), back
    return staged, back
