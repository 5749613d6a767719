"""Passes, their contracts, the compile context, and the pipeline runner.

A pass is a named function ``(IRModule, CompileContext) -> IRModule`` with a contract
stated as data: the ``Property``s it ``needs`` before it runs, those it ``guarantees``
after, and those it ``invalidates`` (a property the IR loses, such as "tile ops are
still calls" once ``lower_tile_ops`` ran). A backend's pipeline is a flat list of
passes. ``run_pipeline`` checks the contracts:

* always, before running anything (``check_pipeline``): every property a pass needs was
  given at the pipeline's entry or guaranteed by an earlier pass and not invalidated
  since;
* always, after each pass: the cheap check of every property it guarantees (an
  attribute lookup or a walk over loops and attributes);
* with ``TILE_VERIFY_EACH_PASS=1``: the IR verifier and the expensive checks of the
  guaranteed properties after every pass.

A broken contract raises ``PassContractError`` naming the pass. The verifier always runs
at pipeline entry and exit; with ``TILE_DUMP_IR=<dir>`` the IR is written as TVMScript
text after every pass.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import tvm  # type: ignore[import-untyped]
import tvm_ffi
from tvm import tirx

from .. import env
from ..backend import Capabilities
from ..errors import PassContractError, TileVerifyError
from ..target import Target


@dataclasses.dataclass(frozen=True)
class CompileContext:
    """What passes may read about the compilation: the target and its capabilities."""

    target: Target
    capabilities: Capabilities


PassFn = Callable[[Any, "CompileContext"], Any]
PropertyCheck = Callable[[Any, "CompileContext"], "str | None"]
"""``(mod, ctx) -> None`` when the property holds, else a sentence saying where it fails."""


@dataclasses.dataclass(frozen=True)
class Property:
    """A named fact about the IR that passes need or guarantee.

    ``check`` is cheap (attribute lookups, a walk over loops or attributes) and runs after
    every pass that guarantees the property; ``verify`` may walk every expression and runs
    only under ``TILE_VERIFY_EACH_PASS=1``. Either may be absent: the property is then
    tracked by name only (the pipeline order is still checked).
    """

    name: str
    doc: str
    check: PropertyCheck | None = dataclasses.field(default=None, compare=False, repr=False)
    verify: PropertyCheck | None = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return self.name


class Pass:
    """A named module-to-module transformation and its contract (see module docstring).

    >>> from tile.ir.transform.properties import TILE_OPS, NORMALIZED
    >>> step = Pass("noop", lambda mod, ctx: mod, needs={TILE_OPS}, guarantees={NORMALIZED})
    >>> sorted(p.name for p in step.needs), step.name
    (['tile_ops'], 'noop')
    """

    __slots__ = ("guarantees", "invalidates", "name", "needs", "run")

    def __init__(
        self,
        name: str,
        run: PassFn,
        *,
        needs: Iterable[Property] = (),
        guarantees: Iterable[Property] = (),
        invalidates: Iterable[Property] = (),
    ) -> None:
        self.name = name
        self.run = run
        self.needs: frozenset[Property] = frozenset(needs)
        self.guarantees: frozenset[Property] = frozenset(guarantees)
        self.invalidates: frozenset[Property] = frozenset(invalidates)

    def __call__(self, mod: Any, ctx: CompileContext) -> Any:
        return self.run(mod, ctx)

    def __repr__(self) -> str:
        return f"Pass({self.name!r})"


def map_prim_funcs(mod: Any, fn: Callable[[Any], Any]) -> Any:
    """A new module with ``fn`` applied to every ``PrimFunc`` (others are kept).

    ``mod`` itself when ``fn`` returns every function unchanged (``same_as``), so a pass
    that does not apply to a target leaves the module as it was.
    """
    funcs = {}
    changed = False
    for gvar, func in mod.functions.items():
        new = fn(func) if isinstance(func, tirx.PrimFunc) else func
        changed = changed or not new.same_as(func)
        funcs[gvar.name_hint] = new
    return tvm.IRModule(funcs, attrs=mod.attrs) if changed else mod


def replace_nodes(root: Any, table: Mapping[Any, Any], kind: type) -> Any:
    """``root`` with every ``kind`` node (a ``tirx.Buffer``, an ``ir.Var``) that is a key of
    ``table`` replaced by its value. Keys match by identity (``same_as``), not by structure:
    two buffers that print alike stay apart.
    """

    def swap(node: Any) -> Any:
        return next((new for old, new in table.items() if node.same_as(old)), node)

    return tvm_ffi.structural_map(root, (kind, swap))


def function_pass(
    rewrite: Callable[[Any], Any],
    *,
    name: str | None = None,
    needs: Iterable[Property] = (),
    guarantees: Iterable[Property] = (),
    invalidates: Iterable[Property] = (),
) -> Pass:
    """A pass, named ``name`` (default: after ``rewrite``), that rewrites every ``PrimFunc`` on its own.

    For the passes that look at one function at a time and read nothing of the context:
    ``rewrite(func) -> func`` is applied by ``map_prim_funcs``. The pass's ``run`` is the
    module-level function ``(mod, ctx) -> mod``, documented by ``rewrite``'s docstring.

    >>> def keep(func):
    ...     return func
    >>> step = function_pass(keep)
    >>> step.name, step.needs
    ('keep', frozenset())
    """
    return context_function_pass(
        lambda func, ctx: rewrite(func),
        name=name or rewrite.__name__,
        doc=rewrite.__doc__,
        needs=needs,
        guarantees=guarantees,
        invalidates=invalidates,
    )


def context_function_pass(
    rewrite: Callable[[Any, CompileContext], Any],
    *,
    name: str | None = None,
    doc: str | None = None,
    needs: Iterable[Property] = (),
    guarantees: Iterable[Property] = (),
    invalidates: Iterable[Property] = (),
) -> Pass:
    """``function_pass`` for rewrites that read the compile context: ``rewrite(func, ctx) -> func``.

    >>> def keep_on_gpus(func, ctx):
    ...     return func
    >>> context_function_pass(keep_on_gpus).name
    'keep_on_gpus'
    """
    pass_name = name or rewrite.__name__

    def run(mod: Any, ctx: CompileContext) -> Any:
        return map_prim_funcs(mod, lambda func: rewrite(func, ctx))

    run.__name__ = run.__qualname__ = pass_name
    run.__doc__ = doc if doc is not None else rewrite.__doc__
    return Pass(pass_name, run, needs=needs, guarantees=guarantees, invalidates=invalidates)


def dump_ir(mod: Any, directory: str, index: int, stage: str) -> pathlib.Path:
    """Write ``mod`` as TVMScript text to ``directory/<index>-<stage>.py``."""
    path = pathlib.Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    out = path / f"{index:02d}-{stage}.py"
    out.write_text(mod.script())
    return out


def _names(props: Iterable[Property]) -> str:
    return ", ".join(sorted(p.name for p in props))


def check_pipeline(passes: Sequence[Pass], given: Iterable[Property]) -> None:
    """Raise ``PassContractError`` for the first pass that needs a property nobody provided.

    A property is available once ``given`` holds it or an earlier pass guarantees it, until
    a pass invalidates it. Costs nothing but set operations: ``run_pipeline`` always runs it.
    """
    available = set(given)
    for index, step in enumerate(passes):
        missing = step.needs - available
        if missing:
            first = min(missing, key=lambda p: p.name)
            later = [p.name for p in passes[index + 1 :] if first in p.guarantees]
            lost = [p.name for p in passes[:index] if first in p.invalidates]
            if later:
                hint = f"run {later[0]} before {step.name}"
            elif lost:
                hint = f"run {step.name} before {lost[-1]}, which invalidates {first.name}"
            else:
                hint = f"add a pass that guarantees {first.name} before {step.name}"
            raise PassContractError(
                f"pass {step.name} (#{index + 1}) needs {_names(missing)}, which no earlier pass guarantees",
                pass_name=step.name,
                property_name=first.name,
                hint=hint,
            )
        available -= step.invalidates
        available |= step.guarantees


def _check_guarantees(mod: Any, step: Pass, ctx: CompileContext, expensive: bool) -> None:
    for prop in sorted(step.guarantees, key=lambda p: p.name):
        for check in (prop.check, prop.verify if expensive else None):
            reason = check(mod, ctx) if check is not None else None
            if reason is not None:
                raise PassContractError(
                    f"pass {step.name} guarantees {prop.name} ({prop.doc}), but after it {reason}",
                    pass_name=step.name,
                    property_name=prop.name,
                    hint="a bug in the pass (or in a lowering rule it ran); "
                    "TILE_DUMP_IR=<dir> writes the IR before and after it",
                )


def run_pipeline(
    mod: Any, passes: Sequence[Pass], ctx: CompileContext, given: Iterable[Property] | None = None
) -> Any:
    """Run ``passes`` in order, checking their contracts (see module docstring).

    ``given`` is what holds for ``mod`` on entry; by default ``ENTRY_PROPERTIES``, what the
    front end's tile IR satisfies.
    """
    from .properties import ENTRY_PROPERTIES
    from .verify import check_stage, first_bad_pass, verify

    check_pipeline(passes, ENTRY_PROPERTIES if given is None else given)
    source = mod
    check_stage(mod, False, "the front end (@T.prim_func)")
    dump_dir = env.DUMP_IR.get()
    each = env.VERIFY_EACH_PASS.get()
    if dump_dir:
        dump_ir(mod, dump_dir, 0, "input")
    for index, step in enumerate(passes, start=1):
        mod = step(mod, ctx)
        if dump_dir:
            dump_ir(mod, dump_dir, index, step.name)
        if each:
            try:
                verify(mod, lowered=None)
            except PassContractError:
                raise
            except TileVerifyError as exc:
                raise PassContractError(
                    f"the IR after pass {step.name} (#{index}) fails verification: {exc.message}",
                    pass_name=step.name,
                    hint="a bug in the pass; TILE_DUMP_IR=<dir> writes the IR before and after it",
                    location=exc.location,
                ) from exc
        _check_guarantees(mod, step, ctx, expensive=each)
    check_stage(mod, True, "the pipeline", locate=lambda: first_bad_pass(source, passes, ctx))
    return mod


def format_pipeline(passes: Sequence[Pass], title: str = "") -> str:
    """The pipeline as text, one pass a line with its contract (``python -m tile.backends.X --pipeline``)."""
    width = max((len(p.name) for p in passes), default=0)
    lines = [title] if title else []
    for index, step in enumerate(passes, start=1):
        parts = []
        if step.needs:
            parts.append(f"needs {_names(step.needs)}")
        if step.guarantees:
            parts.append(f"guarantees {_names(step.guarantees)}")
        if step.invalidates:
            parts.append(f"invalidates {_names(step.invalidates)}")
        lines.append(f"{index:3d}. {step.name:<{width}}  {'; '.join(parts)}".rstrip())
    return "\n".join(lines)
