"""Recycling the memory of large kernel outputs on the CPU.

A kernel compiled with ``out_idx`` allocates its outputs on every call. A fresh 64 MiB
buffer comes from ``mmap`` (glibc maps every allocation above 32 MiB afresh), and the
operating system zeroes each of its pages on first touch: one extra write of the whole
output, which for a memory-bound kernel (softmax, RMSNorm) costs about as much as the
kernel. Like the caching allocators of GPU frameworks, this pool keeps the memory of
outputs that nobody references any more and hands it to the next output of the same
size, warm and already mapped.

Safety: an output's memory returns to the pool only when the last object that can
reach it is gone. The arrays and tensors handed out are views of an owner object (a
ctypes array over the pooled memory); numpy views, slices and ``torch.from_numpy``
keep that owner alive through their ``base`` chain, and only the owner's finalizer
gives the memory back. The pool holds at most ``TILE_OUTPUT_POOL_BYTES`` bytes (0
turns it off) and, like ``numpy.empty``, returns uninitialised memory.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import numpy as np

from .. import env

ALIGNMENT = 64
MAX_PER_SIZE = 2
"""Buffers kept per size: an output and the one being computed while it is still alive."""


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: dict[int, list[np.ndarray]] = {}
        self._held = 0

    def take(self, nbytes: int) -> np.ndarray | None:
        with self._lock:
            stack = self._free.get(nbytes)
            if not stack:
                return None
            self._held -= nbytes
            return stack.pop()

    def give(self, raw: np.ndarray, nbytes: int) -> None:
        limit = env.OUTPUT_POOL_BYTES.get()
        with self._lock:
            stack = self._free.setdefault(nbytes, [])
            if len(stack) < MAX_PER_SIZE and self._held + nbytes <= limit:
                stack.append(raw)
                self._held += nbytes

    def held_bytes(self) -> int:
        with self._lock:
            return self._held

    def count(self, nbytes: int) -> int:
        """Buffers of exactly ``nbytes`` waiting for reuse."""
        with self._lock:
            return len(self._free.get(nbytes, ()))

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self._held = 0


POOL = _Pool()


@functools.lru_cache(maxsize=64)
def _owner_type(nbytes: int) -> Any:
    """A ctypes byte array type of ``nbytes`` whose finalizer returns its memory to the pool."""

    def finalize(self: Any) -> None:
        raw = self.__dict__.get("raw")
        if raw is not None and POOL is not None:  # POOL is None only at interpreter exit
            POOL.give(raw, nbytes)

    return type(f"PooledBytes{nbytes}", (ctypes.c_uint8 * nbytes,), {"__del__": finalize})


def pooled_bytes(nbytes: int) -> np.ndarray:
    """A 64-byte aligned uint8 array of ``nbytes`` whose memory is recycled when unreachable."""
    raw = POOL.take(nbytes) if env.OUTPUT_POOL_BYTES.get() > 0 else None
    if raw is None:
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    address = raw.ctypes.data + (-raw.ctypes.data) % ALIGNMENT
    owner = _owner_type(nbytes).from_address(address)
    owner.raw = raw  # keeps the memory alive for as long as any view of the owner is
    return np.frombuffer(owner, dtype=np.uint8)
