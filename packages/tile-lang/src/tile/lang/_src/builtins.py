"""The developer-tier builtins behind ``tile.lang.language`` (``T``).

Each function runs while TVMScript parses a kernel and emits IR through the
IRBuilder: tile operators become ``Evaluate(Call(tile.<op>))`` statements, loops
become ``For`` frames carrying their schedule annotations.
"""

from __future__ import annotations

import inspect
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi  # type: ignore[import-untyped]
from tvm import ir, tirx  # type: ignore[import-untyped]
from tvm.tirx.script import builder as B  # type: ignore[import-untyped]

from tile.ir.annotations import NUM_STAGES, PIPELINE_ORDER, PIPELINE_STAGE, PIPELINED_LOOP
from tile.ir.errors import TileShapeError, TileWarning, UnsupportedOnTargetError
from tile.ir.ops import Copy, Fill, Gemm, Reduce
from tile.layout import Fragment

from ..errors import ArgumentTypeError, ArgumentValueError, TileScopeError, TileTypeError
from .dtypes import dtype_name
from .naming import named
from .session import current_location, current_session, parse_kernel
from .suggestions import check_keywords
from .tracebacks import api_boundary

_BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@api_boundary
def prim_func(func: Callable[..., Any] | None = None, **_options: Any) -> Any:
    """Parse a Python function into a tile kernel (a TVM ``PrimFunc``).

    Example::

        @T.prim_func
        def add(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    B[i] = A[i] + 1.0
    """
    # The caller's frames resolve the kernel's closure names. The list also holds this frame,
    # which holds the list: a reference cycle that kept every caller's locals (tensors
    # included) alive until the cyclic GC ran, so it is dropped as soon as parsing is done.
    holder = [inspect.stack()]

    @api_boundary
    def decorate(fn: Callable[..., Any]) -> Any:
        try:
            if _eager_style(fn):
                return _eager_prim_func(fn)
            return parse_kernel(fn, holder[0] if holder else inspect.stack())
        finally:
            holder.clear()

    if func is None:
        return decorate
    try:
        return decorate(func)
    finally:
        holder.clear()


def _eager_style(fn: Callable[..., Any]) -> bool:
    """A ``@T.prim_func`` written as an eager body: a parameter without an annotation (declared
    in the body, ``A: T.Tensor[[128, 128], T.float32]``) or outputs made with ``T.empty``."""
    from .eager import is_eager_function

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    bare = any(p.annotation is inspect.Parameter.empty for p in params)
    return (bare or not params) and is_eager_function(fn)


def _eager_prim_func(fn: Callable[..., Any]) -> Any:
    """TileLang's lazy ``@T.prim_func``: the eager body parsed once, its ``T.empty`` outputs
    returned as parameters after the inputs, their positions in the ``tilelang_out_idx`` attr
    (which ``tile.lang.compile`` takes as ``out_idx``)."""
    from .eager import EagerKernel
    from .jit import OUT_IDX_ATTR

    func, outputs = EagerKernel(fn, compile_fn=lambda *a: None).specialize_ahead({}).prim_func(fn.__name__)
    count = len(func.params)
    name = fn.__name__
    if outputs:
        func = func.with_attr(OUT_IDX_ATTR, [o - count for o in outputs])
    func.__name__ = name
    return func


prim_func.dispatch_token = "tirx"  # type: ignore[attr-defined]  # TVMScript picks the parser by this


