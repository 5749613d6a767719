"""Native libraries kept in the cache are verified before they are loaded (issue 17).

A truncated or corrupted emulator runtime, emulated kernel or micro-kernel library in
``TILE_CACHE_DIR`` used to be mapped as it was and crash the process (SIGBUS); each is now
checked against the seal written with it and rebuilt when it does not match.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from _cpu_native_cache_worker import run

from tile.backends.cpu.simt import _toolchain
from tile.ir.sealed_files import SEAL_SUFFIX, install_sealed, is_sealed

needs_cxx = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++", "clang++")), reason="no host C++ compiler"
)
WORKER = pathlib.Path(__file__).with_name("_cpu_native_cache_worker.py")


def test_a_seal_detects_truncation_corruption_and_a_missing_seal(tmp_path):
    built = tmp_path / "lib.tmp"
    built.write_bytes(bytes(range(256)) * 64)
    lib = tmp_path / "libx.so"
    install_sealed(built, lib)
    assert is_sealed(lib) and not built.exists()
    original = lib.read_bytes()
    lib.write_bytes(original[: len(original) // 2])
    assert not is_sealed(lib)
    lib.write_bytes(original[:100] + bytes([original[100] ^ 1]) + original[101:])
    assert not is_sealed(lib)
    lib.write_bytes(original)
    assert is_sealed(lib)
    (tmp_path / ("libx.so" + SEAL_SUFFIX)).unlink()
    assert not is_sealed(lib)


@needs_cxx
def test_damaged_native_libraries_in_the_cache_are_rebuilt_not_loaded(tmp_path):
    # Build (or find) them in this session's cache, then damage copies in a cache of our own.
    paths = {name: pathlib.Path(p) for name, p in run().items()}
    root = _toolchain.cache_root().parent  # TILE_CACHE_DIR
    cache = tmp_path / "cache"
    for path in paths.values():
        for part in (path, path.with_name(path.name + SEAL_SUFFIX)):
            target = cache / part.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(part, target)
    copies = {name: cache / p.relative_to(root) for name, p in paths.items()}
    runtime = copies["runtime"].read_bytes()
    copies["runtime"].write_bytes(runtime[: len(runtime) // 3])  # truncated
    copies["kernel"].write_bytes(bytes(copies["kernel"].stat().st_size))  # zeroed
    copies["ukernel"].write_bytes(b"")  # emptied
    env = {**os.environ, "TILE_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, str(WORKER)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {k: pathlib.Path(v) for k, v in json.loads(done.stdout).items()} == copies
    for name, copy in copies.items():  # rebuilt in place, sealed again
        assert is_sealed(copy), name
