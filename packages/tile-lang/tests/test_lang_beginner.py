"""The beginner tier (tile.lang.beginner) on the CPU backend, against numpy.

Each program is checked for its result (numpy evaluates the same expression) and for
its plan: which kernels it launches and what they fuse, since fusing is the tier's point.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import tile.lang.beginner as tb
from tile.ir.errors import TileError, TileShapeError

RNG = np.random.default_rng(7)


def randn(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def gelu_tanh(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1 + np.tanh(0.7978845608028654 * (z + 0.044715 * z**3)))


def softmax_np(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@tb.jit
def chain(x, y):
    return tb.exp(x) * 2 - y / 3 + 1


def test_beginner_elementwise_chain_is_one_kernel_with_broadcasting() -> None:
    x, y = randn(37, 70), randn(70)
    plan = chain.plan(x, y)
    assert [k.kind for k in plan.kernels] == ["elementwise"]
    np.testing.assert_allclose(chain(x, y), np.exp(x) * 2 - y / 3 + 1, rtol=1e-5, atol=1e-5)


def test_beginner_a_condition_is_computed_in_its_wheres_kernel() -> None:
    # the conformance suite's random programs found this one: the comparison (4, 4) was a kernel
    # of its own and its boolean result had to cross into the where's kernel, which is refused;
    # b * 0.5 (shape (4,)) cannot join a (4, 4) kernel, so the where starts a kernel of its own
    @tb.jit
    def pick(a, b):
        return b, tb.where(a > b, a, b * 0.5)

    a, b = randn(4, 4), randn(4)
    plan = pick.plan(a, b)
    assert [[n.op for n in k.nodes] for k in plan.kernels] == [["binary"], ["binary", "where"]]
    same, picked = pick(a, b)
    np.testing.assert_array_equal(same, b)
    np.testing.assert_allclose(picked, np.where(a > b, a, b * 0.5), rtol=1e-6)


def test_beginner_promotion_follows_numpy() -> None:
    @tb.jit
    def mixed(a, b):
        return a * 0.5 + b, (a > 0).astype("int8")

    a = RNG.integers(-5, 5, (9, 12)).astype("int32")
    b = randn(9, 12, dtype="float16")
    out, sign = mixed(a, b)
    ref = a * 0.5 + b
    assert out.dtype == ref.dtype  # int32 * python float -> float64, + float16 -> float64
    np.testing.assert_allclose(out, ref, rtol=1e-3)
    np.testing.assert_array_equal(sign, (a > 0).astype("int8"))


@tb.jit
def softmax(x):
    return tb.softmax(x, axis=-1)


@tb.jit
def rms_norm(x, w):
    return x * tb.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


@tb.jit
def layer_norm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / tb.sqrt(var + 1e-5) * w + b


def test_beginner_softmax_rmsnorm_layernorm_are_one_row_kernel_each() -> None:
    x, w, b = randn(3, 33, 48), randn(48), randn(48)
    for fn, args, ref in (
        (softmax, (x,), softmax_np(x)),
        (rms_norm, (x, w), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w),
        (
            layer_norm,
            (x, w, b),
            (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b,
        ),
    ):
        plan = fn.plan(*args)
        assert [k.kind for k in plan.kernels] == ["rows"], str(plan)
        np.testing.assert_allclose(fn(*args), ref, rtol=1e-4, atol=1e-5)


@tb.jit
def mlp(x, w, b):
    return tb.gelu(x @ w + b).astype("float16")


def test_beginner_matmul_epilogue_and_cast_fuse_into_the_gemm() -> None:
    x, w, b = randn(70, 40), randn(40, 90), randn(90)
    plan = mlp.plan(x, w, b)
    assert [k.kind for k in plan.kernels] == ["matmul"]
    assert {n.attrs.get("fn") for n in plan.kernels[0].nodes} >= {"add", "gelu"}
    out = mlp(x, w, b)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype("float32"), gelu_tanh(x @ w + b), rtol=2e-3, atol=2e-3)


@tb.jit
def attention(q, k, v):
    return tb.softmax(q @ k.mT * 0.125, axis=-1) @ v


@tb.jit
def attention_primitives(q, k, v):
    s = q @ k.mT / 8.0
    e = tb.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def test_beginner_attention_is_one_kernel_without_a_seq_by_seq_intermediate() -> None:
    q, k, v = randn(1, 2, 70, 64), randn(1, 2, 90, 64), randn(1, 2, 90, 32)
    s = q @ np.swapaxes(k, -1, -2) / 8
    ref = softmax_np(s) @ v
    for fn in (attention, attention_primitives):
        plan = fn.plan(q, k, v)
        assert [kk.kind for kk in plan.kernels] == ["attention"], str(plan)
        written = [n.shape for kk in plan.kernels for n in kk.outputs]
        assert written == [(1, 2, 70, 32)]  # no (70, 90) scores in global memory
        np.testing.assert_allclose(fn(q, k, v), ref, rtol=1e-4, atol=1e-4)


def test_beginner_unfusable_graph_goes_through_global_memory_and_plan_says_so() -> None:
    @tb.jit
    def two(x, w):
        h = x @ w
        return h.sum(axis=0), tb.relu(h)

    x, w = randn(20, 16), randn(16, 24)
    plan = two.plan(x, w)
    kinds = [k.kind for k in plan.kernels]
    assert kinds == ["matmul", "reduce"]
    assert "intermediate from kernel_0 (global memory)" in str(plan)
    total, act = two(x, w)
    np.testing.assert_allclose(total, (x @ w).sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(act, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def test_beginner_reductions_over_any_axes_and_transposes() -> None:
    @tb.jit
    def reds(x):
        return x.sum(axis=0), x.max(axis=(0, 2), keepdims=True), x.mean(), tb.transpose(x, (2, 0, 1))

    x = randn(5, 6, 7)
    s, m, mean, t = reds(x)
    np.testing.assert_allclose(s, x.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m, x.max(axis=(0, 2), keepdims=True))
    np.testing.assert_allclose(mean, x.mean(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(t, np.transpose(x, (2, 0, 1)))


def test_beginner_one_array_as_gemm_operand_and_epilogue_input() -> None:
    @tb.jit
    def gram(a, w):
        return a @ w + a, a @ a.T  # a is read by the gemm and by its epilogue; a.T by a gemm

    a, w = randn(9, 9), randn(9, 9)
    x, y = gram(a, w)
    np.testing.assert_allclose(x, a @ w + a, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y, a @ a.T, rtol=1e-4, atol=1e-5)


def test_beginner_batched_and_transposed_matmul() -> None:
    @tb.jit
    def bmm(a, b, c):
        return a @ b.mT, a @ c

    a, b, c = randn(3, 20, 16), randn(3, 24, 16), randn(16, 8)
    x, y = bmm(a, b, c)
    np.testing.assert_allclose(x, a @ np.swapaxes(b, -1, -2), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, a @ c, rtol=1e-4, atol=1e-4)


# Named aliases keep linters from reading "M" in an annotation as a forward reference.
RowsOf64 = tb.Tensor[("M", 64), "float32"]
Weights64 = tb.Tensor[(64,), "float32"]


@tb.jit
def symbolic(x: RowsOf64, w: Weights64):
    return tb.where(x > 0, x * w, 0.0), x.sum(axis=-1)


def test_beginner_symbolic_extents_compile_once() -> None:
    w = randn(64)
    for m in (1, 50, 130):
        x = randn(m, 64)
        y, s = symbolic(x, w)
        np.testing.assert_allclose(y, np.where(x > 0, x * w, 0), rtol=1e-6)
        np.testing.assert_allclose(s, x.sum(-1), rtol=1e-4, atol=1e-4)
    assert len(symbolic.programs) == 1
    assert 'M = T.dynamic("M")' in symbolic.developer_source(randn(3, 64), w).replace("'", '"')


def test_beginner_torch_in_torch_out() -> None:
    torch = pytest.importorskip("torch")
    x, w = torch.randn(10, 48), torch.randn(48)
    y = rms_norm(x, w)
    assert isinstance(y, torch.Tensor)
    ref = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5)


def test_beginner_developer_source_runs_on_its_own(tmp_path) -> None:
    x, w, b = randn(30, 40), randn(40, 20), randn(20)
    source = mlp.developer_source(x, w, b)
    assert "import tile.lang.language as T" in source and "T.gemm" in source
    path = tmp_path / "generated_mlp.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("generated_mlp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generated_mlp"] = module
    spec.loader.exec_module(module)
    np.testing.assert_allclose(
        module.run(x, w, b).astype("float32"), gelu_tanh(x @ w + b), rtol=2e-3, atol=2e-3
    )


def test_beginner_errors_name_the_users_line() -> None:
    @tb.jit
    def bad_broadcast(x, y):
        return x + y  # the line the error must point at

    with pytest.raises(TileShapeError) as err:
        bad_broadcast(randn(4, 5), randn(6))
    assert err.value.location is not None and "the line the error must point at" in (
        err.value.location.source_line or ""
    )

    @tb.jit
    def indexes(x):
        return x[0]

    with pytest.raises(tb.BeginnerError, match="indexing"):
        indexes(randn(4, 5))

    @tb.jit
    def branches(x):
        return x if x > 0 else -x

    with pytest.raises(tb.BeginnerError, match="truth value"):
        branches(randn(4))

    @tb.jit
    def unknown(x):
        return x.cumsum()

    with pytest.raises(TileError, match="no attribute 'cumsum'"):
        unknown(randn(4))
