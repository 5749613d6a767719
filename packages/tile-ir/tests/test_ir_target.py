import pytest

from tile.ir.backend import resolve_target
from tile.ir.errors import TargetError
from tile.ir.target import Target


def test_names_and_aliases_parse_to_canonical_kinds():
    assert Target.parse("cpu").kind == "cpu"
    assert Target.parse("llvm").kind == "cpu"
    assert Target.parse("rocm").kind == "hip"
    assert Target.parse("CUDA").kind == "cuda"


def test_json_dict_and_string_round_trip():
    t = Target.parse({"kind": "cuda", "arch": "sm_90a", "max_regs": 128})
    assert (t.kind, t.arch, t.option("max_regs")) == ("cuda", "sm_90a", "128")
    assert Target.parse(str(t)) == t
    assert Target.parse('{"kind": "hip", "arch": "gfx942"}') == Target("hip", "gfx942")


def test_tvm_style_strings_name_the_arch():
    assert Target.parse("cuda -arch=sm_80") == Target("cuda", "sm_80")
    assert Target.parse(" rocm  -mcpu=gfx942 ") == Target("hip", "gfx942")
    assert Target.parse("llvm -mcpu=znver3") == Target("cpu", "znver3")


def test_apache_tvm_targets_give_their_kind_and_arch():
    tvm_target = pytest.importorskip("tvm.target").Target
    assert Target.parse(tvm_target("c")) == Target("cpu")
    assert Target.parse(tvm_target({"kind": "llvm", "mcpu": "znver4"})) == Target("cpu", "znver4")
    assert Target.parse(tvm_target({"kind": "cuda", "arch": "sm_90a"})) == Target("cuda", "sm_90a")
    assert Target.parse(tvm_target({"kind": "rocm", "mcpu": "gfx942"})) == Target("hip", "gfx942")
    # apache-tvm's own fallback arch when it finds no GPU is not a choice the program made
    assert Target.parse(tvm_target({"kind": "cuda", "arch": "sm_50"})) == Target("cuda")


@pytest.mark.parametrize(
    "bad",
    ["", "-arch=sm_80", "cuda sm_80", "llvm -mattr=+avx2", "cuda -arch=", "cuda -arch=sm_80 -arch=sm_90a",
     '{"arch": "sm_80"}', "{not json", 42],
)
def test_malformed_specs_raise_target_error(bad):
    with pytest.raises(TargetError):
        Target.parse(bad)


def test_unknown_kind_lists_installed_backends(fake_backend):
    with pytest.raises(TargetError) as info:
        resolve_target("metal")
    assert "metal" in info.value.message
    assert "fake (kinds: fakekind)" in (info.value.hint or "")


def test_named_kind_resolves_to_its_backend(fake_backend):
    target, manifest = resolve_target({"kind": "fakekind"})
    assert manifest is fake_backend and target.kind == "fakekind"


def test_auto_picks_the_highest_priority_backend_with_a_device(fake_backend):
    target, manifest = resolve_target("auto")
    assert manifest is fake_backend
    assert target.kind in manifest.target_kinds
