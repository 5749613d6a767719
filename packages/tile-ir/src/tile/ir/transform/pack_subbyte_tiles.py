"""``pack_subbyte_tiles``: shared and fragment tiles of 4-bit elements, held as their bytes.

TileLang programs allocate tiles of ``T.int4`` (and ``uint4``, ``float4_e2m1fn``), copy packed
tensors into them and multiply them with ``T.gemm`` (its examples/gemm_int4). tile's layouts
address bytes, so a tile of ``(..., n)`` 4-bit elements becomes a tile of ``(..., n / 2)`` bytes
(``int8`` for ``int4``, ``uint8`` for the others), two elements per byte along the last dim, the
even element in the low nibble: the packing of the tensors themselves (``tile.ir.packed``), so a
copy between a packed tensor and a tile moves bytes. The operators on such a tile:

* ``T.copy`` to or from a tensor or tile of the same 4-bit type: a copy of bytes. Both
  regions must start at an even column and span an even number of columns (two elements
  share a byte); a tensor is read through a byte view of its data.
* ``T.fill``/``T.clear`` with a constant: its code in both nibbles of every byte.
* ``T.gemm`` of two ``int4`` (or two ``uint4``) tiles: each operand is first decoded into an
  ``int8`` (``uint8``) tile of the logical shape by a ``T.Parallel`` nest, and the product runs
  on those, the 8-bit integer GEMM of every backend (exact: products of 4-bit integers
  accumulate in the int32 accumulator).
* An element read (``A_shared[i, k]`` in a ``T.Parallel`` body) decodes its nibble: ``int8`` for
  ``int4``, ``uint8`` for ``uint4``, ``float32`` for ``float4_e2m1fn``.

Anything else on such a tile (an element store, which two threads could race on within a
byte; a reduction; an odd column) is a typed error at its line, with a hint.

Runs on the kernel as the front end parsed it, before any pass of a backend's pipeline, so
every backend sees byte tiles only. A function without 4-bit tiles is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import ir, tirx

from ..errors import TileError, TileShapeError, TileTypeError, location_from_span
from ..ops import Copy, Fill, Gemm, Region, decode, op_class_of
from ..ops.loops import fresh_vars, parallel_nest
from ..ops.region import as_int
from ..packed import subbyte_bits
from ._traverse import map_nodes

_SUBBYTE_GEMM = ("int4", "uint4")
"""4-bit types ``T.gemm`` takes (decoded into 8-bit integer tiles)."""


def _storage(dtype: str) -> str:
    return "int8" if dtype == "int4" else "uint8"


def _is_tile_scope(scope: str) -> bool:
    return scope.startswith("shared") or scope.startswith("local")


def decode_nibble(byte: Any, high: Any, dtype: str) -> Any:
    """The ``dtype`` element held in nibble ``high`` (0: bits 3..0, 1: bits 7..4) of ``byte``:
    ``int8`` for ``int4`` (sign-extended), ``uint8`` for ``uint4``, ``float32`` for e2m1."""
    shift = tirx.Cast("uint32", high) * tirx.const(4, "uint32")
    code = tirx.bitwise_and(
        tirx.shift_right(tirx.Cast("uint32", tirx.Cast("uint8", byte)), shift), tirx.const(15, "uint32")
    )
    if dtype == "uint4":
        return tirx.Cast("uint8", code)
    if dtype == "int4":  # codes 8..15 are -8..-1: subtract 16 where bit 3 is set
        signed = tirx.Cast("int32", code)
        return tirx.Cast("int8", signed - tirx.shift_left(tirx.shift_right(signed, 3), 4))
    from ..gpu.subbyte_accesses import _decode  # e2m1: the decoder the GPU passes use

    return _decode(tirx.Cast("uint8", code), dtype)


def _fill_byte(value: Any, dtype: str, where: Any) -> int:
    """The byte holding ``value``'s code in both nibbles; ``value`` must be a constant."""
    if not isinstance(value, tirx.IntImm | tirx.FloatImm):
        raise TileTypeError(
            f"T.fill of a {dtype} tile takes a constant value, got {value}",
            hint="fill it with a literal (T.clear fills 0), or fill a wider tile and T.copy it",
            location=where,
        )
    if dtype == "float4_e2m1fn":
        from ..gpu.subbyte_accesses import encode_e2m1

        code = encode_e2m1(float(value.value))
    else:
        code = int(value.value) & 15
    return code | (code << 4)


