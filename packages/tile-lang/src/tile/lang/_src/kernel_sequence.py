"""A ``@T.prim_func`` that launches several ``T.Kernel`` blocks in turn, or allocates
``T.alloc_global`` scratch before its kernel: one callable over separately compiled kernels.

Split-K decoding is the common case: a first kernel writes partial results to a global
scratch tensor, a second combines them::

    @T.prim_func
    def decode(Q: T.Tensor(...), K: T.Tensor(...), Out: T.Tensor(...)):
        partial = T.alloc_global((batch, splits, dim), "float32")
        with T.Kernel(batch, splits) as (b, s):
            ...  # writes partial[b, s, :]
        with T.Kernel(batch) as b:
            ...  # reads partial[b, :, :], writes Out[b, :]

Each ``T.Kernel`` compiles to a kernel of its own with the function's whole parameter list;
the kernels run in program order on the same tensors (a GPU stream orders them, as two
launches would be). Scratch tensors are trailing parameters (``SCRATCH_PARAMS``) that the
first kernel allocates like outputs at each call; they are not returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tvm import tirx  # type: ignore[import-untyped]

from .arguments import ParamSpec, param_specs
from .session import SCRATCH_PARAMS


def scratch_count(func: Any) -> int:
    """How many trailing parameters of ``func`` are function-scope ``T.alloc_global`` scratch."""
    attrs = getattr(func, "attrs", None)
    return int(attrs[SCRATCH_PARAMS]) if attrs is not None and SCRATCH_PARAMS in attrs else 0


def _is_kernel(stmt: Any) -> bool:
    return (
        isinstance(stmt, tirx.AttrStmt)
        and stmt.attr_key == "thread_extent"
        and str(getattr(stmt.node, "thread_tag", "")).startswith("blockIdx")
    )


def kernel_parts(func: Any) -> list[Any]:
    """One ``PrimFunc`` per top-level ``T.Kernel`` of ``func`` (each with all its parameters),
    or ``[]`` when ``func`` is one kernel with no scratch (the ordinary case)."""
    body = func.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    several = len(stmts) > 1 and all(_is_kernel(s) for s in stmts)
    if not several and not scratch_count(func):
        return []
    if not several:
        stmts = [body]
    attrs = {str(k): v for k, v in func.attrs.items() if str(k) != SCRATCH_PARAMS} if func.attrs else {}
    name = str(getattr(func, "__name__", None) or "main")
    parts = []
    for index, stmt in enumerate(stmts):
        part = tirx.PrimFunc(list(func.params), stmt).with_attrs(attrs)
        part.__name__ = name if len(stmts) == 1 else f"{name}_kernel{index}"
        parts.append(part)
    return parts


class KernelSequence:
    """The compiled kernels of one function, called as one kernel (``JITKernel``'s interface:
    ``params``, ``out_idx``, ``get_kernel_source``, ``get_profiler``)."""

    def __init__(self, func: Any, outputs: list[int], compile_part: Callable[[Any, list[int]], Any]) -> None:
        scratch = scratch_count(func)
        every = param_specs(func)
        self.func = func
        self.params: list[ParamSpec] = every[: len(every) - scratch]
        self.out_idx = outputs
        self.name = str(getattr(func, "__name__", None) or "main")
        parts = kernel_parts(func)
        self._total = len(every)
        self._allocated = [*outputs, *range(len(self.params), len(every))]
        self.kernels = [compile_part(parts[0], self._allocated)]
        self.kernels += [compile_part(part, []) for part in parts[1:]]
        first = self.kernels[0]
        self.target = first.target
        self.artifact = first.artifact
        self.device = first.device

    @property
    def input_params(self) -> list[ParamSpec]:
        return [p for i, p in enumerate(self.params) if i not in self.out_idx]

    def __call__(self, *args: Any) -> Any:
        made = self.kernels[0](*args)
        made = () if not self._allocated else made if isinstance(made, tuple) else (made,)
        given = dict(zip(self._allocated, made, strict=True))
        it = iter(args)
        full = [given[i] if i in given else next(it) for i in range(self._total)]
        for kernel in self.kernels[1:]:
            kernel(*full)
        outputs = [full[i] for i in self.out_idx]
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def get_kernel_source(self, kind: str | None = None, kernel_only: bool = False) -> str:
        """Each kernel's source (``JITKernel.get_kernel_source``), in launch order."""
        return "\n".join(k.get_kernel_source(kind, kernel_only) for k in self.kernels)

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        """A ``Profiler`` over the whole sequence."""
        from .profiler import Profiler

        return Profiler(self, tensor_supply_type)

    def run_once(self, func: Any = None) -> Any:
        """Run the kernels (or ``func``) once on inputs the profiler makes."""
        return self.get_profiler().run_once(func)
