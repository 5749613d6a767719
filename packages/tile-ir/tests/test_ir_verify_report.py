"""A failed IR verification reads as the compiler bug it is: pass, kernel line, what to attach."""

import pytest
import tvm
from tvm import tirx

from tile.ir.annotations import KERNEL_SOURCE
from tile.ir.backend import Capabilities
from tile.ir.errors import TileVerifyError
from tile.ir.target import Target
from tile.ir.transform import CompileContext, Pass, run_pipeline

CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 20, frozenset({"float32"}), 256, True, False))


def store_kernel(source: str | None = None):
    C = tirx.decl_buffer((8,), "float32", name="C")
    i = tirx.Var("i", "int32")
    loop = tirx.For(i, 0, 8, tirx.ForKind.SERIAL, tirx.BufferStore(C, tirx.const(1.0, "float32"), [i]))
    func = tirx.PrimFunc([C], loop).with_attr("global_symbol", "k")
    if source is not None:
        func = func.with_attr(KERNEL_SOURCE, source)
    return tvm.IRModule({"k": func})


def use_undefined_variable(mod, ctx):
    """A broken pass: the store index reads a variable nothing defines."""
    func = mod["k"]
    loop = func.body
    stray = tirx.Var("stray", "int32")
    store = tirx.BufferStore(loop.body.buffer, loop.body.value, [stray])
    body = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, store)
    return tvm.IRModule({"k": func.with_body(body)})


def keep(mod, ctx):
    return mod


PASSES = [Pass("keep_first", keep), Pass("use_undefined_variable", use_undefined_variable),
          Pass("keep_last", keep)]


def test_a_bad_pass_is_named_with_the_kernel_line_and_what_to_attach(tmp_path, monkeypatch):
    kernel_file = tmp_path / "kern.py"
    kernel_file.write_text("import tile.lang.language as T\n@T.prim_func\ndef k(C): ...\n")
    monkeypatch.delenv("TILE_DUMP_IR", raising=False)
    monkeypatch.delenv("TILE_VERIFY_EACH_PASS", raising=False)
    with pytest.raises(TileVerifyError) as info:
        run_pipeline(store_kernel(f"{kernel_file}:2"), PASSES, CTX)
    text = str(info.value)
    assert "pass 'use_undefined_variable' produced invalid IR" in text
    assert "stray" in text  # TVM's reason: the undefined variable
    assert "bug in tile" in text and "TILE_DUMP_IR" in text
    assert info.value.location is not None and info.value.location.line == 2
    assert "@T.prim_func" in text  # the kernel's line, rendered


def test_the_exit_check_names_the_dump_folder_when_there_is_one(tmp_path, monkeypatch):
    monkeypatch.setenv("TILE_DUMP_IR", str(tmp_path / "ir"))
    monkeypatch.delenv("TILE_VERIFY_EACH_PASS", raising=False)
    with pytest.raises(TileVerifyError) as info:
        run_pipeline(store_kernel(), PASSES, CTX)
    assert "pass 'use_undefined_variable'" in str(info.value)
    assert str(tmp_path / "ir") in str(info.value)
    assert (tmp_path / "ir" / "02-use_undefined_variable.py").exists()


def test_a_good_pipeline_still_passes():
    assert run_pipeline(store_kernel(), [Pass("keep", keep)], CTX) is not None
