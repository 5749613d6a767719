"""``tile.lang.tools.Analyzer`` (TileLang's ``tilelang.tools.Analyzer``): the work a tile
program names, counted from its statements before any lowering.

``Analyzer.analysis(func, device)`` counts

- floating-point operations: ``2 * M * N * K`` for each ``T.gemm``;
- global-memory bytes: each ``T.copy`` (and atomic tile operator) with a global tensor on one
  side moves its region once; each load or store of a global tensor inside a ``T.Parallel``
  nest (``T.im2col`` expands to one) moves one element per iteration;

each times the trip counts of the loops around it and the number of blocks of its
``T.Kernel``. Both branches of an ``if`` count, so the totals are what the program names,
an upper bound of what a guarded tail moves. Caches are not modelled.

An estimated time (a roofline: the larger of the FLOPs at the device's peak and the bytes at
its bandwidth) needs the device's peak rates, which tile's device facts do not state: set
``peak_tflops`` and ``bandwidth_GBps`` on the device (``CUDA("cuda")``) to get one; otherwise
``estimated_time``, ``expected_tflops`` and ``expected_bandwidth_GBps`` are ``None``.

Example::

    >>> from tile.lang.tools import Analyzer
    >>> result = Analyzer.analysis(my_gemm_func, None)   # doctest: +SKIP
    >>> result.total_flops == 2 * M * N * K               # doctest: +SKIP
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from tile.ir.errors import TileError, location_from_span
from tile.ir.ops import Atomic, Copy, Gemm, Region, decode, op_class_of
from tile.ir.transform.infer_layout import is_parallel


class AnalysisError(TileError, ValueError):
    """The program cannot be counted: a loop or grid extent is not a constant."""


@dataclasses.dataclass(frozen=True)
class AnalysisResult:
    """What ``Analyzer.analysis`` counted (TileLang's field names).

    Attributes:
        total_flops: floating-point operations of every ``T.gemm``.
        total_global_bytes: bytes moved to and from global memory.
        estimated_time: seconds of the roofline, or None without the device's peak rates.
        expected_tflops: the device's peak (``device.peak_tflops``), or None.
        expected_bandwidth_GBps: the device's bandwidth (``device.bandwidth_GBps``), or None.
    """

    total_flops: int
    total_global_bytes: int
    estimated_time: float | None
    expected_tflops: float | None
    expected_bandwidth_GBps: float | None


def _constant(expr: Any, what: str, node: Any) -> int:
    value = tvm.sym.Analyzer().simplify(expr)
    if not isinstance(value, tirx.IntImm):
        raise AnalysisError(
            f"cannot count the work of a {what} of extent {expr}: it is not a constant",
            hint="give the kernel's dims as T.const values (or constants) when calling get_tir",
            location=location_from_span(getattr(node, "span", None)),
        )
    return int(value.value)


def _bytes(dtype: str) -> float:
    kind = tvm.DataType(dtype)
    return int(kind.bits) * int(kind.lanes) / 8


def _is_global(buffer: Any) -> bool:
    return str(buffer.scope()) == "global"


def _region_bytes(region: Region, node: Any) -> float:
    elements = 1
    for extent in region.extents:
        elements *= _constant(extent, "tile region", node)
    return elements * _bytes(str(region.buffer.dtype))


_NO_GRID = {"blockIdx.x": 1, "blockIdx.y": 1, "blockIdx.z": 1}


class Analyzer:
    """Counts a tile program's FLOPs and global-memory bytes (see module docstring)."""

    def __init__(self, fn: Any, device: Any = None) -> None:
        if isinstance(fn, tvm.IRModule):
            funcs = [f for f in fn.functions.values() if isinstance(f, tirx.PrimFunc)]
            if len(funcs) != 1:
                raise AnalysisError(f"expected one function in the module, found {len(funcs)}")
            fn = funcs[0]
        if not isinstance(fn, tirx.PrimFunc):
            raise AnalysisError(
                f"Analyzer takes a tile program (a PrimFunc), got {type(fn).__name__}",
                hint="pass kernel.get_tir(...) or a @T.prim_func",
            )
        self.fn = fn
        self.device = device
        self.total_flops = 0
        self.total_global_bytes = 0
        self.block_counts = dict(_NO_GRID)
        """The kernel's grid, ``{"blockIdx.x": gx, ...}``, as the last ``ir_pass`` found it."""

    def ir_pass(self) -> Analyzer:
        """Count the program's statements (see module docstring)."""
        self.total_flops, self.total_global_bytes = 0, 0
        self.block_counts = dict(_NO_GRID)  # each count starts from the program's own grid
        self._visit(self.fn.body, 1)
        return self

    def _visit(self, node: Any, times: int) -> None:
        if isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                self._visit(stmt, times)
        elif isinstance(node, tirx.For):
            if is_parallel(node):
                self._count_nest(node, times)
                return
            self._visit(node.body, times * _constant(node.extent, "loop", node))
        elif isinstance(node, tirx.AttrStmt):
            inner = times
            if str(node.attr_key) == "thread_extent" and str(node.node.thread_tag).startswith("blockIdx"):
                extent = _constant(node.value, "grid dimension", node)
                self.block_counts[str(node.node.thread_tag)] = extent
                inner *= extent
            self._visit(node.body, inner)
        elif isinstance(node, tirx.IfThenElse):
            self._visit(node.then_case, times)
            if node.else_case is not None:
                self._visit(node.else_case, times)
        elif isinstance(node, tirx.While):
            self._visit(node.body, times)
        elif isinstance(node, tirx.Evaluate) and op_class_of(node.value) is not None:
            self._count_op(decode(node.value), node, times)
        elif hasattr(node, "body") and isinstance(getattr(node, "body", None), tirx.Stmt):
            self._visit(node.body, times)

    def _count_op(self, op: Any, node: Any, times: int) -> None:
        if isinstance(op, Gemm):
            m, n, k = (_constant(e, "T.gemm dim", node) for e in op.mnk)
            self.total_flops += 2 * m * n * k * times
        elif isinstance(op, Copy):
            if _is_global(op.src.buffer) != _is_global(op.dst.buffer):
                # the elements of the tile, at the tensor's element size
                tile, tensor = (op.dst, op.src) if _is_global(op.src.buffer) else (op.src, op.dst)
                elements = _region_bytes(tile, node) / _bytes(str(tile.buffer.dtype))
                self.total_global_bytes += int(elements * _bytes(str(tensor.buffer.dtype)) * times)
        elif isinstance(op, Atomic):
            for region in op.regions():
                if _is_global(region.buffer):
                    self.total_global_bytes += int(_region_bytes(region, node) * times)

    def _count_nest(self, loop: Any, times: int) -> None:
        iterations = times
        body = loop
        while isinstance(body, tirx.For) and is_parallel(body):
            iterations *= _constant(body.extent, "T.Parallel loop", body)
            body = body.body
        moved = [0.0]

        def on_load(load: Any) -> None:
            if _is_global(load.source):
                moved[0] += _bytes(str(load.ty))

        def on_store(store: Any) -> None:
            if _is_global(store.buffer):
                moved[0] += _bytes(str(store.value.ty))

        tvm_ffi.structural_walk(body, [(ir.TensorLoad, on_load), (tirx.BufferStore, on_store)])
        self.total_global_bytes += int(moved[0] * iterations)

    def calculate(self) -> AnalysisResult:
        """The counts, and a roofline estimate where the device states its peak rates."""
        peak = getattr(self.device, "peak_tflops", None)
        bandwidth = getattr(self.device, "bandwidth_GBps", None)
        estimate = None
        if peak and bandwidth:
            estimate = max(self.total_flops / (peak * 1e12), self.total_global_bytes / (bandwidth * 1e9))
        return AnalysisResult(self.total_flops, self.total_global_bytes, estimate, peak, bandwidth)

    @classmethod
    def analysis(cls, fn: Any, device: Any = None) -> AnalysisResult:
        """Count ``fn`` (a tile program) and estimate its time on ``device``."""
        return cls(fn, device).ir_pass().calculate()