class Kernel:
    """``with T.Kernel(gx[, gy[, gz]], threads=N) as (bx, by[, bz])``: the block grid.

    Each of the ``gx * gy * gz`` blocks runs the body (``T.Kernel()`` with no extents is one
    block); ``threads`` is the block's thread count, which tile operators distribute work
    over (a CPU runs a block on one core).
    """

    def __init__(self, *grid: Any, threads: int | Sequence[int] = 128, **_options: Any) -> None:
        if len(grid) > 3:
            raise TileTypeError(
                f"T.Kernel takes 1 to 3 grid extents, got {len(grid)}",
                hint="write T.Kernel(gx, gy, threads=128)",
            )
        grid = grid or (1,)  # T.Kernel(): one block, as in TileLang
        self.grid = grid
        self.threads = [threads] if isinstance(threads, int) else list(threads)
        _check_threads(self.threads)
        self._frames: list[Any] = []
        self.thread_vars: list[Any] = []
        self.block_vars: list[Any] = []

    def __enter__(self) -> Any:
        session = current_session("T.Kernel")
        if session.kernels:
            raise TileScopeError(
                "T.Kernel cannot be nested inside another T.Kernel", hint="use one T.Kernel per kernel"
            )
        tags = list(zip(_BLOCK_TAGS, self.grid, strict=False)) + list(
            zip(_THREAD_TAGS, self.threads, strict=False)
        )
        self._frames = [B.launch_thread(tag, extent) for tag, extent in tags]
        handles = [frame.__enter__() for frame in self._frames]
        block_vars = handles[: len(self.grid)]
        self.block_vars = list(block_vars)
        self.thread_vars = handles[len(self.grid) :]
        session.kernels.append(self)
        return block_vars[0] if len(block_vars) == 1 else tuple(block_vars)

    def __exit__(self, *exc: Any) -> None:
        current_session("T.Kernel").kernels.pop()
        for frame in reversed(self._frames):
            frame.__exit__(*exc)


def _check_threads(threads: list[Any]) -> None:
    if not 1 <= len(threads) <= 3:
        raise TileTypeError(
            f"T.Kernel threads= takes 1 to 3 extents, got {len(threads)}",
            hint="write threads=128 or threads=(32, 4)",
        )
    for extent in threads:
        if not _is_integer(extent):
            raise ArgumentTypeError(
                f"T.Kernel threads= must be integers, got {extent!r}",
                hint="write threads=128 (a block's thread count is known at compile time)",
            )
        if not isinstance(extent, ir.Expr) and operator.index(extent) <= 0:
            raise ArgumentValueError(
                f"T.Kernel threads= must be positive, got {extent}",
                hint="a block needs at least one thread, e.g. threads=128",
            )


def _is_integer(value: Any) -> bool:
    """An int (numpy ints included, bools not) or an integer-typed expression."""
    if isinstance(value, ir.Expr):
        return str(value.ty).startswith(("int", "uint"))
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _check_integer_extents(construct: str, extents: Sequence[Any]) -> None:
    for extent in extents:
        if not _is_integer(extent):
            raise TileTypeError(
                f"{construct} extents must be integers, got {extent!r}",
                hint="loop over an integer count, e.g. T.ceildiv(n, 32) or int(x)",
            )


def _kernel(construct: str) -> Kernel:
    session = current_session(construct)
    if not session.kernels:
        raise TileScopeError(
            f"{construct} can only be used inside a `with T.Kernel(...)` block",
            hint="on-chip buffers and thread ids belong to a kernel's blocks",
        )
    kernel: Kernel = session.kernels[-1]
    return kernel


def get_thread_binding(dim: int = 0) -> Any:
    """The calling thread's index along ``dim`` inside its block (expert tier)."""
    kernel = _kernel("T.get_thread_binding")
    where = current_location()
    if where is not None:
        current_session("T.get_thread_binding").thread_reads.append(
            f"{where.filename}:{where.line}:{where.column}"
        )
    if not 0 <= dim < len(kernel.thread_vars):
        raise TileTypeError(
            f"the kernel has {len(kernel.thread_vars)} thread dims, asked for dim {dim}",
            hint="T.Kernel(..., threads=(x, y)) makes dims 0 and 1",
        )
    return kernel.thread_vars[dim]


def _shape(shape: Any, rest: Sequence[Any]) -> list[Any]:
    dims = list(shape) if isinstance(shape, list | tuple) else [shape]
    return dims + [d for d in rest if not isinstance(d, str)]


def _alloc(construct: str, shape: Any, dtype: str, scope: str) -> Any:
    _kernel(construct)
    # A user's "shared" (static) tile joins the dynamic arena: that arena is aligned for TMA and
    # swizzled wgmma operands (a static __shared__ array is only alignas(64), which breaks the
    # swizzle pattern a descriptor assumes) and is not capped at 48 KiB. uint64 words are
    # mbarriers, which need no more than 8 bytes and which TVM's arena merging cannot place.
    if scope == "shared" and dtype_name(dtype) != "uint64":
        scope = "shared.dyn"
    return B.alloc_buffer(shape, dtype_name(dtype), scope=scope)


