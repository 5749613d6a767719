"""The launcher's dynamic shared-memory opt-in (``runtime.CudaFunction.set_dynamic_shared``).

The driver's 48 KiB default limit counts a block's static ``__shared__`` bytes plus
its dynamic bytes. A warp-specialized sm_90a GEMM (128x128x32 tiles, 3 stages) asks
for exactly 48 KiB of dynamic memory and also has static shared memory (its
mbarriers, padded by the 1024-byte alignment of the dynamic arena), so its launch
must raise ``MAX_DYNAMIC_SHARED_SIZE_BYTES`` or ``cuLaunchKernel`` fails with
``CUDA_ERROR_INVALID_VALUE``. A fake ``libcuda`` records the calls; the static size of
the real kernel is read from its cubin's ELF ``.nv.shared.<kernel>`` section.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from _cuda_sass import HAVE_TOOLS, SKIP_REASON

from tile.backends.cuda._src.runtime import (
    MAX_DYNAMIC_SHARED_SIZE_BYTES,
    SHARED_SIZE_BYTES,
    CudaDriver,
    CudaFunction,
)
from tile.backends.cuda.errors import CudaLaunchError

KIB = 1024


def _fail(message: str, hint: str) -> Exception:
    return CudaLaunchError(message, hint=hint)


class FakeLibcuda:
    """The few ``libcuda`` entry points a load and an opt-in call, as ctypes would call them:
    answers ``cuFuncGetAttribute(SHARED_SIZE_BYTES)`` with ``static``; records every call."""

    def __init__(self, static: int, set_error: int = 0) -> None:
        self.static = static
        self.set_error = set_error
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args: Any) -> int:
            self.calls.append((name, *args))
            if name == "cuFuncGetAttribute":
                assert args[1] == SHARED_SIZE_BYTES
                args[0]._obj.value = self.static
            if name == "cuFuncSetAttribute":
                return self.set_error
            return 0

        call.argtypes = call.restype = None  # type: ignore[attr-defined]
        self.__dict__[name] = call
        return call

    def sets(self) -> list[int]:
        return [c[3] for c in self.calls if c[0] == "cuFuncSetAttribute"]


def _function(lib: FakeLibcuda) -> CudaFunction:
    return CudaFunction(lib, context=1, function=2, static_shared=lib.static, fail=_fail)


@pytest.mark.parametrize(
    ("static", "dynamic", "expected"),
    [
        (0, 48 * KIB, []),  # exactly the default limit: no opt-in (the default sm_90a GEMM)
        (0, 48 * KIB + 16, [48 * KIB + 16]),
        (48, 48 * KIB, [48 * KIB]),  # the warp-specialized GEMM: mbarriers + 48 KiB ring
        (2 * KIB, 48 * KIB, [48 * KIB]),
        (2 * KIB, 40 * KIB, []),
        (0, 0, []),
        (4 * KIB, 0, []),
    ],
)
def test_static_shared_memory_counts_toward_the_opt_in(
    static: int, dynamic: int, expected: list[int]
) -> None:
    lib = FakeLibcuda(static)
    _function(lib).set_dynamic_shared(dynamic)
    assert lib.sets() == expected
    for call in lib.calls:
        if call[0] == "cuFuncSetAttribute":
            assert call[1:3] == (2, MAX_DYNAMIC_SHARED_SIZE_BYTES)


def test_static_size_is_queried_once_per_device_and_the_opt_in_once_per_size() -> None:
    lib = FakeLibcuda(2 * KIB)
    function = CudaDriver(lib).load(b"cubin", "k", 0, fail=_fail)
    assert isinstance(function, CudaFunction) and function.static_shared == 2 * KIB
    for _ in range(3):
        function.set_dynamic_shared(48 * KIB)
    function.set_dynamic_shared(40 * KIB)  # already allowed by the larger opt-in
    assert sum(c[0] == "cuFuncGetAttribute" for c in lib.calls) == 1
    assert lib.sets() == [48 * KIB]
    # the load left the caller's context current again
    sets = [c[1] for c in lib.calls if c[0] == "cuCtxSetCurrent"]
    assert len(sets) == 2 and sets[-1].value is None


def test_a_refused_opt_in_names_the_sizes() -> None:
    lib = FakeLibcuda(2 * KIB, set_error=1)
    with pytest.raises(CudaLaunchError, match=r"MAX_DYNAMIC_SHARED_SIZE_BYTES=235520, static 2048"):
        _function(lib).set_dynamic_shared(230 * KIB)


def _elf_section_size(blob: bytes, name: str) -> int:
    """Size of section ``name`` in a little-endian ELF64 file (a cubin)."""
    assert blob[:4] == b"\x7fELF" and blob[4] == 2 and blob[5] == 1
    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        name_off = struct.unpack_from("<I", blob, base)[0]
        offset, size = struct.unpack_from("<QQ", blob, base + 0x18)
        return name_off, offset, size

    strtab = header(shstrndx)[1]
    for i in range(shnum):
        name_off, _, size = header(i)
        end = blob.index(b"\0", strtab + name_off)
        if blob[strtab + name_off : end].decode() == name:
            return int(size)
    return 0


@pytest.mark.skipif(not HAVE_TOOLS, reason=SKIP_REASON)
def test_warp_specialized_gemm_launch_opts_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import tile.lang as tilelang
    from tile.ops.gemm import matmul_kernel

    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILE_CUDA_WARP_SPECIALIZE", raising=False)
    monkeypatch.delenv("TILE_DEVICE", raising=False)
    func = matmul_kernel(512, 512, 512, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
    compiled = tilelang.compile(func, target={"kind": "cuda", "arch": "sm_90a", "warp_specialize": "1"})
    binary = compiled.artifact.payload
    assert any(p.kind == "tensormap" for p in binary.recipe.params)  # really the TMA kernel
    dynamic = int(binary.recipe.dynamic_shared)
    static = _elf_section_size(binary.cubin, f".nv.shared.{binary.recipe.kernel_name}")
    assert dynamic == 3 * (128 * 32 + 32 * 128) * 2  # 3 stages of A and B fp16 tiles = 48 KiB
    assert static >= 6 * 8  # 2 x 3 mbarriers
    assert static + dynamic > 48 * KIB  # over the default limit although dynamic alone is not
    lib = FakeLibcuda(static)
    _function(lib).set_dynamic_shared(dynamic)
    assert lib.sets() == [dynamic]
