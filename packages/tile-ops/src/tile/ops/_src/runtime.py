"""What every op shares: argument checks, the target a call runs on, and compiled kernels."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tile.lang as tilelang

from .errors import bad_argument


def is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def dtype_name(x: Any) -> str:
    return str(x.dtype).removeprefix("torch.")


def target_for(x: Any, target: Any = None) -> str:
    """The target a call runs on: ``target`` when given; else CPU tensors (and numpy arrays)
    on the CPU backend, and tensors on a device on the backend ``"auto"`` finds a device for
    (through the backend plug-ins: tile.ops names no vendor). Returned as ``target_key``'s string.
    """
    if target is not None:
        return target_key(target)
    if is_torch(x) and x.device.type != "cpu":
        return "auto"
    return "cpu"


def target_key(target: Any) -> str:
    """``target`` (any form ``tile.lang.compile`` takes: ``"cpu"``, ``{"kind": "cuda", "arch":
    "sm_90a"}``, a ``Target``) as one string, the key compiled kernels are cached by (a dict
    target raised "unhashable type" in the caches)."""
    if isinstance(target, str):
        return target
    from tile.ir.target import Target

    return str(Target.parse(target))


def compiled(
    factory: Callable[..., Any], out_idx: tuple[int, ...], target: Any, *args: Any, **kwargs: Any
) -> Any:
    """``tilelang.compile(factory(*args, **kwargs))`` once per argument set and target."""
    return _compiled(factory, out_idx, target_key(target), *args, **kwargs)


@functools.cache
def _compiled(
    factory: Callable[..., Any], out_idx: tuple[int, ...], target: str, *args: Any, **kwargs: Any
) -> Any:
    return tilelang.compile(factory(*args, **kwargs), out_idx=list(out_idx), target=target)


def check_array(
    op: str,
    name: str,
    x: Any,
    ndim: int | Sequence[int] | None = None,
    dtypes: Sequence[str] | None = None,
    any_strides: bool = False,
) -> None:
    """``x`` is a numpy array or torch tensor of a rank in ``ndim`` and a dtype in ``dtypes``
    (a numpy array C-contiguous, unless ``any_strides``: the op handles other strides)."""
    if not (isinstance(x, np.ndarray) or is_torch(x)):
        raise bad_argument(op, name, f"is a {type(x).__name__}", "pass a numpy array or a torch tensor")
    ranks = (ndim,) if isinstance(ndim, int) else ndim
    if ranks is not None and len(x.shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise bad_argument(
            op,
            name,
            f"has {len(x.shape)} dimensions (shape {tuple(x.shape)}); it needs {want}",
            "see the op's docstring for its layout",
        )
    if dtypes is not None and dtype_name(x) not in dtypes:
        raise bad_argument(op, name, f"has dtype {dtype_name(x)}", f"the op takes {', '.join(dtypes)}")
    # torch tensors of any strides are fine: the torch ops copy what is not contiguous
    if isinstance(x, np.ndarray) and not x.flags.c_contiguous and not any_strides:
        raise bad_argument(
            op, name, "is a numpy array that is not C-contiguous", "pass np.ascontiguousarray(x)"
        )


def matrix_dims(op: str, name: str, x: Any) -> tuple[int, int]:
    """The (rows, columns) of ``x``, a 2-D numpy array or torch tensor (``check_array``)."""
    check_array(op, name, x, ndim=2)
    return int(x.shape[0]), int(x.shape[1])


def product_dims(
    op: str, a: Any, b: Any, names: tuple[str, str] = ("a", "b"), form: str = "(M, K) @ (K, N)"
) -> tuple[int, int, int]:
    """``(M, K, N)`` of the product ``a @ b`` of two 2-D arrays named ``names``; ``form`` is the
    layout the op computes, for the error when the inner dimensions differ."""
    m, k = matrix_dims(op, names[0], a)
    k_b, n = matrix_dims(op, names[1], b)
    if k_b != k:
        raise bad_argument(op, names[1], f"does not fit {names[0]}: {tuple(a.shape)} @ {tuple(b.shape)}",
                           f"{op} computes {form}")
    return m, k, n


def check_shape(op: str, name: str, x: Any, want: tuple[int, ...], hint: str) -> None:
    """``x`` has exactly the shape ``want``; ``hint`` spells out the layout the op takes."""
    if tuple(int(s) for s in x.shape) != want:
        raise bad_argument(op, name, f"has shape {tuple(x.shape)}; expected {want}", hint)


def check_same(op: str, names: Sequence[str], arrays: Sequence[Any]) -> None:
    """All of ``arrays`` share the first's dtype, kind (numpy/torch) and device."""
    first = arrays[0]
    for name, x in zip(names[1:], arrays[1:], strict=True):
        if is_torch(x) != is_torch(first):
            raise bad_argument(
                op,
                name,
                "mixes numpy and torch with the other arguments",
                "pass all arrays as numpy arrays or all as torch tensors",
            )
        if dtype_name(x) != dtype_name(first):
            raise bad_argument(
                op,
                name,
                f"has dtype {dtype_name(x)} but {names[0]!r} has {dtype_name(first)}",
                "cast the arguments to one dtype",
            )
        if is_torch(x) and x.device != first.device:
            raise bad_argument(
                op,
                name,
                f"is on {x.device} but {names[0]!r} is on {first.device}",
                "move the tensors to one device",
            )
