"""Loaded by ``run_tilelang.py --cuda-as-cpu`` (through PYTHONPATH) in each program it runs.

TileLang's programs make their tensors with ``device="cuda"`` / ``.cuda()``. On a machine
without a GPU, this maps torch's CUDA device to the CPU, so the kernels (compiled by tile
for the device of their tensors: the CPU) and the programs' torch references still run
and compare. ``torch.cuda.is_available()`` stays False: nothing pretends a GPU is present.
"""

from __future__ import annotations

import os

if os.environ.get("TILE_COMPAT_CUDA_AS_CPU") == "1":
    import torch
    from torch.overrides import TorchFunctionMode

    def _host(device: object) -> object:
        if isinstance(device, str) and device.startswith("cuda"):
            return "cpu"
        if isinstance(device, torch.device) and device.type == "cuda":
            return torch.device("cpu")
        return device

    class _CudaAsCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = _host(kwargs["device"])
            if getattr(func, "__name__", "") in ("to", "device"):
                args = tuple(_host(a) for a in args)
            return func(*args, **kwargs)

    _CudaAsCpu().__enter__()
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.cuda.synchronize = lambda *args, **kwargs: None
    torch.cuda.empty_cache = lambda *args, **kwargs: None
    torch.cuda.manual_seed = lambda *args, **kwargs: None
    torch.cuda.manual_seed_all = lambda *args, **kwargs: None
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda *args, **kwargs: None
