"""tile.ir.gpu.backend: the vendor-neutral parts of a GPU backend module."""

from __future__ import annotations

import pytest

from tile.ir.annotations import CHECK_OPTION
from tile.ir.errors import BackendError
from tile.ir.gpu import MARK_KERNEL_LINES
from tile.ir.gpu.backend import PLANNING_PASSES, generate_device_code, with_kernel_lines
from tile.ir.target import Target


def test_planning_passes_run_in_the_order_memory_is_planned() -> None:
    assert [p.name for p in PLANNING_PASSES] == [
        "check_resources_unplanned",
        "normalize",
        "infer_layout",
        "plan_pipeline",
        "plan_storage",
        "check_planned_shared",
    ]


@pytest.mark.parametrize(("check", "marked"), [(None, False), ("0", False), ("1", True), ("1:ab12", True)])
def test_kernel_lines_are_marked_only_for_checked_kernels(check: str | None, marked: bool) -> None:
    options = ((CHECK_OPTION, check),) if check is not None else ()
    passes = with_kernel_lines(PLANNING_PASSES, Target(kind="cuda", options=options))
    assert list(passes) == [*PLANNING_PASSES, *([MARK_KERNEL_LINES] if marked else [])]


def test_a_generator_failure_names_the_kernel_and_the_language() -> None:
    def broken(mod: object, arch: str) -> str:
        raise RuntimeError(f"first line\n  the cause for {arch}\n")

    with pytest.raises(BackendError, match=r"HIP code generation failed for kernel k: .*cause for gfx90a"):
        generate_device_code(broken, None, "gfx90a", "k", "HIP")


def test_a_backend_error_from_the_generator_is_kept_as_it_is() -> None:
    def refuses(mod: object, arch: str) -> str:
        raise BackendError("not on this arch")

    with pytest.raises(BackendError, match=r"^not on this arch"):
        generate_device_code(refuses, None, "sm_80", "k", "CUDA")
