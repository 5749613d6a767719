"""``@tb.jit``: trace an array function, partition it into kernels, write and run tile programs."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import inspect
import json
import pathlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from tile.ir.errors import TileError, TileShapeError, TileTypeError

from ..cache import cache_dir
from ..callsite import call_site
from ..naming import named
from . import graph
from .emit import Config, Names, Shapes, host_reshape, writer_for
from .graph import Array, BeginnerError, Dim, Node, normalize_dtype
from .partition import Kernel, partition


class _TensorSpec:
    """``tb.Tensor[("M", 64), "float16"]``: an argument annotation with symbolic extents."""

    def __init__(self, shape: Sequence[Dim], dtype: str | None) -> None:
        for d in shape:
            if not (isinstance(d, int) and d >= 0) and not (isinstance(d, str) and d.isidentifier()):
                raise BeginnerError(f"tb.Tensor extents are ints or names, got {d!r}", location=call_site())
        self.shape = tuple(shape)
        self.dtype = normalize_dtype(dtype) if dtype is not None else None

    def __repr__(self) -> str:
        return f"tb.Tensor[{self.shape!r}, {self.dtype!r}]"


class Tensor:
    """Annotation for an argument of a ``@tb.jit`` function: ``x: tb.Tensor[("M", "K"), "float16"]``.

    Named extents are symbolic: one compile serves every size; ints must match exactly.
    """

    def __class_getitem__(cls, item: Any) -> _TensorSpec:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple | list):
            return _TensorSpec(item[0], item[1])
        if isinstance(item, tuple | list):
            return _TensorSpec(item, None)
        raise BeginnerError("write tb.Tensor[(extents...), dtype]", location=call_site())


def _describe(arg: Any, position: str) -> tuple[tuple[int, ...], str, str]:
    shape = getattr(arg, "shape", None)
    dtype = getattr(arg, "dtype", None)
    if shape is None or dtype is None:
        raise TileTypeError(
            f"argument {position} is a {type(arg).__name__}, not an array",
            hint="pass numpy arrays or torch tensors",
            location=call_site(),
        )
    device = str(getattr(arg, "device", "cpu"))
    return tuple(int(d) for d in shape), normalize_dtype(dtype), device


@dataclasses.dataclass
class Program:
    """A traced and compiled signature: its kernels, source and host entry point."""

    source: str
    kernels: list[Kernel]
    infos: list[dict[str, Any]]
    names: Names
    run: Callable[..., Any] | None
    multiple: bool
    function: str
    target: Any


class Plan:
    """What ``@tb.jit`` launches for one argument signature (``print(f.plan(x, ...))``)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.kernels = program.kernels

    def __str__(self) -> str:
        p = self.program
        lines = [f"plan of {p.function}: {len(p.kernels)} kernel(s)"]
        produced: dict[int, int] = {}
        for index, (kernel, info) in enumerate(zip(p.kernels, p.infos, strict=True)):
            ops = ", ".join(
                _op_label(n) for n in kernel.nodes if n.op != "transpose" or kernel.kind == "elementwise"
            )
            lines.append(f"  kernel_{index}: {kernel.kind} over {tuple(kernel.anchor)}, config {info}")
            lines.append(f"    fuses: {ops}")
            reads = []
            for node in kernel.inputs:
                origin = node.inputs[0] if node.op == "transpose" else node
                where = (
                    f"intermediate from kernel_{produced[id(origin)]} (global memory)"
                    if id(origin) in produced
                    else "argument"
                )
                reads.append(f"{p.names.of(origin)} [{where}]")
            lines.append(f"    reads: {', '.join(reads) or '-'}")
            lines.append(
                f"    writes: {', '.join(p.names.of(n) + str(tuple(n.shape)) for n in kernel.outputs)}"
            )
            for node in kernel.outputs:
                produced[id(node)] = index
        return "\n".join(lines)

    __repr__ = __str__


def _op_label(node: Node) -> str:
    label = str(node.attrs.get("fn") or node.attrs.get("kind") or node.op)
    if node.op == "cast":
        label = f"astype({node.dtype})"
    if node.op == "reduce":
        label = f"{node.attrs['kind']}(axis={node.attrs['axes']})"
    loc = node.location
    return f"{label}@{pathlib.Path(loc.filename).name}:{loc.line}" if loc else label


