"""A reference interpreter for thread-bound TIR (tests only): runs the block once per thread.

Every thread gets its own ``local`` buffers (registers); other buffers are one memory
the whole block shares. Threads run one after another, so the code must not rely on
barriers or shuffles (the small modules of these tests do not). Each store into shared
memory is counted per element, which is how a test sees that a replicated loop wrote a
global element once and not once per copy.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
from tvm import ir, tirx

_BINARY = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
    "FloorDiv": operator.floordiv,
    "FloorMod": operator.mod,
    "Min": min,
    "Max": max,
    "EQ": operator.eq,
    "NE": operator.ne,
    "LT": operator.lt,
    "LE": operator.le,
    "GT": operator.gt,
    "GE": operator.ge,
    "And": lambda a, b: bool(a) and bool(b),
    "Or": lambda a, b: bool(a) or bool(b),
}


class BlockRun:
    """One block's run: ``memory``/``writes`` by buffer name, ``registers[thread][name]``."""

    def __init__(self, threads: int, memory: dict[str, np.ndarray]) -> None:
        self.threads = threads
        self.memory = {k: np.array(v, dtype=np.float64).ravel() for k, v in memory.items()}
        self.writes = {k: np.zeros(v.size, dtype=np.int64) for k, v in self.memory.items()}
        self.registers: list[dict[str, np.ndarray]] = [{} for _ in range(threads)]
        self._env: dict[Any, Any] = {}
        self._thread = 0
        self._shapes: dict[str, list[int]] = {}

    # ------------------------------------------------------------------ buffers
    def _array(self, buffer: Any) -> tuple[np.ndarray, np.ndarray | None]:
        name = str(buffer.name)
        if str(buffer.scope()).startswith("local"):
            regs = self.registers[self._thread]
            if name not in regs:
                regs[name] = np.zeros(self._size(buffer))
            return regs[name], None
        if name not in self.memory:
            self.memory[name] = np.zeros(self._size(buffer))
            self.writes[name] = np.zeros(self._size(buffer), dtype=np.int64)
        return self.memory[name], self.writes[name]

    def _size(self, buffer: Any) -> int:
        return math.prod(int(e) for e in buffer.shape)

    def _flat(self, buffer: Any, indices: Any) -> int:
        flat = 0
        for index, extent in zip(indices, buffer.shape, strict=True):
            flat = flat * int(extent) + int(self.value(index))
        return flat

    # ------------------------------------------------------------------ expressions
    def value(self, e: Any) -> Any:
        kind = type(e).__name__
        if isinstance(e, tirx.IntImm):
            return int(e.value)
        if isinstance(e, tirx.FloatImm):
            return float(e.value)
        if isinstance(e, ir.Var):
            return self._env[e]
        if kind in _BINARY:
            return _BINARY[kind](self.value(e.a), self.value(e.b))
        if kind == "Not":
            return not self.value(e.a)
        if kind == "Cast":
            v = self.value(e.value)
            return int(v) if "int" in str(e.dtype) else v
        if kind == "Select":
            return self.value(e.true_value) if self.value(e.condition) else self.value(e.false_value)
        if kind == "TensorLoad":
            data, _ = self._array(e.source)
            return data[self._flat(e.source, e.indices)]
        raise NotImplementedError(f"interpreter: expression {kind} ({e})")

    # ------------------------------------------------------------------ statements
    def run(self, stmt: Any) -> None:
        kind = type(stmt).__name__
        if kind == "SeqStmt":
            for s in stmt.seq:
                self.run(s)
        elif kind == "For":
            lo = self.value(stmt.min)
            for n in range(lo, lo + self.value(stmt.extent)):
                self._env[stmt.loop_var] = n
                self.run(stmt.body)
        elif kind == "IfThenElse":
            if self.value(stmt.condition):
                self.run(stmt.then_case)
            elif stmt.else_case is not None:
                self.run(stmt.else_case)
        elif kind == "AttrStmt":
            if str(stmt.attr_key) == "thread_extent":
                tag = str(stmt.node.thread_tag)
                self._env[stmt.node.var] = self._thread if tag == "threadIdx.x" else 0
            self.run(stmt.body)
        elif kind == "BufferStore":
            data, writes = self._array(stmt.buffer)
            flat = self._flat(stmt.buffer, stmt.indices)
            data[flat] = self.value(stmt.value)
            if writes is not None:
                writes[flat] += 1
        elif kind in ("AllocBuffer", "DeclBuffer"):
            pass
        else:
            raise NotImplementedError(f"interpreter: statement {kind}")


def run_block(func: Any, threads: int, memory: dict[str, np.ndarray], registers: Any = None) -> BlockRun:
    """Run ``func``'s body for threads 0..threads-1 in order.

    ``registers(thread) -> {name: array}`` gives each thread's initial register files.
    """
    out = BlockRun(threads, memory)
    for t in range(threads):
        out._thread = t
        out.registers[t] = {
            k: np.array(v, dtype=np.float64) for k, v in (registers(t) if registers else {}).items()
        }
        out.run(func.body)
    return out
