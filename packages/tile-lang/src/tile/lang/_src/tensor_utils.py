"""``tile.lang.utils.tensor``: make and compare test tensors the way TileLang programs do."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tile.ir.errors import TileTypeError

from .profiler import TensorSupplyType, _values

TORCH_ALIASES = {
    "float8_e4m3": "float8_e4m3fn",
    "float8_e5m2fn": "float8_e5m2",
    "half": "float16",
    "float": "float32",
}
"""TileLang dtype spellings whose torch name differs."""


def torch_storage_dtype_name(name: str) -> str:
    """The name of the torch dtype that stores tensors of ``name``: ``name`` itself, except for
    the 4-bit types torch has no element type for: ``int4``/``uint4`` are held in ``int8``/``uint8``
    bytes, ``float4_e2m1fn`` (and its vector forms) in ``float4_e2m1fn_x2`` (two codes per byte;
    ``int8`` with a torch that lacks it)."""
    import torch

    if name in ("int4", "uint4"):
        return name.replace("4", "8")
    if name.startswith("float4_e2m1fn"):
        return "float4_e2m1fn_x2" if hasattr(torch, "float4_e2m1fn_x2") else "int8"
    return name


class TorchDtypeError(TileTypeError):
    """A dtype name has no torch equivalent."""


def map_torch_type(dtype: Any) -> Any:
    """The ``torch.dtype`` for a tile/TileLang dtype name (``"float16"`` -> ``torch.float16``).

    Example::

        >>> import torch
        >>> map_torch_type("bfloat16") is torch.bfloat16
        True
    """
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    name = str(dtype)
    found = getattr(torch, TORCH_ALIASES.get(name, name), None)
    if not isinstance(found, torch.dtype):
        raise TorchDtypeError(
            f"torch has no dtype for {name!r}",
            hint="use one of float16, bfloat16, float32, float64, int8..int64, uint8, bool, "
            "float8_e4m3fn, float8_e5m2",
        )
    return found


def is_float8_dtype(dtype: Any) -> bool:
    """Whether a torch dtype (or dtype name) is one of the 8-bit floats."""
    return str(dtype).removeprefix("torch.").startswith("float8")


def fp8_remove_negative_zeros_(tensor: Any) -> Any:
    """Replace -0.0 by +0.0 in place (TileLang's helper for comparing fp8 bit patterns)."""
    zero = tensor == 0
    tensor[zero] = 0
    return tensor


def _default_device() -> Any:
    torch = sys.modules.get("torch")
    accelerator = getattr(torch, "accelerator", None)
    try:
        current = accelerator.current_accelerator() if accelerator is not None else None
    except RuntimeError:
        current = None
    return current if current is not None else "cpu"


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer) -> Callable[[Any], Any]:
    """A function ``param -> torch tensor`` filling a tensor of ``param.shape``/``param.dtype``
    as ``supply_type`` says (on the current torch accelerator, else the CPU).

    Example::

        >>> import types
        >>> supply = get_tensor_supply(TensorSupplyType.One)
        >>> supply(types.SimpleNamespace(shape=(2, 3), dtype="float16")).sum().item()
        6.0
    """
    import torch

    rng = np.random.default_rng(0)

    def supply(param: Any) -> Any:
        dtype = str(param.dtype).removeprefix("torch.")
        shape = tuple(int(d) for d in param.shape)
        spec = _Spec(dtype)
        array = _values(spec, shape, supply_type, rng)  # type: ignore[arg-type]
        torch_dtype = map_torch_type(dtype)
        if array.dtype.type.__module__ == "ml_dtypes":
            host = torch.from_numpy(array.astype(np.float32)).to(torch_dtype)
        else:
            host = torch.from_numpy(array)
        return host.to(_default_device())

    return supply


class _Spec:
    def __init__(self, dtype: str) -> None:
        self.dtype = dtype


def _as_float64(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if str(value.dtype) in ("torch.bfloat16",) or is_float8_dtype(value.dtype):
            value = value.float()
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.type.__module__ == "ml_dtypes":
        array = array.astype(np.float32)
    return array.astype(np.float64)


def torch_assert_close(
    tensor_a: Any,
    tensor_b: Any,
    rtol: float = 1e-2,
    atol: float = 1e-3,
    max_mismatched_ratio: float = 0.001,
    verbose: bool = False,
    equal_nan: bool = True,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    base_name: str = "LHS",
    ref_name: str = "RHS",
) -> None:
    """Raise ``AssertionError`` unless ``tensor_a`` and ``tensor_b`` agree: an element agrees
    when ``|a - b| <= atol + rtol * |b|``, and at most ``max_mismatched_ratio`` of the
    elements may disagree. Shapes must match; dtypes and devices too unless told not to
    check them. Takes torch tensors or numpy arrays.

    Example::

        >>> import numpy as np
        >>> torch_assert_close(np.ones(1000), np.r_[np.ones(999), 2.0], max_mismatched_ratio=0.01)
    """
    if tuple(tensor_a.shape) != tuple(tensor_b.shape):
        raise AssertionError(
            f"{base_name} has shape {tuple(tensor_a.shape)}, {ref_name} {tuple(tensor_b.shape)}"
        )
    if check_dtype and str(tensor_a.dtype) != str(tensor_b.dtype):
        raise AssertionError(f"{base_name} has dtype {tensor_a.dtype}, {ref_name} {tensor_b.dtype}")
    if check_device and str(getattr(tensor_a, "device", "cpu")) != str(getattr(tensor_b, "device", "cpu")):
        raise AssertionError(f"{base_name} is on {tensor_a.device}, {ref_name} on {tensor_b.device}")
    if check_stride and hasattr(tensor_a, "stride") and tensor_a.stride() != tensor_b.stride():
        raise AssertionError(f"{base_name} has strides {tensor_a.stride()}, {ref_name} {tensor_b.stride()}")
    a, b = _as_float64(tensor_a), _as_float64(tensor_b)
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    mismatched = int(close.size - np.count_nonzero(close))
    allowed = max_mismatched_ratio * close.size
    if verbose:
        print(f"{mismatched} of {close.size} elements differ (allowed {allowed:g})")
    if mismatched > allowed:
        diff = np.where(close, 0.0, np.abs(a - b))
        worst = np.unravel_index(int(np.argmax(diff)), close.shape) if close.ndim else ()
        raise AssertionError(
            f"{mismatched} of {close.size} elements of {base_name} and {ref_name} differ "
            f"(rtol={rtol}, atol={atol}, allowed ratio {max_mismatched_ratio}); "
            f"the largest difference is at {tuple(int(i) for i in worst)}: "
            f"{base_name}={a[worst]!r}, {ref_name}={b[worst]!r}"
        )
