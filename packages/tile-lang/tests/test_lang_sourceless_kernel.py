"""A kernel whose source text cannot be read gets a typed error, not an OSError."""

import pytest

from tile.lang import TileParseError

SOURCE = """
import tile.lang.language as T

@T.prim_func
def sourceless(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=4) as bx:
        T.clear(A)
"""


def test_kernel_without_source_file_raises_tile_parse_error() -> None:
    with pytest.raises(TileParseError) as info:
        exec(compile(SOURCE, "<interactive>", "exec"), {})
    assert "sourceless has no readable source (<interactive>:4)" in info.value.message
    assert "define kernels in a .py file" in (info.value.hint or "")
