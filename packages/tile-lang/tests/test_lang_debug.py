"""T.print and T.device_assert on the CPU: output on stdout, typed assertion errors."""

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.lang.errors import KernelAssertionError, TileScopeError, TileTypeError
from tile.testsupport import kernels
from tile.testsupport.kernels import printing_copy


def test_print_buffer_and_scalar_with_block_prefix(capfd):
    kernel = tilelang.compile(printing_copy(100.0), out_idx=[1], target="cpu")
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(kernel(a), a)
    lines = capfd.readouterr().out.splitlines()
    for block in (0, 1):
        for i in range(2):
            for j in range(2):
                value = float(a[block * 4 + i * 2 + j])
                assert f"[block ({block}, 0, 0)] tile: tile[{i}, {j}] = {value!r}" in lines
        assert any(
            line.startswith(f"[block ({block}, 0, 0)] twice:")
            and line.endswith(f"= {float(2.0 * a[block * 4])!r}")
            for line in lines
        )


def test_failing_device_assert_raises_typed_error_with_message_and_line():
    kernel = tilelang.compile(printing_copy(6.0), out_idx=[1], target="cpu")
    ok = np.zeros(8, dtype="float32")
    np.testing.assert_array_equal(kernel(ok), ok)
    with pytest.raises(KernelAssertionError, match="A too large") as info:
        kernel(np.arange(8, dtype="float32"))
    assert info.value.location is not None
    assert info.value.location.filename == kernels.__file__  # the kernel's T.device_assert line
    assert "T.device_assert" in str(info.value)
    assert "block (1, 0, 0)" in str(info.value)
    np.testing.assert_array_equal(kernel(ok), ok)  # the failure does not stick


def test_print_outside_a_kernel_is_a_scope_error():
    with pytest.raises(TileScopeError, match="kernel"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            T.print(A)


def _message_only():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            T.print(msg="hello 100%")  # TileLang's message-only form
            T.print(bx * 3, msg="three", warp_group_id=0, warp_id=0)

    return main


def test_print_of_a_message_alone(capfd):
    tilelang.compile(_message_only(), target="cpu")(np.zeros(8, "float32"))
    lines = sorted(line for line in capfd.readouterr().out.splitlines() if line.startswith("[block"))
    assert lines == [
        "[block (0, 0, 0)] hello 100%",
        "[block (0, 0, 0)] three: bx * 3 = 0",
        "[block (1, 0, 0)] hello 100%",
        "[block (1, 0, 0)] three: bx * 3 = 3",
    ]


def test_print_needs_a_value_or_a_message():
    with pytest.raises(TileTypeError, match="a value or a message"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1):
                T.print()
