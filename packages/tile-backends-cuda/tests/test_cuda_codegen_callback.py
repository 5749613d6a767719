"""TVM's own CUDA compile callback is kept out of our codegen, and restored after it.

Where a CUDA driver is present, TVM's codegen hands the source to NVRTC through that
callback, which cannot find ``tile_cuda.h``: seen on an H100 before this fix.
"""

from __future__ import annotations

import importlib

import pytest
import tvm_ffi

from tile.ir.gpu import codegen

NAME = "tvm_callback_cuda_compile"
# the module, not the function ``tvm.tirx.build`` that shadows it as an attribute
tvm_build = importlib.import_module("tvm.tirx.build")


def test_codegen_replaces_and_restores_tvms_compile_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_nvrtc(*_args: object) -> str:  # what TVM's NVRTC callback does with our #include
        raise RuntimeError("tile_cuda.h: No such file or directory")

    seen: list[str] = []

    def fake_build(device_mod: object, device_target: object) -> str:
        seen.append(bytes(tvm_ffi.get_global_func(NAME)("// source")).decode())
        return "module"

    previous = tvm_ffi.get_global_func(NAME, allow_missing=True)
    tvm_ffi.register_global_func(NAME, failing_nvrtc, override=True)
    monkeypatch.setattr(tvm_build, "codegen_build", fake_build)
    try:
        assert codegen.source_only_build(None, None) == "module"
        assert seen and "not by TVM" in seen[0], "during codegen the callback must be our placeholder"
        with pytest.raises(Exception, match=r"tile_cuda\.h"):
            tvm_ffi.get_global_func(NAME)("x")  # restored afterwards
    finally:
        if previous is not None:
            tvm_ffi.register_global_func(NAME, previous, override=True)
