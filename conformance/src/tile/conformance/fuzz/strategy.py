"""hypothesis strategies for valid ``Program``s on one backend's capabilities."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import strategies as st

from .interpret import fits
from .program import ATOMIC_KINDS, EPILOGUES, FLOAT_OPS, INT_OPS, REDUCE_KINDS, UNSIGNED_OPS, Program

#: Element types a program may use, when the backend declares them.
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint32", "uint16",
          "uint8")
GEMM_DTYPES = ("float32", "float16", "bfloat16")
ATOMIC_DTYPES = ("float32", "int32")


def _usable(wanted: Iterable[str], supported: Iterable[str]) -> list[str]:
    return sorted(set(wanted) & set(supported))


@st.composite
def programs(draw: st.DrawFn, dtypes: Iterable[str], warp_size: int = 32, max_size: int = 80) -> Program:
    """One valid program over ``dtypes`` (the backend's ``Capabilities.dtypes``)."""
    supported = set(dtypes)
    pools = {e: _usable({"gemm": GEMM_DTYPES, "atomic": ATOMIC_DTYPES}.get(e, DTYPES), supported)
             for e in EPILOGUES}
    epilogue = draw(st.sampled_from([e for e in EPILOGUES if pools[e]]), label="epilogue")
    pool = pools[epilogue]
    dtype = draw(st.sampled_from(_usable(pool, supported)), label="dtype")
    is_int = dtype.startswith(("int", "uint"))
    unsigned = dtype.startswith("uint")
    if epilogue == "gemm":
        bm = draw(st.sampled_from([16, 32]))
        bn = draw(st.sampled_from([16, 32]))
    else:
        bm = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
        bn = draw(st.sampled_from([1, 4, 8, 16, 32]))
    M = draw(st.integers(1, max_size), label="M")
    N = draw(st.integers(1, max_size), label="N")
    threads = draw(st.sampled_from([warp_size, 2 * warp_size, 4 * warp_size]), label="threads")
    scope = draw(st.sampled_from(["shared", "fragment"]), label="scope")
    stages = draw(st.one_of(st.none(), st.integers(1, 3)), label="stages")
    op_kinds = UNSIGNED_OPS if unsigned else INT_OPS if is_int else FLOAT_OPS
    n_ops = draw(st.integers(0, 3))
    consts = st.sampled_from([1, 2, 3] if unsigned else [-3, -2, -1, 1, 2, 3] if is_int
                             else [-1.5, -0.5, 0.25, 0.5, 2.0])
    ops = tuple((draw(st.sampled_from(op_kinds)), float(draw(consts))) for _ in range(n_ops))
    fields: dict[str, object] = {}
    if epilogue == "reduce":
        kind = draw(st.sampled_from(REDUCE_KINDS))
        clear = draw(st.booleans())
        inits = [0, 1, 3] if unsigned else [-2, 0, 1, 3]
        fields = dict(reduce_kind=kind, dim=draw(st.sampled_from([0, 1])), clear=clear,
                      init=0.0 if clear else float(draw(st.sampled_from(inits))))
    elif epilogue == "cumsum":
        fields = dict(dim=draw(st.sampled_from([0, 1])), reverse=draw(st.booleans()))
    elif epilogue == "gemm":
        fields = dict(bo=draw(st.sampled_from([16, 32])), trans_a=draw(st.booleans()),
                      trans_b=draw(st.booleans()))
    elif epilogue == "atomic":
        fields = dict(atomic_kind=draw(st.sampled_from(ATOMIC_KINDS)))
    program = Program(
        dtype=dtype, M=M, N=N, bm=bm, bn=bn, threads=threads, scope=scope, stages=stages, ops=ops,
        style=draw(st.sampled_from(["inline", "named"]), label="style"),
        guard=draw(st.sampled_from(["none", "inline", "named"]), label="guard"),
        epilogue=epilogue, **fields,  # type: ignore[arg-type]
    )
    if not fits(program):  # a chain that would overflow the dtype: drop the constants' growth
        tame = tuple(o for o in ops if o[0] in ("max", "min", "neg"))
        program = Program(**{**program.__dict__, "ops": tame})
    if not fits(program):
        program = Program(**{**program.__dict__, "stages": None, "ops": ()})
    if not fits(program):  # e.g. an int8 sum over a long tile: a plain store always fits
        program = Program(**{**program.__dict__, "epilogue": "store"})
    return program
