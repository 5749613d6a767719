"""The hardware facts the hint generator reads: one ``TileDevice`` per target (TileLang's
``carver.arch`` names), built from the backend's ``Capabilities`` and nothing else.

Example::

    >>> from tile.lang.carver.arch import CPU
    >>> CPU().compute_max_core >= 1
    True
"""

from __future__ import annotations

import re
from typing import Any

from tile.ir.backend import Capabilities


class TileDevice:
    """A target's facts under TileLang's attribute names (and tile's own).

    Attributes:
        target: the resolved tile ``Target``; ``capabilities``: the backend's data.
        platform: ``"CUDA"``, ``"CDNA"``, ``"CPU"`` or the device name's first word.
        compute_max_core: SMs / CUs / CPU cores a grid spreads over.
        warp_size: threads in lock step (1 on a CPU).
        smem_cap: shared memory one block may allocate, bytes.
        max_smem_usage: shared memory of one SM/CU, shared by its resident blocks.
        reg_cap: 32-bit registers of one SM/CU (0 on a CPU).
        max_registers_per_thread, max_threads_per_block, max_threads_per_core.
        vector_bits: widest vector register; cache_bytes: a CPU core's caches, L1d first.
        mma_shapes: (m, n, k) of the matrix instructions ``T.gemm`` uses.
    """

    default_target: Any = "auto"

    def __init__(self, target: Any = None) -> None:
        from .jit import _pick_target

        spec = self.default_target if target is None else target
        if not isinstance(spec, str | dict) and not hasattr(spec, "to_json"):
            spec = str(spec)  # e.g. a tvm.target.Target: its text names the kind
        resolved, manifest = _pick_target(spec)
        self._read(resolved, manifest.capabilities(resolved))

    @classmethod
    def from_capabilities(cls, capabilities: Capabilities, target: Any = None) -> TileDevice:
        """A device described by ``capabilities`` directly (a machine that is not here, or a test)."""
        device = cls.__new__(cls)
        device._read(target, capabilities)
        return device

    def _read(self, resolved: Any, caps: Capabilities) -> None:
        self.target = resolved
        self.capabilities = caps
        self.name = caps.device_name or str(getattr(resolved, "kind", "device"))
        self.platform = type(self).__name__ if type(self) is not TileDevice else self.name.split(" ")[0]
        self.compute_max_core = caps.compute_units
        self.warp_size = caps.warp_size
        self.smem_cap = caps.shared_bytes
        self.max_smem_usage = caps.shared_bytes_per_unit or caps.shared_bytes
        self.reg_cap = caps.registers_per_unit
        self.max_registers_per_thread = caps.registers_per_thread
        self.max_threads_per_block = caps.max_threads
        self.max_threads_per_core = caps.max_threads_per_unit or caps.max_threads
        self.vector_bits = caps.vector_bits
        self.cache_bytes = caps.cache_bytes
        self.mma_shapes = caps.mma_shapes
        self.async_copy = caps.async_copy

    @property
    def is_gpu(self) -> bool:
        """Whether blocks run as threads in lock step on SMs/CUs (warp size above 1)."""
        return self.warp_size > 1

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {self.compute_max_core} cores)"


_SM_ARCH = re.compile(r"(?:sm_)?([0-9]+)[a-z]?")


def check_sm_version(arch: str) -> int:
    """The compute capability an arch name spells (``"sm_90a"`` -> 90, ``"89"`` -> 89): ``sm_``
    and digits with at most one feature-set letter, or the digits alone; -1 for anything else."""
    text = str(arch)
    found = _SM_ARCH.fullmatch(text)
    if found is None or not (text.startswith("sm_") or text.isdigit()):
        return -1
    return int(found.group(1))


class CUDA(TileDevice):
    """An NVIDIA GPU: ``CUDA("cuda")``, ``CUDA({"kind": "cuda", "arch": "sm_90a"})``.

    ``sm_version`` is its compute capability (90 for sm_90a)."""

    default_target = "cuda"

    def _read(self, resolved: Any, caps: Capabilities) -> None:
        super()._read(resolved, caps)
        self.sm_version = check_sm_version(str(getattr(resolved, "arch", "") or ""))


class CDNA(TileDevice):
    """An AMD CDNA GPU: ``CDNA("hip")``, ``CDNA({"kind": "hip", "arch": "gfx942"})``."""

    default_target = "hip"


class CPU(TileDevice):
    """The host CPU (the CPU backend)."""

    default_target = "cpu"


def auto_infer_current_arch() -> TileDevice:
    """The device ``target="auto"`` compiles for here (``TILE_DEFAULT_TARGET`` overrides)."""
    return TileDevice("auto")
