"""The on-disk kernel cache: hits skip compilation, keys are content addressed and
stable across processes, broken entries are rebuilt, concurrent compiles are safe."""

import importlib.util
import inspect
import json
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cpu._src import backend as cpu_backend
from tile.ir.backend import resolve_target
from tile.ir.target import Target
from tile.lang._src import cache
from tile.lang._src.cache import KernelCacheWarning

WORKER = pathlib.Path(__file__).with_name("_lang_cache_worker.py")


def axpy(n, alpha):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i] * alpha + 1.0

    return main


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILE_CACHE", "1")
    return tmp_path / "cache"


def _counted(monkeypatch, name, record):
    """Calls of the CPU backend's ``name(first, target)``, each as ``record(first, target)``."""
    calls = []
    original = getattr(cpu_backend, name)

    def counting(first, target):
        calls.append(record(first, target))
        return original(first, target)

    monkeypatch.setattr(cpu_backend, name, counting)
    return calls


@pytest.fixture
def builds(monkeypatch):
    """Counts real LLVM builds of the CPU backend."""
    return _counted(monkeypatch, "build", lambda mod, target: target)


def entries(root):
    return sorted(p for p in (root / cache.FORMAT).glob("??/*") if p.is_dir())


def key_of(func, out_idx=(1,), target="cpu", **options):
    resolved, manifest = resolve_target(target)
    return cache.kernel_key(func, list(out_idx), resolved, manifest, options)


def run_axpy(kernel, alpha, n=64):
    a = np.arange(n, dtype="float32")
    np.testing.assert_array_equal(kernel(a), a * np.float32(alpha) + 1)


def test_a_miss_runs_the_library_it_stored(cache_root, builds, monkeypatch):
    # the first process runs the same machine code as every later one: the stored library,
    # not the built module (whose loading would run LLVM's code generation a second time)
    restored = _counted(monkeypatch, "restore", lambda directory, target: directory)
    kernel = tilelang.compile(axpy(64, 3.0), out_idx=[-1], target="cpu")
    assert len(builds) == 1 and len(restored) == 1
    [entry] = entries(cache_root)
    assert restored[0] == entry / cache.PAYLOAD_DIR
    run_axpy(kernel, 3.0)
    assert "define" in kernel.get_kernel_source("llvm")


def test_a_hit_skips_compilation_and_runs_correctly(cache_root, builds):
    func = axpy(64, 2.0)
    run_axpy(tilelang.compile(func, out_idx=[-1], target="cpu"), 2.0)
    hits = cache.stats.hits
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    run_axpy(kernel, 2.0)
    assert len(builds) == 1
    assert cache.stats.hits == hits + 1
    assert "define" in kernel.get_kernel_source("llvm")
    [entry] = entries(cache_root)
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["entry_name"] == "main"
    assert [p["name"] for p in meta["params"]] == ["A", "B"]


def test_the_key_follows_program_target_options_and_outputs():
    base = key_of(axpy(64, 2.0))
    assert base == key_of(axpy(64, 2.0)), "same program, same key"
    assert base != key_of(axpy(64, 3.0)), "a different constant"
    assert base != key_of(axpy(96, 2.0)), "a different shape"
    assert base != key_of(axpy(64, 2.0), target={"kind": "cpu", "arch": "x86-64"})
    assert base != key_of(axpy(64, 2.0), unroll=True)
    assert base != key_of(axpy(64, 2.0), out_idx=())


def test_the_key_ignores_where_the_kernel_was_written(tmp_path):
    # The same program text in another file and on other lines.
    path = tmp_path / "moved_axpy.py"
    path.write_text("import tile.lang.language as T\n\n\n\n" + inspect.getsource(axpy))
    spec = importlib.util.spec_from_file_location("moved_axpy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    moved = module.axpy
    assert inspect.getsourcefile(moved) != inspect.getsourcefile(axpy)
    assert key_of(moved(64, 2.0)) == key_of(axpy(64, 2.0))
    assert "tile.source" not in cache.canonical_program(axpy(64, 2.0))


def imports(code):
    @T.prim_func
    def main(A: T.Tensor((2,), "uint32"), B: T.Tensor((1,), "uint32")):
        T.import_source(code)
        with T.Kernel(1, threads=32):
            T.call_extern("handle", "f", T.address_of(A[0]), T.address_of(B[0]))

    return main


def imports_elsewhere(code):  # the same kernel, written on other lines
    @T.prim_func
    def main(A: T.Tensor((2,), "uint32"), B: T.Tensor((1,), "uint32")):
        T.import_source(code)
        with T.Kernel(1, threads=32):
            T.call_extern("handle", "f", T.address_of(A[0]), T.address_of(B[0]))

    return main


def test_the_key_follows_imported_source_code():
    # TVMScript prints a string with a newline as a reference into its metadata section, which it
    # leaves out by default: these two printed alike and shared one entry (the second kernel ran
    # the first one's code)
    sm80 = {"kind": "cuda", "arch": "sm_80"}
    one = "__device__ void f(const unsigned *a, unsigned *b) {\n  b[0] = a[0] + a[1];\n}\n"
    two = "__device__ void f(const unsigned *a, unsigned *b) {\n  b[0] = a[0] - a[1];\n}\n"
    assert key_of(imports(one), target=sm80) != key_of(imports(two), target=sm80)
    assert key_of(imports(one), target=sm80) == key_of(imports_elsewhere(one), target=sm80)


def test_the_key_keeps_dynamic_dims_symbolic():
    n = T.dynamic("n")

    @T.prim_func
    def dyn(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = A[bx * 32 + i] + 1.0

    key = key_of(dyn)
    assert key is not None and key == key_of(dyn)


def test_options_that_are_not_plain_data_are_not_cached(cache_root, builds):
    func = axpy(64, 2.0)
    assert key_of(func, target_host=object()) is None  # TileLang passes a tvm Target object here
    tilelang.compile(func, out_idx=[-1], target="cpu", target_host=object())
    assert len(builds) == 1 and entries(cache_root) == []


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "garble-meta"])
def test_a_damaged_entry_is_reported_removed_and_rebuilt(cache_root, builds, damage):
    func = axpy(64, 4.0)
    tilelang.compile(func, out_idx=[-1], target="cpu")
    [entry] = entries(cache_root)
    library = entry / "payload" / "kernel.so"
    # damaged as a later process finds it: a new file in its place (this process has the
    # library it stored mapped, and rewriting a mapped library in place crashes any process)
    data = bytearray(library.read_bytes())
    if damage == "truncate":
        library.unlink()
        library.write_bytes(bytes(data[:100]))
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
        library.unlink()
        library.write_bytes(bytes(data))
    elif damage == "delete":
        library.unlink()
    else:
        (entry / "meta.json").write_text('{"format": "v1", "ke')
    with pytest.warns(KernelCacheWarning, match="unusable.*rebuilt"):
        kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    run_axpy(kernel, 4.0)
    assert len(builds) == 2
    [rebuilt] = entries(cache_root)
    meta = json.loads((rebuilt / "meta.json").read_text())
    assert all(
        cache._sha256_file(rebuilt / name) == digest for name, digest in meta["files"].items()
    ), "the rebuilt entry is whole again"
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelCacheWarning)
        run_axpy(tilelang.compile(func, out_idx=[-1], target="cpu"), 4.0)
    assert len(builds) == 2, "the rebuilt entry is used"


