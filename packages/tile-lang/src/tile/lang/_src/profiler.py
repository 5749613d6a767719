"""``kernel.get_profiler()``: check a kernel against a reference and time it (TileLang API).

Example::

    kernel = tilelang.compile(matmul(256, 256, 256, 64, 64, 32), out_idx=[2], target="cpu")
    profiler = kernel.get_profiler(tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda A, B: A @ B, atol=1e-2, rtol=1e-2)
    print(profiler.do_bench(), "ms")

Inputs are made for every parameter that is not an output (``out_idx``): torch CPU
tensors when torch is installed (as TileLang does), else numpy arrays. The reference
program gets the same inputs (copies) and returns the outputs, one or a tuple.
"""

from __future__ import annotations

import enum
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tile.ir.errors import TileError, TileShapeError

from .arguments import ParamSpec, _numpy_dtype, dim_value, is_torch_tensor


class TensorSupplyType(enum.Enum):
    """How the profiler fills the kernel's input tensors."""

    Integer = 1  # small integers in [-2, 2] (exact in every dtype)
    Uniform = 2  # uniform in [-1, 1)
    Normal = 3  # standard normal
    Randn = 4  # standard normal (TileLang's other spelling)
    Zero = 5
    One = 6
    Auto = 7  # Uniform for float16/bfloat16/float32, Integer for other dtypes (as TileLang's Auto)


class ProfilerError(TileError, ValueError):
    """The profiler cannot make inputs for, or compare the outputs of, this kernel.

    A ``ValueError`` too: TileLang's profiler raises that for inputs it cannot make."""


class AllcloseError(AssertionError):
    """The kernel's outputs differ from the reference program's."""


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _values(spec: ParamSpec, shape: tuple[int, ...], supply: TensorSupplyType, rng: Any) -> np.ndarray:
    kind = supply
    if kind is TensorSupplyType.Auto:  # TileLang's choice: its tests' tolerances assume it
        uniform = spec.dtype in ("float16", "bfloat16", "float32")
        kind = TensorSupplyType.Uniform if uniform else TensorSupplyType.Integer
    if kind is TensorSupplyType.Zero:
        data = np.zeros(shape)
    elif kind is TensorSupplyType.One:
        data = np.ones(shape)
    elif kind is TensorSupplyType.Integer or not _is_float(spec.dtype):
        low = 0 if spec.dtype.startswith(("uint", "bool")) else -2
        high = 2 if spec.dtype == "bool" else 3
        data = rng.integers(low, high, size=shape)
    elif kind is TensorSupplyType.Uniform:
        data = rng.uniform(-1.0, 1.0, size=shape)
    else:
        data = rng.standard_normal(size=shape)
    return np.ascontiguousarray(np.asarray(data, dtype=np.float64).astype(_numpy_dtype(spec.dtype)))


def _to_torch(array: np.ndarray, dtype: str) -> Any:
    import torch

    wanted = getattr(torch, dtype, None)
    if wanted is None:
        raise ProfilerError(f"torch has no dtype {dtype}", hint="pass input_tensors= as numpy arrays")
    if array.dtype.name in _NUMPY_TORCH_SHARE:
        return torch.from_numpy(array)
    # bfloat16, float8 (ml_dtypes; its float8_e5m2 even reports kind "f") via float32
    return torch.from_numpy(array.astype(np.float32)).to(wanted)


_NUMPY_TORCH_SHARE = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
     "float64", "complex64", "complex128"]
)  # fmt: skip
"""numpy dtypes ``torch.from_numpy`` takes as they are."""


def _as_numpy(value: Any) -> np.ndarray:
    """Any output as a numpy array of a standard dtype (bfloat16/float8 widen to float32)."""
    if is_torch_tensor(value):
        value = value.detach().cpu()
        if value.dtype.is_floating_point and value.element_size() < 4 and str(value.dtype) != "torch.float16":
            value = value.float()
        return np.asarray(value.numpy())
    array = np.asarray(value)
    return array if array.dtype.name in _NUMPY_TORCH_SHARE else array.astype(np.float32)


