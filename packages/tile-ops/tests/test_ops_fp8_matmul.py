"""``tile.ops.matmul`` on fp8 (``torch.float8_e4m3fn``, ``float8_e5m2``) operands.

The kernels run on the CUDA emulator (``TILE_DEVICE=emu``) for sm_89 (mma.sync) and sm_90a
(wgmma), and on the CPU, with B row-major (copied transposed first) and
column-major (read in place), against float64 products of the exactly decoded operands rounded
once to the output dtype. Targets without fp8 (sm_80, ROCm's fnuz-only CDNA3) are an
``OpArgumentError`` naming the argument before anything compiles, as are output dtypes an fp8
product is not stored as.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tile.ops
from tile.ops import OpArgumentError
from tile.ops.gemm import FP8_WIDE_TILE, GemmConfig, gemm_config_for
from tile.testsupport.markers import needs_backend, needs_cuobjdump, needs_host_cxx, needs_nvcc

torch = pytest.importorskip("torch")


def cuda(arch: str) -> str:
    return json.dumps({"kind": "cuda", "arch": arch})


def fp8(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    values = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 4, shape))
    return torch.from_numpy(values.astype(np.float32)).to(dtype)


def reference(a: torch.Tensor, b: torch.Tensor, out: torch.dtype) -> torch.Tensor:
    # fp8 -> float64 is exact (checked on every code in the CUDA backend's fp8 gemm tests)
    return (a.double() @ b.double()).to(out)


@pytest.fixture
def emu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEVICE", "emu")


# tile-ops' own test session installs only the CPU backend: the CUDA cases run where
# tile-backends-cuda is installed (a dev venv; CI's conformance session covers fp8 on it)
needs_cuda = needs_backend("cuda")


@needs_cuda
@needs_host_cxx
@pytest.mark.parametrize(
    ("arch", "dtype", "b_column_major", "out_dtype"),
    [
        ("sm_89", torch.float8_e4m3fn, False, None),
        ("sm_89", torch.float8_e4m3fn, True, torch.float32),
        ("sm_90a", torch.float8_e4m3fn, True, torch.float16),
        ("sm_90a", torch.float8_e5m2, False, torch.bfloat16),
    ],
)
def test_fp8_matmul_matches_the_exact_product(emu, arch, dtype, b_column_major, out_dtype) -> None:
    rng = np.random.default_rng(3)
    m, k, n = 200, 192, 80  # M and N not multiples of any tile: bounds-checked loads and stores
    a = fp8(rng, (m, k), dtype)
    weight = fp8(rng, (n, k), dtype)
    b = weight.t() if b_column_major else weight.t().contiguous()
    c = tile.ops.matmul(a, b, out_dtype=out_dtype, target=cuda(arch))
    want_dtype = out_dtype or torch.bfloat16  # the documented default
    assert c.dtype == want_dtype and c.shape == (m, n)
    want = reference(a, b, want_dtype)
    # float32 sums of 192 terms in another order than float64's (a few float32 ulps), then one
    # rounding to the output dtype
    tol = torch.finfo(want_dtype).eps + 2.0**-18
    scale = want.double().abs().max().item()
    torch.testing.assert_close(c.double(), want.double(), rtol=tol, atol=tol * scale)


@needs_cuda
@needs_host_cxx
def test_fp8_matmul_batched_rows(emu) -> None:
    rng = np.random.default_rng(4)
    a = fp8(rng, (2, 3, 64), torch.float8_e4m3fn)
    b = fp8(rng, (64, 32), torch.float8_e4m3fn)
    c = tile.ops.matmul(a, b, out_dtype="float32", target=cuda("sm_89"))
    assert c.shape == (2, 3, 32)
    torch.testing.assert_close(c, reference(a, b, torch.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("b_column_major", [False, True])
def test_fp8_matmul_on_the_cpu(b_column_major) -> None:
    # CPU tensors: the torch op on the CPU backend (exact fp8 conversions, float32 sums)
    rng = np.random.default_rng(5)
    a = fp8(rng, (70, 96), torch.float8_e4m3fn)
    weight = fp8(rng, (40, 96), torch.float8_e4m3fn)
    b = weight.t() if b_column_major else weight.t().contiguous()
    c = tile.ops.matmul(a, b, out_dtype=torch.float32)
    want = reference(a, b, torch.float32)
    tol = 2.0**-18  # float32 sums of 96 exact products, in another order than float64's
    torch.testing.assert_close(c, want, rtol=tol, atol=tol * want.abs().max().item())
    # test_schema and the aot_dispatch checks compare and perturb the inputs with ops torch has no
    # fp8 CPU kernel for (mul, ...): the fake kernel and the autograd registration are checked
    utils = ("test_faketensor", "test_autograd_registration")
    torch.library.opcheck(torch.ops.tile.matmul, (a, b, torch.bfloat16), test_utils=utils)


@needs_cuda
def test_fp8_where_the_target_has_none_is_an_error_naming_a_before_any_compile(monkeypatch) -> None:
    import tile.lang as tilelang

    monkeypatch.setattr(tilelang, "compile", lambda *a, **k: pytest.fail("compiled"))
    a = torch.zeros(4, 8).to(torch.float8_e4m3fn)
    b = torch.zeros(8, 4).to(torch.float8_e4m3fn)
    with pytest.raises(OpArgumentError, match="argument 'a' has dtype float8_e4m3fn") as info:
        tile.ops.matmul(a, b, target=cuda("sm_80"))  # no fp8 before sm_89
    assert "bfloat16" in info.value.hint
    with pytest.raises(OpArgumentError, match="argument 'a'"):
        tile.ops.matmul(a, b, target=json.dumps({"kind": "hip", "arch": "gfx942"}))  # fnuz fp8 only


@pytest.mark.parametrize(
    ("a_dtype", "out_dtype", "problem"),
    [
        (torch.float8_e4m3fn, torch.int8, "'out_dtype' is int8"),
        (torch.float8_e4m3fn, "float64", "'out_dtype' is float64"),
        (torch.float32, torch.bfloat16, "'out_dtype' is bfloat16 for float32 operands"),
    ],
)
def test_unsupported_output_dtypes_name_out_dtype(a_dtype, out_dtype, problem) -> None:
    a = torch.zeros(4, 8).to(a_dtype)
    b = torch.zeros(8, 4).to(a_dtype)
    with pytest.raises(OpArgumentError, match=problem):
        tile.ops.matmul(a, b, out_dtype=out_dtype, target=cuda("sm_89"))


def test_fake_kernel_gives_the_output_dtype() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(5, 64, dtype=torch.float8_e4m3fn)
        b = torch.empty(64, 16, dtype=torch.float8_e4m3fn)
        assert torch.ops.tile.matmul(a, b).dtype == torch.bfloat16
        assert torch.ops.tile.matmul(a, b, torch.float16).dtype == torch.float16
        assert torch.ops.tile.matmul(a.float(), b.float()).dtype == torch.float32


def test_fp8_matmul_has_no_backward() -> None:
    from tile.ops._src import torch_ops

    a = torch.zeros(4, 8).to(torch.float8_e4m3fn)
    b = torch.zeros(8, 4).to(torch.float8_e4m3fn)
    ctx = type("Ctx", (), {"saved_tensors": (a, b), "needs_input_grad": (True, False)})()
    with pytest.raises(OpArgumentError, match="no backward"):
        torch_ops._matmul_backward(ctx, torch.zeros(4, 4))


@needs_cuda
def test_fp8_tiles_follow_the_capabilities() -> None:
    from tile.backends.cuda._src.backend import capabilities
    from tile.ir.target import Target

    def config(arch: str, m: int, n: int) -> GemmConfig:
        return gemm_config_for(capabilities(Target("cuda", arch=arch)), m, n, 4096, "float8_e4m3fn")

    # sm_90a lists an fp8 wgmma: the warpgroup tile, 128 bytes of K per row
    assert config("sm_90a", 4096, 4096) == GemmConfig(*FP8_WIDE_TILE, 3, 256, panel=8)
    # sm_89 (mma.sync only) and small problems: mma-sized tiles, K a multiple of the k32 instruction
    assert config("sm_89", 4096, 4096) == GemmConfig(128, 128, 64, 3, 128)
    assert config("sm_90a", 64, 64) == GemmConfig(64, 64, 64, 2, 128)


@needs_cuda
@needs_nvcc
@needs_cuobjdump
def test_the_library_tiling_compiles_to_fp8_wgmma_on_sm90a() -> None:
    # the paper's M0 shape with the tiling matmul picks for it: TMA, QGMMA, no spills
    import re

    import tile.lang as tilelang
    from tile.ops.gemm import fp8_matmul_kernel, gemm_config

    target = {"kind": "cuda", "arch": "sm_90a"}
    config = gemm_config(4096, 1024, 8192, "float8_e4m3fn", target)
    assert config == GemmConfig(*FP8_WIDE_TILE, 3, 256, panel=8)
    program = fp8_matmul_kernel(4096, 1024, 8192, "float8_e4m3fn", "bfloat16", config)
    binary = tilelang.compile(program, out_idx=[-1], target=target).artifact.payload
    assert binary.stats.spill_stores == 0 and binary.stats.spill_loads == 0, binary.stats
    sass = binary.sass()
    assert re.search(r"\bQGMMA\.64x128x32\.F32\.E4M3\.E4M3\b", sass) and re.search(r"\bUTMALDG\.2D\b", sass)
