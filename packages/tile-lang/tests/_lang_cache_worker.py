"""Compiles one kernel through the on-disk cache and prints what happened as JSON.

Run as a separate process by test_lang_cache.py (several at once, sharing one
``TILE_CACHE_DIR``); not a test module itself.
"""

import json
import sys

import numpy as np

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.backend import resolve_target
from tile.lang._src import cache


def scaled_add(n, block):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 3.0 + B[bx * block + i]

    return main


if __name__ == "__main__":
    func = scaled_add(256, 64)
    kernel = tilelang.compile(func, out_idx=[-1], target="cpu")
    a = np.arange(256, dtype="float32")
    b = np.ones(256, dtype="float32")
    ok = bool(np.array_equal(kernel(a, b), a * 3.0 + b))
    target, manifest = resolve_target("cpu")
    key = cache.kernel_key(func, [2], target, manifest, {})
    sources = cache.toolchain_fingerprint()["sources"]
    report = {"ok": ok, "key": key, "sources": sources}
    report.update(hits=cache.stats.hits, misses=cache.stats.misses)
    json.dump(report, sys.stdout)
