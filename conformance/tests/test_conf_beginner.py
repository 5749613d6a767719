"""The beginner tier on every backend: random array programs against numpy.

hypothesis draws a small expression graph over the tier's operations (element-wise math
with broadcasting, comparisons and ``where``, last-axis and other reductions, matmuls,
casts); the same steps run once through ``tile.lang.beginner`` (traced, partitioned into
kernels, compiled for the backend under test) and once through numpy, which is the
reference. Values are kept in ranges where every step is well conditioned (``exp`` of a
``tanh``, ``log`` and ``sqrt`` of ``1 + x*x``, division by ``1 + x*x``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tile.lang.beginner as tb
from tile.conformance import env as conformance_env

# (name, arity, numpy implementation, beginner implementation)
UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "tanh": (np.tanh, tb.tanh),
    "exp_tanh": (lambda x: np.exp(np.tanh(x)), lambda x: tb.exp(tb.tanh(x))),
    "log1p_sq": (lambda x: np.log(1 + x * x), lambda x: tb.log(1 + x * x)),
    "sqrt1p_sq": (lambda x: np.sqrt(x * x + 1), lambda x: tb.sqrt(x * x + 1)),
    "relu": (lambda x: np.maximum(x, 0), tb.relu),
    "neg": (lambda x: -x, lambda x: -x),
    "abs": (np.abs, tb.abs),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), tb.sigmoid),
    "scale": (lambda x: x * 0.5 + 0.25, lambda x: x * 0.5 + 0.25),
}
BINARY: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "add": (np.add, lambda a, b: a + b),
    "sub": (np.subtract, lambda a, b: a - b),
    "mul": (np.multiply, lambda a, b: a * b),
    "div_safe": (lambda a, b: a / (1 + b * b), lambda a, b: a / (1 + b * b)),
    "maximum": (np.maximum, tb.maximum),
    "where_gt": (lambda a, b: np.where(a > b, a, b * 0.5), lambda a, b: tb.where(a > b, a, b * 0.5)),
}
REDUCE = ("sum", "max", "mean", "min")


@dataclasses.dataclass(frozen=True)
class Step:
    op: str
    args: tuple[int, ...]
    extra: Any = None


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


@st.composite
def programs(draw: st.DrawFn) -> tuple[tuple[int, int], list[tuple[int, ...]], list[Step], list[int]]:
    rows = draw(st.integers(1, 40), label="rows")
    cols = draw(st.integers(1, 70), label="cols")
    # argument shapes: the full (rows, cols), a column vector, a per-row column, a scalar
    shapes = [
        (rows, cols),
        *draw(
            st.lists(st.sampled_from([(rows, cols), (cols,), (rows, 1), ()]), min_size=0, max_size=2),
            label="args",
        ),
    ]
    steps: list[Step] = []
    values = list(range(len(shapes)))
    kinds = {i: s for i, s in enumerate(shapes)}  # value -> shape
    for _ in range(draw(st.integers(1, 6), label="steps")):
        op = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "matmul"]), label="op")
        a = draw(st.sampled_from(values), label="a")
        if op == "unary":
            steps.append(Step(draw(st.sampled_from(sorted(UNARY))), (a,)))
            kinds[len(kinds)] = kinds[a]
        elif op == "binary":
            partners = [v for v in values if _broadcasts(kinds[a], kinds[v])]
            b = draw(st.sampled_from(partners), label="b")
            steps.append(Step(draw(st.sampled_from(sorted(BINARY))), (a, b)))
            kinds[len(kinds)] = tuple(np.broadcast_shapes(kinds[a], kinds[b]))
        elif op == "reduce" and len(kinds[a]) == 2 and kinds[a][1] > 0:
            axis = draw(st.sampled_from([-1, 0]), label="axis")
            steps.append(Step(draw(st.sampled_from(REDUCE)), (a,), axis))
            shape = list(kinds[a])
            shape[axis] = 1
            kinds[len(kinds)] = tuple(shape)
        elif op == "matmul" and len(kinds[a]) == 2:
            n = draw(st.integers(1, 24), label="n")
            steps.append(Step("matmul", (a,), n))
            kinds[len(kinds)] = (kinds[a][0], n)
        else:
            continue
        values.append(len(kinds) - 1)
    outputs = sorted({values[-1], draw(st.sampled_from(values[len(shapes) - 1 :]), label="second")})
    return (rows, cols), shapes, steps, outputs


def run_steps(
    lib: str, args: list[Any], steps: list[Step], outputs: list[int], weights: dict[int, Any]
) -> Any:
    values = list(args)
    for index, step in enumerate(steps):
        a = values[step.args[0]]
        if step.op in UNARY:
            out = UNARY[step.op][0 if lib == "np" else 1](a)
        elif step.op in BINARY:
            out = BINARY[step.op][0 if lib == "np" else 1](a, values[step.args[1]])
        elif step.op == "matmul":
            out = a @ weights[index]
        else:
            out = getattr(a, step.op)(axis=step.extra, keepdims=True)
        values.append(out)
    return tuple(values[i] for i in outputs)


# Under the emulator each kernel compiles the generated CUDA/HIP for the host (seconds per
# program), so outside the nightly profile the emulated devices draw a few programs only.
EMULATED_SAMPLE = 3


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
def test_beginner_random_programs_match_numpy(tile_backend, program) -> None:
    if tile_backend.device == "emu" and conformance_env.HYPOTHESIS_PROFILE.get() != "nightly":
        pytest.skip(f"under the emulator, the sample test below draws {EMULATED_SAMPLE} programs")
    check_random_program(tile_backend, program)


@settings(max_examples=EMULATED_SAMPLE,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
def test_beginner_random_programs_sample_emulated(tile_backend, program) -> None:
    if tile_backend.device != "emu" or conformance_env.HYPOTHESIS_PROFILE.get() == "nightly":
        pytest.skip("the emulator's CI sample (elsewhere the full test above runs)")
    check_random_program(tile_backend, program)


def check_random_program(tile_backend, program) -> None:
    (_, _), shapes, steps, outputs = program
    rng = np.random.default_rng(len(steps) * 7 + sum(map(len, shapes)))
    args = [rng.uniform(-1, 1, s).astype("float32") for s in shapes]
    # matmul weights are arguments too (after the drawn ones), fixed per step
    weights_np: dict[int, Any] = {}
    values_shape = list(shapes)
    for index, step in enumerate(steps):
        shape = values_shape[step.args[0]]
        if step.op == "matmul":
            weights_np[index] = rng.uniform(-1, 1, (shape[-1], step.extra)).astype("float32")
            values_shape.append((shape[0], step.extra))
        elif step.op in BINARY:
            values_shape.append(tuple(np.broadcast_shapes(shape, values_shape[step.args[1]])))
        elif step.op in UNARY:
            values_shape.append(shape)
        else:
            reduced = list(shape)
            reduced[step.extra] = 1
            values_shape.append(tuple(reduced))
    extra = sorted(weights_np)

    def program_fn(*arrays: Any) -> Any:
        given_args = list(arrays[: len(shapes)])
        weights = dict(zip(extra, arrays[len(shapes) :], strict=True))
        return run_steps("tb", given_args, steps, outputs, weights)

    # one named parameter per array: tb.jit binds arguments by the function's signature
    names = [f"a{i}" for i in range(len(shapes) + len(extra))]
    program_fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
    )
    fn = tb.jit(program_fn, target=tile_backend.target)
    inputs = args + [weights_np[i] for i in extra]
    got = fn(*inputs)
    expected = run_steps(
        "np",
        [a.astype(np.float64) for a in args],
        steps,
        outputs,
        {i: w.astype(np.float64) for i, w in weights_np.items()},
    )
    tf32 = getattr(tile_backend.capabilities, "float32_gemm", "float32") == "tfloat32"
    tol = 3e-2 if tf32 and any(s.op == "matmul" for s in steps) else 2e-4
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(
            np.asarray(g, dtype=np.float64), e, rtol=tol, atol=tol * max(1.0, float(np.abs(e).max(initial=0)))
        )


# Fixed programs: what the tier is for, on every backend and device (the random programs
# above are many small compiles; under the emulator these few carry the family).
def _half(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype("float16")


def test_beginner_mlp_rmsnorm_softmax_block(tile_backend) -> None:
    @tb.jit(target=tile_backend.target)
    def block(x, w, b, g):
        h = tb.gelu(x @ w + b)
        n = h * tb.rsqrt((h * h).mean(axis=-1, keepdims=True) + 1e-6) * g
        return tb.softmax(n, axis=-1).astype("float16")

    rng = np.random.default_rng(3)
    x, w, b, g = _half(rng, 40, 32), _half(rng, 32, 64), _half(rng, 64), _half(rng, 64)
    assert [k.kind for k in block.plan(x, w, b, g).kernels] == ["matmul", "rows"]
    h = x.astype("float32") @ w.astype("float32") + b.astype("float32")
    h = 0.5 * h * (1 + np.tanh(0.7978845608028654 * (h + 0.044715 * h**3)))
    n = h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * g.astype("float32")
    e = np.exp(n - n.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(block(x, w, b, g).astype("float32"), ref, rtol=2e-2, atol=2e-3)


def test_beginner_attention_from_primitives(tile_backend) -> None:
    @tb.jit(target=tile_backend.target)
    def attention(q, k, v):
        s = q @ k.mT * 0.125
        e = tb.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    rng = np.random.default_rng(4)
    q, k, v = _half(rng, 1, 2, 40, 64), _half(rng, 1, 2, 72, 64), _half(rng, 1, 2, 72, 64)
    assert [kk.kind for kk in attention.plan(q, k, v).kernels] == ["attention"]
    s = q.astype("float32") @ np.swapaxes(k, -1, -2).astype("float32") / 8
    e = np.exp(s - s.max(-1, keepdims=True))
    ref = (e / e.sum(-1, keepdims=True)) @ v.astype("float32")
    np.testing.assert_allclose(attention(q, k, v).astype("float32"), ref, rtol=2e-2, atol=2e-2)
