"""The ctypes prototypes of the driver calls the launcher makes, against the toolkit's cuda.h.

A wrong argument type in a ctypes prototype is not caught by any host-side test with a fake
driver; it corrupts the call on a GPU. So each entry of ``runtime.PROTOTYPES`` is compared with
the declaration in cuda.h (next to the nvcc the backend finds): the same number of parameters,
and for each a ctypes type that passes it the way C does (pointers and handles as pointers,
``unsigned int`` as ``c_uint``, ``int``/enums/``CUdevice`` as ``c_int``).
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import re

import pytest

from tile.backends.cuda._src.runtime import PROTOTYPES
from tile.backends.cuda.toolchain import probe_nvcc

HANDLES = {"CUfunction", "CUmodule", "CUcontext", "CUstream"}
INTS = {"int", "CUdevice", "CUfunction_attribute", "CUresult"}


def _cuda_h() -> pathlib.Path | None:
    """cuda.h of the toolkit here: beside the nvcc the backend finds, CUDA_HOME, /usr/local/cuda*."""
    roots = [pathlib.Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    nvcc = probe_nvcc()
    if nvcc is not None:
        roots.append(pathlib.Path(nvcc.path).resolve().parent.parent)
    roots += [
        pathlib.Path("/usr/local/cuda"),
        *sorted(pathlib.Path("/usr/local").glob("cuda-*"), reverse=True),
    ]
    return next((r / "include" / "cuda.h" for r in roots if (r / "include" / "cuda.h").is_file()), None)


def _declared_parameters(text: str, name: str) -> list[str]:
    found = re.search(rf"CUresult\s+CUDAAPI\s+{name}\s*\(([^;]*?)\)\s*;", text)
    assert found, f"{name} is not declared in cuda.h"
    return [" ".join(p.split()) for p in found.group(1).split(",")]


def _passes_as(c_type: str) -> set[object]:
    """The ctypes types that pass a C parameter of type ``c_type`` correctly."""
    words = c_type.replace("const ", "").split()
    base, stars = words[0], c_type.count("*")
    if stars == 1 and base == "char":
        return {ctypes.c_char_p}
    if stars == 2 and base == "char":
        return {ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)}
    if stars:  # a pointer: an address, typed or not
        pointee = {"CUcontext": ctypes.c_void_p, "CUmodule": ctypes.c_void_p, "CUfunction": ctypes.c_void_p,
                   "int": ctypes.c_int, "CUdevice": ctypes.c_int}.get(base)  # fmt: skip
        return {ctypes.c_void_p} | (
            {ctypes.POINTER(pointee)} if pointee is not None and stars == 1 else set()
        )
    if base in HANDLES:
        return {ctypes.c_void_p}
    if base == "unsigned":
        return {ctypes.c_uint}
    if base in INTS:
        return {ctypes.c_int}
    raise AssertionError(f"no rule for the C type {c_type!r}")


@pytest.mark.skipif(_cuda_h() is None, reason="no CUDA toolkit (cuda.h) here")
@pytest.mark.parametrize("name", sorted(PROTOTYPES))
def test_prototype_matches_cuda_h(name: str) -> None:
    header = _cuda_h()
    assert header is not None
    declared = _declared_parameters(header.read_text(errors="replace"), name)
    argtypes = PROTOTYPES[name]
    assert len(argtypes) == len(declared), f"{name}: {declared}"
    for c_type, py_type in zip(declared, argtypes, strict=True):
        assert py_type in _passes_as(c_type), f"{name}: {c_type} passed as {py_type}"
