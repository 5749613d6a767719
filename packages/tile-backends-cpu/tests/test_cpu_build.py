import subprocess
import sys

import numpy as np
import tvm
from tvm import ir, tirx

from tile.backends.cpu import MANIFEST
from tile.backends.cpu._src.host import host_cpu
from tile.ir.annotations import PARALLEL_LOOP
from tile.ir.ops import Gemm
from tile.ir.target import Target
from tile.ir.transform import CompileContext, run_pipeline
from tile.testsupport.kernels import shared_copy_module


def test_manifest_import_is_lazy():
    code = (
        "import sys, tile.backends.cpu; "
        "print(any(m.startswith('tile.backends.cpu._src') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_default_target_names_the_host_cpu():
    target = MANIFEST.default_target()
    assert target.kind == "cpu" and target.arch == host_cpu() and target.arch


def aligned(array):
    """A 64-byte aligned copy: generated vector code assumes TVM's default buffer alignment."""
    raw = np.empty(array.nbytes + 64, np.uint8)
    offset = (-raw.ctypes.data) % 64
    out = raw[offset : offset + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def _compile(mod):
    target = Target("cpu")
    ctx = CompileContext(target, MANIFEST.capabilities(target))
    lowered = run_pipeline(mod, MANIFEST.pipeline(target), ctx)
    artifact = MANIFEST.build(lowered, target)
    return artifact, MANIFEST.load(artifact)


def _block(extent, body, var):
    return tirx.AttrStmt(
        tirx.IterVar(ir.Range(0, extent), var, 1, "blockIdx.x"), "thread_extent", extent, body
    )


def test_gemm_tile_op_builds_and_matches_numpy():
    A = tirx.decl_buffer((16, 8), "float32", name="A")
    B = tirx.decl_buffer((12, 8), "float32", name="B")  # used transposed
    C = tirx.decl_buffer((16, 12), "float32", name="C")
    bx = tirx.Var("bx", "int32")
    body = tirx.Evaluate(Gemm.build(A, B, C, False, True, True).encode())
    mod = tvm.IRModule({"k": tirx.PrimFunc([A, B, C], _block(1, body, bx)).with_attr("global_symbol", "k")})
    artifact, fn = _compile(mod)
    a = aligned(np.random.rand(16, 8).astype("float32"))
    b = aligned(np.random.rand(12, 8).astype("float32"))
    c = aligned(np.full((16, 12), 7, "float32"))
    fn(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)
    assert "define" in artifact.sources["llvm"]
    assert "T.parallel" in artifact.sources["tir"]


def test_copy_with_tail_and_cast_runs_in_parallel_blocks():
    n = 100
    artifact, fn = _compile(shared_copy_module(n, "float16", "float32"))
    a = aligned(np.random.rand(n).astype("float16"))
    b = aligned(np.zeros(n, "float32"))
    fn(a, b)
    np.testing.assert_array_equal(b, a.astype("float32"))
    assert "TVMBackendParallelLaunch" in artifact.sources["llvm"]
    assert PARALLEL_LOOP not in artifact.sources["tir"]


def test_cpu_manifest_is_discovered_with_data_capabilities():
    from tile.ir.backend import available_backends

    manifest = available_backends(refresh=True)["cpu"]
    assert "cpu" in manifest.target_kinds
    caps = manifest.capabilities(manifest.default_target())
    assert caps.warp_size == 1
    assert caps.thread_binding is False
    assert {"float16", "float32"} <= caps.dtypes
    assert caps.vector_bits in (128, 256, 512)
    assert manifest.device_present()
