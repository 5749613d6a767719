"""@autotune over an eager @tilelang.jit kernel (a body called with tensors, as TileLang's topk,
gemv, blocksparse GEMM and convolution examples write it): tuned at the first call with each
argument signature, on inputs generated for the call's shapes, then run on the call's tensors."""

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang._src import tuner as tuner_module
from tile.lang._src import tuning_cache
from tile.lang.autotuner import AutoTuner, EmulatedTimingError, NoValidConfigError, autotune
from tile.testsupport.markers import needs_backend


@pytest.fixture(autouse=True)
def fresh_tuning_cache(tmp_path_factory, monkeypatch):
    """No tuning result from an earlier test or run (the kernel cache only saves compile time)."""
    cache_dir = tmp_path_factory.getbasetemp() / "eager-autotune-cache"
    monkeypatch.setenv("TILE_CACHE_DIR", str(cache_dir))
    shutil.rmtree(cache_dir / tuning_cache.FORMAT, ignore_errors=True)
    monkeypatch.delenv("TILE_AUTOTUNE", raising=False)
    monkeypatch.delenv("TILE_DEFAULT_TARGET", raising=False)
    monkeypatch.setenv("TILE_AUTOTUNE_WORKERS", "1")  # tiny kernels: forking costs more than it saves
    AutoTuner._memory_cache.clear()
    yield
    AutoTuner._memory_cache.clear()


@pytest.fixture
def tuning_runs(monkeypatch):
    """The configs of every tuning run, in order."""
    runs = []
    original = AutoTuner.run

    def counted(self, *args, **kwargs):
        runs.append(self._configs())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(AutoTuner, "run", counted)
    return runs


CONFIGS = [{"block": 16, "bias": 1.0}, {"block": 32, "bias": 0.0}]
"""The first config computes a wrong answer (the check skips it)."""


def _twice_plus(A, B):
    return 2 * A + B


def make_axpy():
    """A fresh decorated kernel (its tuning memory starts empty)."""

    @autotune(configs=CONFIGS, warmup=1, rep=3, ref_prog=_twice_plus)
    @tilelang.jit
    def axpy(A, B, block: int = 64, bias: float = 0.0):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), "float32")
        B: T.Tensor((M, N), "float32")
        C = T.empty((M, N), "float32")
        with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    C[bx * block + i, j] = A[bx * block + i, j] * 2.0 + B[bx * block + i, j] + bias
        return C

    return axpy