class JitFunction:
    """A ``@tb.jit`` function: call it with arrays; ``plan`` and ``developer_source`` explain it."""

    def __init__(self, fn: Callable[..., Any], target: Any) -> None:
        self.fn = fn
        self.target = target
        self.signature = inspect.signature(fn)
        try:
            annotations = inspect.get_annotations(fn, eval_str=True)
        except Exception:
            annotations = {}
        self.specs: dict[str, _TensorSpec] = {
            k: v for k, v in annotations.items() if isinstance(v, _TensorSpec)
        }
        self.programs: dict[Any, Program] = {}
        functools.update_wrapper(self, fn)

    # -- signatures ----------------------------------------------------------------------------
    def _bind(self, args: Sequence[Any]) -> tuple[Any, list[tuple[str, tuple[Dim, ...], str]]]:
        params = list(self.signature.parameters)
        if len(args) != len(params):
            raise TileTypeError(
                f"{self.fn.__name__} takes {len(params)} array argument(s), got {len(args)}",
                location=call_site(),
            )
        described = []
        bound: dict[str, int] = {}
        key = []
        devices = set()
        for name, arg in zip(params, args, strict=True):
            shape, dtype, device = _describe(arg, repr(name))
            devices.add(device.split(":")[0] if device != "cpu" else "cpu")
            spec = self.specs.get(name)
            traced: tuple[Dim, ...] = shape
            if spec is not None:
                if len(spec.shape) != len(shape):
                    raise TileShapeError(
                        f"argument {name!r} has shape {shape}, its annotation {spec.shape}",
                        location=call_site(),
                    )
                if spec.dtype is not None and spec.dtype != dtype:
                    raise TileTypeError(
                        f"argument {name!r} is {dtype}, its annotation says {spec.dtype}",
                        location=call_site(),
                    )
                for want, got in zip(spec.shape, shape, strict=True):
                    if isinstance(want, int) and want != got:
                        raise TileShapeError(
                            f"argument {name!r} has shape {shape}, its annotation {spec.shape}",
                            location=call_site(),
                        )
                    if isinstance(want, str) and bound.setdefault(want, got) != got:
                        raise TileShapeError(
                            f"{want!r} is {bound[want]} in an earlier argument and {got} in {name!r}",
                            location=call_site(),
                        )
                traced = spec.shape
            described.append((name, traced, dtype))
            key.append((traced, dtype))
        return (tuple(key), tuple(sorted(devices))), described

    def _trace(
        self, described: list[tuple[str, tuple[Dim, ...], str]]
    ) -> tuple[list[Node], list[Node], bool]:
        inputs = [
            Node("input", (), shape, dtype, {"name": name, "index": i}, None)
            for i, (name, shape, dtype) in enumerate(described)
        ]
        result = self.fn(*[Array(n) for n in inputs])
        multiple = isinstance(result, tuple | list)
        values = list(result) if multiple else [result]
        outputs = []
        for value in values:
            if not isinstance(value, Array):
                raise BeginnerError(
                    f"{self.fn.__name__} must return traced arrays (or a tuple of them), "
                    f"got {type(value).__name__}",
                    location=_function_location(self.fn),
                )
            outputs.append(value._node)
        return inputs, outputs, multiple

    def _program(self, args: Sequence[Any]) -> Program:
        key, described = self._bind(args)
        program = self.programs.get(key)
        if program is None:
            inputs, outputs, multiple = self._trace(described)
            program = build_program(self.fn.__name__, inputs, outputs, multiple, self.target)
            self.programs[key] = program
        return program

    # -- public ------------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        program = self._program(args)
        if program.run is None:
            program.run = load_run(program)
        try:
            return program.run(*args)
        except TileError as exc:
            raise exc.with_location(exc.location or call_site()) from None

    def plan(self, *args: Any) -> Plan:
        """The kernels this function launches for arguments like ``args`` (nothing runs)."""
        return Plan(self._program(args))

    def developer_source(self, *args: Any) -> str:
        """The generated developer-tier tile program for arguments like ``args``, as Python source."""
        return self._program(args).source


def _function_location(fn: Callable[..., Any]) -> Any:
    from tile.ir.errors import SourceLocation

    code = getattr(fn, "__code__", None)
    return SourceLocation.from_file(code.co_filename, code.co_firstlineno) if code else None


def _config_for(target: Any) -> tuple[Config, Any]:
    from ..jit import _pick_target

    resolved, manifest = _pick_target(target)
    caps = manifest.capabilities(resolved)
    # Defaults for what the hint generator has no answer for (symbolic sizes); the GEMM and
    # attention kernels ask tile.lang.carver for their tiles (Config.hinted).
    on_cpu = caps.warp_size == 1
    config = Config(
        rows=16,
        ew_rows=32,
        ew_cols=128 if on_cpu else 64,
        gemm=(64, 64, 32),
        attn=(128, 128) if on_cpu else (64, 64),
        threads=128,
        stages=2,
        target=target,
        shared_bytes=caps.shared_bytes,
    )
    return config, resolved


