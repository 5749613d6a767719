"""The CUDA pipelines, pinned: one list per arch family, in contract order, printable."""

from __future__ import annotations

import pytest

from tile.backends.cuda.__main__ import main
from tile.backends.cuda._src import backend
from tile.ir.gpu.backend import PLANNING_PASSES
from tile.ir.target import Target
from tile.ir.transform import check_pipeline
from tile.ir.transform.properties import ENTRY_PROPERTIES

PLANNING = [p.name for p in PLANNING_PASSES]

SM80 = [
    "check_arch_helpers",  # the expert tier's calls the arch has, named at their lines
    *PLANNING,  # pinned in tile-ir (test_ir_gpu_backend.py)
    "mark_pipeline_statements",
    "lower_tile_ops",
    "legalize_fp8",
    "guard_global_accesses",
    "split_dynamic_tails",
    "pipeline_async_copies",
    "serialize_pipelined_loops",
    "bind_parallel_loops",
    "lower_fragments",
    "lower_gpu_atomics",
    "lower_device_prints",
    "apply_shared_layouts",
    "lower_subbyte_accesses",
    "lower_async_copies",
    "rasterize_blocks",
]
# sm_80's list plus the three warp-specialization passes, each where it must run
SM90A = [
    *SM80[:8],
    "mark_tma_copies",
    *SM80[8:12],
    "warp_specialize_loop",
    *SM80[12:-1],
    "split_producer_warps",
    "rasterize_blocks",
]


def _names(family: str) -> list[str]:
    return [p.name for p in backend.PIPELINES[family]]


def test_the_sm80_pipeline_is_pinned() -> None:
    assert _names("sm_80") == SM80


def test_the_sm90a_pipeline_is_pinned() -> None:
    assert _names("sm_90a") == SM90A
    assert len(SM90A) == len(SM80) + 3


@pytest.mark.parametrize("family", ["sm_80", "sm_90a"])
def test_every_pass_gets_what_it_needs(family: str) -> None:
    check_pipeline(backend.PIPELINES[family], ENTRY_PROPERTIES)
    assert len(set(_names(family))) == len(_names(family))  # each pass runs once


@pytest.mark.parametrize(
    ("arch", "family"),
    [("sm_75", "sm_80"), ("sm_80", "sm_80"), ("sm_86", "sm_80"), ("sm_89", "sm_80"), ("sm_90", "sm_80"),
     ("sm_90a", "sm_90a")],
)
def test_each_arch_runs_its_family_list(arch: str, family: str) -> None:
    assert backend.pipeline(Target(kind="cuda", arch=arch)) is backend.PIPELINES[family]


def test_the_warp_specialization_switch_does_not_change_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    # the passes read the switch themselves: off, they leave the module as it is
    monkeypatch.setenv("TILE_CUDA_WARP_SPECIALIZE", "0")
    off = backend.pipeline(Target.parse({"kind": "cuda", "arch": "sm_90a"}))
    assert [p.name for p in off] == SM90A


def test_the_cli_prints_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pipeline", "sm_90a"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"tile.backends.cuda pipeline for sm_90a (sm_90a family): {len(SM90A)} passes"
    assert [line.split()[1] for line in lines[1:]] == SM90A
    contract = lines[SM90A.index("warp_specialize_loop") + 1]
    assert "needs pipelined_loops, tile_ops_lowered, tma_copies_marked;" in contract


def test_the_cli_refuses_an_arch_without_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--pipeline", "sm_70"])
    assert info.value.code == 2 and "sm_70" in capsys.readouterr().err
