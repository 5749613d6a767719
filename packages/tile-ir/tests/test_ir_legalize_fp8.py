"""legalize_fp8: exact fp8 <-> float conversions as integer bit arithmetic, checked
exhaustively against ml_dtypes (the OCP FP8 reference) through LLVM, scalar and vectorized.
Encoding saturates (PTX's cvt.rn.satfinite): the reference clamps to the largest finite value
before ml_dtypes rounds, which gives the same bytes (a value between the largest finite one and
the next tie rounds down to it either way)."""

import ml_dtypes
import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import ir, tirx

from tile.ir.backend import Capabilities
from tile.ir.target import Target
from tile.ir.transform import CompileContext, legalize_fp8

FP8 = ("float8_e4m3fn", "float8_e5m2")
CTX = CompileContext(Target("cpu"), Capabilities(1, 1024, 1 << 24, frozenset(FP8), 256, True, False))
NUMPY = {
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "bfloat16": ml_dtypes.bfloat16,
}


def np_dtype(name):
    return np.dtype(NUMPY.get(name, name))


def satfinite(values, fp8):
    """``values`` cast to ``fp8`` as the GPUs do: +-inf and everything past the largest finite
    value become that value with its sign; NaN stays NaN (np.clip keeps it)."""
    top = float(ml_dtypes.finfo(np_dtype(fp8)).max)
    with np.errstate(all="ignore"):
        return np.clip(values, -top, top).astype(np_dtype(fp8))


def cast_module(src, dst, n, lanes, staged=False):
    """``B[i] = cast(A[i])`` over ``n`` elements; inner loop of ``lanes`` vectorized when > 1.

    ``staged`` goes through an allocated buffer of ``src`` first (fp8 allocations too).
    """
    A = tirx.decl_buffer((n,), src, name="A")
    B = tirx.decl_buffer((n,), dst, name="B")
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    idx = i * lanes + j
    kind = tirx.ForKind.VECTORIZED if lanes > 1 else tirx.ForKind.SERIAL
    source = A
    stmts = []
    if staged:
        source = tirx.decl_buffer((n,), src, name="S", scope="local")
        k = tirx.Var("k", "int32")
        stmts += [
            tirx.AllocBuffer(source),
            tirx.For(k, 0, n, tirx.ForKind.SERIAL, tirx.BufferStore(source, tirx.BufferLoad(A, [k]), [k])),
        ]
    store = tirx.BufferStore(B, tirx.Cast(dst, tirx.BufferLoad(source, [idx])), [idx])
    stmts.append(tirx.For(i, 0, n // lanes, tirx.ForKind.SERIAL, tirx.For(j, 0, lanes, kind, store)))
    body = tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0]
    func = tirx.PrimFunc([A, B], body).with_attrs({"global_symbol": "k", "tirx.noalias": True})
    return tvm.IRModule({"k": func})


def run_cast(values, dst, lanes, staged=False):
    names = ("float32", "float64", "float16", *NUMPY)
    src = next(name for name in names if np_dtype(name) == values.dtype)
    n = len(values)
    mod = legalize_fp8(cast_module(src, dst, n, lanes, staged), CTX)
    kernel = tvm.compile(mod, target="llvm")["k"]
    out = tvm.runtime.tensor(np.zeros(n, np_dtype(dst)))
    kernel(tvm.runtime.tensor(values), out)
    return out.numpy()


def all_codes(fp8):
    return np.arange(256, dtype=np.uint8).view(np_dtype(fp8))


def encode_sweep(fp8):
    """Every fp8 value, every midpoint between neighbours (where ties round), their
    float32 neighbours, half of each (the subnormal range), the overflow boundary, and
    float32 specials; both signs."""
    finite = all_codes(fp8)[:128].astype(np.float64)
    finite = np.sort(finite[np.isfinite(finite)])
    step = finite[-1] - finite[-2]
    grid = np.concatenate([finite, [finite[-1] + step, finite[-1] + 2 * step]])
    mids = (grid[:-1] + grid[1:]) / 2
    points = np.concatenate([grid, mids, grid / 2, mids / 2, mids / 4]).astype(np.float32)
    up, down = np.nextafter(points, np.float32(np.inf)), np.nextafter(points, np.float32(-np.inf))
    f32 = np.finfo(np.float32)
    specials = [0, np.inf, np.nan, f32.max, f32.tiny, f32.smallest_subnormal, 1e-30, 1e30]
    specials = np.array(specials, np.float32)
    values = np.concatenate([points, up, down, specials])
    return np.concatenate([values, -values])


def random_floats(count, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scaled = (rng.standard_normal(count) * 2.0 ** rng.integers(-20, 18, count)).astype(np.float32)
    return np.concatenate([bits, scaled])


def padded(values, multiple=16):
    extra = (-len(values)) % multiple
    return np.concatenate([values, values[:extra]])


@pytest.mark.parametrize("lanes", [1, 16])
@pytest.mark.parametrize("fp8", FP8)
def test_decode_all_256_codes_bit_exact(fp8, lanes):
    codes = all_codes(fp8)
    got = run_cast(codes, "float32", lanes)
    expected = codes.astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))  # NaN sign and -0 too