def build_program(name: str, inputs: list[Node], outputs: list[Node], multiple: bool, target: Any) -> Program:
    """Partition the graph and write the module source (compiling happens on the first call)."""
    for node in outputs:
        if node.op == "const":
            raise BeginnerError(f"{name} returns a constant", location=node.location)
    kernels = partition(outputs)
    config, _ = _config_for(target)
    names = Names()
    for node in inputs:
        names.of(node)
    shapes = Shapes()
    factories: list[str] = []
    calls: list[str] = []
    infos: list[dict[str, Any]] = []
    for index, kernel in enumerate(kernels):
        writer = writer_for(index, kernel, names, shapes, config)
        factories.append(writer.write())
        infos.append(writer.info)
        args = ", ".join(p[3] for p in writer.params if p[0] not in {o[0] for o in writer.outputs_order})
        outs = [o[1] for o in writer.outputs_order]
        targets = ", ".join(names.of(n) for n in outs)
        calls.append(f"    {targets} = kernel_{index}()({args})")
        for node in outs:
            calls.append(f"    {names.of(node)} = {names.of(node)}.reshape({host_reshape(node)})")
    for node in outputs:
        if node.op == "transpose" and not any(node in k.nodes for k in kernels):  # pragma: no cover
            raise BeginnerError("internal: an unmaterialized transpose result", location=node.location)
    symbols_host = []
    seen: set[str] = set()
    for node in inputs:
        for axis, d in enumerate(node.shape):
            if isinstance(d, str) and d not in seen:
                seen.add(d)
                symbols_host.append(f"    {d} = {names.of(node)}.shape[{axis}]")
    results = ", ".join(names.of(n) for n in outputs)
    target_src = json.dumps(target) if isinstance(target, dict) else repr(str(target or "auto"))
    header = [
        f'"""Developer-tier tile program generated by tile.lang.beginner from {name}().',
        "",
        "Runs unchanged under tile (and under TileLang: the kernels use only names both have).",
        '"""',
        "",
        "import tile.lang as tilelang",
        "import tile.lang.language as T",
        "",
        f"TARGET = {target_src}",
    ]
    for sym in shapes.symbols:
        header.append(f"{sym} = T.dynamic({sym!r})")
    body = [f.replace("@tilelang.jit(out_idx=", "@tilelang.jit(target=TARGET, out_idx=") for f in factories]
    params = ", ".join(names.of(n) for n in inputs)
    run = [
        f"def run({params}):",
        *symbols_host,
        *calls,
        f"    return {results}{',' if multiple and len(outputs) == 1 else ''}",
    ]
    source = "\n".join(header) + "\n\n\n" + "\n\n\n".join([*body, "\n".join(run)]) + "\n"
    return Program(source, kernels, infos, names, None, multiple, name, target)


def load_run(program: Program) -> Callable[..., Any]:
    """Import the generated module from a file (tracebacks and errors show its lines)."""
    digest = hashlib.sha256(program.source.encode()).hexdigest()[:20]
    folder = cache_dir() / "beginner"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{program.function}_{digest}.py"
    if not path.exists() or path.read_text() != program.source:
        tmp = path.with_suffix(f".tmp{id(program)}")
        tmp.write_text(program.source)
        tmp.replace(path)
    module_name = f"tile_beginner_{program.function}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module.run  # type: ignore[no-any-return]


def jit(fn: Callable[..., Any] | None = None, *, target: Any = "auto") -> Any:
    """Compile an array function to tile kernels: ``@tb.jit`` or ``@tb.jit(target=...)``.

    Example::

        import tile.lang.beginner as tb

        @tb.jit
        def scaled_softmax(x):
            return tb.softmax(x * 0.5, axis=-1)

        y = scaled_softmax(np.random.rand(128, 64).astype("float32"))
    """
    if fn is None:
        return lambda f: JitFunction(f, target)
    return JitFunction(fn, target)


# numpy-facing helpers the tier exports --------------------------------------------------------------
def _array_fn(name: str) -> Callable[[Any], Array]:
    def apply(x: Any) -> Array:
        return graph.unary(name, x)

    return named(apply, name, f"Element-wise {name} of a traced array.")


exp = _array_fn("exp")
exp2 = _array_fn("exp2")
log = _array_fn("log")
sqrt = _array_fn("sqrt")
rsqrt = _array_fn("rsqrt")
tanh = _array_fn("tanh")
sigmoid = _array_fn("sigmoid")
relu = _array_fn("relu")
silu = _array_fn("silu")
abs = _array_fn("abs")


def gelu(x: Any) -> Array:
    """GELU with the tanh approximation (``jax.nn.gelu``'s default; torch's ``approximate='tanh'``)."""
    return graph.unary("gelu", x)


def maximum(a: Any, b: Any) -> Array:
    return graph.binary("maximum", a, b)


def minimum(a: Any, b: Any) -> Array:
    return graph.binary("minimum", a, b)


def where(cond: Any, a: Any, b: Any) -> Array:
    return graph.where(cond, a, b)


def clip(x: Any, lo: Any = None, hi: Any = None) -> Array:
    out = x
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    if not isinstance(out, Array):
        raise BeginnerError("tb.clip takes a traced array", location=call_site())
    return out


def transpose(x: Array, axes: Sequence[int] | None = None) -> Array:
    return graph.transpose(x, axes)


def softmax(x: Array, axis: int = -1) -> Array:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (built from the primitives)."""
    shifted = x - x.max(axis=axis, keepdims=True)
    e = exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)
