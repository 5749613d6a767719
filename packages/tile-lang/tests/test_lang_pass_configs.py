"""``pass_configs`` become target options (``tile.lang._src.pass_config``)."""

from __future__ import annotations

import pytest

from tile.ir.errors import TargetError
from tile.ir.target import Target
from tile.lang import PassConfigKey
from tile.lang._src.pass_config import apply_pass_configs


def test_tilelang_spellings_become_target_options() -> None:
    base = Target.parse({"kind": "cuda", "arch": "sm_90a", "x": "y"})
    out = apply_pass_configs(
        base, {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True, "tl.disable_tma_lower": False}
    )
    assert out.options == (("tl.disable_tma_lower", "0"), ("tl.disable_warp_specialized", "1"), ("x", "y"))
    assert apply_pass_configs(base, None) is base and apply_pass_configs(base, {}) == base
    assert PassConfigKey.TL_DISABLE_WARP_SPECIALIZED == "tl.disable_warp_specialized"  # TileLang's key text
    # the same value in both places is fine, a different one is not
    same = Target.parse({"kind": "cuda", "tl.disable_warp_specialized": "1"})
    assert apply_pass_configs(same, {"tl.disable_warp_specialized": True}) == same
    with pytest.raises(TargetError, match="contradicts"):
        apply_pass_configs(same, {"tl.disable_warp_specialized": "0"})


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"tl.enable_everything": True}, "unknown pass config"),
        ({3: True}, "unknown pass config"),
        ({"tl.disable_tma_lower": None}, "not a bool, int or string"),
        ({"tl.disable_tma_lower": " "}, "not a bool, int or string"),
        ([("tl.disable_tma_lower", True)], "must be a dict"),
    ],
)
def test_bad_pass_configs_are_typed_errors(configs: object, message: str) -> None:
    with pytest.raises(TargetError, match=message) as info:
        apply_pass_configs(Target.parse("cpu"), configs)
    assert info.value.hint


def test_compile_hands_pass_configs_to_the_target() -> None:
    import tile.lang as tilelang
    import tile.lang.language as T

    @T.prim_func
    def copy(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):  # type: ignore[no-untyped-def]
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i]

    kernel = tilelang.compile(copy, target="cpu", pass_configs={PassConfigKey.TL_DISABLE_TMA_LOWER: True})
    assert kernel.target.option("tl.disable_tma_lower") == "1"
    with pytest.raises(TargetError, match="unknown pass config"):
        tilelang.compile(copy, target="cpu", pass_configs={"tl.nope": True})