def _copy(value: Any) -> Any:
    if is_torch_tensor(value):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


class Profiler:
    """Inputs, correctness checks and timing for one compiled kernel."""

    def __init__(
        self,
        kernel: Any,
        supply_type: TensorSupplyType | None = None,
        *,
        seed: int = 0,
        use_torch: bool | None = None,
    ) -> None:
        self.kernel = kernel
        self.supply_type = supply_type or TensorSupplyType.Auto
        self.seed = seed
        if use_torch is None:
            try:
                import torch  # noqa: F401
            except ImportError:
                use_torch = False
            else:
                use_torch = True
        self.use_torch = use_torch
        self._inputs: list[Any] | None = None

    @property
    def func(self) -> Any:
        """The kernel this profiler calls (TileLang's ``profiler.func``: ``do_bench(profiler.func)``)."""
        return self.kernel

    @property
    def input_params(self) -> list[ParamSpec]:
        outs = set(self.kernel.out_idx)
        return [p for i, p in enumerate(self.kernel.params) if i not in outs]

    def _shape(self, spec: ParamSpec, sizes: dict[str, int] | None = None) -> tuple[int, ...]:
        dims = [dim_value(spec, d, sizes or {}) for d in spec.shape or ()]
        if any(d is None for d in dims):
            unknown = [
                d
                for d in spec.shape or ()
                if not isinstance(d, int) and dim_value(spec, d, sizes or {}) is None
            ]
            raise ProfilerError(
                f"cannot make an input for {spec.name}: its shape {list(spec.shape or ())} has symbolic "
                f"dims with no size given ({', '.join(map(str, unknown))})",
                hint="pass dynamic_symbolic_constraints={name: size, ...} or input_tensors=[...] "
                "to the profiler call",
            )
        return tuple(int(d) for d in dims if d is not None)

    def supply_inputs(self, dynamic_symbolic_constraints: dict[str, int] | None = None) -> list[Any]:
        """Fresh inputs for the kernel's non-output parameters (deterministic per seed).

        ``dynamic_symbolic_constraints`` gives the sizes of symbolic dims (``{"m": 256}``).
        """
        rng = np.random.default_rng(self.seed)
        sizes = {str(k): int(v) for k, v in (dynamic_symbolic_constraints or {}).items()}
        inputs: list[Any] = []
        for spec in self.input_params:
            if not spec.is_tensor:
                value = _values(spec, (), self.supply_type, rng)
                inputs.append(value.item())
                continue
            array = _values(spec, self._shape(spec, sizes), self.supply_type, rng)
            if not self.use_torch:
                inputs.append(array)
                continue
            tensor = _to_torch(array, spec.dtype)
            device = str(getattr(self.kernel, "device", "cpu"))
            inputs.append(tensor if device == "cpu" else tensor.to(device))  # on the kernel's GPU
        return inputs

    def _get_inputs(self, input_tensors: Sequence[Any] | None) -> list[Any]:
        if input_tensors is not None:
            return list(input_tensors)
        if self._inputs is None:
            self._inputs = self.supply_inputs()
        return self._inputs

    def run_once(
        self, func: Callable[..., Any] | None = None, input_tensors: Sequence[Any] | None = None
    ) -> Any:
        """Run the kernel (or ``func``) once on the profiler's inputs and return its result."""
        inputs = self._get_inputs(input_tensors)
        return (func or self.kernel)(*inputs)

    def assert_allclose(
        self,
        reference_program: Callable[..., Any],
        input_tensors: Sequence[Any] | None = None,
        atol: float = 1e-2,
        rtol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
    ) -> None:
        """Raise ``AllcloseError`` unless the kernel's outputs match ``reference_program``'s.

        An element matches when ``|out - ref| <= atol + rtol * |ref|``; up to
        ``max_mismatched_ratio`` of each output's elements may miss (TileLang's rule).
        """
        if not self.kernel.out_idx:
            raise ProfilerError(
                f"kernel {self.kernel.name} has no outputs to compare",
                hint="compile it with out_idx=[...] naming the output parameters",
            )
        inputs = self._get_inputs(input_tensors)
        expected = reference_program(*[_copy(x) for x in inputs])
        got = self.kernel(*[_copy(x) for x in inputs])
        got_list = list(got) if isinstance(got, tuple) else [got]
        want_list = list(expected) if isinstance(expected, tuple | list) else [expected]
        if len(got_list) != len(want_list):
            raise ProfilerError(
                f"kernel {self.kernel.name} returns {len(got_list)} outputs, "
                f"the reference returns {len(want_list)}",
                hint="make the reference return one value per out_idx entry, in order",
            )
        out_specs = [self.kernel.params[i] for i in self.kernel.out_idx]
        for spec, out, ref in zip(out_specs, got_list, want_list, strict=True):
            actual, desired = _as_numpy(out), _as_numpy(ref)
            # float32 arithmetic is exact enough for tolerances of float32 and narrower outputs,
            # and halves the memory a large output's comparison walks (autotuning checks many)
            narrow = all(d.kind == "f" and d.itemsize <= 4 for d in (actual.dtype, desired.dtype))
            wide = np.float32 if narrow else np.float64
            actual, desired = actual.astype(wide, copy=False), desired.astype(wide, copy=False)
            if actual.shape != desired.shape:
                raise TileShapeError(
                    f"output {spec.name} has shape {list(actual.shape)}, "
                    f"the reference returns shape {list(desired.shape)}",
                    hint="the reference must return tensors shaped like the kernel's outputs",
                )
            close = np.isclose(actual, desired, atol=atol, rtol=rtol, equal_nan=True)
            bad = int(close.size - np.count_nonzero(close))
            if bad > max_mismatched_ratio * close.size:
                worst = np.unravel_index(np.argmax(np.where(close, 0, np.abs(actual - desired))), close.shape)
                raise AllcloseError(
                    f"output {spec.name}: {bad} of {close.size} elements differ from the reference "
                    f"(atol={atol}, rtol={rtol}, allowed ratio {max_mismatched_ratio}); "
                    f"e.g. at {tuple(int(i) for i in worst)}: kernel {actual[worst]!r}, "
                    f"reference {desired[worst]!r}"
                )

    def do_bench(
        self,
        func: Callable[..., Any] | None = None,
        warmup: float = 25,
        rep: float = 100,
        n_warmup: int = 0,
        n_repeat: int = 0,
        input_tensors: Sequence[Any] | None = None,
        backend: str = "event",
        dynamic_symbolic_constraints: dict[str, int] | None = None,
        **_options: Any,
    ) -> float:
        """Median wall time of one call in milliseconds.

        ``warmup`` and ``rep`` are time budgets in ms (as in TileLang / Triton);
        ``n_warmup`` / ``n_repeat``, when positive, fix the counts instead. TileLang's
        ``backend=`` ("event", "cupti", "cudagraph") and other timing options are accepted:
        every call is timed by wall clock. A kernel with symbolic dims gets inputs of the sizes
        ``dynamic_symbolic_constraints`` gives (``{"m": 512}``); ``input_tensors`` wins over it.
        """
        target = func or self.kernel
        if input_tensors is None and dynamic_symbolic_constraints:
            input_tensors = self.supply_inputs(dynamic_symbolic_constraints)
        inputs = self._get_inputs(input_tensors)
        start = time.perf_counter()
        target(*inputs)
        estimate_ms = max((time.perf_counter() - start) * 1e3, 1e-4)
        warmups = n_warmup if n_warmup > 0 else max(1, min(10_000, int(warmup / estimate_ms)))
        repeats = n_repeat if n_repeat > 0 else max(3, min(10_000, int(rep / estimate_ms)))
        for _ in range(warmups):
            target(*inputs)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            target(*inputs)
            times.append((time.perf_counter() - start) * 1e3)
        return float(statistics.median(times))
