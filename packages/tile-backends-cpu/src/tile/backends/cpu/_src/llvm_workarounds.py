"""LLVM options that keep the CPU backend clear of known miscompilations of TVM's LLVM.

apache-tvm 0.27 links LLVM 22, whose x86 back end stores a *truncating* masked store
with a constant one-lane mask as a store of the wide element (llvm/llvm-project#179489,
fixed upstream by #179853): a 16-bit store becomes a 32-bit one and overwrites the next
element. LLVM's loop vectorizer makes such stores from a guarded store in a loop (the
ragged tail of a tile copy, ``if c < N: Y[r, c] = v``): the guard becomes the mask,
full unrolling makes it constant, and a narrowing conversion feeding the store (a
bfloat16 store computed in float32, an int8/int16 store of a wider value) makes it
truncating. The fuzzer found it as a bfloat16 ragged copy that zeroed the element
after each row's tail (``conformance/tests/test_fuzz_regressions.py``).

Where a kernel has a guarded store of a 8- or 16-bit integer or bfloat16 element
inside a loop, ``cl_options`` turns off LLVM's if-conversion for that one compilation
(TVM scopes ``cl-opt`` to the build): those guarded loops stay scalar, everything else
vectorizes as before. float16 is not affected (its conversions are not integer
truncations).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx  # type: ignore[import-untyped]

NO_IF_CONVERSION = "-enable-if-conversion=false"
"""LLVM's loop vectorizer option: do not turn guarded stores into masked stores."""

_NARROW = frozenset(["int8", "uint8", "int16", "uint16", "bfloat16"])


def _stores_narrow(stmt: Any) -> bool:
    def on_store(store: Any) -> Any:
        element = str(store.buffer.ty.dtype).split("x")[0]  # int8x4 -> int8
        return tvm_ffi.VisitInterrupt(True) if element in _NARROW else None

    return tvm_ffi.structural_walk(stmt, (tirx.BufferStore, on_store)) is not None


def has_guarded_narrow_store(body: Any) -> bool:
    """Whether ``body`` has a loop with a store of a narrow element under an ``if``."""

    def on_for(loop: Any) -> Any:
        def on_if(branch: Any) -> Any:
            return tvm_ffi.VisitInterrupt(True) if _stores_narrow(branch) else None

        found = tvm_ffi.structural_walk(loop.body, (tirx.IfThenElse, on_if))
        return tvm_ffi.VisitInterrupt(True) if found is not None else None

    return tvm_ffi.structural_walk(body, (tirx.For, on_for)) is not None


def cl_options(mod: Any) -> list[str]:
    """The LLVM command-line options compiling ``mod`` needs (see the module docstring)."""
    funcs = [f for _, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    return [NO_IF_CONVERSION] if any(has_guarded_narrow_store(f.body) for f in funcs) else []