def test_a_library_for_another_cpu_is_refused(cache_root, builds, tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "0")  # the built module, which `save` exports
    func = axpy(64, 5.0)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    cpu_backend.save(kernel.artifact, tmp_path)
    assert cpu_backend.restore(tmp_path, kernel.target) is not None
    with pytest.raises(Exception, match="generated for"):
        cpu_backend.restore(tmp_path, Target(kind="cpu", arch="some-other-cpu"))


def test_disabled_cache_reads_and_writes_nothing(cache_root, builds, monkeypatch):
    monkeypatch.setenv("TILE_CACHE", "0")
    func = axpy(64, 6.0)
    run_axpy(tilelang.compile(func, out_idx=[-1], target="cpu"), 6.0)
    run_axpy(tilelang.compile(func, out_idx=[-1], target="cpu"), 6.0)
    assert len(builds) == 2
    assert not cache_root.exists()


def test_an_unwritable_cache_warns_and_still_compiles(tmp_path, monkeypatch, builds):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TILE_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("TILE_CACHE", "1")
    with pytest.warns(KernelCacheWarning, match="not writable"):
        kernel = tilelang.compile(axpy(64, 7.0), out_idx=[-1], target="cpu")
    run_axpy(kernel, 7.0)


def _spawn(root):
    env = dict(os.environ, TILE_CACHE_DIR=str(root), TILE_CACHE="1")
    return subprocess.Popen(
        [sys.executable, str(WORKER)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc):
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)


def _load_worker():
    spec = importlib.util.spec_from_file_location("_lang_cache_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def concurrent_runs(tmp_path_factory):
    """Three processes compile one kernel at once into a fresh cache."""
    for _attempt in range(3):
        root = tmp_path_factory.mktemp("shared-cache")
        together = [_finish(p) for p in [_spawn(root) for _ in range(3)]]
        # An edit to the tile sources during the runs (a live checkout) changes the key.
        if len({run["sources"] for run in together}) == 1:
            break
    return root, together


def test_concurrent_processes_all_get_correct_results(concurrent_runs):
    _, together = concurrent_runs
    assert all(run["ok"] for run in together)
    assert sum(run["misses"] for run in together) == 1, "one process built, the others waited and loaded"


def test_concurrent_compiles_leave_exactly_one_valid_entry(concurrent_runs):
    root, _ = concurrent_runs
    [entry] = entries(root)
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["key"] == entry.name
    for name, digest in meta["files"].items():
        assert cache._sha256_file(entry / name) == digest
    assert list((root / cache.FORMAT / "tmp").iterdir()) == [], "no staging directories left behind"


def test_the_key_is_stable_across_processes(concurrent_runs, monkeypatch, builds):
    root, together = concurrent_runs
    [key] = {run["key"] for run in together}
    if together[0]["sources"] != cache.toolchain_fingerprint()["sources"]:
        pytest.skip("the tile sources changed while the test ran")
    monkeypatch.setenv("TILE_CACHE_DIR", str(root))
    monkeypatch.setenv("TILE_CACHE", "1")
    func = _load_worker().scaled_add(256, 64)
    assert key_of(func, out_idx=[2]) == key
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    a, b = np.arange(256, dtype="float32"), np.ones(256, dtype="float32")
    np.testing.assert_array_equal(kernel(a, b), a * 3 + b)
    assert builds == [], "this process loaded what another process built"


def test_an_empty_cache_dir_means_the_default(tmp_path, monkeypatch, builds):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TILE_CACHE_DIR", "")
    monkeypatch.setenv("TILE_CACHE", "1")
    assert cache.cache_dir() == tmp_path / ".cache" / "tile" / cache.FORMAT
    run_axpy(tilelang.compile(axpy(64, 8.0), out_idx=[-1], target="cpu"), 8.0)
    assert len(entries(tmp_path / ".cache" / "tile")) == 1