def _inputs(m, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((m, n), dtype=np.float32), rng.random((m, n), dtype=np.float32)


def test_a_call_tunes_once_per_argument_signature_and_returns_the_outputs(tuning_runs):
    axpy = make_axpy()
    a, b = _inputs(40, 8)
    np.testing.assert_allclose(axpy(a, b), 2 * a + b, rtol=1e-6)
    assert len(tuning_runs) == 1
    a2, b2 = _inputs(40, 8, seed=1)  # same shapes, other values: the tuned kernel runs
    np.testing.assert_allclose(axpy(a2, b2), 2 * a2 + b2, rtol=1e-6)
    assert len(tuning_runs) == 1
    a3, b3 = _inputs(24, 4, seed=2)  # another shape: tuned again, for that shape
    np.testing.assert_allclose(axpy(a3, b3), 2 * a3 + b3, rtol=1e-6)
    assert len(tuning_runs) == 2
    best = next(iter(axpy._tuner_cache.values()))
    assert best.config == CONFIGS[1]  # the wrong candidate never wins
    assert best.latency > 0
    assert [p.shape for p in best.params] == [(40, 8), (40, 8), (40, 8)]  # specialized to the call
    assert ("tensor", "float32", (40, 8), (8, 1), "cpu") in next(iter(axpy._tuner_cache))[0]

    torch = pytest.importorskip("torch")  # the same signature as torch tensors: no new tuning
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out = axpy(ta, tb)
    assert isinstance(out, torch.Tensor) and len(tuning_runs) == 2
    torch.testing.assert_close(out, 2 * ta + tb)


def plus_block(A, block: int = 8):
    """C = A + block: which block size ran."""
    M = T.const("M")
    A: T.Tensor((M,), "float32")
    C = T.empty((M,), "float32")
    with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < M:
                C[bx * block + i] = A[bx * block + i] + block
    return C


def test_the_call_runs_the_measured_best_candidate(monkeypatch):
    # Time candidates by a script: config 2 is the fastest; the call must run its kernel.
    timings = {16: 5.0, 32: 1.0}
    monkeypatch.setattr(
        tuner_module,
        "measure",
        lambda kernel, *a, **k: tuner_module.Outcome(tuner_module.OK, timings[kernel.config_block]),
    )
    monkeypatch.setattr(tuner_module, "checked", lambda *a, **k: tuner_module.Outcome(tuner_module.OK, None))
    monkeypatch.setattr(tuner_module, "reference_latency", lambda *a, **k: None)
    original = tuner_module.AutoTuner._plan

    def plan_with_blocks(self):
        plan = original(self)
        compile_one = plan.compile

        def compile_tagged(config):
            kernel = compile_one(config)
            kernel.config_block = config["block"]
            return kernel

        plan.compile = compile_tagged
        return plan

    monkeypatch.setattr(tuner_module.AutoTuner, "_plan", plan_with_blocks)

    rows = autotune(configs=[{"block": 16}, {"block": 32}], warmup=1, rep=3)(tilelang.jit(plus_block))
    np.testing.assert_array_equal(rows(np.zeros(40, np.float32)), np.full(40, 32.0, np.float32))


def test_passing_a_tuned_parameter_runs_as_asked_without_tuning(tuning_runs):
    axpy = make_axpy()
    a, b = _inputs(20, 4)
    np.testing.assert_allclose(axpy(a, b, bias=1.0), 2 * a + b + 1.0, rtol=1e-6)
    np.testing.assert_allclose(axpy(a, b, 16), 2 * a + b, rtol=1e-6)  # positional too
    assert tuning_runs == []


def test_compile_tunes_from_the_const_dims_and_returns_the_best_kernel(tuning_runs):
    axpy = make_axpy()
    kernel = axpy.compile(M=48, N=8)
    assert kernel.config == CONFIGS[1] and kernel.latency > 0
    a, b = _inputs(48, 8)
    np.testing.assert_allclose(kernel(a, b), 2 * a + b, rtol=1e-6)
    assert axpy.compile(M=48, N=8) is kernel and len(tuning_runs) == 1
    fixed = axpy.compile(M=48, N=8, block=16, bias=0.0)  # tuned parameters given: compiled as asked
    assert not hasattr(fixed, "latency") and len(tuning_runs) == 1
    np.testing.assert_allclose(fixed(a, b), 2 * a + b, rtol=1e-6)


def test_every_candidate_wrong_is_a_typed_error_at_the_call():
    @autotune(configs=[{"bias": 1.0}, {"bias": 2.0}], warmup=1, rep=3, ref_prog=_twice_plus)
    @tilelang.jit
    def wrong(A, B, bias: float = 0.0):
        M = T.const("M")
        A: T.Tensor((M,), "float32")
        B: T.Tensor((M,), "float32")
        C = T.empty((M,), "float32")
        with T.Kernel(1, threads=32):
            for i in T.Parallel(M):
                C[i] = A[i] * 2.0 + B[i] + bias
        return C

    a = np.ones(32, np.float32)
    with pytest.raises(NoValidConfigError, match="mismatch") as info:
        wrong(a, a)
    assert info.value.location is not None and info.value.location.line > 0


@needs_backend("cuda")
def test_emulated_gpu_timings_stay_refused_for_eager_kernels(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.jit(target={"kind": "cuda", "arch": "sm_80"})(plus_block)
    tuned = autotune(configs=[{"block": 32}, {"block": 64}], warmup=1, rep=3)(kernel)
    with pytest.raises(EmulatedTimingError, match="emulator"):
        tuned.compile(M=128)
