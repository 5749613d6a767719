"""tile.lang.autotuner: TileLang-style autotune programs on the CPU backend, the tuning cache,
TILE_AUTOTUNE modes, skipped candidates, parallel compiles, and refusing to time the emulator."""

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TileError
from tile.lang._src import cache, tuning_cache, tuning_measure
from tile.lang._src.tuning_measure import Budget
from tile.lang.autotuner import (
    AutotuneConfigError,
    AutoTuner,
    EmulatedTimingError,
    NoValidConfigError,
    autotune,
    set_autotune_inputs,
)
from tile.lang.demo import matmul as paper_gemm


@pytest.fixture(scope="module")
def kernel_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def fresh_caches(kernel_cache_dir, monkeypatch):
    """Every test starts with an empty tuning cache, in-process and on disk (the kernel cache,
    shared by this module's tests, only saves compile time)."""
    monkeypatch.setenv("TILE_CACHE_DIR", str(kernel_cache_dir))
    shutil.rmtree(kernel_cache_dir / tuning_cache.FORMAT, ignore_errors=True)
    monkeypatch.delenv("TILE_AUTOTUNE", raising=False)
    monkeypatch.delenv("TILE_AUTOTUNE_EXECUTOR", raising=False)
    AutoTuner._memory_cache.clear()
    yield
    AutoTuner._memory_cache.clear()


def gemm_configs(M, N, K):
    return [{"block_M": bm, "block_N": bn} for bm in (16, 64) for bn in (16, 64)]


# The paper's GEMM tuned the way a TileLang autotune example does it: a jit factory of the
# tunable keyword arguments under @autotune.
@autotune(configs=gemm_configs, warmup=5, rep=20, ref_prog=lambda A, B: A @ B)
@tilelang.jit(out_idx=[-1])
def matmul(
    M,
    N,
    K,
    block_M=128,
    block_N=128,
    block_K=32,
    threads=128,
    num_stages=2,
    dtype="float32",
    accum_dtype="float32",
):
    return paper_gemm(
        M, N, K, block_M, block_N, block_K, dtype, accum_dtype, num_stages=num_stages, threads=threads
    )


