"""Autotuning on a local Ray cluster started by the test (CPU backend): the same choice as the
local executor, and a worker lost mid-tuning is retried elsewhere instead of failing the run.

Starting Ray takes tens of seconds on a busy machine, so these tests run only with
``TILE_TEST_RAY=1`` (and Ray installed: ``pip install 'tile-lang[ray]'``), as ``nox -s ray`` does."""

import os
import sys

import numpy as np
import pytest

import tile.lang.language as T
from tile.lang.autotuner import AutoTuner

pytestmark = pytest.mark.skipif(os.environ.get("TILE_TEST_RAY") != "1", reason="set TILE_TEST_RAY=1 to run")
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("cache")
    os.environ["TILE_CACHE_DIR"] = str(cache_dir)  # before the workers start: they inherit it
    # The workers cannot import this test module; ship its functions by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield cache_dir
    ray.shutdown()
    os.environ.pop("TILE_CACHE_DIR", None)


def scaled_add(n, block=64, repeat=1):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2.0 + B[bx * block + i]
            for _ in T.serial(repeat - 1):  # an affine FP recurrence: nothing the compiler can fold
                for i in T.Parallel(block):
                    C[bx * block + i] = C[bx * block + i] * 1.0000001 + A[bx * block + i] * 1e-9

    return main


CONFIGS = [{"block": 64, "repeat": 2000}, {"block": 64, "repeat": 1}, {"block": 4096}]  # ~1000x apart


def _tuner(**profile):
    return (
        AutoTuner.from_kernel(
            kernel=lambda block, repeat=1: scaled_add(1 << 14, block, repeat), configs=CONFIGS
        )
        .set_compile_args(out_idx=[-1], target="cpu")
        .set_profile_args(ref_prog=lambda a, b: 2 * a + b, **profile)
    )


def test_ray_executor_makes_the_local_executors_choice(cluster, monkeypatch):
    monkeypatch.setenv("TILE_AUTOTUNE", "force")
    local = _tuner().run(warmup=1, rep=5, executor="local")
    remote = _tuner().run(warmup=1, rep=5, executor="ray")
    assert remote.config == local.config == CONFIGS[1]
    assert {s.index: s.reason for s in remote.skipped} == {2: "compile failed"}
    a = np.arange(1 << 14, dtype=np.float32)
    np.testing.assert_allclose(remote.kernel(a, a), 3 * a, rtol=1e-6)


def test_a_worker_lost_mid_tuning_is_retried_elsewhere(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_AUTOTUNE", "force")
    marker = tmp_path / "killed-once"

    def supply_killing_its_first_worker(params):
        if not marker.exists():
            marker.write_text("x")
            os._exit(1)  # the worker process dies mid-task, as on a lost node
        rng = np.random.default_rng(0)
        return [rng.standard_normal(1 << 14).astype(np.float32) for _ in params]

    tuner = _tuner(supply_prog=supply_killing_its_first_worker)
    result = tuner.run(warmup=1, rep=5, executor="ray")
    assert marker.exists()
    assert result.config == CONFIGS[1]
    assert all(s.reason != "lost worker" for s in result.skipped)
