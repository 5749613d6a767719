"""kernel.get_profiler(): generated inputs, assert_allclose against a reference, do_bench."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang import TensorSupplyType
from tile.lang._src.profiler import AllcloseError, ProfilerError


def scale_rows(M, N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), s: T.Tensor((M,), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=32) as bx:
            for j in T.Parallel(N):
                B[bx, j] = A[bx, j] * s[bx]

    return main


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(scale_rows(16, 32), out_idx=[-1], target="cpu")


def test_assert_allclose_accepts_a_correct_reference(kernel):
    profiler = kernel.get_profiler()
    profiler.assert_allclose(lambda A, s: A * s[:, None], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("use_torch", [False, True])
def test_assert_allclose_rejects_a_wrong_reference(kernel, use_torch):
    if use_torch:
        pytest.importorskip("torch")
    profiler = tilelang.Profiler(kernel, TensorSupplyType.Normal, use_torch=use_torch)
    with pytest.raises(AllcloseError, match=r"output B: \d+ of 512 elements differ"):
        profiler.assert_allclose(lambda A, s: A * s[:, None] + 0.5, atol=1e-3, rtol=1e-3)


def test_the_mismatch_ratio_tolerates_a_few_wrong_elements(kernel):
    profiler = tilelang.Profiler(kernel, TensorSupplyType.Normal, use_torch=False)

    def one_wrong(A, s):
        out = A * s[:, None]
        out[3, 7] += 10.0
        return out

    profiler.assert_allclose(one_wrong, max_mismatched_ratio=0.01)  # 1 of 512 < 1 %
    with pytest.raises(AllcloseError, match=r"at \(3, 7\)"):
        profiler.assert_allclose(one_wrong, max_mismatched_ratio=0.0)


def test_inputs_follow_the_supply_type_and_dtype():
    k = tilelang.compile(scale_rows(4, 32, "float16"), out_idx=[-1], target="cpu")
    ones = tilelang.Profiler(k, TensorSupplyType.One, use_torch=False).supply_inputs()
    assert [x.dtype for x in ones] == [np.float16, np.float16]
    assert [x.shape for x in ones] == [(4, 32), (4,)]
    assert all((x == 1).all() for x in ones)
    ints = tilelang.Profiler(k, TensorSupplyType.Integer, use_torch=False).supply_inputs()[0]
    assert set(np.unique(ints)) <= {-2, -1, 0, 1, 2} and len(np.unique(ints)) > 1
    zeros = tilelang.Profiler(k, TensorSupplyType.Zero, use_torch=False).supply_inputs()[0]
    assert not zeros.any()
    uniform = tilelang.Profiler(k, TensorSupplyType.Uniform, use_torch=False).supply_inputs()[0]
    assert (np.abs(uniform) <= 1).all() and np.unique(uniform).size > 10


def test_torch_inputs_when_asked():
    torch = pytest.importorskip("torch")
    k = tilelang.compile(scale_rows(4, 32, "bfloat16"), out_idx=[-1], target="cpu")
    profiler = k.get_profiler(TensorSupplyType.Integer)
    a, s = profiler.supply_inputs()
    assert isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 and s.shape == (4,)
    profiler.assert_allclose(lambda A, s: A * s[:, None], atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "bfloat16"])
def test_torch_inputs_of_narrow_floats(dtype):
    # ml_dtypes' float8_e5m2 says it is a numpy float (kind "f") which torch.from_numpy refuses
    torch = pytest.importorskip("torch")
    k = tilelang.compile(scale_rows(4, 32, dtype), out_idx=[-1], target="cpu")
    a, s = k.get_profiler(TensorSupplyType.Integer).supply_inputs()
    assert a.dtype == getattr(torch, dtype) and s.shape == (4,)
    assert set(a.float().unique().tolist()) <= {-2.0, -1.0, 0.0, 1.0, 2.0}
    out = k(a, s)
    want = (a.float() * s.float()[:, None]).to(a.dtype).float()
    np.testing.assert_array_equal(out.float().numpy(), want.numpy())


def test_run_once_and_explicit_inputs(kernel):
    profiler = kernel.get_profiler()
    a = np.full((16, 32), 2.0, "float32")
    s = np.arange(16, dtype="float32")
    out = profiler.run_once(input_tensors=[a, s])
    np.testing.assert_array_equal(out, a * s[:, None])


def test_do_bench_returns_a_median_in_milliseconds(kernel):
    profiler = kernel.get_profiler()
    calls = []

    def slow(*args):
        calls.append(1)
        import time

        time.sleep(0.002)

    ms = profiler.do_bench(slow, n_warmup=1, n_repeat=5)
    assert len(calls) == 1 + 1 + 5  # estimate, warmup, timed
    assert 1.9 <= ms < 50
    assert 0 < profiler.do_bench(warmup=1, rep=5) < 50


def test_profiler_func_is_the_kernel_it_times(kernel):
    # TileLang's examples write profiler.do_bench(profiler.func, warmup=25)
    profiler = kernel.get_profiler()
    assert profiler.func is kernel
    a, s = profiler.supply_inputs()
    np.testing.assert_allclose(np.asarray(profiler.func(a, s)), np.asarray(a) * np.asarray(s)[:, None])


def test_profiler_needs_outputs_and_static_shapes():
    dyn = scale_rows(T.dynamic("M"), 8)
    k = tilelang.compile(dyn, out_idx=[-1], target="cpu")
    with pytest.raises(ProfilerError, match="symbolic dims") as info:
        k.get_profiler().run_once()
    assert info.value.hint
    no_out = tilelang.compile(dyn, target="cpu")
    with pytest.raises(ProfilerError, match="no outputs"):
        no_out.get_profiler().assert_allclose(lambda A, s, B: A)


def test_symbolic_dims_take_their_sizes_from_dynamic_symbolic_constraints():
    # TileLang's profiler.do_bench(dynamic_symbolic_constraints={"M": 24}) sizes inputs of a
    # kernel with symbolic dims; a missing size is a ValueError that names the dim
    k = tilelang.compile(scale_rows(T.dynamic("M"), 8), out_idx=[-1], target="cpu")
    profiler = tilelang.Profiler(k, TensorSupplyType.Normal, use_torch=False)
    a, s = profiler.supply_inputs({"M": 24})
    assert a.shape == (24, 8) and s.shape == (24,)
    np.testing.assert_allclose(np.asarray(k(a, s)), a * s[:, None], rtol=1e-6)
    assert profiler.do_bench(n_warmup=1, n_repeat=3, dynamic_symbolic_constraints={"M": 40}) > 0
    with pytest.raises(ValueError, match=r"symbolic dims with no size given \(M\)"):
        profiler.do_bench(dynamic_symbolic_constraints={"wrong": 8})
    # explicit input tensors win over the constraints
    calls = []
    profiler.do_bench(
        lambda *xs: calls.append([x.shape for x in xs]),
        n_warmup=1,
        n_repeat=3,
        input_tensors=[a, s],
        dynamic_symbolic_constraints={"M": 40},
    )
    assert calls[0] == [(24, 8), (24,)]


def test_auto_supply_is_uniform_for_16_and_32_bit_floats_and_integers_otherwise():
    # TileLang's Auto: uniform in [-1, 1) for float16/bfloat16/float32, small integers otherwise;
    # its GEMM tests with float16 accumulators pass their tolerances only with those magnitudes
    for dtype in ("float16", "bfloat16", "float32", "float64", "int8"):
        k = tilelang.compile(scale_rows(64, 64, dtype), out_idx=[-1], target="cpu")
        a, _s = tilelang.Profiler(k, use_torch=False).supply_inputs()
        values = np.asarray(a, dtype=np.float64)
        if dtype in ("float16", "bfloat16", "float32"):
            assert -1 <= values.min() < -0.9 and 0.9 < values.max() <= 1
            assert len(np.unique(values)) > 100
        else:
            assert set(np.unique(values)) <= {-2, -1, 0, 1, 2}