def scaled_add(n, block=64, bias=0.0, repeat=1):
    """C = 2A + B (+ bias: a wrong answer); ``repeat`` redoes the work (a slower candidate)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2.0 + B[bx * block + i] + bias
            for _ in T.serial(repeat - 1):  # an affine FP recurrence: nothing the compiler can fold
                for i in T.Parallel(block):
                    C[bx * block + i] = C[bx * block + i] * 1.0000001 + A[bx * block + i] * 1e-9

    return main


def add_ref(a, b):
    return 2 * a + b


def test_decorator_form_returns_a_correct_kernel_at_the_measured_best_config(monkeypatch):
    kernel = matmul(128, 96, 64)
    configs = gemm_configs(128, 96, 64)
    assert kernel.config in configs
    assert kernel.latency is not None and kernel.latency > 0 and kernel.ref_latency > 0
    a = np.random.default_rng(1).random((128, 64), dtype=np.float32)
    b = np.random.default_rng(2).random((64, 96), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4)
    assert matmul(128, 96, 64) is kernel  # once per argument set

    # A new process (here: a new decorated factory, in-process memory cleared) finds the
    # result in the tuning cache and times nothing.
    AutoTuner._memory_cache.clear()

    def no_timing(*args, **kwargs):
        raise AssertionError("a tuning-cache hit benchmarked a candidate")

    monkeypatch.setattr("tile.lang._src.tuner.measure", no_timing)
    again = autotune(configs=gemm_configs, warmup=5, rep=20, ref_prog=lambda A, B: A @ B)(
        tilelang.jit(out_idx=[-1])(matmul.jit_impl.factory)
    )(128, 96, 64)
    assert again.config == kernel.config and again.latency == kernel.latency
    np.testing.assert_allclose(again(a, b), a @ b, rtol=1e-4)


def test_from_kernel_form_picks_the_fastest_of_the_measured_and_reports_all():
    configs = [{"block": 64, "repeat": 400}, {"block": 64, "repeat": 1}, {"block": 128, "repeat": 1}]
    result = (
        AutoTuner.from_kernel(
            kernel=lambda block, repeat: scaled_add(1 << 16, block, repeat=repeat), configs=configs
        )
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=add_ref, supply_type=tilelang.TensorSupplyType.Normal)
        .run(warmup=2, rep=10, timeout=60)
    )
    assert result.latencies, result.skipped
    best_index = min(result.latencies, key=result.latencies.get)
    assert result.config == configs[best_index] and result.latency == result.latencies[best_index]
    assert result.config["repeat"] == 1  # 400 passes over the data never win
    assert result.benchmarked == len(result.latencies) and not result.from_cache
    a = np.arange(1 << 16, dtype=np.float32)
    np.testing.assert_array_equal(result.kernel(a, a), 3 * a)
    assert "tir" in result.libcode or result.libcode


def test_failing_and_wrong_candidates_are_skipped_and_reported():
    configs = [
        {"block": 64, "bias": 1.0},  # disagrees with the reference
        {"block": 4096},  # more threads than a block may have: does not compile
        {"block": 32},
    ]
    result = (
        AutoTuner.from_kernel(
            kernel=lambda block, bias=0.0: scaled_add(1 << 13, block, bias), configs=configs
        )
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=add_ref)
        .run(warmup=1, rep=3)
    )
    assert result.config == {"block": 32}
    reasons = {s.index: s.reason for s in result.skipped}
    assert reasons == {0: tuning_measure.MISMATCH, 1: tuning_measure.COMPILE_FAILED}
    assert "4096" in result.skipped[1].message or "threads" in result.skipped[1].message


def test_no_valid_config_is_a_typed_error_listing_the_reasons():
    tuner = (
        AutoTuner.from_kernel(kernel=lambda bias: scaled_add(256, 64, bias), configs=[{"bias": 1.0}])
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=add_ref)
    )
    with pytest.raises(NoValidConfigError, match="mismatch"):
        tuner.run(warmup=1, rep=3)


def test_a_config_key_the_factory_lacks_is_a_typed_error():
    tuner = AutoTuner.from_kernel(kernel=lambda block: scaled_add(256, block), configs=[{"blok": 64}])
    with pytest.raises(AutotuneConfigError, match="blok") as info:
        tuner.set_compile_args(out_idx=[-1], target="cpu").run()
    assert isinstance(info.value, TileError) and "block" in info.value.hint


def test_autotune_must_sit_over_jit():
    with pytest.raises(TileError, match=r"@tilelang\.jit"):
        autotune(configs=[{"block": 64}])(scaled_add)


def _tuner(configs, **profile):
    return (
        AutoTuner.from_kernel(
            kernel=lambda block, repeat=1: scaled_add(1 << 12, block, repeat=repeat), configs=configs
        )
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=add_ref, **profile)
    )


def test_autotune_off_uses_the_first_config_then_the_cache(monkeypatch):
    configs = [{"block": 32, "repeat": 50000}, {"block": 64}]  # 50000 passes: ~10 ms against ~10 us
    monkeypatch.setenv("TILE_AUTOTUNE", "off")
    first = _tuner(configs).run(warmup=1, rep=3)
    assert first.config == configs[0] and first.latency is None and first.benchmarked == 0
    monkeypatch.setenv("TILE_AUTOTUNE", "on")
    tuned = _tuner(configs).run(warmup=1, rep=3)
    assert tuned.config == configs[1] and tuned.benchmarked >= 1
    AutoTuner._memory_cache.clear()
    monkeypatch.setenv("TILE_AUTOTUNE", "off")
    cached = _tuner(configs).run(warmup=1, rep=3)
    assert cached.from_cache and cached.config == configs[1] and cached.latency == tuned.latency


def test_autotune_force_tunes_again_despite_the_cache(monkeypatch):
    configs = [{"block": 32}, {"block": 64}]
    _tuner(configs).run(warmup=1, rep=3)
    AutoTuner._memory_cache.clear()
    assert _tuner(configs).run(warmup=1, rep=3).from_cache
    AutoTuner._memory_cache.clear()
    monkeypatch.setenv("TILE_AUTOTUNE", "force")
    forced = _tuner(configs).run(warmup=1, rep=3)
    assert not forced.from_cache and forced.benchmarked >= 1


def test_the_tuning_key_follows_arguments_and_configs(monkeypatch):
    configs = [{"block": 32}, {"block": 64}]
    _tuner(configs).run(warmup=1, rep=3)
    AutoTuner._memory_cache.clear()
    assert not _tuner([{"block": 64}, {"block": 32}]).run(warmup=1, rep=3).from_cache
    AutoTuner._memory_cache.clear()
    assert not _tuner(configs, rtol=1e-3).run(warmup=1, rep=3).from_cache
    AutoTuner._memory_cache.clear()
    monkeypatch.setenv("TILE_CACHE", "0")
    assert not _tuner(configs).run(warmup=1, rep=3).from_cache


def test_candidates_compile_in_worker_processes_into_the_shared_kernel_cache(monkeypatch):
    monkeypatch.setenv("TILE_AUTOTUNE_WORKERS", "2")
    configs = [{"block": b} for b in (16, 32, 64, 128)]
    hits = cache.stats.hits
    result = _tuner(configs).run(warmup=1, rep=3)
    # the workers compiled every candidate; this process only loaded them from the cache
    assert cache.stats.hits - hits == len(configs)
    assert result.config in configs
    assert all(s.reason == tuning_measure.HOPELESS for s in result.skipped)  # none failed to compile


def test_set_autotune_inputs_feeds_every_candidate():
    a = np.full(1 << 12, 3.0, np.float32)
    b = np.ones(1 << 12, np.float32)
    seen = []

    def ref(x, y):
        seen.append(float(x[0]))
        return 2 * x + y

    with set_autotune_inputs(a, b, np.empty_like(a)):  # outputs may be passed too
        result = (
            _tuner([{"block": 32}, {"block": 64}], skip_check=False)
            .set_profile_args(ref_prog=ref)
            .run(warmup=1, rep=3)
        )
    assert seen == [3.0] * len(seen) and seen
    assert result.config in ([{"block": 32}, {"block": 64}])


class _SleepyKernel:
    """A stand-in kernel whose calls take ``seconds`` (measure() needs only these attributes)."""

    device = "cpu"

    def __init__(self, seconds):
        self.seconds = seconds
        self.out_idx, self.params, self.input_params = [], [], []

    def __call__(self):
        import time

        time.sleep(self.seconds)


def test_a_candidate_over_the_timeout_or_far_behind_the_best_is_not_timed_further():
    spec = tuning_measure.CheckSpec(inputs=[])
    inputs = tuning_measure.Inputs(spec)
    slow = tuning_measure.measure(_SleepyKernel(0.2), spec, inputs, Budget(1, 1, timeout_s=0.05))
    assert slow.status == tuning_measure.TIMED_OUT
    hopeless = tuning_measure.measure(_SleepyKernel(0.05), spec, inputs, Budget(1, 1, 5), best=5.0)
    assert hopeless.status == tuning_measure.HOPELESS
    ok = tuning_measure.measure(_SleepyKernel(0.01), spec, inputs, Budget(1, 1, 5), best=50.0)
    assert ok.status == tuning_measure.OK and 9 <= ok.latency < 50


def test_a_call_longer_than_the_whole_rep_budget_is_timed_twice_not_three_times(monkeypatch):
    # a scripted clock, not sleeps: under load a 20 ms sleep can take 30 ms, and then two
    # calls no longer fit in a 50 ms rep budget (the test failed on a loaded machine)
    calls = []
    call_ms = {"ms": 20.0}

    def scripted(device):
        def run(fn):
            fn()
            return call_ms["ms"]

        return run

    monkeypatch.setattr(tuning_measure, "_timer", scripted)
    count = lambda: calls.append(1)
    outcome = tuning_measure.timed(count, "cpu", Budget(warmup=1, rep=5, timeout_s=5))
    assert outcome.status == tuning_measure.OK and len(calls) == 2 and outcome.latency == 20.0
    calls.clear()
    tuning_measure.timed(count, "cpu", Budget(warmup=1, rep=50, timeout_s=5))  # two calls fit in rep: three
    assert len(calls) == 3
    calls.clear()
    call_ms["ms"] = 2.0
    short = tuning_measure.timed(count, "cpu", Budget(1, 1, 5))
    assert short.status == tuning_measure.OK and len(calls) == 3  # under TWO_CALLS_FLOOR_MS: three


def _scripted_clock(monkeypatch, first_call_ms, later_call_ms):
    """A fake clock: candidate ``i`` (in config order) took ``first_call_ms[i]`` in its check
    (its first call ever) and takes ``later_call_ms[i]`` on every later call."""
    from tile.lang._src import tuner as tuner_module

    kernels, timing = [], {}

    def scripted_check(kernel, spec, inputs):
        kernels.append(kernel)
        return tuning_measure.Outcome(tuning_measure.OK, latency=first_call_ms[len(kernels) - 1])

    def scripted_measure(kernel, *args, **kwargs):
        timing["ms"] = later_call_ms[next(i for i, k in enumerate(kernels) if k is kernel)]
        return tuning_measure.measure(kernel, *args, **kwargs)

    monkeypatch.setattr(tuner_module, "checked", scripted_check)
    monkeypatch.setattr(tuner_module, "measure", scripted_measure)
    monkeypatch.setattr(tuning_measure, "_timer", lambda device: lambda fn: timing.get("ms", 1.0))


def test_the_checks_cold_call_is_neither_a_probe_nor_a_sample(monkeypatch):
    """Hand-computed: a 0.05 ms kernel whose first call took 12 ms. Before, that call was the
    only warm-up call, so it was the probe (over TWO_CALLS_FLOOR_MS: two calls are enough) and
    a sample: the median of [12, 0.05] said 6.025 ms."""
    monkeypatch.setattr(tuning_measure, "_timer", lambda device: lambda fn: 0.05)
    outcome = tuning_measure.timed(lambda: None, "cpu", Budget(warmup=1, rep=5, timeout_s=5), first=12.0)
    assert outcome.status == tuning_measure.OK and outcome.latency == 0.05


@pytest.mark.parametrize("early_stop", [True, False])
def test_a_slow_first_call_does_not_rank_the_fast_candidate_behind_the_slow_one(monkeypatch, early_stop):
    # The slow candidate's check took 9 ms (5 ms a call after), the fast one's 12 ms (0.05 ms
    # after): the slow one is timed first and sets the bar at 5 ms; the fast one came out at
    # 6.025 ms (see above) and the slow one was kept, whatever early_stop said.
    monkeypatch.setenv("TILE_AUTOTUNE", "force")
    _scripted_clock(monkeypatch, first_call_ms=[9.0, 12.0], later_call_ms=[5.0, 0.05])
    configs = [{"block": 64, "repeat": 3}, {"block": 64, "repeat": 1}]
    result = _tuner(configs).run(warmup=1, rep=5, early_stop=early_stop)
    assert result.config == configs[1]
    assert result.latencies == {0: 5.0, 1: 0.05}


def test_candidates_are_checked_in_order_then_timed_fastest_first(monkeypatch):
    from tile.lang._src import tuner as tuner_module

    configs = [{"block": 64, "repeat": 20000}, {"block": 64, "repeat": 1}]  # ~45 ms against ~0.1 ms
    timed_order = []

    def recording(kernel, *args, **kwargs):
        timed_order.append(kwargs["check_outcome"].latency)
        return tuning_measure.measure(kernel, *args, **kwargs)

    monkeypatch.setattr(tuner_module, "measure", recording)
    result = (
        AutoTuner.from_kernel(kernel=lambda block, repeat: scaled_add(1 << 16, block, repeat=repeat),
                              configs=configs)
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=add_ref, supply_type=tilelang.TensorSupplyType.Normal)
        .run(warmup=1, rep=3, early_stop=False)
    )
    assert result.config == configs[1]
    assert len(timed_order) == 2 and timed_order == sorted(timed_order)  # by the check's call time


def test_candidates_with_the_same_machine_code_are_timed_once():
    # ``tag`` changes nothing the CPU compiles: configs 0 and 2 are one kernel, 1 another
    configs = [{"block": 64, "tag": 0}, {"block": 32, "tag": 0}, {"block": 64, "tag": 1}]
    result = (
        AutoTuner.from_kernel(kernel=lambda block, tag: scaled_add(1 << 13, block), configs=configs)
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=add_ref)
        .run(warmup=1, rep=3, early_stop=False)
    )
    assert not result.skipped
    assert sorted(result.latencies) == [0, 1, 2] and result.latencies[2] == result.latencies[0]
    assert result.benchmarked == 2


def test_tuning_refuses_to_time_the_gpu_emulator_unless_asked_for_functional_tuning(monkeypatch):
    from tile.ir.backend import resolve_target

    try:
        resolve_target("cuda")
    except TileError:
        pytest.skip("no CUDA backend installed")
    monkeypatch.setenv("TILE_DEVICE", "emu")
    configs = [{"bias": 1.0}, {"bias": 0.0}]
    tuner = (
        AutoTuner.from_kernel(kernel=lambda bias: scaled_add(128, 64, bias), configs=configs)
        .set_compile_args(out_idx=[-1], target="cuda")
        .set_profile_args(ref_prog=add_ref)
    )
    with pytest.raises(EmulatedTimingError, match="emulator") as info:
        tuner.run()
    assert "functional" in info.value.hint
    result = tuner.run(functional=True)
    assert result.config == configs[1] and result.latency is None
    assert [s.reason for s in result.skipped] == ["mismatch"]


def test_passing_a_tuned_parameter_skips_tuning():
    kernel = matmul(64, 32, 32, block_M=16, block_N=16)
    assert not hasattr(kernel, "config")  # compiled as asked, not tuned
    a = np.ones((64, 32), np.float32)
    b = np.ones((32, 32), np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b)


def test_progress_counts_and_stays_quiet_off_a_terminal(capsys):
    from tile.lang._src.tuning_progress import Progress

    quiet = Progress("k", 3)  # pytest's stderr is no terminal
    quiet.compiled_one()
    quiet.benchmarked_one(2.5)
    quiet.benchmarked_one(1.5)
    quiet.failed_one()
    quiet.close()
    assert quiet.summary() == "compiled 1/3, benchmarked 2, failed 1, best 1.5 ms"
    assert capsys.readouterr().err == ""
    pytest.importorskip("tqdm")
    shown = Progress("k", 2, enabled=True)
    shown.benchmarked_one(3.0)
    shown.close()
    assert "benchmarked 1" in capsys.readouterr().err


def add_scalar(n, block=64, threads=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), s: T.float32, C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + s

    return main


def test_scalar_inputs_must_be_given_and_then_tune():
    from tile.lang.autotuner import AutotuneInputError

    tuner = (
        AutoTuner.from_kernel(
            kernel=lambda block: add_scalar(1024, block), configs=[{"block": 32}, {"block": 64}]
        )
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=lambda a, s: a + s)
    )
    with pytest.raises(AutotuneInputError, match="scalar") as info:
        tuner.run(warmup=1, rep=3)
    assert "set_autotune_inputs" in info.value.hint
    a = np.arange(1024, dtype=np.float32)
    with set_autotune_inputs(a, 0.5):
        result = tuner.run(warmup=1, rep=3)
    np.testing.assert_allclose(result.kernel(a, 0.5), a + 0.5)
