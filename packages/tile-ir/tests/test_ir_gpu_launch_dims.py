"""Launch dims compiled once per kernel (``compile_launch_dims``) against ``evaluate``, which
walks the expression text per call: the same values, the same typed errors."""

from __future__ import annotations

import itertools

import pytest

from tile.ir.errors import BackendError
from tile.ir.gpu import KernelParam, LaunchRecipe, evaluate
from tile.ir.gpu.launch import compile_launch_dims, launch_dim_names


def _recipe(
    grid: tuple[str, str, str], block: tuple[str, str, str] = ("128", "1", "1"), shared: str = "0"
) -> LaunchRecipe:
    return LaunchRecipe("k", (KernelParam("tensor", "X", "float16"),), grid, block, shared)


def test_compiled_dims_match_the_interpreted_ones() -> None:
    recipe = _recipe(
        ("((M + 127) // 128)", "(max(N, 1) % 7)", "min((B * 2), 65535)"),
        ("128", "1", "1"),
        "((K // 32) * 4096)",
    )
    dims = compile_launch_dims(recipe)
    assert launch_dim_names(recipe) == {"M", "N", "B", "K"}
    for m, n, b, k in itertools.product((1, 128, 1000), (0, 9), (1, 40000), (32, 96)):
        names = {"M": m, "N": n, "B": b, "K": k}
        texts = (*recipe.grid, *recipe.block, recipe.dynamic_shared)
        assert dims(names) == tuple(evaluate(t, names) for t in texts)
    assert dims({"M": 1000, "N": 9, "B": 3, "K": 64}) == (8, 2, 6, 128, 1, 1, 8192)  # by hand


def test_constant_dims_are_evaluated_once() -> None:
    dims = compile_launch_dims(_recipe(("(4 * 2)", "3", "1"), shared="49152"))
    assert dims({}) == (8, 3, 1, 128, 1, 1, 49152)


def test_a_missing_name_and_a_foreign_expression_are_typed_errors() -> None:
    dims = compile_launch_dims(_recipe(("((M + 127) // 128)", "1", "1")))
    with pytest.raises(BackendError, match="needs the value of M"):
        dims({"N": 3})
    for bad in ("__import__('os').getpid()", "M.bit_length()", "'a'", "abs(M)", "M / 2"):
        with pytest.raises(BackendError, match="unexpected launch expression"):
            compile_launch_dims(_recipe((bad, "1", "1")))
