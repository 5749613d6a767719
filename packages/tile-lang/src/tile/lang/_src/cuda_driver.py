"""CUDA device facts under TileLang's ``carver.arch.driver`` names (``get_num_sms``, ...).

With a CUDA GPU visible to torch, the answers are that GPU's (``torch.cuda``); without one
they are the facts of the CUDA target tile compiles for (``TILE_DEFAULT_TARGET`` where it
names a CUDA target, else the CUDA backend's default arch), so a program that sizes a
persistent grid by ``get_num_sms()`` runs on the CUDA emulator as it would on that GPU.

Example::

    >>> from tile.lang.carver.arch import driver
    >>> driver.get_num_sms() > 0
    True
"""

from __future__ import annotations

from typing import Any

from tile.ir.backend import Capabilities
from tile.ir.errors import TargetError

__all__ = [
    "cuda_target_here",
    "get_device_name",
    "get_max_dynamic_shared_size_bytes",
    "get_num_sms",
    "get_registers_per_block",
    "get_shared_memory_per_block",
]

_UNITS = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}


def cuda_target_here() -> Any:
    """The CUDA target ``"auto"`` resolves to here, else the CUDA backend's default one."""
    from .jit import _pick_target

    resolved, _ = _pick_target("auto")
    if getattr(resolved, "kind", None) != "cuda":
        resolved, _ = _pick_target("cuda")
    return resolved


def _torch_props(device_id: int) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a test dependency here
        return None
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None):
        return None
    return torch.cuda.get_device_properties(device_id)


def _capabilities() -> Capabilities:
    from .jit import _pick_target

    target = cuda_target_here()
    _, manifest = _pick_target(target)
    return manifest.capabilities(target)


def _scaled(value: int, format: str) -> int:
    if format not in _UNITS:
        raise TargetError(
            f"unknown size format {format!r}",
            hint=f"use one of {', '.join(map(repr, _UNITS))}",
        )
    return value // _UNITS[format]


def get_num_sms(device_id: int = 0) -> int:
    """Streaming multiprocessors of the GPU (a persistent kernel's grid size)."""
    props = _torch_props(device_id)
    return int(props.multi_processor_count) if props is not None else _capabilities().compute_units


def get_device_name(device_id: int = 0) -> str:
    """The GPU's name (``"NVIDIA sm_90a"`` for a target with no GPU here)."""
    props = _torch_props(device_id)
    return str(props.name) if props is not None else _capabilities().device_name


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory one block may allocate (``format``: ``"bytes"``, ``"kb"``, ``"mb"``)."""
    props = _torch_props(device_id)
    value = getattr(props, "shared_memory_per_block_optin", None) if props is not None else None
    return _scaled(int(value) if value else _capabilities().shared_bytes, format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:
    """Dynamic shared memory a block may opt in to; the same figure as the per-block limit."""
    return get_shared_memory_per_block(device_id, format)


def get_registers_per_block(device_id: int = 0) -> int:
    """32-bit registers one block may use (the registers of one SM)."""
    props = _torch_props(device_id)
    value = getattr(props, "regs_per_multiprocessor", None) if props is not None else None
    return int(value) if value else _capabilities().registers_per_unit