class _Packer:
    def __init__(self, func: Any) -> None:
        self.func = func
        self.packed: dict[Any, Any] = {}  # 4-bit tile -> its byte tile
        self.dtypes: dict[Any, str] = {}
        self.twins: dict[Any, Any] = {}  # 4-bit tile a T.gemm reads -> its 8-bit tile
        self.views: dict[Any, Any] = {}  # 4-bit tensor parameter -> its byte view
        self.analyzer = tvm.sym.Analyzer()

    # -------------------------------------------------------------------------------- buffers
    def find_tiles(self) -> None:
        def on_alloc(node: Any) -> None:
            buffer = node.buffer
            dtype = str(buffer.dtype)
            if subbyte_bits(dtype) != 4 or not _is_tile_scope(str(buffer.scope())):
                return
            last = as_int(buffer.shape[-1]) if len(buffer.shape) else None
            if last is None or last % 2:
                raise TileShapeError(
                    f"{dtype} tile {buffer.name} has {buffer.shape[-1] if len(buffer.shape) else 0} elements "
                    "along its last dim; tile keeps two per byte there, so it must be a constant even number",
                    hint=f"allocate {buffer.name} with an even last dim",
                    location=location_from_span(getattr(node, "span", None)),
                )
            shape = [*buffer.shape[:-1], last // 2]
            self.packed[buffer] = tirx.decl_buffer(
                shape, _storage(dtype), name=str(buffer.name), scope=str(buffer.scope())
            )
            self.dtypes[buffer] = dtype

        _walk(self.func.body, (tirx.AllocBuffer, on_alloc))

    def lookup(self, table: dict[Any, Any], buffer: Any) -> Any:
        for old, new in table.items():
            if buffer.same_as(old):
                return old, new
        return None

    def is_packed(self, buffer: Any) -> bool:
        return self.lookup(self.packed, buffer) is not None

    def dtype_of(self, buffer: Any) -> str:
        found = self.lookup(self.dtypes, buffer)
        return found[1] if found else str(buffer.dtype)

    def find_gemm_operands(self) -> None:
        def on_eval(node: Any) -> None:
            if op_class_of(node.value) is not Gemm:
                return
            op = decode(node.value)
            assert isinstance(op, Gemm)
            for region in (op.a, op.b):
                found = self.lookup(self.packed, region.buffer)
                if found is None:
                    continue
                old, _ = found
                dtype = self.dtypes[old]
                where = location_from_span(node.span)
                if dtype not in _SUBBYTE_GEMM:
                    raise TileTypeError(
                        f"T.gemm reads {dtype} tile {old.name}; tile multiplies 4-bit tiles of "
                        f"{' and '.join(_SUBBYTE_GEMM)} only",
                        hint=f"decode {old.name} into a float16 tile in a T.Parallel loop and T.gemm that",
                        location=where,
                    )
                if self.lookup(self.twins, old) is None:
                    self.twins[old] = tirx.decl_buffer(
                        list(old.shape), _storage(dtype), name=f"{old.name}_unpacked", scope=str(old.scope())
                    )

        _walk(self.func.body, (tirx.Evaluate, on_eval))

    def param_view(self, param: Any, where: Any) -> Any:
        found = self.lookup(self.views, param)
        if found is not None:
            return found[1]
        # a 4-bit tensor arrives as its bytes (tile.ir.packed): its last dim is twice their count,
        # even also where it is symbolic
        last = param.shape[-1]
        constant = as_int(last)
        if len(param.strides) or (constant is not None and constant % 2):
            raise TileShapeError(
                f"{param.dtype} tensor {param.name} must be contiguous with an even last dim "
                f"({last}) to be copied into a tile: two elements share a byte",
                hint="declare a contiguous tensor whose last dim is even (T.Tensor, not T.StridedTensor)",
                location=where,
            )
        view = tirx.decl_buffer(
            [*param.shape[:-1], self.analyzer.simplify(tirx.floordiv(last, 2))],
            _storage(str(param.dtype)),
            name=str(param.name),  # the name the launch recipe and the caller know
            data=tirx.buffer_data(param),
            scope=param.scope(),
        )
        self.views[param] = view
        return view

    # -------------------------------------------------------------------------------- regions
    def byte_region(self, region: Region, buffer: Any, where: Any, what: str) -> Region:
        lo, extent = region.mins[-1], region.extents[-1]
        even = self.analyzer.can_prove(tirx.floormod(lo, 2) == 0) and self.analyzer.can_prove(
            tirx.floormod(extent, 2) == 0
        )
        if not even:
            raise TileShapeError(
                f"{what} {region.name} starts at column {lo} and spans {extent} columns of "
                f"{self.dtype_of(region.buffer)} elements; two share a byte, so both must be even",
                hint="move whole bytes: start at an even column and copy an even number of columns",
                location=where,
            )
        half = tirx.const(2, str(lo.ty))
        mins = (*region.mins[:-1], self.analyzer.simplify(tirx.floordiv(lo, half)))
        extents = (*region.extents[:-1], self.analyzer.simplify(tirx.floordiv(extent, 2)))
        return Region(buffer, mins, extents)

    def copy_region(self, region: Region, other: Region, where: Any, what: str) -> Region:
        found = self.lookup(self.packed, region.buffer)
        if found is not None:
            return self.byte_region(region, found[1], where, what)
        dtype, want = str(region.buffer.dtype), self.dtype_of(other.buffer)
        if dtype != want:
            raise TileTypeError(
                f"T.copy between {want} tile {other.name} and {dtype} buffer {region.name}: "
                f"a {want} tile copies to and from {want} tensors and tiles only (as bytes)",
                hint=f"read the elements of {other.name} in a T.Parallel loop to convert them "
                "(an element read decodes its code)",
                location=where,
            )
        return self.byte_region(region, self.param_view(region.buffer, where), where, what)

    # ------------------------------------------------------------------------------ statements
    def read(self, buffer: Any, indices: Sequence[Any]) -> Any:
        """Element ``indices`` of the 4-bit tile ``buffer``, decoded from its byte tile."""
        old, packed = self.lookup(self.packed, buffer)
        column = indices[-1]
        byte = tirx.BufferLoad(packed, [*indices[:-1], tirx.shift_right(column, 1)])
        return decode_nibble(byte, tirx.bitwise_and(column, 1), self.dtypes[old])

    def unpack(self, region: Region) -> tuple[Any, Region]:
        """A ``T.Parallel`` nest decoding ``region`` of a 4-bit tile into its 8-bit twin, and the
        twin's region."""
        old, _ = self.lookup(self.packed, region.buffer)
        _, twin = self.lookup(self.twins, old)
        loop_vars = fresh_vars("u", len(region.extents))
        at = [lo + v for lo, v in zip(region.mins, loop_vars, strict=True)]
        nest = parallel_nest(
            loop_vars, list(region.extents), tirx.BufferStore(twin, self.read(region.buffer, at), at)
        )
        return nest, Region(twin, region.mins, region.extents)

    def rewrite_op(self, node: Any) -> Any:
        kind = op_class_of(node.value)
        if kind is None:
            return node
        op = decode(node.value)
        where = location_from_span(node.span)
        regions = [(name, value) for name, value in vars(op).items() if isinstance(value, Region)]
        if not any(self.is_packed(region.buffer) for _, region in regions):
            return node
        if isinstance(op, Copy):
            src, dst = op.src, op.dst
            op.src = self.copy_region(src, dst, where, "T.copy source")
            op.dst = self.copy_region(dst, src, where, "T.copy destination")
            return tirx.Evaluate(op.encode(), span=node.span)
        if isinstance(op, Fill):
            old, packed = self.lookup(self.packed, op.dst.buffer)
            byte = _fill_byte(op.value, self.dtypes[old], where)
            storage = str(packed.dtype)
            op.dst = self.byte_region(op.dst, packed, where, "T.fill destination")
            op.value = tirx.const(byte - 256 if storage == "int8" and byte > 127 else byte, storage)
            return tirx.Evaluate(op.encode(), span=node.span)
        if isinstance(op, Gemm):
            stmts = []
            for name in ("a", "b"):
                region = getattr(op, name)
                if not self.is_packed(region.buffer):
                    raise TileTypeError(
                        f"T.gemm multiplies {self.dtype_of(op.a.buffer)} tile {op.a.name} by "
                        f"{region.dtype} buffer {region.name}: both operands must be 4-bit tiles",
                        hint="T.copy the 4-bit tensor into a tile (T.alloc_shared) first",
                        location=where,
                    )
                nest, twin_region = self.unpack(region)
                stmts.append(nest)
                setattr(op, name, twin_region)
            stmts.append(tirx.Evaluate(op.encode(), span=node.span))
            return tirx.SeqStmt(stmts)
        packed = next(region for _, region in regions if self.is_packed(region.buffer))
        raise TileTypeError(
            f"{kind.__name__} on {self.dtype_of(packed.buffer)} tile {packed.name}: a 4-bit tile "
            "takes T.copy, T.fill/T.clear, T.gemm and element reads",
            hint=f"read {packed.name}'s elements into a tile of a wider type in a T.Parallel loop "
            "(an element read decodes its code) and use that",
            location=where,
        )

    def run(self) -> Any:
        self.find_tiles()
        if not self.packed:
            return self.func
        self.find_gemm_operands()

        def on_alloc(node: Any) -> Any:
            found = self.lookup(self.packed, node.buffer)
            return node if found is None else tirx.AllocBuffer(found[1], node.annotations)

        def twin_of(stmt: Any) -> Any:
            if not isinstance(stmt, tirx.AllocBuffer):
                return None
            for old, new in self.packed.items():
                if stmt.buffer.same_as(old) or stmt.buffer.same_as(new):
                    twin = self.lookup(self.twins, old)
                    return None if twin is None else tirx.AllocBuffer(twin[1], stmt.annotations)
            return None

        def on_seq(seq: Any) -> Any:  # a 4-bit tile a T.gemm reads: its 8-bit twin beside it
            out = []
            for stmt in seq.seq:
                out.append(stmt)
                twin = twin_of(stmt)
                if twin is not None:
                    out.append(twin)
            return tirx.SeqStmt(out) if len(out) != len(seq.seq) else seq

        def on_load(load: Any) -> Any:
            return self.read(load.source, list(load.indices)) if self.is_packed(load.source) else load

        def on_store(store: Any) -> Any:
            found = self.lookup(self.packed, store.buffer)
            if found is None:
                return store
            raise TileTypeError(
                f"a store of one element into {self.dtypes[found[0]]} tile {found[0].name}: two "
                "elements share a byte, and the threads storing them would race",
                hint=f"fill {found[0].name} with T.copy from a tensor or tile of its type, or keep "
                "the values in an int8 tile",
                location=location_from_span(getattr(store, "span", None)),
            )

        # tile operators first (their regions name the tiles), then allocations and accesses
        body = map_nodes(self.func.body, [(tirx.Evaluate, self.rewrite_op)])
        body = map_nodes(
            body,
            [
                (tirx.SeqStmt, on_seq),
                (tirx.AllocBuffer, on_alloc),
                (ir.TensorLoad, on_load),
                (tirx.BufferStore, on_store),
            ],
        )
        self.check_nothing_left(body)
        return self.with_views(body)

    def with_views(self, body: Any) -> Any:
        """The function over ``body``, each byte view declared over its parameter's data (the
        signature keeps the 4-bit types the caller's packed tensors are checked against)."""
        views = [tirx.DeclBuffer(view, data=tirx.buffer_data(param)) for param, view in self.views.items()]
        return self.func.with_body(tirx.SeqStmt([*views, body]) if views else body)

    def check_nothing_left(self, body: Any) -> None:
        left: list[Any] = []

        def on_var(var: Any) -> None:
            if tirx.is_buffer_var(var) and self.is_packed(var):
                left.append(var)

        tvm_ffi.structural_walk(body, (ir.Var, on_var))
        if left:
            old = left[0]
            raise TileTypeError(
                f"{self.dtype_of(old)} tile {old.name} is used in a way "
                "tile cannot keep two elements per byte for (a layout annotation, a pointer, an operator)",
                hint="a 4-bit tile takes T.copy, T.fill/T.clear, T.gemm and element reads",
            )


def _walk(body: Any, callback: tuple[type, Any]) -> None:
    """``tvm_ffi.structural_walk``, a ``TileError`` of the callback raised as it is (through the
    FFI it would come back a ``RuntimeError``)."""
    kind, fn = callback
    failed: list[TileError] = []

    def guarded(node: Any) -> None:
        if failed:
            return
        try:
            fn(node)
        except TileError as error:
            failed.append(error)

    tvm_ffi.structural_walk(body, (kind, guarded))
    if failed:
        raise failed[0]


def pack_subbyte_tiles(func: Any) -> Any:
    """``func`` with its 4-bit shared and fragment tiles held as bytes (see the module doc)."""
    return _Packer(func).run()