def alloc_shared(shape: Any, dtype: str = "float16", scope: str = "shared.dyn") -> Any:
    """A tile in the block's shared memory (``scope="shared"`` is taken as ``"shared.dyn"``)."""
    return _alloc("T.alloc_shared", shape, dtype, scope)


def alloc_fragment(shape: Any, dtype: str = "float32", scope: str = "local.fragment") -> Any:
    """A block-level register tile, distributed over the block's threads."""
    return _alloc("T.alloc_fragment", shape, dtype, scope)


def alloc_local(shape: Any, dtype: str = "float32", scope: str = "local") -> Any:
    """Per-thread registers."""
    return _alloc("T.alloc_local", shape, dtype, scope)


def _emit(op: Any) -> None:
    B.evaluate(op.encode())


def copy(src: Any, dst: Any, **_options: Any) -> None:
    """Copy a tile: ``T.copy(A[by * 64, k * 32], A_shared)`` (corner forms infer the extent).

    Two single elements (``T.copy(A[i], B[j])``) copy that one element, converted to the
    destination's type, as TileLang does."""
    if isinstance(src, ir.TensorLoad) and isinstance(dst, ir.TensorLoad):
        dtype = str(dst.source.dtype)
        value = src if str(src.source.dtype) == dtype else tirx.Cast(dtype, src)
        B.buffer_store(dst.source, value, list(dst.indices))
        return
    _emit(Copy.build(_fold_bound_extents(src), _fold_bound_extents(dst), warn=_warn_at_line))


def _fold_bound_extents(operand: Any) -> Any:
    """A slice whose extent is constant once the body's named scalars are put in
    (``A[r, k_base + t * 32 : k_base + (t + 1) * 32]`` after ``k_base = bk * 1024``: 32), with that
    constant extent; any other operand as given. Each scalar used must be assigned once in the
    kernel (checked after the parse: ``check_folded_scalars``)."""
    if not isinstance(operand, ir.TensorRegion) or all(
        isinstance(r.extent, tirx.IntImm) for r in operand.region
    ):
        return operand
    session = current_session("T.copy")
    if not session.bound_values:
        return operand
    analyzer = tvm.sym.Analyzer()
    ranges: list[Any] = []
    used: list[Any] = []
    for r in operand.region:
        extent = r.extent
        if not isinstance(extent, tirx.IntImm):
            folded = analyzer.simplify(_substitute_scalars(extent, session.bound_values, used))
            extent = folded if isinstance(folded, tirx.IntImm) else extent
        ranges.append(ir.Range.from_min_extent(r.min, extent))
    if not used:
        return operand
    where = current_location()
    session.folded_scalars.extend((buffer, where) for buffer in used)
    return ir.TensorRegion(operand.source, ranges, operand.ty)


def _substitute_scalars(expr: Any, bound: list[tuple[Any, Any]], used: list[Any], depth: int = 8) -> Any:
    """``expr`` with each read of a named scalar replaced by the value of its first store
    (names inside those values too, ``depth`` deep); the scalars replaced are added to ``used``."""
    replaced = [False]

    def put(load: Any) -> Any:
        for buffer, value in bound:
            if load.source.same_as(buffer):
                replaced[0] = True
                if not any(buffer.same_as(u) for u in used):
                    used.append(buffer)
                return value
        return load

    for _ in range(depth):
        replaced[0] = False
        expr = tvm_ffi.structural_map(expr, (ir.TensorLoad, put))
        if not replaced[0]:
            break
    return expr


def _warn_at_line(message: str) -> None:
    """A ``TileWarning`` at the user's kernel line being parsed (Python's own line when unknown)."""
    where = current_location()
    if where is None:
        warnings.warn(message, TileWarning, stacklevel=3)
    else:
        warnings.warn_explicit(message, TileWarning, where.filename, where.line)


