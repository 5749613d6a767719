"""Inline PTX of ``T.import_source`` code on the CUDA emulator: each instruction the emulator
translates (``tile.backends.cuda._src.inline_ptx``, ``tile_cuda/ptx.h``) against a reference
written here from the PTX ISA's definitions, bit for bit.

- ``lop3.b32``: the lookup table is the function F with F(0xF0, 0xCC, 0xAA) = immLut, so
  0x96 is a ^ b ^ c, 0xE8 the majority, 0x1E a ^ (b | c).
- ``prmt.b32`` (default mode): bytes 0-3 of a, 4-7 of b; selector nibble i picks result byte
  i, its bit 3 replicates that byte's sign; ``prmt(a, 0, 0x0123)`` reverses a's bytes.
- ``{add,sub,mul,fma.rn}.f16x2`` / ``.bf16x2``: each 16-bit half rounded to nearest even once
  (numpy's float16 arithmetic and its direct float64 -> float16 conversion; bfloat16 rounded
  from the exact float64 value here).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.backends.cuda._src import inline_ptx

pytestmark = [
    pytest.mark.emu,
    pytest.mark.skipif(not shutil.which("c++") and not shutil.which("g++"), reason="no host C++ compiler"),
]

OPS = r"""
template <int LUT>
__device__ unsigned tile_test_lop3(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
  return d;
}

