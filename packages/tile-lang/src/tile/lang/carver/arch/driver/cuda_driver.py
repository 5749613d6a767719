"""``carver.arch.driver.cuda_driver``: CUDA device facts, with the driver's attribute query.

``get_device_attribute(attr)`` asks the CUDA driver (``cuDeviceGetAttribute``; the runtime's
``cudaDevAttr*`` numbers are the driver's), so it needs a CUDA GPU and its driver; the other
functions answer from torch's view of the GPU, else from tile's facts of the CUDA target.
"""

from __future__ import annotations

import ctypes
from typing import Any

from tile.ir.errors import TargetError

from ...._src.cuda_driver import get_device_name as get_device_name
from ...._src.cuda_driver import get_max_dynamic_shared_size_bytes as get_max_dynamic_shared_size_bytes
from ...._src.cuda_driver import get_num_sms as get_num_sms
from ...._src.cuda_driver import get_registers_per_block as get_registers_per_block
from ...._src.cuda_driver import get_shared_memory_per_block as get_shared_memory_per_block

PERSISTING_L2_CACHE_MAX_SIZE = 108
"""``CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE`` (``cudaDevAttrMaxPersistingL2CacheSize``)."""


def get_cuda_device_properties(device_id: int = 0) -> Any:
    """torch's ``_CudaDeviceProperties`` of the device; a ``TargetError`` without a CUDA GPU."""
    import torch

    if not torch.cuda.is_available() or getattr(torch.version, "hip", None):
        raise TargetError(
            "get_cuda_device_properties: torch sees no CUDA GPU here",
            hint="use get_num_sms() and the other getters, which fall back to the CUDA target's facts",
        )
    return torch.cuda.get_device_properties(device_id)


def _driver() -> Any:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise TargetError(
            "get_device_attribute needs the CUDA driver (libcuda.so.1), which is not installed here",
            hint="run on a machine with an NVIDIA GPU and its driver",
        ) from exc
    if lib.cuInit(0) != 0:
        raise TargetError("get_device_attribute: cuInit failed (no usable CUDA GPU)", hint="check nvidia-smi")
    return lib


def get_device_attribute(attr: int, device_id: int = 0) -> int:
    """The driver's value of device attribute ``attr`` (a ``CUdevice_attribute`` number)."""
    lib = _driver()
    device = ctypes.c_int()
    if lib.cuDeviceGet(ctypes.byref(device), int(device_id)) != 0:
        raise TargetError(
            f"get_device_attribute: no CUDA device {device_id}", hint="pass a device index torch sees"
        )
    value = ctypes.c_int()
    status = lib.cuDeviceGetAttribute(ctypes.byref(value), int(attr), device)
    if status != 0:
        raise TargetError(f"get_device_attribute: attribute {attr} failed (CUresult {status})")
    return int(value.value)


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int:
    """Bytes of L2 the device can set aside for persisting accesses."""
    return get_device_attribute(PERSISTING_L2_CACHE_MAX_SIZE, device_id)


__all__ = [
    "get_cuda_device_properties",
    "get_device_attribute",
    "get_device_name",
    "get_max_dynamic_shared_size_bytes",
    "get_num_sms",
    "get_persisting_l2_cache_max_size",
    "get_registers_per_block",
    "get_shared_memory_per_block",
]
