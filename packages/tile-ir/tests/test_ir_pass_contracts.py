"""Pass contracts: ``run_pipeline`` names the pass that needs what nobody gave, or breaks what it promised."""

import pytest
import tvm
from test_ir_passes import CTX, copy_kernel
from tvm import tirx

from tile.ir.annotations import LAYOUT_MAP
from tile.ir.errors import PassContractError, TileVerifyError
from tile.ir.transform import (
    INFER_LAYOUT,
    LOWER_TILE_OPS,
    NORMALIZE,
    SERIALIZE_BLOCK_GRID,
    VECTORIZE_PARALLEL_LOOPS,
    Pass,
    Property,
    check_pipeline,
    format_pipeline,
    function_pass,
    run_pipeline,
)
from tile.ir.transform.properties import (
    ENTRY_PROPERTIES,
    LAYOUTS_INFERRED,
    PARALLEL_LOOPS_SCHEDULED,
    TILE_OPS,
    TILE_OPS_LOWERED,
)

GOOD = [NORMALIZE, INFER_LAYOUT, LOWER_TILE_OPS, VECTORIZE_PARALLEL_LOOPS, SERIALIZE_BLOCK_GRID]


def _identity(mod, ctx):
    return mod


def test_a_pipeline_in_contract_order_passes_the_static_check():
    check_pipeline(GOOD, ENTRY_PROPERTIES)


def test_a_need_that_a_later_pass_provides_names_both_passes():
    with pytest.raises(PassContractError) as info:
        check_pipeline([NORMALIZE, LOWER_TILE_OPS, INFER_LAYOUT], ENTRY_PROPERTIES)
    err = info.value
    assert err.pass_name == "lower_tile_ops" and err.property_name == "layouts_inferred"
    assert "#2" in err.message and err.hint == "run infer_layout before lower_tile_ops"


def test_a_need_invalidated_by_an_earlier_pass_says_which():
    needs_tile_ops = Pass("reads_tile_ops", _identity, needs={TILE_OPS})
    with pytest.raises(PassContractError) as info:
        check_pipeline([NORMALIZE, INFER_LAYOUT, LOWER_TILE_OPS, needs_tile_ops], ENTRY_PROPERTIES)
    assert info.value.pass_name == "reads_tile_ops"
    assert info.value.hint == "run reads_tile_ops before lower_tile_ops, which invalidates tile_ops"


def test_a_need_nobody_provides_is_reported_before_any_pass_runs():
    ran = []

    def record(mod, ctx):
        ran.append(True)
        return mod

    orphan = Property("orphan", "nothing guarantees this")
    with pytest.raises(PassContractError) as info:
        run_pipeline(copy_kernel(64), [Pass("first", record), Pass("lonely", _identity, needs={orphan})], CTX)
    assert info.value.pass_name == "lonely" and not ran


def test_a_broken_cheap_guarantee_names_the_pass_always(monkeypatch):
    monkeypatch.delenv("TILE_VERIFY_EACH_PASS", raising=False)
    liar = Pass("claims_layouts", _identity, needs={TILE_OPS}, guarantees={LAYOUTS_INFERRED})
    with pytest.raises(PassContractError) as info:
        run_pipeline(copy_kernel(64), [NORMALIZE, liar], CTX)
    assert info.value.pass_name == "claims_layouts" and info.value.property_name == "layouts_inferred"
    assert LAYOUT_MAP in info.value.message


def test_an_expensive_guarantee_is_checked_only_when_asked(monkeypatch):
    liar = Pass("claims_lowered", _identity, guarantees={TILE_OPS_LOWERED}, invalidates={TILE_OPS})
    monkeypatch.delenv("TILE_VERIFY_EACH_PASS", raising=False)
    with pytest.raises(TileVerifyError) as plain:  # the exit verifier, which cannot say who
        run_pipeline(copy_kernel(64), [liar], CTX)
    assert not isinstance(plain.value, PassContractError)
    monkeypatch.setenv("TILE_VERIFY_EACH_PASS", "1")
    with pytest.raises(PassContractError) as info:
        run_pipeline(copy_kernel(64), [liar], CTX)
    assert info.value.pass_name == "claims_lowered" and "tile.copy" in info.value.message


def test_verification_after_each_pass_names_the_pass_that_broke_the_ir(monkeypatch):
    def break_rank(mod, ctx):  # a region with one index too many for its buffer
        body = mod["k"].body
        bad = tirx.Evaluate(tirx.call_intrin("handle", "tile.fill", tirx.const(0, "int32")))
        return tvm.IRModule({"k": mod["k"].with_body(tirx.SeqStmt([bad, body]))})

    monkeypatch.setenv("TILE_VERIFY_EACH_PASS", "1")
    with pytest.raises(PassContractError) as info:
        run_pipeline(copy_kernel(64), [NORMALIZE, Pass("vandal", break_rank)], CTX)
    assert info.value.pass_name == "vandal" and "fails verification" in info.value.message


def test_the_real_guarantees_hold_on_a_real_pipeline(monkeypatch):
    monkeypatch.setenv("TILE_VERIFY_EACH_PASS", "1")
    mod = run_pipeline(copy_kernel(70), GOOD, CTX)
    assert PARALLEL_LOOPS_SCHEDULED.check(mod, CTX) is None
    assert TILE_OPS_LOWERED.verify(mod, CTX) is None
    assert TILE_OPS_LOWERED.verify(copy_kernel(70), CTX) is not None  # the check can fail


def test_format_pipeline_lists_each_pass_with_its_contract():
    text = format_pipeline(GOOD, "demo")
    lines = text.splitlines()
    assert lines[0] == "demo" and len(lines) == 1 + len(GOOD)
    assert lines[3].split()[:2] == ["3.", "lower_tile_ops"]
    assert "needs layouts_inferred, tile_ops; guarantees tile_ops_lowered; invalidates tile_ops" in lines[3]


def test_function_pass_rewrites_each_function_under_the_rewrites_name_and_contract():
    seen = []

    def mark_seen(func):
        seen.append(func)
        return func.with_attr("test_seen", len(seen))

    step = function_pass(mark_seen, needs={TILE_OPS}, guarantees={LAYOUTS_INFERRED})
    assert step.name == "mark_seen" and step.run.__name__ == "mark_seen"
    assert step.needs == {TILE_OPS} and step.guarantees == {LAYOUTS_INFERRED} and not step.invalidates
    mod = tvm.IRModule({"a": copy_kernel(64)["k"], "b": copy_kernel(32)["k"]})
    out = step(mod, CTX)
    assert len(seen) == 2
    assert sorted(int(out[name].attrs["test_seen"]) for name in ("a", "b")) == [1, 2]
