"""fp8 values in kernels: ``T.float8_e4m3`` (TileLang's name for CUDA's e4m3) and arithmetic on
fp8 operands (``T.max``, ``T.min``, ``T.clamp`` of two fp8 loads).

* ``T.float8_e4m3`` was apache-tvm's IEEE-style type (infinities, largest finite 240) as a bare
  TVMScript constructor: binding it in an eager kernel body stopped the parse (TileLang's
  examples/deepseek_v4/act_quant.py, ``out_dtype = T.float8_e4m3``), and no CUDA target took it.
  TileLang stores it as CUDA's ``__nv_fp8_e4m3`` and gives torch ``float8_e4m3fn`` tensors for
  it, so here it is ``float8_e4m3fn``, as a name (``"float8_e4m3"``) too.
* ``T.max(a, b)`` of two fp8 values: CUDA's fp8 types have no ``max``/``min`` (nvcc: "no instance
  of overloaded function"; TileLang's testing/python/language/test_tilelang_language_clamp.py).
  They are computed in float32 and stored back, which is exact for min and max and rounds a sum
  once; a clamp's nested min and max stay one float32 expression (the CPU build of ``T.clamp``
  ran for minutes before).

Reference: torch's fp8 tensors (every non-NaN e4m3fn and e5m2 code against a shuffled copy), codes
compared byte for byte; a result past the largest finite value saturates to it (as on the GPUs).
"""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.testsupport.markers import needs_backend

torch = pytest.importorskip("torch")

N = 256
TARGETS = [
    pytest.param("cpu", id="cpu"),
    pytest.param({"kind": "cuda", "arch": "sm_89"}, id="sm_89", marks=needs_backend("cuda")),
    pytest.param({"kind": "cuda", "arch": "sm_90a"}, id="sm_90a", marks=needs_backend("cuda")),
]
OPS = {
    "add": lambda a, b, dt: a + b,
    "max": lambda a, b, dt: T.max(a, b),
    "min": lambda a, b, dt: T.min(a, b),
    "clamp": lambda a, b, dt: T.clamp(a, T.cast(-1.0, dt), T.cast(1.0, dt)),
}


def _kernel(op: str, dtype: str):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                C[bx * 128 + i] = OPS[op](A[bx * 128 + i], B[bx * 128 + i], dtype)

    return main


def _every_code(torch_dtype) -> tuple:
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch_dtype)
    finite = codes[~torch.isnan(codes.float())]
    other = finite[torch.from_numpy(np.random.default_rng(3).permutation(len(finite)))]
    a = torch.zeros(N, dtype=torch_dtype)
    b = torch.zeros(N, dtype=torch_dtype)
    a[: len(finite)], b[: len(finite)] = finite, other
    return a, b


def test_float8_e4m3_is_the_ocp_e4m3() -> None:
    assert T.float8_e4m3 == "float8_e4m3fn"
    assert T.dtype("float8_e4m3") == "float8_e4m3fn"
    assert T.dtype("float8_e4m3").as_torch() is torch.float8_e4m3fn
    assert T.float8_e4m3(1.5).dtype == "float8_e4m3fn"  # a constructor, as TVMScript's is


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_min_max_clamp_of_fp8_values(monkeypatch, target, dtype: str, op: str) -> None:
    if target != "cpu":
        monkeypatch.setenv("TILE_DEVICE", "emu")
    torch_dtype = T.dtype(dtype).as_torch()
    a, b = _every_code(torch_dtype)
    c = torch.empty(N, dtype=torch_dtype)
    tilelang.compile(_kernel(op, dtype), target=target)(a, b, c)
    af, bf = a.float(), b.float()
    exact = {
        "add": af + bf,  # rounded once from the float32 sum
        "max": torch.maximum(af, bf),
        "min": torch.minimum(af, bf),
        "clamp": af.clamp(-1.0, 1.0),
    }[op]
    # a sum past the largest finite value saturates (CUDA's cvt.rn.satfinite; torch saturates
    # e4m3fn on its own but gives e5m2 infinity, so the reference clamps first)
    top = torch.finfo(torch_dtype).max
    want = exact.clamp(-top, top).to(torch_dtype)
    got = c.view(torch.uint8)
    same = got == want.view(torch.uint8)
    # +0 and -0 compare equal: a min or max of the two may return either code
    zeros = (c.float() == 0) & (want.float() == 0)
    assert bool((same | zeros).all()), (op, dtype, int((~(same | zeros)).sum()))
    if op == "add":  # the largest codes are in the draw: sums past them did occur
        assert bool(((exact.abs() > top) & (c.float().abs() == top)).any())


def test_eager_body_binds_the_dtype_name(monkeypatch) -> None:
    # act_quant's pattern: the dtype bound to a name in an eager kernel body, a float8 output
    @tilelang.jit
    def quantize(x, scale: float = 0.5):
        M = T.const("M")
        x: T.Tensor[(M,), T.float32]
        out_dtype = T.float8_e4m3
        y = T.empty((M,), out_dtype)
        with T.Kernel(1, threads=32):
            for i in T.Parallel(M):
                y[i] = T.clamp(x[i] * scale, -448.0, 448.0)
        return y

    x = torch.tensor([0.0, 1.0, -3.0, 1000.0, -1000.0, 2.75, 600.0, 0.3] * 4)
    y = quantize(x)
    assert y.dtype is torch.float8_e4m3fn
    want = (x * 0.5).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    assert torch.equal(y.float(), want.float())


@pytest.mark.parametrize("target", TARGETS)
def test_infinity_of_e5m2_stays_infinity(monkeypatch, target) -> None:
    # a constant of the type that is its infinity is not a conversion: fp8 conversions saturate
    # (cvt.rn.satfinite), T.infinity does not (TileLang's language/infinity: output == inf)
    if target != "cpu":
        monkeypatch.setenv("TILE_DEVICE", "emu")

    @T.prim_func
    def main(A: T.Tensor((32,), "float8_e5m2"), B: T.Tensor((32,), "float8_e5m2")):
        with T.Kernel(1, threads=32):
            T.fill(A, T.infinity("float8_e5m2"))
            T.fill(B, -T.infinity("float8_e5m2"))

    a, b = tilelang.compile(main, out_idx=[0, 1], target=target)()  # torch tensors (no inputs)
    assert set(a.view(torch.uint8).tolist()) == {0x7C}  # 0.11111.00
    assert set(b.view(torch.uint8).tolist()) == {0xFC}
