"""TMA on sm_90 (``_src/tma.py``): box plans, tensor-map arguments, map parameters.

* Box plans vs the reference TMA placement model (``isa_tables.tma_smem_addr``): every
  element of a shared tile lands, through our boxes, exactly where the tile's
  swizzled layout stores it.
* ``cuTensorMapEncodeTiled`` arguments, hand-computed (dims innermost first, byte
  strides, swizzle enum), and the rules that reject a tensor.
* Map parameters: the rewritten kernel source compiles for sm_90a with nvcc and the
  TMA load becomes UTMALDG; the launch recipe carries the map through JSON.
* GPU: the driver accepts the encoded arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _cuda_gpu import check_fp16_gemm_on_gpu
from _cuda_sass import HAVE_TOOLS, SKIP_REASON, compile_cubin, opcodes, sass_by_kernel

from tile.backends.cuda._src.tma import (
    ELEMENT_BYTES,
    TmaUnsupported,
    encode_arguments,
    plan_boxes,
    plan_from_json,
    plan_to_json,
)
from tile.backends.cuda.errors import CudaLaunchError
from tile.ir.gpu import KernelParam, LaunchRecipe
from tile.layout import make_swizzled_layout
from tile.testsupport import isa_tables as isa


# ---------------------------------------------------------------- box plans
@pytest.mark.parametrize(
    ("rows", "cols", "dtype"),
    [
        (128, 32, "float16"),
        (32, 128, "float16"),
        (64, 64, "bfloat16"),
        (16, 128, "float32"),
        (64, 128, "int8"),
    ],
)
def test_boxes_land_where_the_swizzled_layout_stores(rows: int, cols: int, dtype: str) -> None:
    assert isa is not None
    layout = make_swizzled_layout([rows, cols], dtype)
    plan = plan_boxes(rows, cols, dtype, layout.swizzle_bytes)
    elem = ELEMENT_BYTES[dtype]
    span = layout.swizzle_bytes // elem
    assert plan.box_cols == span and plan.box_rows == rows
    assert plan.tile_bytes == rows * cols * elem
    by_col = {box.col: box for box in plan.boxes}
    step = max(1, rows // 16)
    for r in range(0, rows, step):
        for c in range(cols):
            box = by_col[c - c % span]
            tma = isa.tma_smem_addr(
                box.smem_offset, (c - box.col, r), (span, rows), elem, layout.swizzle_bytes
            )
            phys_row, phys_col = (int(e) for e in layout.map_forward_index([r, c]))
            assert tma == (phys_row * span + phys_col) * elem, (r, c)


def test_unswizzled_tile_is_one_box() -> None:
    plan = plan_boxes(64, 32, "float16", 0)
    assert (plan.box_rows, plan.box_cols, len(plan.boxes), plan.smem_align) == (64, 32, 1, 128)


@pytest.mark.parametrize(
    ("rows", "cols", "dtype", "swizzle"),
    [
        (64, 12, "float16", 0),  # 24-byte rows: not a multiple of 16
        (512, 64, "float16", 128),  # 512 rows > 256 per box dim
        (64, 96, "float16", 128),  # 96 columns are not whole 64-element swizzle rows
        (12, 64, "float16", 128),  # 12 rows are not whole 8-row swizzle atoms
        (64, 64, "float16", 16),  # no such swizzle mode
    ],
)
def test_tiles_tma_cannot_load(rows: int, cols: int, dtype: str, swizzle: int) -> None:
    with pytest.raises(TmaUnsupported):
        plan_boxes(rows, cols, dtype, swizzle)


def test_plan_json_round_trip() -> None:
    plan = plan_boxes(32, 128, "float16", 128)
    assert plan_from_json(plan_to_json(plan)) == plan
    four = plan_boxes(64, 128, "float16", 128, rank=4, row_dim=1)
    assert plan_from_json(plan_to_json(four)) == four


def test_a_tile_of_a_4d_tensor_takes_unit_boxes_on_the_other_dims() -> None:
    # attention's K[b, k*64 : (k+1)*64, h, :] of a (batch, seq, heads, dim) tensor:
    # rows along dim 1, columns along dim 3, one element of dims 0 and 2
    plan = plan_boxes(64, 128, "float16", 128, rank=4, row_dim=1)
    assert plan.box_dim == (64, 1, 64, 1)  # innermost first: 64 halves = 128 B, 1 head, 64 rows, 1 batch
    base = 0x7F00_0000_0000
    args = encode_arguments(plan, base, (2, 1024, 8, 128), (1024 * 8 * 128, 8 * 128, 128, 1))
    assert args.rank == 4 and args.global_dim == (128, 8, 1024, 2)
    # byte strides of dims 1..3 innermost first: a head (256 B), a row (8 heads), a batch
    assert args.global_strides == (256, 2048, 1024 * 2048)
    assert args.element_strides == (1, 1, 1, 1) and args.swizzle == 3
    # batch 1: its stride is never stepped over; the map still gets a legal one
    one = encode_arguments(plan, base, (1, 200, 2, 64 * 2), (200 * 2 * 128, 256, 128, 1))
    assert one.global_dim == (128, 2, 200, 1) and one.global_strides == (256, 512, 200 * 512)


@pytest.mark.parametrize(
    ("extents", "tile", "row_dim"),
    [
        ([64, 32], [64, 32], 0),
        ([1, 64, 1, 128], [64, 128], 1),
        ([64, 1, 128], [64, 128], 0),
        ([1, 1, 1, 128], [1, 128], 2),
        ([2, 64, 1, 128], [64, 128], None),  # two dims with extent > 1 besides the columns
        ([1, 64, 1, 64], [64, 128], None),  # columns do not span the tile
        ([1, 128, 1, 64], [64, 128], None),
    ],
)
def test_which_global_dim_a_tile_spans(extents: list[int], tile: list[int], row_dim: int | None) -> None:
    from tile.backends.cuda._src.sm90a_mark_tma_copies import _tile_dims

    assert _tile_dims(list(extents), list(tile)) == row_dim


# ---------------------------------------------------------------- encode arguments
def test_encode_arguments_for_the_paper_gemm_operands() -> None:
    base = 0x7F00_0000_0000
    a = encode_arguments(plan_boxes(128, 32, "float16", 64), base, (512, 304), (304, 1))
    # dims innermost first; one byte stride (dim 1); box {32 halves = 64 B, 128 rows}
    assert a.global_dim == (304, 512) and a.global_strides == (608,) and a.box_dim == (32, 128)
    assert (a.data_type, a.rank, a.swizzle, a.interleave, a.oob_fill) == (6, 2, 2, 0, 0)
    assert a.element_strides == (1, 1) and a.global_address == base
    b = encode_arguments(plan_boxes(32, 128, "bfloat16", 128), base, (200, 256), (256, 1))
    assert b.global_dim == (256, 200) and b.global_strides == (512,) and b.box_dim == (64, 32)
    assert (b.data_type, b.swizzle) == (9, 3)
    c = encode_arguments(plan_boxes(16, 128, "float32", 128), base, (1, 100), (100, 1))
    assert c.global_strides == (400,) and c.data_type == 7  # one row: any 16-byte multiple


@pytest.mark.parametrize(
    ("ptr", "shape", "strides", "message"),
    [
        (0x1000, (300, 260), (260, 1), "multiples of 16 bytes"),  # 520-byte rows
        (0x1008, (512, 512), (512, 1), "aligned"),
        (0x1040, (512, 512), (512, 1), "aligned"),  # 16- but not 128-byte aligned under a swizzle
        (0x1000, (512, 512), (1, 512), "contiguous"),
        (0x1000, (4, 512, 512), (512 * 512, 512, 1), "2-D"),  # the plan is for a 2-D tensor
    ],
)
def test_encode_arguments_reject(
    ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], message: str
) -> None:
    with pytest.raises(CudaLaunchError, match=message):
        encode_arguments(plan_boxes(128, 64, "float16", 128), ptr, shape, strides)


# ---------------------------------------------------------------- kernel parameters
def _generated_gemm() -> tuple[str, Any]:
    """The CUDA source and launch recipe of the warp-specialized 256^3 GEMM (no nvcc needed)."""
    import tvm

    from tile.backends.cuda._src import backend
    from tile.backends.cuda._src.codegen import generate
    from tile.ir.target import Target
    from tile.ir.transform import CompileContext, run_pipeline
    from tile.ops.gemm import matmul_kernel

    func = matmul_kernel(256, 256, 256, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    target = Target.parse({"kind": "cuda", "arch": "sm_90a", "warp_specialize": "1"})
    ctx = CompileContext(target=target, capabilities=backend.capabilities(target))
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    mod = run_pipeline(mod, backend.pipeline(target), ctx)
    source, recipe, _ = generate(mod, "sm_90a")
    return source, recipe


def test_codegen_declares_a_map_parameter_per_tma_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    source, recipe = _generated_gemm()
    (signature,) = [line for line in source.splitlines() if "__global__" in line]
    # A and B are read only through TMA: their maps follow C, in tensor-name order, by value
    maps = "const __grid_constant__ CUtensorMap tile_tmap_A, const __grid_constant__ CUtensorMap tile_tmap_B"
    assert signature.endswith(f"main_kernel(half* __restrict__ C_ptr, {maps}) {{"), signature
    assert "__launch_bounds__(256, 1)" in signature  # 128 consumers + the producer warpgroup, 1 block/SM
    # one A box and two B boxes (64-column spans of the 128B swizzle) per stage, and each
    # map prefetched once by the producer thread while thread 0 initialises the barriers
    assert source.count("tile_tma_load_2d(") == 3
    assert source.count("(&(tile_tmap_A))") == 2 and source.count("(&(tile_tmap_B))") == 3
    assert source.count("tile_tma_prefetch_map(") == 2
    assert "tile_tmap_A()" not in source and "tile_tmap_B()" not in source  # no placeholder left
    assert "extern __shared__ __align__(1024)" in source and "__syncthreads" not in source
    kinds = [(p.kind, p.source) for p in recipe.params]
    assert kinds == [("tensor", "C"), ("tensormap", "A"), ("tensormap", "B")]
    assert plan_from_json(recipe.params[2].tma or {}) == plan_boxes(32, 128, "float16", 128)


def test_warp_specialized_pipeline_verifies_after_every_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    # warp_specialize_loop used the mbarrier ring before split_producer_warps allocated it:
    # TILE_VERIFY_EACH_PASS=1 failed ("buffer tile_mbar is used ... without a prior DeclBuffer")
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    monkeypatch.setenv("TILE_VERIFY_EACH_PASS", "1")
    source, _ = _generated_gemm()
    assert source.count("tile_mbar_ptr[6];") == 1  # one allocation (3 stages: full + empty)
    assert "tile_mbarrier_arrive_expect_tx" in source


@pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)
def test_map_parameters_compile_to_utmaldg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    source, _ = _generated_gemm()
    cubin = compile_cubin(source, "sm_90a", tmp_path)
    ((_, sass),) = sass_by_kernel(cubin).items()
    ops = opcodes(sass)
    loads = sum(op.startswith("UTMALDG.2D") for op in ops)
    assert loads and loads % 3 == 0, ops  # 3 per stage; nvcc may unroll the 8 iterations
    assert any(op.startswith("SYNCS") for op in ops), ops


def test_recipe_carries_the_map_through_json() -> None:
    plan = plan_boxes(32, 128, "float16", 128)
    recipe = LaunchRecipe(
        "k_kernel",
        (KernelParam("tensor", "C", "float16"), KernelParam("tensormap", "B", "float16", plan_to_json(plan))),
        ("1", "1", "1"),
        ("128", "1", "1"),
        "0",
    )
    again = LaunchRecipe.from_json(recipe.to_json())
    assert again == recipe and plan_from_json(again.params[1].tma or {}) == plan


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_driver_encodes_the_map() -> None:
    import torch

    from tile.backends.cuda._src.tma import TensorMapPacker

    x = torch.zeros((512, 512), dtype=torch.float16, device="cuda")
    packer = TensorMapPacker(plan_boxes(32, 128, "float16", 128))  # the real cuTensorMapEncodeTiled
    owner, address = packer(x.data_ptr(), (512, 512), (512, 1))
    assert address % 64 == 0
    assert packer(x.data_ptr(), (512, 512), (512, 1)) == (owner, address)  # cached per key


def test_warp_specialization_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from tile.backends.cuda._src.tma import warp_specialize_enabled
    from tile.ir.target import Target

    def target(**options: str) -> Target:
        return Target.parse({"kind": "cuda", "arch": "sm_90a", **options})

    monkeypatch.delenv("TILE_CUDA_WARP_SPECIALIZE", raising=False)
    assert warp_specialize_enabled(target())
    assert not warp_specialize_enabled(target(warp_specialize="0"))
    assert not warp_specialize_enabled(target(**{"tl.disable_warp_specialized": "1"}))
    assert not warp_specialize_enabled(target(**{"tl.disable_tma_lower": "true"}))
    assert warp_specialize_enabled(target(**{"tl.disable_warp_specialized": "0"}))
    # the env var overrides the default, a kernel's own setting overrides the env var
    monkeypatch.setenv("TILE_CUDA_WARP_SPECIALIZE", "0")
    assert not warp_specialize_enabled(target())
    assert not warp_specialize_enabled(target(**{"tl.disable_warp_specialized": "0"}))
    assert warp_specialize_enabled(target(warp_specialize="1"))
    monkeypatch.setenv("TILE_CUDA_WARP_SPECIALIZE", "1")
    assert warp_specialize_enabled(target())
    assert not warp_specialize_enabled(target(warp_specialize="off"))
    assert not warp_specialize_enabled(target(**{"tl.disable_warp_specialized": "1"}))


def test_a_malformed_switch_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from tile.backends.cuda._src.tma import warp_specialize_enabled
    from tile.ir.errors import TargetError
    from tile.ir.target import Target
    from tile.layout.errors import EnvironmentVariableError

    with pytest.raises(TargetError, match="warp_specialize='maybe'"):
        warp_specialize_enabled(Target.parse({"kind": "cuda", "arch": "sm_90a", "warp_specialize": "maybe"}))
    monkeypatch.setenv("TILE_CUDA_WARP_SPECIALIZE", "sometimes")
    with pytest.raises(EnvironmentVariableError, match="TILE_CUDA_WARP_SPECIALIZE"):
        warp_specialize_enabled(Target.parse({"kind": "cuda", "arch": "sm_90a"}))


# ---------------------------------------------------------------- warp-specialized pipeline
def _gemm(m: int, n: int, k: int, warp_specialize: bool | None, threads: int = 128) -> Any:
    """The paper GEMM for sm_90a; ``warp_specialize`` None leaves the default (on)."""
    import tile.lang as tilelang
    from tile.ops.gemm import matmul_kernel

    func = matmul_kernel(m, n, k, block_M=128, block_N=128, block_K=32, num_stages=3, threads=threads)
    target = {"kind": "cuda", "arch": "sm_90a"}
    if warp_specialize is not None:
        target["warp_specialize"] = "1" if warp_specialize else "0"
    return tilelang.compile(func, target=target)


@pytest.fixture
def private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILE_CUDA_WARP_SPECIALIZE", raising=False)


needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)


def test_register_split_fits_the_register_file() -> None:
    from tile.backends.cuda._src.sm90a_split_producer_warps import consumer_registers, producer_registers

    for threads in (128, 256, 384, 512):
        give = producer_registers(threads)
        take = consumer_registers(threads, give)
        assert take % 8 == 0 and give % 8 == 0 and 24 <= give <= take <= 256
        assert 128 * give + threads * take <= 65536, threads
    assert (producer_registers(128), consumer_registers(128, 40)) == (40, 240)
    assert consumer_registers(256, 40) == 232  # (65536 - 128 * 40) // 256 = 236 -> 232


@needs_tools
def test_paper_gemm_warp_specialized_on_tma(private_cache: None) -> None:
    binary = _gemm(512, 512, 512, warp_specialize=None).artifact.payload  # the default
    assert binary.stats.spill_stores == 0 and binary.stats.spill_loads == 0, binary.stats
    ops = opcodes(binary.sass())
    assert sum(op.startswith("HGMMA.64x128x16.F32") for op in ops) == 4
    # A: one 128 x 32 box (64B swizzle); B: two 32 x 64 boxes (128B swizzle) per stage
    assert sum(op.startswith("UTMALDG.2D") for op in ops) == 3, [o for o in ops if "TMA" in o]
    assert any(op.startswith("SYNCS") for op in ops)
    assert not any(op.startswith("LDGSTS") for op in ops)
    assert sum(op.startswith("USETMAXREG") for op in ops) == 2
    assert sum(op.startswith("BAR.SYNC") for op in ops) == 1  # the named barrier after the mbarrier init
    source = binary.source
    assert "__launch_bounds__(256, 1)" in source
    assert "if (128 <= ((int)threadIdx.x)) {" in source and "} else {" in source  # producer / consumers
    assert "tile_setmaxnreg_dec<40>();" in source and "tile_setmaxnreg_inc<240>();" in source
    assert "__syncthreads" not in source  # the producer never reaches a CTA barrier
    assert "tile_mbarrier_arrive_expect_tx" in source and "(uint)16384" in source  # 2 x 8 KiB per stage
    assert "extern __shared__ __align__(1024)" in source
    # the operands are written only by TMA (async proxy) and nothing before the K loop writes
    # shared memory through the generic proxy: no proxy fence at all
    assert "tile_fence_proxy_async" not in source
    recipe = binary.recipe
    assert recipe.block == ("256", "1", "1")
    maps = {p.source: plan_from_json(p.tma or {}) for p in recipe.params if p.kind == "tensormap"}
    assert maps == {
        "A": plan_boxes(128, 32, "float16", 64),
        "B": plan_boxes(32, 128, "float16", 128),
    }


@needs_tools
@pytest.mark.parametrize("how", ["pass_configs", "tma_pass_config", "target_option", "env"])
def test_turning_it_off_keeps_the_cp_async_ring(
    private_cache: None, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    import tile.lang as tilelang
    from tile.ops.gemm import matmul_kernel

    func = matmul_kernel(512, 512, 512, block_M=128, block_N=128, block_K=32, num_stages=3)
    target: dict[str, str] = {"kind": "cuda", "arch": "sm_90a"}
    configs: dict[Any, bool] = {}
    if how == "pass_configs":  # TileLang's spelling
        configs = {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    elif how == "tma_pass_config":
        configs = {"tl.disable_tma_lower": True}
    elif how == "target_option":
        target["warp_specialize"] = "0"
    else:
        monkeypatch.setenv("TILE_CUDA_WARP_SPECIALIZE", "0")
    binary = tilelang.compile(func, target=target, pass_configs=configs).artifact.payload
    ops = opcodes(binary.sass())
    assert any(op.startswith("LDGSTS") for op in ops) and not any("UTMALDG" in op for op in ops)
    assert any(op.startswith("HGMMA") for op in ops)
    assert not any(op.startswith("USETMAXREG") for op in ops)
    assert binary.recipe.block == ("128", "1", "1")
    assert all(p.kind != "tensormap" for p in binary.recipe.params)


def test_unknown_or_malformed_pass_configs_are_typed_errors() -> None:
    import tile.lang as tilelang
    from tile.ir.errors import TargetError
    from tile.ops.gemm import matmul_kernel

    func = matmul_kernel(256, 256, 128, block_M=128, block_N=128, num_stages=2)
    target = {"kind": "cuda", "arch": "sm_90a"}
    with pytest.raises(TargetError, match="unknown pass config") as info:
        tilelang.compile(func, target=target, pass_configs={"tl.disable_warp_specialised": True})
    assert "tl.disable_warp_specialized" in (info.value.hint or "")  # the right spelling is listed
    with pytest.raises(TargetError, match="not a bool"):
        tilelang.compile(func, target=target, pass_configs={"tl.disable_warp_specialized": 1.5})
    with pytest.raises(TargetError, match="must be a dict"):
        tilelang.compile(func, target=target, pass_configs=["tl.disable_warp_specialized"])
    with pytest.raises(TargetError, match="contradicts"):
        tilelang.compile(
            func,
            target={**target, "tl.disable_warp_specialized": "0"},
            pass_configs={"tl.disable_warp_specialized": True},
        )


@needs_tools
def test_rows_tma_cannot_describe_fall_back_to_cp_async(private_cache: None) -> None:
    # B is 200 x 260 fp16: 520-byte rows are not a multiple of 16, so no tensor map exists.
    binary = _gemm(300, 260, 200, warp_specialize=True).artifact.payload
    ops = opcodes(binary.sass())
    assert any(op.startswith("LDGSTS") for op in ops) and not any("UTMALDG" in op for op in ops)
    assert binary.recipe.block == ("128", "1", "1")


@pytest.mark.gpu
@pytest.mark.parametrize(("m", "n", "k"), [(512, 512, 512), (300, 260, 200), (1000, 1000, 1000)])
def test_warp_specialized_gemm_matches_torch_matmul(private_cache: None, m: int, n: int, k: int) -> None:
    check_fp16_gemm_on_gpu(_gemm(m, n, k, warp_specialize=True), m, n, k, sm90=True)


@needs_tools
def test_cache_entry_follows_the_env_switch(private_cache: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # The env var is not in the kernel cache key: an entry built under the other setting is rebuilt.
    import warnings

    first = _gemm(512, 512, 512, warp_specialize=None).artifact.payload
    assert first.recipe.block == ("256", "1", "1")  # on by default
    monkeypatch.setenv("TILE_CUDA_WARP_SPECIALIZE", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        second = _gemm(512, 512, 512, warp_specialize=None).artifact.payload
    assert second.recipe.block == ("128", "1", "1")
    monkeypatch.setenv("TILE_CUDA_WARP_SPECIALIZE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        third = _gemm(512, 512, 512, warp_specialize=None).artifact.payload
    assert third.recipe.block == ("256", "1", "1")


def test_pass_configs_are_part_of_the_cache_key(private_cache: None) -> None:
    import tile.lang as tilelang
    from tile.lang._src import cache
    from tile.ops.gemm import matmul_kernel

    func = matmul_kernel(256, 256, 128, block_M=128, block_N=128, num_stages=2)
    target = {"kind": "cuda", "arch": "sm_90a"}
    off = {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    before = cache.stats.misses
    on_kernel = tilelang.compile(func, target=target)
    off_kernel = tilelang.compile(func, target=target, pass_configs=off)
    assert cache.stats.misses == before + 2  # two entries, not one reused for both
    assert on_kernel.artifact.payload.recipe.block == ("256", "1", "1")
    assert off_kernel.artifact.payload.recipe.block == ("128", "1", "1")
    assert off_kernel.target.option("tl.disable_warp_specialized") == "1"


def _gemm_over_a_ring(*, in_outer_loop: bool = False, read_a_after: bool = False) -> Any:
    """A 128x128x128 float16 GEMM whose K loop is ``T.Pipelined(4, num_stages=2)``: inside a
    ``T.serial(2)`` loop when ``in_outer_loop``; with the last A tile copied to ``D`` after the
    loop (it outlives the ring) when ``read_a_after``."""
    import tile.lang.language as T

    @T.prim_func
    def kernel(
        A: T.Tensor((128, 128), "float16"),
        B: T.Tensor((128, 128), "float16"),
        C: T.Tensor((128, 128), "float16"),
        D: T.Tensor((128, 32), "float16"),
    ):  # type: ignore[no-untyped-def]
        with T.Kernel(1, 1, threads=128) as (_bx, _by):
            A_shared = T.alloc_shared((128, 32), "float16")
            B_shared = T.alloc_shared((32, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            T.clear(C_local)
            if in_outer_loop:
                for _r in T.serial(2):
                    for k in T.Pipelined(4, num_stages=2):
                        T.copy(A[0, k * 32], A_shared)
                        T.copy(B[k * 32, 0], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
            else:
                for k in T.Pipelined(4, num_stages=2):
                    T.copy(A[0, k * 32], A_shared)
                    T.copy(B[k * 32, 0], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C)
            if read_a_after:
                T.copy(A_shared, D)

    return kernel


def _lowered_for_sm90a_warp_specialized(func: Any) -> str:
    """``func`` through the sm_90a pipeline with warp specialization asked for, as TIR text."""
    import tvm

    from tile.backends.cuda._src import backend
    from tile.ir.target import Target
    from tile.ir.transform import CompileContext

    target = Target.parse({"kind": "cuda", "arch": "sm_90a", "warp_specialize": "1"})
    passes = backend.pipeline(target)
    assert [p.name for p in passes].count("mark_tma_copies") == 1
    ctx = CompileContext(target=target, capabilities=backend.capabilities(target))
    mod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    for step in passes:
        mod = step(mod, ctx)
    return str(mod["main"].script())


def test_a_versioned_tile_used_after_the_loop_is_not_specialized() -> None:
    text = _lowered_for_sm90a_warp_specialized(_gemm_over_a_ring(read_a_after=True))
    # what the sm_90a path does without the switch (this loop is not pipelined there either)
    assert "tile_tma_load_2d" not in text and "tile_mbarrier" not in text
    assert 'T.launch_thread("threadIdx.x", 128)' in text


@pytest.mark.parametrize(("nested", "specialized"), [(True, False), (False, True)])
def test_only_top_level_pipelined_loops_are_specialized(
    monkeypatch: pytest.MonkeyPatch, nested: bool, specialized: bool
) -> None:
    from tile.ops.gemm import matmul_kernel

    monkeypatch.delenv("TILE_DEVICE", raising=False)
    if nested:
        func = _gemm_over_a_ring(in_outer_loop=True)
    else:
        func = matmul_kernel(256, 256, 128, block_M=128, block_N=128, num_stages=2)
    text = _lowered_for_sm90a_warp_specialized(func)
    assert ("tile_tma_load_2d" in text) == specialized
    assert ('T.launch_thread("threadIdx.x", 256)' in text) == specialized


def test_the_emulator_runs_the_warp_specialized_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # the emulator models TMA, mbarriers and setmaxnreg (test_cuda_emu_hopper.py runs them)
    from tile.backends.cuda._src.warp_specialize import warp_specialize_requested
    from tile.ir.target import Target

    target = Target.parse({"kind": "cuda", "arch": "sm_90a", "warp_specialize": "1"})
    monkeypatch.setenv("TILE_DEVICE", "emu")
    assert warp_specialize_requested(target)


def test_proxy_fences_leave_the_consumer_loop_only_when_it_writes_no_shared_memory() -> None:
    from tvm import tirx

    from tile.backends.cuda._src.sm90a_warp_specialize_loop import PROXY_FENCE, _hoist_proxy_fences
    from tile.ir.gpu.statements import extern_call

    shared = tirx.decl_buffer((64,), "float16", name="S", scope="shared.dyn")
    local = tirx.decl_buffer((8,), "float32", name="acc", scope="local")
    wgmma = [extern_call(PROXY_FENCE), extern_call("tile_wgmma_fence"), extern_call("tile_wgmma_commit")]
    register_math = tirx.BufferStore(local, tirx.const(1.0, "float32"), [tirx.const(0, "int32")])
    kept, hoisted = _hoist_proxy_fences([*wgmma, register_math])
    assert hoisted and PROXY_FENCE not in str(kept)
    for writer in (tirx.BufferStore(shared, tirx.const(1.0, "float16"), [tirx.const(0, "int32")]),
                   extern_call("tile_stmatrix_x4", tirx.const(0, "int32"))):
        kept, hoisted = _hoist_proxy_fences([writer, *wgmma])
        assert not hoisted and PROXY_FENCE in str(kept)  # generic writes each iteration: fenced each time
