"""Loaded by ``run_tilelang.py --cuda-as-cpu`` (through PYTHONPATH) in each program it runs.

TileLang's programs make their tensors with ``device="cuda"`` / ``.cuda()``. On a machine
without a GPU, this maps torch's CUDA device to the CPU, so the kernels (compiled by tile
for the device of their tensors: the CPU) and the programs' torch references still run
and compare. ``torch.cuda.is_available()`` stays False unless ``--pretend-gpu`` (TILE_COMPAT_PRETEND_GPU=1)
asks torch to report one GPU of the emulated arch (below).
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

    # torch.Generator(device="cuda") is a constructor, not a torch function
    class _HostGenerator(torch.Generator):
        def __new__(cls, device: object = "cpu") -> _HostGenerator:
            return super().__new__(cls, device=_host(device))  # type: ignore[call-arg]

    torch.Generator = _HostGenerator  # type: ignore[misc]

    class _HostStream:  # torch.cuda.Stream() / torch.cuda.stream(s): the CPU runs in program order
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def wait_stream(self, other: object) -> None:
            pass

        def __enter__(self) -> _HostStream:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    torch.cuda.Stream = _HostStream  # type: ignore[misc]
    torch.cuda.default_stream = lambda *args, **kwargs: _HostStream()
    torch.cuda.current_stream = lambda *args, **kwargs: _HostStream()
    torch.cuda.stream = lambda stream=None: stream if stream is not None else _HostStream()

if os.environ.get("TILE_COMPAT_CUDA_AS_CPU") == "1" and os.environ.get("TILE_COMPAT_PRETEND_GPU") == "1":
    # ``run_tilelang.py --pretend-gpu``: on the CUDA emulator, torch reports one GPU of the
    # arch TILE_DEFAULT_TARGET names, so programs that check torch.cuda.is_available() or
    # choose a config by compute capability take the path they take on that GPU.
    import json
    import re
    import types

    _target = json.loads(os.environ.get("TILE_DEFAULT_TARGET") or '{"kind": "cuda", "arch": "sm_80"}')
    _arch = re.fullmatch(r"sm_(\d+?)(\d)[af]?", str(_target.get("arch", "sm_80")))
    _capability = (int(_arch.group(1)), int(_arch.group(2))) if _arch else (8, 0)

    def _properties(device: object = None) -> object:
        from tile.lang.carver.arch import CUDA

        facts = CUDA(_target)
        return types.SimpleNamespace(
            name=f"{facts.name} (tile CUDA emulator)",
            major=_capability[0],
            minor=_capability[1],
            multi_processor_count=facts.compute_max_core,
            shared_memory_per_block_optin=facts.smem_cap,
            regs_per_multiprocessor=facts.reg_cap,
            total_memory=80 * 2**30,
            gcnArchName="",
        )

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda device=None: _capability
    torch.cuda.get_device_properties = _properties
    torch.cuda.get_device_name = lambda device=None: _properties().name