@pytest.mark.parametrize("wide", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("fp8", FP8)
def test_decode_to_other_floats(fp8, wide):
    codes = all_codes(fp8)
    got = run_cast(codes, wide, 16).astype(np.float64)
    expected = codes.astype(np_dtype(wide)).astype(np.float64)
    np.testing.assert_array_equal(got, expected)  # NaN == NaN for assert_array_equal


@pytest.mark.parametrize("lanes", [1, 16])
@pytest.mark.parametrize("fp8", FP8)
def test_encode_float32_sweep_matches_ml_dtypes_saturated(fp8, lanes):
    values = padded(np.concatenate([encode_sweep(fp8), random_floats(4000, seed=lanes)]))
    got = run_cast(values, fp8, lanes)
    expected = satfinite(values, fp8)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("source", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("fp8", FP8)
def test_encode_other_floats_matches_ml_dtypes_saturated(fp8, source):
    with np.errstate(all="ignore"):
        values = np.concatenate([encode_sweep(fp8), random_floats(2000, seed=3)])
        values = padded(values.astype(np_dtype(source)))
        expected = satfinite(values, fp8)
    if source == "float64":  # near-ties that only a double holds: ml_dtypes rounds via float32
        grid = all_codes(fp8)[:126].astype(np.float64)
        grid = np.sort(grid[np.isfinite(grid)])
        mids = (grid[:-1] + grid[1:]) / 2
        near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
        values = padded(np.concatenate([values, near, -near]))
        expected = satfinite(values, fp8)
        via_float32 = satfinite(values.astype(np.float32), fp8)
        np.testing.assert_array_equal(expected.view(np.uint8), via_float32.view(np.uint8))
    got = run_cast(values, fp8, 16)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize(("src", "dst"), [FP8, FP8[::-1]])
def test_fp8_to_fp8_through_an_allocated_buffer(src, dst):
    codes = all_codes(src)
    got = run_cast(codes, dst, 16, staged=True)
    expected = satfinite(codes.astype(np.float32), dst)  # e5m2's large values and inf saturate in e4m3fn
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_no_fp8_cast_or_fp8_allocation_is_left():
    mod = legalize_fp8(cast_module("float8_e4m3fn", "float32", 32, 16, staged=True), CTX)
    casts, allocs, calls, loads = [], [], [], []
    tvm_ffi.structural_walk(
        mod["k"].body,
        [
            (tirx.Cast, casts.append),
            (tirx.AllocBuffer, allocs.append),
            (ir.Call, calls.append),
            (ir.TensorLoad, loads.append),
        ],
    )
    assert casts and all("float8" not in str(c.ty) and "float8" not in str(c.value.ty) for c in casts)
    assert [str(a.buffer.dtype) for a in allocs] == ["uint8"]
    assert not {"tirx.if_then_else", "tirx.Select"} & {str(c.op.name) for c in calls}
    assert {str(load.ty) for load in loads} == {"uint8"}  # fp8 buffers are read through byte views


def test_modules_without_fp8_are_unchanged():
    mod = cast_module("float16", "float32", 32, 16)
    after = legalize_fp8(mod, CTX)
    tvm.ir.assert_structural_equal(after["k"], mod["k"])


def test_pointers_into_fp8_buffers_count_bytes():
    # an ldmatrix/TMA span into an fp8 tile (tvm_access_ptr) must name the byte buffer's element
    # type once the tile is a byte buffer: TVM's code generator refuses a mismatch
    S = tirx.decl_buffer((64, 32), "float8_e4m3fn", name="S", scope="shared")
    A = tirx.decl_buffer((64, 32), "float8_e4m3fn", name="A")
    i = tirx.Var("i", "int32")
    span = S.access_ptr("r", offset=i * 32, extent=16)
    body = tirx.SeqStmt([
        tirx.AllocBuffer(S),
        tirx.For(i, 0, 64, tirx.ForKind.SERIAL, tirx.SeqStmt([
            tirx.BufferStore(S, tirx.BufferLoad(A, [i, 0]), [i, 0]),
            tirx.Evaluate(tirx.call_extern("int32", "use", span, A.access_ptr("r", offset=i, extent=1))),
        ])),
    ])  # fmt: skip
    func = tirx.PrimFunc([A], body).with_attrs({"global_symbol": "k"})
    after = legalize_fp8(tvm.IRModule({"k": func}), CTX)["k"]
    pointers = []
    tvm_ffi.structural_walk(
        after.body, [(ir.Call, lambda c: pointers.append(c) if c.op.name == "tirx.tvm_access_ptr" else None)]
    )
    assert len(pointers) == 2
    assert {str(p.args[0].ty) for p in pointers} == {"uint8"}
    tvm.compile(after, target={"kind": "cuda", "arch": "sm_89"})  # the check that refused fp8 spans


@pytest.mark.parametrize("fp8", FP8)
def test_constants_encode_to_constant_bytes_as_ml_dtypes_saturated(fp8):
    from tile.ir.transform.legalize_fp8 import FP8_FORMATS, encode_constant

    values = np.concatenate([
        random_floats(4000, 1).astype(np.float64),
        [0.0, -0.0, 448.0, 464.0, 464.5, 480.0, 57344.0, 61440.0, 61441.0, 1e30, np.inf, -np.inf, np.nan],
    ])  # fmt: skip
    with np.errstate(all="ignore"):
        want = satfinite(values.astype(np.float32), fp8).view(np.uint8).copy()
    if fp8 == "float8_e5m2":  # a constant of the type that is infinity is its infinity
        want[np.isposinf(values)], want[np.isneginf(values)] = 0x7C, 0xFC
    got = [encode_constant(float(v), FP8_FORMATS[fp8]) for v in values]
    np.testing.assert_array_equal(np.array(got, np.uint8), want)


def test_a_bounds_checked_fp8_load_chooses_between_bytes():
    # if_then_else(in bounds, A[i], fp8 0) stored into an fp8 tile: the choice is made on the
    # bytes, with the zero a constant byte (an fp8-typed choice reached CUDA codegen as an fp8
    # vector and failed; an encoded constant was a 4 KB expression nvcc could not compile)
    A = tirx.decl_buffer((100,), "float8_e4m3fn", name="A")
    S = tirx.decl_buffer((128,), "float8_e4m3fn", name="S", scope="shared")
    i = tirx.Var("i", "int32")
    value = tirx.if_then_else(i < 100, tirx.BufferLoad(A, [i]), tirx.const(0.0, "float8_e4m3fn"))
    body = tirx.SeqStmt(
        [tirx.AllocBuffer(S), tirx.For(i, 0, 128, tirx.ForKind.SERIAL, tirx.BufferStore(S, value, [i]))]
    )
    func = tirx.PrimFunc([A], body).with_attrs({"global_symbol": "k"})
    after = legalize_fp8(tvm.IRModule({"k": func}), CTX)["k"]
    stores, calls = [], []
    tvm_ffi.structural_walk(after.body, [(tirx.BufferStore, stores.append)])
    choice = stores[0].value
    assert str(choice.op.name) == "prim.if_then_else" and str(choice.ty) == "uint8"
    assert isinstance(choice.args[2], tirx.IntImm) and choice.args[2].value == 0
    tvm_ffi.structural_walk(choice, [(ir.Call, calls.append)])
    assert not any("float8" in str(c.ty) for c in calls)  # no reinterpret to fp8 and back


def clamp_module(fp8, n):
    """``C[i] = max(min(A[i], 1), -1)`` on fp8 values (``T.clamp``), and ``D[i] = A[i] + B[i]``."""
    A, B, C, D = (tirx.decl_buffer((n,), fp8, name=name) for name in "ABCD")
    i = tirx.Var("i", "int32")
    one, minus_one = (tirx.Cast(fp8, tirx.const(v, "float32")) for v in (1.0, -1.0))
    clamp = tirx.Max(tirx.Min(tirx.BufferLoad(A, [i]), one), minus_one)
    body = tirx.SeqStmt(
        [
            tirx.BufferStore(C, clamp, [i]),
            tirx.BufferStore(D, tirx.Add(tirx.BufferLoad(A, [i]), tirx.BufferLoad(B, [i])), [i]),
        ]
    )
    func = tirx.PrimFunc([A, B, C, D], tirx.For(i, 0, n, tirx.ForKind.SERIAL, body))
    return tvm.IRModule({"k": func.with_attrs({"global_symbol": "k", "tirx.noalias": True})})


@pytest.mark.parametrize("fp8", FP8)
def test_arithmetic_on_fp8_values_runs_in_float32(fp8):
    # CUDA's fp8 types have no max/min/operators: the pass computes in float32 and encodes the
    # result once; a clamp's min inside its max is read as float32 (one encode, not an encode
    # decoded again inside the outer one's). Values: test_lang_fp8_values.py, through tile's
    # CPU build and the CUDA emulator (TVM's default LLVM pipeline takes a minute on these).
    from tile.ir.transform.legalize_fp8 import _arithmetic_in_float32

    rewritten = _arithmetic_in_float32(clamp_module(fp8, 256)["k"].body)
    to_fp8, arithmetic = [], []
    tvm_ffi.structural_walk(
        rewritten,
        [
            (tirx.Cast, lambda c: to_fp8.append(c) if str(c.ty) == fp8 else None),
            (tirx.Min, arithmetic.append),
            (tirx.Max, arithmetic.append),
            (tirx.Add, arithmetic.append),
        ],
    )
    assert len(to_fp8) == 4  # the two constants, the clamp's one result and the sum's
    assert sorted(str(node.ty) for node in arithmetic) == ["float32"] * 3
    legalized = legalize_fp8(clamp_module(fp8, 256), CTX)
    casts = []
    tvm_ffi.structural_walk(legalized["k"].body, [(tirx.Cast, casts.append)])
    assert all("float8" not in str(c.ty) and "float8" not in str(c.value.ty) for c in casts)


@pytest.mark.parametrize(
    ("fp8", "cases"),
    [
        # hand-computed: 448 = 1.75 * 2^8 is 0.1111.110; 464 (the tie with the NaN pattern's 480)
        # and everything above saturate there; NaN is 0.1111.111
        ("float8_e4m3fn", {440.0: 0x7E, 448.0: 0x7E, 464.0: 0x7E, 1e30: 0x7E, np.inf: 0x7E,
                           -np.inf: 0xFE, -500.0: 0xFE, np.nan: 0x7F}),
        # 57344 = 1.75 * 2^15 is 0.11110.11; 61440 (the tie with inf's 65536) saturates too
        ("float8_e5m2", {57344.0: 0x7B, 61440.0: 0x7B, 1e30: 0x7B, np.inf: 0x7B, -np.inf: 0xFB,
                         np.nan: 0x7E}),
    ],
)  # fmt: skip
def test_encoding_saturates_at_the_largest_finite_value(fp8, cases):
    from tile.ir.transform.legalize_fp8 import FP8_FORMATS, encode_constant

    values = np.resize(np.array(list(cases), np.float32), 16)  # whole vectors of 16 lanes
    want = np.resize(np.array(list(cases.values()), np.uint8), 16)
    for lanes in (1, 16):
        np.testing.assert_array_equal(run_cast(values, fp8, lanes).view(np.uint8), want)
    constants = [encode_constant(float(v), FP8_FORMATS[fp8]) for v in values]
    if fp8 == "float8_e5m2":  # the conversion saturates; the type's own infinity stays
        want[np.isposinf(values)], want[np.isneginf(values)] = 0x7C, 0xFC
    assert constants == want.tolist()


def test_arithmetic_on_fp8_constants_folds_in_float32():
    # -T.infinity("float8_e5m2") is inf * -1: folded to the constant -inf (a conversion of the
    # float32 product would saturate it to -57344); others as float32 arithmetic, then encoded
    from tile.ir.transform.legalize_fp8 import FP8_FORMATS, _fold, encode_constant

    e5m2, e4m3 = FP8_FORMATS["float8_e5m2"], FP8_FORMATS["float8_e4m3fn"]
    assert encode_constant(_fold(tirx.Mul, np.inf, -1.0), e5m2) == 0xFC
    assert encode_constant(_fold(tirx.Add, 448.0, 448.0), e4m3) == 0x7E  # 896 saturates
    assert encode_constant(_fold(tirx.Div, 1.0, 3.0), e4m3) == encode_constant(float(np.float32(1) / 3), e4m3)
    assert np.isnan(_fold(tirx.Max, np.nan, 1.0)) and _fold(tirx.Min, -2.0, 3.0) == -2.0