def fill(buffer: Any, value: Any) -> None:
    """Set every element of a buffer (or slice) to ``value``; a single element (a
    ``T.alloc_var``, ``buf[i]``) is assigned."""
    if isinstance(buffer, ir.TensorLoad):
        dtype = str(buffer.source.dtype)
        expr = tirx.const(value, dtype) if isinstance(value, bool | int | float) else value
        if not isinstance(expr, ir.Expr) or tirx.is_buffer_var(expr):
            raise TileTypeError(
                f"T.fill value must be a scalar, got {type(value).__name__}",
                hint="to copy a tile into another, use T.copy(src, dst)",
            )
        if str(expr.ty) != dtype:
            expr = tirx.Cast(dtype, expr)
        B.buffer_store(buffer.source, expr, list(buffer.indices))
        return
    _emit(Fill.build(buffer, value))


def clear(buffer: Any) -> None:
    """Set every element of a buffer (or slice, or a single element) to zero."""
    fill(buffer, 0)


TILELANG_GEMM_OPTIONS = ("k_pack", "wg_wait", "mbar", "annotations")
"""Keyword options TileLang's ``T.gemm`` takes that tile accepts for compatibility (see ``gemm``)."""


def gemm(
    A: Any,
    B_: Any,
    C: Any,
    transpose_A: bool = False,
    transpose_B: bool = False,
    policy: Any = 0,
    clear_accum: bool = False,
    k_pack: int = 1,
    wg_wait: int = 0,
    mbar: Any = None,
    *,
    impl: str | None = None,
    annotations: dict[str, Any] | None = None,
    **options: Any,
) -> None:
    """``C += A @ B`` on tiles (``C = A @ B`` with ``clear_accum=True``).

    The positional order is TileLang's (``transpose_A, transpose_B, policy, clear_accum,
    k_pack, wg_wait, mbar``), so its programs that pass them positionally mean the same.

    ``policy`` (``T.GemmWarpPolicy``) says how warps split the C tile on GPUs.
    ``impl`` picks the implementation: ``None``/``"tile"`` (tile's own lowering) or one
    the target lists in ``Capabilities.gemm_impls`` (``"cute"`` on CUDA: CuTe, for
    comparison); another is a compile-time error naming the ones the target has.

    TileLang's other options are accepted so its programs compile unchanged:
    ``k_pack`` (packs K for AMD MFMA in TileLang) and ``wg_wait`` (how many wgmma groups
    stay in flight) are ignored: tile picks the instruction and waits for every wgmma
    group before the accumulator is read; ``annotations`` (lowering hints) are ignored;
    ``mbar`` (an mbarrier to signal, sm_100 in TileLang) must be ``None``.
    """
    if options:
        accepted = [n for n in inspect.signature(gemm).parameters if n not in ("A", "B_", "C", "options")]
        try:
            check_keywords("T.gemm", sorted(options), accepted)
        except TileTypeError as exc:
            raise exc.with_location(current_location()) from None
    if mbar is not None:
        raise TileTypeError(
            "T.gemm(..., mbar=...) is not supported: tile's gemms complete before the next statement",
            hint="drop mbar= and synchronize with the statements that follow",
            location=current_location(),
        )
    for name, value in (("k_pack", k_pack), ("wg_wait", wg_wait)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TileTypeError(
                f"T.gemm {name} must be a non-negative int, got {value!r}",
                hint=f"leave {name} out: tile ignores it",
                location=current_location(),
            )
    if annotations is not None and not isinstance(annotations, dict):
        raise TileTypeError(
            f"T.gemm annotations must be a dict, got {type(annotations).__name__}",
            hint="leave annotations out: tile ignores them",
            location=current_location(),
        )
    if isinstance(clear_accum, tirx.IntImm):
        clear_accum = bool(clear_accum.value)
    elif isinstance(clear_accum, ir.Expr):
        # a flag known at run time (TileLang's clear_accum=(k == 0) in a loop over k): zero C
        # where it holds, then accumulate; an unrolled loop folds the condition away
        with B.If(tirx.NE(tirx.Cast("int32", clear_accum), 0)), B.Then():
            clear(C)
        clear_accum = False
    _emit(Gemm.build(A, B_, C, transpose_A, transpose_B, clear_accum, int(policy), impl))


_REDUCE_HINTS = (
    " ``batch`` (TileLang's count of results per cross-thread round, a positive int) and "
    "``annotations`` are hints: tile plans the rounds itself."
)


def _check_batch(kind: str, batch: Any) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ArgumentValueError(
            f"T.reduce_{kind}: batch must be >= 1, got {batch!r}", hint="drop batch= (1 is the default)"
        )


def _reducer(kind: str) -> Callable[..., None]:
    def reduce(
        buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1, annotations: Any = None
    ) -> None:
        _check_batch(kind, batch)
        _emit(Reduce.build(kind, buffer, out, dim, clear))

    return named(
        reduce,
        f"reduce_{kind}",
        f"``out = {kind}(buffer, dim)``; with ``clear=False`` also folds in ``out``." + _REDUCE_HINTS,
    )


def _extreme_reducer(kind: str) -> Callable[..., None]:
    def reduce(
        buffer: Any,
        out: Any,
        dim: int = -1,
        clear: bool = True,
        batch: int = 1,
        nan_propagate: bool = False,
        annotations: Any = None,
    ) -> None:
        _check_batch(kind, batch)
        _emit(Reduce.build(f"{kind}_nan" if nan_propagate else kind, buffer, out, dim, clear))

    return named(
        reduce,
        f"reduce_{kind}",
        f"``out = {kind}(buffer, dim)``; with ``clear=False`` also folds in ``out``. NaN values of a "
        "float tile are skipped; with ``nan_propagate=True`` a row holding a NaN gives NaN." + _REDUCE_HINTS,
    )


reduce_sum = _reducer("sum")
reduce_max = _extreme_reducer("max")
reduce_min = _extreme_reducer("min")
reduce_abssum = _reducer("abssum")
reduce_absmax = _extreme_reducer("absmax")
reduce_bitand = _reducer("bitand")
reduce_bitor = _reducer("bitor")
reduce_bitxor = _reducer("bitxor")


def Parallel(
    *extents: Any,
    coalesced_width: int | None = None,
    loop_layout: Any = None,
    prefer_async: bool | None = None,
    annotations: dict[str, Any] | None = None,
) -> Any:
    """``for i, j in T.Parallel(M, N)``: independent iterations the compiler schedules.

    ``loop_layout=T.Fragment((M, N), forward_fn=...)`` binds the iterations to threads by hand
    (iteration ``(i, j)`` runs on the fragment's thread(s) of that element; on the CPU, whose
    block is one thread, it has no effect). ``coalesced_width``, ``prefer_async`` and
    ``annotations`` (TileLang's code-generation hints) are accepted and have no effect.
    """
    del coalesced_width, prefer_async, annotations
    if not extents:
        raise TileTypeError(
            "T.Parallel needs at least one extent", hint="write T.Parallel(M) or T.Parallel(M, N)"
        )
    _check_integer_extents("T.Parallel", extents)
    if loop_layout is not None:
        _check_loop_layout(loop_layout, extents)
    frame = B.grid(*extents)
    session = current_session("T.Parallel")
    session.parallel_vars.extend(frame.vars)
    if loop_layout is not None:
        session.loop_layouts.append((frame.vars[0], loop_layout))
    return frame


def _check_loop_layout(layout: Any, extents: Sequence[Any]) -> None:
    if not isinstance(layout, Fragment):
        raise TileTypeError(
            f"T.Parallel loop_layout= takes a T.Fragment, got {type(layout).__name__}",
            hint="build one with T.Fragment((M, N), forward_fn=lambda i, j: (thread, local))",
            location=current_location(),
        )
    shape = layout.const_input_shape()
    want = [int(e) if isinstance(e, int) else int(getattr(e, "value", -1)) for e in extents]
    if shape is None or list(shape) != want:
        raise TileShapeError(
            f"T.Parallel loop_layout= is a fragment of shape {list(shape or [])} but the loop nest is {want}",
            hint="give the fragment the nest's extents, one input dim per loop",
            location=current_location(),
        )


def Pipelined(
    start: Any,
    stop: Any = None,
    num_stages: int = 0,
    order: Sequence[int] | None = None,
    stage: Sequence[int] | None = None,
    **_options: Any,
) -> Any:
    """``for k in T.Pipelined(n, num_stages=3)``: a loop whose copies may overlap compute."""
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 0:
        raise TileTypeError(
            f"T.Pipelined num_stages must be an integer >= 0, got {num_stages!r}",
            hint="num_stages counts the loop iterations in flight: 0 or 1 = no overlap, 2-4 typical",
        )
    if order is not None and stage is not None and len(order) != len(stage):
        raise TileTypeError(
            f"T.Pipelined order= has {len(order)} entries but stage= has {len(stage)}",
            hint="give order= and stage= one entry per statement of the loop body",
        )
    lo, hi = (0, start) if stop is None else (start, stop)
    _check_integer_extents("T.Pipelined", [lo, hi])
    annotations: dict[str, Any] = {PIPELINED_LOOP: 1, NUM_STAGES: int(num_stages)}
    if order is not None:
        annotations[PIPELINE_ORDER] = [int(x) for x in order]
    if stage is not None:
        annotations[PIPELINE_STAGE] = [int(x) for x in stage]
    return B.serial(lo, hi, annotations=annotations)


def serial(start: Any, stop: Any = None, **kwargs: Any) -> Any:
    return B.serial(start, stop, **kwargs)


def unroll(start: Any, stop: Any = None, *, unroll_factor: Any = None, **kwargs: Any) -> Any:
    """``for i in T.unroll(n)``: a loop unrolled in full. A trip count known only at run time
    (``T.unroll(tid % 32)``) cannot be unrolled in full: that loop runs as a serial one (TileLang
    leaves it to CUDA's ``#pragma unroll``). ``unroll_factor`` (TileLang's partial unrolling) is
    accepted; tile unrolls constant loops in full."""
    del unroll_factor

    def constant(bound: Any) -> bool:
        return bound is None or isinstance(bound, int | tirx.IntImm)

    if constant(start) and constant(stop):
        return B.unroll(start, stop, **kwargs)
    return B.serial(start, stop, **kwargs)


def vectorized(start: Any, stop: Any = None, **kwargs: Any) -> Any:
    return B.vectorized(start, stop, **kwargs)


def ceildiv(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for ints or index expressions."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return tirx.floordiv(a + b - 1, b)


def is_expr(value: object) -> bool:
    return isinstance(value, ir.Expr)


CAST_ROUNDING_MODES = ("", "rn", "rz", "rp", "rm", "rs")
"""TileLang's ``T.cast(round=...)`` values: PTX's rounding modifiers, ``""`` the default."""


def cast(value: Any, dtype: str, round: str = "", sat: bool = True, rbits: Any = None) -> Any:
    """``value`` converted to ``dtype`` (Python numbers become constants).

    ``round``, ``sat`` and ``rbits`` are TileLang's: checked as TileLang checks them. A
    conversion rounds to nearest even and saturates as the target's default conversion does;
    ``round="rz"/"rp"/"rm"`` and ``sat=False`` are reserved in TileLang's CUDA backend as in
    tile (the default conversion, with a ``TileWarning``), and stochastic rounding
    (``round="rs"``) needs sm_100a, which tile does not target.
    """
    if round not in CAST_ROUNDING_MODES:
        raise ArgumentValueError(
            f"T.cast: Invalid round {round!r}: must be one of "
            f"{', '.join(repr(m) for m in CAST_ROUNDING_MODES)}",
            hint="leave round out for round-to-nearest-even",
        )
    if not isinstance(sat, bool):
        raise ArgumentValueError(
            f"T.cast: Invalid sat {sat!r}: must be a bool (True saturates to the finite range)",
            hint="write sat=True or sat=False",
        )
    if round == "rs" and rbits is None:
        raise ArgumentValueError("T.cast: rbits is required when round='rs' (stochastic rounding)")
    if round != "rs" and rbits is not None:
        raise ArgumentValueError("T.cast: rbits is only valid with round='rs' (stochastic rounding)")
    if round == "rs":
        raise UnsupportedOnTargetError(
            "T.cast(round='rs'): stochastic rounding needs sm_100a's cvt.rs; "
            "tile targets sm_75-sm_90a and gfx90a",
            hint="leave round out for round-to-nearest-even",
            location=current_location(),
        )
    if round not in ("", "rn") or not sat:
        _warn_at_line(
            f"T.cast(round={round!r}, sat={sat}) is the default conversion (round to nearest even, "
            "saturating where the target's conversion does): the other modes are reserved, as in "
            "TileLang's CUDA backend"
        )
    dtype = dtype_name(dtype)
    if isinstance(value, bool | int | float):
        return tirx.const(value, dtype)
    if str(value.ty) == dtype:
        return value
    return tirx.Cast(dtype, value)
