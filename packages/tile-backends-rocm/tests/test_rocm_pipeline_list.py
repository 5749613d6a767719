"""The ROCm pipeline, pinned: one list for every gfx target, in contract order, printable."""

from __future__ import annotations

import pytest

from tile.backends.rocm.__main__ import main
from tile.backends.rocm._src import backend
from tile.ir.gpu.backend import PLANNING_PASSES
from tile.ir.target import Target
from tile.ir.transform import check_pipeline
from tile.ir.transform.properties import ENTRY_PROPERTIES

PLANNING = [p.name for p in PLANNING_PASSES]

ROCM = [
    *PLANNING,  # pinned in tile-ir (test_ir_gpu_backend.py)
    "mark_lds_ring_statements",
    "lower_tile_ops",
    "guard_global_accesses",
    "split_dynamic_tails",
    "pipeline_lds_ring",
    "merge_vmem_waits",
    "serialize_pipelined_loops",
    "bind_parallel_loops",
    "lower_fragments",
    "apply_shared_layouts",
    "lower_gpu_atomics",
    "lower_device_prints",
    "lower_subbyte_accesses",
    "rasterize_blocks",
]


def test_the_rocm_pipeline_is_pinned() -> None:
    assert [p.name for p in backend.PIPELINE] == ROCM
    check_pipeline(backend.PIPELINE, ENTRY_PROPERTIES)


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_every_target_runs_the_list(arch: str) -> None:
    assert backend.pipeline(Target(kind="hip", options=(("mcpu", arch),))) is backend.PIPELINE


def test_the_cli_prints_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pipeline", "gfx90a"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"tile.backends.rocm pipeline for gfx90a: {len(ROCM)} passes"
    assert [line.split()[1] for line in lines[1:]] == ROCM


def test_the_cli_refuses_an_unknown_target(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--pipeline", "gfx1234"])
    assert info.value.code == 2 and "gfx1234" in capsys.readouterr().err


def test_toolchain_listing_names_a_compiler_or_what_to_install(capsys) -> None:
    from tile.backends.rocm.toolchain import probe_hip_compiler

    status = main(["--toolchain"])
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["gfx90a", "gfx942"]
    for line, arch in zip(out, ("gfx90a", "gfx942"), strict=True):
        chosen = probe_hip_compiler(arch)
        if chosen is not None:
            assert line == f"{arch}: {chosen.describe()}"
        else:
            assert "apt-get install clang-19 lld-19" in line
    assert status == (0 if all(probe_hip_compiler(a) for a in ("gfx90a", "gfx942")) else 1)