__device__ void tile_test_ptx_ops(const unsigned *x, unsigned *out) {
  unsigned a = x[0], b = x[1], c = x[2];
  out[0] = tile_test_lop3<0x96>(a, b, c);
  out[1] = tile_test_lop3<0xE8>(a, b, c);
  out[2] = tile_test_lop3<0x1E>(a, b, c);
  asm volatile("prmt.b32 %0, %1, %2, %3;" : "=r"(out[3]) : "r"(a), "r"(b), "r"(c));
  asm volatile(
    // a scoped scratch register, comments between the template's pieces
    "{\n .reg .b32 t;\n"
    " shl.b32 t, %1, 3;\n"   /* then an arithmetic shift */
    " shr.s32 %0, t, 5;\n}"
    : "=r"(out[4]) : "r"(a));
  asm volatile("add.f16x2 %0, %1, %2;" : "=r"(out[5]) : "r"(a), "r"(b));
  asm volatile("sub.f16x2 %0, %1, %2;" : "=r"(out[6]) : "r"(a), "r"(b));
  asm volatile("mul.f16x2 %0, %1, %2;" : "=r"(out[7]) : "r"(a), "r"(b));
  asm volatile("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(out[8]) : "r"(a), "r"(b), "r"(c));
  asm volatile("mul.bf16x2 %0, %1, %2;" : "=r"(out[9]) : "r"(a), "r"(b));
  asm volatile("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(out[10]) : "r"(a), "r"(b), "r"(c));
  asm volatile("prmt.b32 %0, %1, 0, 0x0123;" : "=r"(out[11]) : "r"(a));
}
"""
ROWS, OUTS = 64, 12


def ops_kernel():
    @T.prim_func
    def main(X: T.Tensor((ROWS * 3,), "uint32"), Y: T.Tensor((ROWS * OUTS,), "uint32")):
        T.import_source(OPS)
        with T.Kernel(1, threads=ROWS):
            tx = T.get_thread_binding()
            T.call_extern("handle", "tile_test_ptx_ops", T.address_of(X[tx * 3]), T.address_of(Y[tx * OUTS]))

    return main


def _halves(words: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = (words & 0xFFFF).astype(np.uint16), (words >> 16).astype(np.uint16)
    if dtype == "float16":
        return lo.view(np.float16).astype(np.float64), hi.view(np.float16).astype(np.float64)
    return [(h.astype(np.uint32) << 16).view(np.float32).astype(np.float64) for h in (lo, hi)]  # type: ignore[return-value]


def _to_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float16":
        return values.astype(np.float16).view(np.uint16).astype(np.uint32)  # float64 -> float16 directly
    mantissa, exponent = np.frexp(values)  # values = mantissa * 2**exponent, 0.5 <= |mantissa| < 1
    rounded = np.ldexp(np.round(mantissa * 256.0), exponent - 8)  # 8 significant bits, ties to even
    return (rounded.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)


def _packed(op, dtype: str, *words: np.ndarray) -> np.ndarray:
    parts = [_halves(w, dtype) for w in words]
    lo = _to_bits(op(*[p[0] for p in parts]), dtype)
    hi = _to_bits(op(*[p[1] for p in parts]), dtype)
    return lo | (hi << 16)


def _prmt(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    for row in range(a.size):
        pool = int(a[row]) | (int(b[row]) << 32)
        word = 0
        for i in range(4):
            selector = (int(c[row]) >> (4 * i)) & 0xF
            byte = (pool >> (8 * (selector & 7))) & 0xFF
            if selector & 8:
                byte = 0xFF if byte & 0x80 else 0
            word |= byte << (8 * i)
        out[row] = word
    return out


def _words(rng: np.random.Generator, dtype: type) -> np.ndarray:
    """ROWS words of two finite 16-bit floats in [-8, 8] (random bits for the bit operations too)."""
    halves = rng.uniform(-8, 8, size=(ROWS, 2))
    if dtype is np.float16:
        bits = halves.astype(np.float16).view(np.uint16).astype(np.uint32)
    else:
        bits = (halves.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)
    return bits[:, 0] | (bits[:, 1] << 16)


@pytest.mark.vendor_compile  # nvcc (where installed) checks that this is PTX it takes
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_every_translated_instruction_matches_the_isa_definition(dtype):
    # the packed bfloat16 add, sub and mul are sm_90 instructions
    kernel = tilelang.compile(ops_kernel(), out_idx=[1], target={"kind": "cuda", "arch": "sm_90a"})
    rng = np.random.default_rng(7 if dtype == "float16" else 11)
    a, b, c = (_words(rng, np.float16 if dtype == "float16" else np.float32) for _ in range(3))
    a[0], c[0] = 0x33221100, 0x0123  # a hand-checked prmt: bytes reversed -> 0x00112233
    y = kernel(np.stack([a, b, c], axis=1).reshape(-1)).reshape(ROWS, OUTS)

    np.testing.assert_array_equal(y[:, 0], a ^ b ^ c)
    np.testing.assert_array_equal(y[:, 1], (a & b) | (a & c) | (b & c))
    np.testing.assert_array_equal(y[:, 2], a ^ (b | c))
    np.testing.assert_array_equal(y[:, 3], _prmt(a, b, c))
    assert y[0, 3] == 0x00112233
    shifted = ((a << np.uint32(3)) & np.uint32(0xFFFFFFFF)).view(np.int32) >> 5
    np.testing.assert_array_equal(y[:, 4], shifted.view(np.uint32))
    np.testing.assert_array_equal(y[:, 11], _prmt(a, np.zeros_like(a), np.full_like(a, 0x0123)))
    if dtype == "float16":
        np.testing.assert_array_equal(y[:, 5], _packed(lambda p, q: p + q, dtype, a, b))
        np.testing.assert_array_equal(y[:, 6], _packed(lambda p, q: p - q, dtype, a, b))
        np.testing.assert_array_equal(y[:, 7], _packed(lambda p, q: p * q, dtype, a, b))
        np.testing.assert_array_equal(y[:, 8], _packed(lambda p, q, r: p * q + r, dtype, a, b, c))
    else:
        np.testing.assert_array_equal(y[:, 9], _packed(lambda p, q: p * q, dtype, a, b))
        np.testing.assert_array_equal(y[:, 10], _packed(lambda p, q, r: p * q + r, dtype, a, b, c))


@pytest.mark.vendor_compile
def test_the_int4_to_float16_lop3_decoder_of_dequantizing_gemms():
    """The magic-number decoder TileLang's dequantizing examples import: (q & 0x000f000f) |
    0x64006400 is the float16 pair 1024 + q, minus 1032 gives q - 8, times a scale."""
    decoder = r"""
    __device__ void tile_test_decode(const unsigned *packed, const unsigned *scale, unsigned *out) {
      unsigned const i4s = packed[0];
      static constexpr unsigned MASK = 0x000f000f, MAGIC = 0x64006400, MEDIAN = 0x64086408;
      static constexpr unsigned LUT = (0xf0 & 0xcc) | 0xaa;
      #pragma unroll
      for (int i = 0; i < 4; i++) {
        asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n"
                     : "=r"(out[i]) : "r"(i4s >> (4 * i)), "n"(MASK), "n"(MAGIC), "n"(LUT));
        asm volatile("sub.f16x2 %0, %1, %2;\n" : "=r"(out[i]) : "r"(out[i]), "r"(MEDIAN));
        asm volatile("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(out[i]) : "r"(out[i]), "r"(scale[0]), "r"(0));
      }
    }
    """

    @T.prim_func
    def main(P: T.Tensor((32,), "uint32"), S: T.Tensor((32,), "uint32"), Out: T.Tensor((128,), "uint32")):
        T.import_source(decoder)
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            T.call_extern("handle", "tile_test_decode", T.address_of(P[tx]), T.address_of(S[tx]),
                          T.address_of(Out[tx * 4]))

    kernel = tilelang.compile(main, out_idx=[2], target={"kind": "cuda", "arch": "sm_80"})
    rng = np.random.default_rng(3)
    packed = rng.integers(0, 2**32, size=32, dtype=np.uint64).astype(np.uint32)
    scales = rng.uniform(0.5, 2, size=32).astype(np.float16)
    scale_words = np.repeat(scales.view(np.uint16).astype(np.uint32), 1) * np.uint32(0x10001)
    out = kernel(packed, scale_words).reshape(32, 4)
    halves = np.stack([out & 0xFFFF, out >> 16], axis=-1).astype(np.uint16).view(np.float16)
    # output word i holds nibble i (low half) and nibble i + 4 (high half)
    nibbles = (packed[:, None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF
    want = ((nibbles.astype(np.float16) - np.float16(8)) * scales[:, None]).astype(np.float16)
    np.testing.assert_array_equal(halves[:, :, 0], want[:, :4])
    np.testing.assert_array_equal(halves[:, :, 1], want[:, 4:])


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ('asm("popc.b32 %0, %1;" : "=r"(x) : "r"(y));', "PTX instruction 'popc.b32'"),
        ('asm volatile("@p add.u32 %0, %1, %1;" : "=r"(x) : "r"(y));', "predicated"),
        ('asm("mov.b32 %0, %1;" : "=f"(x) : "f"(y));', "constraint '=f'"),
        ('asm("add.u32 %0, %1, %2;" : "=r"(x) : "r"(y));', "operand %2"),
        ('asm("mov.b32 %0, {%1, %1};" : "=r"(x) : "r"(y));', "vector operand"),
    ],
)
def test_what_is_not_translated_is_named(code, says):
    with pytest.raises(inline_ptx.InlinePtxError) as info:
        inline_ptx.translate("void f(unsigned x, unsigned y) { " + code + " }")
    assert says in str(info.value)


def test_an_instruction_the_target_lacks_is_refused_as_ptxas_would():
    code = 'void f(unsigned x, unsigned y) { asm("mul.bf16x2 %0, %1, %1;" : "=r"(x) : "r"(y)); }'
    with pytest.raises(inline_ptx.InlinePtxError, match=r"needs sm_90 or newer \(target sm_80\)"):
        inline_ptx.translate(code, sm=80)
    assert "tile_ptx::mul_bf16x2" in inline_ptx.translate(code, sm=90)


def test_the_kernel_source_keeps_asm_that_does_not_translate_for_the_preprocessor():
    # TVM's CUDA prelude defines __dp4a with inline PTX under `#if defined(__CUDA_ARCH__)`, which
    # the emulator's host preprocessor drops: the whole source is translated leniently
    prelude = (
        "#if defined(__CUDA_ARCH__)\n"
        'int f(int a) { int r; asm ("dp4a.u32.s32 %0, %1, %1, %1;" : "=r"(r) : "r"(a)); return r; }\n'
        "#endif\n"
    )
    code = prelude + 'void g(unsigned x) { asm("mov.b32 %0, 7;" : "=r"(x)); }'
    out = inline_ptx.translate(code, strict=False)
    assert out.startswith(prelude) and "tile_ptx::mov(7ull)" in out
    with pytest.raises(inline_ptx.InlinePtxError, match="dp4a"):
        inline_ptx.translate(code)


def test_the_gnu_spelling_is_translated_too():
    out = inline_ptx.translate('void f(unsigned x) { __asm__ __volatile__("mov.b32 %0, 3;" : "=r"(x)); }')
    assert "__asm__" not in out and "tile_ptx::mov(3ull)" in out


def test_a_ptx_comment_inside_the_template_string_is_read_as_one():
    # the C code goes on after the comment's end of line, which is an escape in the string
    code = 'void f(unsigned x) { asm("mov.b32 %0, 5; // five\\n" "add.u32 %0, %0, 1;" : "=r"(x)); }'
    out = inline_ptx.translate(code)
    assert "tile_ptx::mov(5ull)" in out and "tile_ptx::add_u32(_ptx[0], 1ull)" in out


def test_asm_in_comments_and_strings_is_left_alone():
    source = '// asm("nop");\nconst char *s = "asm(";\n/* asm volatile("x") */ int asm_count = 0;\n'
    assert not inline_ptx.has_inline_asm(source)
    assert inline_ptx.translate(source) == source
