"""The kernel factories' tiling: keyword arguments or one ``tile.ops.Tiling``, the same
program either way; what the config functions pick; the typed error a bad tiling gets."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
import tvm_ffi

import tile.lang as tilelang
from tile.lang.autotuner import AutotuneConfigError, autotune
from tile.ops import OpArgumentError, Tiling
from tile.ops.attention import flash_attention_kernel
from tile.ops.gemm import GemmConfig, matmul_kernel
from tile.ops.gemv import gemv_kernel
from tile.ops.norm import rms_norm_kernel, softmax_kernel
from tile.ops.ssd import chunk_scan_kernel, chunk_state_kernel

SSD = (1, 2, 1, 64, 32, 16, 16)  # batch, nheads, ngroups, seqlen, chunk_size, headdim, dstate


def _same(a, b) -> bool:
    return bool(tvm_ffi.structural_equal(a, b, map_free_vars=True))


@pytest.mark.parametrize(
    "factory,args,keywords",
    [
        (matmul_kernel, (128, 96, 64, "float32"), {"block_M": 32, "block_N": 32, "block_K": 16, "panel": 2}),
        (flash_attention_kernel, (1, 2, 40, 16, True, "float32"), {"block_M": 16, "block_N": 32}),
        (gemv_kernel, (96, 64), {"block_N": 32, "block_K": 16, "num_stages": 1}),
        (softmax_kernel, (24, 64), {"block_M": 8, "threads": 64}),
        (rms_norm_kernel, (24, 64, "float32", "float32", 1e-5), {"block_M": 4}),
        (chunk_state_kernel, SSD, {"block_M": 16, "block_N": 16, "block_K": 16}),
        (chunk_scan_kernel, SSD, {"block_M": 16, "block_N": 16, "block_K": 16}),
    ],
    ids=["matmul", "flash_attention", "gemv", "softmax", "rms_norm", "chunk_state", "chunk_scan"],
)
def test_keywords_and_a_tiling_build_the_same_program(factory, args, keywords):
    params = inspect.signature(factory).parameters
    # the keyword form is the factory's signature: what help() shows and the autotuner checks
    assert set(keywords) <= set(params) and "tiling" in params
    defaults = {name: params[name].default for name in Tiling.__dataclass_fields__ if name in params}
    by_keywords = factory(*args, **keywords)
    by_tiling = factory(*args, tiling=Tiling(**{**defaults, **keywords}))
    assert _same(by_keywords, by_tiling)
    # positional tiling arguments still bind in the order the signature lists them
    problem = [p for p in params.values() if p.name not in defaults and p.name != "tiling"]
    leading = (*args, *(p.default for p in problem[len(args):]))
    positional = factory(*leading, *({**defaults, **keywords}[n] for n in params if n in defaults))
    assert _same(positional, by_keywords)
    # and a different tiling is a different program (the tiling is read, not dropped)
    assert not _same(factory(*args, **{**keywords, "threads": 2 * defaults["threads"]}), by_keywords)


def test_gemm_config_is_the_tiling_matmul_kernel_defaults_to():
    params = inspect.signature(matmul_kernel).parameters
    assert {f: params[f].default for f in Tiling.__dataclass_fields__} == dataclasses.asdict(GemmConfig())
    config = GemmConfig(128, 256, 64, 3, 256, panel=8)
    assert GemmConfig.parse(str(config)) == config and str(config) == "128x256x64:3:256:8"
    by_keywords = matmul_kernel(256, 256, 128, **dataclasses.asdict(config))
    assert _same(matmul_kernel(256, 256, 128, tiling=config), by_keywords)


@pytest.mark.parametrize(
    "call,argument",
    [
        (lambda: matmul_kernel(64, 64, 64, block_M=0), "block_M"),
        (lambda: gemv_kernel(64, 64, threads=-32), "threads"),
        (lambda: softmax_kernel(8, 64, block_M=2.5), "block_M"),
        (lambda: matmul_kernel(64, 64, 64, panel=-1), "panel"),
        (lambda: matmul_kernel(64, 64, 64, block_K=16, tiling=GemmConfig()), "block_K"),
        (lambda: chunk_state_kernel(*SSD, tiling=Tiling(num_stages=0)), "num_stages"),
    ],
    ids=["zero-block", "negative-threads", "fractional-block", "negative-panel", "both-ways", "ssd-stages"],
)
def test_a_bad_tiling_is_a_typed_error_naming_the_field(call, argument):
    with pytest.raises(OpArgumentError, match=f"argument '{argument}'"):
        call()


def test_the_autotuner_tunes_a_factory_over_its_tiling_keywords(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))  # this test's own tuning cache
    jitted = tilelang.jit(out_idx=[-1], target="cpu")(matmul_kernel)
    configs = [{"block_M": 16, "block_N": 16}, {"block_M": 32, "block_N": 16, "block_K": 16}]
    kernel = autotune(configs=configs, warmup=1, rep=2)(jitted)(48, 40, 32, "float32")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((48, 32)).astype("float32"), rng.standard_normal((32, 40)).astype("float32")
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(AutotuneConfigError, match="blok_M"):  # keys are checked against the signature
        autotune(configs=[{"blok_M": 16}], warmup=1, rep=2)(jitted)(48, 40, 32, "float32")
