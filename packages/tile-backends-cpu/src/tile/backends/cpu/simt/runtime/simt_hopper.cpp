// sm_90 data movement and tensor cores of the SIMT emulator: what a wgmma.mma_async
// computes once its group is waited for, and where a TMA tiled load puts each element.
//
// Shared operands are read the way the hardware reads them: the 64-bit matrix
// descriptor gives a start address, leading and stride byte offsets and a swizzle mode;
// the element (mn, k) of a K-major or MN-major operand sits at the canonical-layout
// offset from the start, and the 16-byte chunk index of that shared address is XORed
// with its bits [7, 7 + B) (B = 1, 2, 3 for the 32B, 64B, 128B modes). Addresses are
// byte offsets in the block's shared window, whose base is 1024-byte aligned, so the
// XOR sees the same bits as on the GPU.
#include <stdio.h>
#include <string.h>

#include "simt_internal.h"

namespace tile_simt {

namespace {

int fail(char* error, size_t size, int status, const char* text) {
  snprintf(error, size, "%s", text);
  return status;
}

// log2 of the swizzle span in 16-byte chunks (0 none) of a descriptor's 2-bit mode.
int descriptor_swizzle_bits(unsigned mode) {
  switch (mode) {
    case 1: return 3;  // 128B
    case 2: return 2;  // 64B
    case 3: return 1;  // 32B
    default: return 0;
  }
}

unsigned long long swizzle_address(unsigned long long addr, int bits) {
  if (!bits) return addr;
  return addr ^ (((addr >> 7) & ((1ull << bits) - 1)) << 4);
}

// The operands' element type: its size and the K of one instruction (32 bytes of K).
struct InputType {
  unsigned bytes;  // 2: f16/bf16 (m64nNk16), 1: e4m3/e5m2 (m64nNk32), 4: tf32 (m64nNk8)
  int kind;        // the TILE_SIMT_WGMMA_* type flag (0: f16)
  unsigned k() const { return 32 / bytes; }
};

InputType input_type(int kind) {
  if (kind & TILE_SIMT_WGMMA_E4M3) return {1, TILE_SIMT_WGMMA_E4M3};
  if (kind & TILE_SIMT_WGMMA_E5M2) return {1, TILE_SIMT_WGMMA_E5M2};
  if (kind & TILE_SIMT_WGMMA_TF32) return {4, TILE_SIMT_WGMMA_TF32};
  return {2, kind & TILE_SIMT_WGMMA_BF16};
}

// A decoded matrix descriptor.
struct Operand {
  unsigned long long start, lbo, sbo;
  int swizzle_bits;
  bool mn_major;
};

Operand decode(unsigned long long desc, bool mn_major) {
  Operand op;
  op.start = (desc & 0x3FFFull) << 4;
  op.lbo = ((desc >> 16) & 0x3FFFull) << 4;
  op.sbo = ((desc >> 32) & 0x3FFFull) << 4;
  op.swizzle_bits = descriptor_swizzle_bits((unsigned)(desc >> 62) & 3u);
  op.mn_major = mn_major;
  return op;
}

// Byte offset (before the swizzle) of element (mn, k) of an operand of `bytes`-byte elements in
// the PTX canonical layouts; T = elements per 16 bytes, S = swizzle span in 16-byte chunks.
// Returns false when k leaves the swizzle row of a K-major swizzled operand.
bool canonical_offset(const Operand& op, unsigned bytes, unsigned mn, unsigned k, unsigned long long* offset) {
  const unsigned T = 16 / bytes;
  const unsigned S = op.swizzle_bits ? 1u << op.swizzle_bits : 1u;
  if (!op.mn_major) {
    const unsigned r = mn % 8, mi = mn / 8, t = k % T, kk = k / T;
    if (!op.swizzle_bits) {
      *offset = (unsigned long long)(r * T + t) * bytes + mi * op.sbo + kk * op.lbo;
      return true;
    }
    if (kk >= S) return false;
    *offset = (unsigned long long)(r * S * T + kk * T + t) * bytes + mi * op.sbo;
    return true;
  }
  const unsigned kr = k % 8, kk = k / 8;
  if (!op.swizzle_bits) {
    const unsigned t = mn % T, mi = mn / T;
    *offset = (unsigned long long)(t + kr * T) * bytes + mi * op.sbo + kk * op.lbo;
    return true;
  }
  const unsigned t = mn % T, sc = (mn / T) % S, mi = mn / (T * S);
  *offset = (unsigned long long)(t + sc * T + kr * S * T) * bytes + mi * op.lbo + kk * op.sbo;
  return true;
}

float element(const unsigned char* at, const InputType& type) {
  if (type.kind == TILE_SIMT_WGMMA_E4M3) return e4m3_to_float(*at);
  if (type.kind == TILE_SIMT_WGMMA_E5M2) return e5m2_to_float(*at);
  if (type.kind == TILE_SIMT_WGMMA_TF32) {  // the tensor core reads the top 19 bits of each float
    uint32_t u;
    memcpy(&u, at, 4);
    u &= 0xffffe000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  uint16_t bits;
  memcpy(&bits, at, 2);
  if (type.kind == TILE_SIMT_WGMMA_BF16) {
    const uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  return half_to_float(bits);
}

constexpr unsigned MAX_K = 32;  // of one instruction (8-bit inputs)

// Reads an (rows x type.k()) operand: out[mn * MAX_K + k].
int read_operand(const Operand& op, unsigned rows, const InputType& type, const unsigned char* smem,
                 unsigned long long smem_bytes, const unsigned char* async_view, const char* which, float* out,
                 char* error, size_t size) {
  if (type.bytes != 2 && op.mn_major) {
    snprintf(error, size, "wgmma: operand %s is read MN-major, which wgmma does only for 16-bit types (8-bit "
             "and tf32 operands are K-major: imm-trans must be 0)", which);
    return TILE_SIMT_MISUSE;
  }
  for (unsigned mn = 0; mn < rows; ++mn) {
    for (unsigned k = 0; k < type.k(); ++k) {
      unsigned long long offset = 0;
      if (!canonical_offset(op, type.bytes, mn, k, &offset)) {
        snprintf(error, size,
                 "wgmma: the K extent of operand %s leaves its %u-byte swizzle row (a K-major swizzled operand "
                 "advances K through the start address)",
                 which, 16u << op.swizzle_bits);
        return TILE_SIMT_MISUSE;
      }
      const unsigned long long addr = swizzle_address(op.start + offset, op.swizzle_bits);
      if (addr + type.bytes > smem_bytes) {
        snprintf(error, size,
                 "wgmma: operand %s element (%u, %u) is read at shared address %llu, outside the block's %llu bytes "
                 "of dynamic shared memory (check the descriptor's start address, LBO and SBO)",
                 which, mn, k, addr, smem_bytes);
        return TILE_SIMT_MISUSE;
      }
      if (async_view && memcmp(async_view + addr, smem + addr, type.bytes) != 0) {
        snprintf(error, size,
                 "wgmma: operand %s element (%u, %u) at shared address %llu was written through the generic proxy "
                 "(a store or cp.async) with no fence.proxy.async since, so the tensor core may read the old "
                 "contents; call tile_fence_proxy_async() after the writes and before the barrier that precedes "
                 "the wgmma",
                 which, mn, k, addr);
        return TILE_SIMT_MISUSE;
      }
      out[mn * MAX_K + k] = element(smem + addr, type);
    }
  }
  return TILE_SIMT_OK;
}

}  // namespace

int compute_wgmma(const WgmmaOp& op, unsigned char* smem, unsigned long long smem_bytes,
                  const unsigned char* async_view, char* error, size_t error_size) {
  const unsigned n = (unsigned)(op.kind & 0x1ff);
  const InputType type = input_type(op.kind);
  const bool rs = (op.kind & TILE_SIMT_WGMMA_RS) != 0;
  if (n % 8 || n < 8 || n > 256) return fail(error, error_size, TILE_SIMT_MISUSE, "wgmma: N must be a multiple of 8 in [8, 256]");
  if (!smem) return fail(error, error_size, TILE_SIMT_MISUSE, "wgmma: the block has no dynamic shared memory to read operands from");
  if (((op.desc_a >> 49) & 7) || ((op.desc_b >> 49) & 7))
    return fail(error, error_size, TILE_SIMT_MISUSE, "wgmma: a nonzero matrix base offset is not modelled by the emulator");
  static thread_local float a[64 * MAX_K], b[256 * MAX_K];
  if (rs && type.bytes == 1)
    return fail(error, error_size, TILE_SIMT_MISUSE, "wgmma: the emulator reads A from registers for 16-bit and tf32 types only");
  if (rs && type.bytes == 4) {  // a0..a3, one tf32 each: row 16w + g + 8 (i & 1), column t + 4 (i >> 1)
    for (unsigned tid = 0; tid < 128; ++tid) {
      const unsigned char* regs = static_cast<const unsigned char*>(op.a[tid]);
      const unsigned w = tid / 32, g = (tid % 32) >> 2, t = tid % 4;
      for (unsigned i = 0; i < 4; ++i) {
        const unsigned m = 16 * w + g + 8 * (i & 1), k = t + 4 * (i >> 1);
        a[m * MAX_K + k] = element(regs + 4 * i, type);
      }
    }
  } else if (rs) {
    for (unsigned tid = 0; tid < 128; ++tid) {
      const uint16_t* regs = static_cast<const uint16_t*>(op.a[tid]);
      const unsigned w = tid / 32, g = (tid % 32) >> 2, t = tid % 4;
      for (unsigned i = 0; i < 8; ++i) {
        const unsigned m = 16 * w + g + 8 * ((i >> 1) & 1), k = 2 * t + (i & 1) + 8 * (i >> 2);
        a[m * MAX_K + k] = element(reinterpret_cast<const unsigned char*>(regs + i), type);
      }
    }
  } else {
    const int status = read_operand(decode(op.desc_a, op.trans_a != 0), 64, type, smem, smem_bytes, async_view, "A", a,
                                     error, error_size);
    if (status != TILE_SIMT_OK) return status;
  }
  const int status = read_operand(decode(op.desc_b, op.trans_b != 0), n, type, smem, smem_bytes, async_view, "B", b,
                                  error, error_size);
  if (status != TILE_SIMT_OK) return status;
  for (unsigned tid = 0; tid < 128; ++tid) {
    float* d = op.d[tid];
    const unsigned w = tid / 32, g = (tid % 32) >> 2, t = tid % 4;
    for (unsigned i = 0; i < n / 2; ++i) {
      const unsigned m = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);
      float acc = op.scale_d ? d[i] : 0.0f;  // fp32 accumulation in k order
      const float* row = a + m * MAX_K;
      const float* column = b + col * MAX_K;
      for (unsigned k = 0; k < type.k(); ++k) acc += row[k] * column[k];
      d[i] = acc;
    }
  }
  return TILE_SIMT_OK;
}

namespace {

// Walks the box a TMA copy at `coords` moves between the tensor of `map` and the shared tile at
// `smem_tile` (128-byte aligned; swizzled per the map by absolute shared address):
// `element(shared byte offset in the tile, global byte offset or -1 when out of bounds)`
// runs once per element, dim 0 fastest. Sets *bytes to the box's size. Returns a tile_simt_status.
template <typename Element>
int walk_tma_box(const tile_simt_tensor_map& map, const unsigned char* smem_tile, const int* coords, int rank,
                 const unsigned char* smem, unsigned long long smem_bytes, long long* bytes, const char* what,
                 char* error, size_t error_size, Element element) {
  if (map.magic != TILE_SIMT_TENSOR_MAP_MAGIC)
    return fail(error, error_size, TILE_SIMT_MISUSE,
                "TMA: the tensor map was not built for the emulator (encode it with "
                "tile.backends.cpu.simt.encode_tensor_map)");
  if (rank != (int)map.rank) {
    snprintf(error, error_size, "TMA: a %d-D copy with a %u-D tensor map", rank, (unsigned)map.rank);
    return TILE_SIMT_MISUSE;
  }
  if ((uintptr_t)smem_tile % 128) {
    snprintf(error, error_size, "TMA: the shared %s must be 128-byte aligned", what);
    return TILE_SIMT_MISUSE;
  }
  const unsigned elem = map.elem_bytes;
  const int swizzle_bits = map.swizzle == 3 ? 3 : map.swizzle == 2 ? 2 : map.swizzle == 1 ? 1 : 0;
  unsigned counts[5] = {1, 1, 1, 1, 1};
  unsigned long long total = 1;
  for (int d = 0; d < rank; ++d) {
    const unsigned es = d == 0 ? 1 : (map.element_stride[d] ? map.element_stride[d] : 1);
    counts[d] = (map.box_dim[d] + es - 1) / es;
    total *= counts[d];
  }
  if (swizzle_bits && (unsigned long long)counts[0] * elem != (16ull << swizzle_bits)) {
    snprintf(error, error_size, "TMA: a swizzled box's inner extent (%llu bytes) must equal the %u-byte swizzle span",
             (unsigned long long)counts[0] * elem, 16u << swizzle_bits);
    return TILE_SIMT_MISUSE;
  }
  const bool in_window = smem && smem_tile >= smem && smem_tile < smem + smem_bytes;
  const unsigned long long base =
      in_window ? (unsigned long long)(smem_tile - smem) : (unsigned long long)(uintptr_t)smem_tile;
  if (in_window && base + total * elem > smem_bytes) {
    snprintf(error, error_size,
             "TMA: a %llu-byte box at shared offset %llu runs past the block's %llu bytes of dynamic shared memory",
             total * elem, base, smem_bytes);
    return TILE_SIMT_MISUSE;
  }
  unsigned index[5] = {0, 0, 0, 0, 0};
  for (unsigned long long linear = 0; linear < total; ++linear) {
    unsigned long long rest = linear;
    for (int d = 0; d < rank; ++d) {
      index[d] = (unsigned)(rest % counts[d]);
      rest /= counts[d];
    }
    long long global = 0;
    for (int d = 0; d < rank; ++d) {
      const long long es = d == 0 ? 1 : (map.element_stride[d] ? map.element_stride[d] : 1);
      const long long g = (long long)coords[d] + (long long)index[d] * es;
      if (g < 0 || (unsigned long long)g >= map.global_dim[d]) {
        global = -1;
        break;
      }
      global += d == 0 ? g * (long long)elem : g * (long long)map.global_stride[d - 1];
    }
    const int status = element(swizzle_address(base + linear * elem, swizzle_bits) - base, global);
    if (status != TILE_SIMT_OK) return status;
  }
  *bytes = (long long)(total * elem);
  return TILE_SIMT_OK;
}

}  // namespace

int tma_load(const tile_simt_tensor_map& map, unsigned char* dst, const int* coords, int rank, unsigned char* smem,
             unsigned long long smem_bytes, long long* bytes, char* error, size_t error_size) {
  const unsigned char* tensor = reinterpret_cast<const unsigned char*>((uintptr_t)map.address);
  const unsigned elem = map.elem_bytes;
  return walk_tma_box(map, dst, coords, rank, smem, smem_bytes, bytes, "destination", error, error_size,
                      [&](unsigned long long offset, long long global) {
                        if (global >= 0) memcpy(dst + offset, tensor + global, elem);
                        else memset(dst + offset, 0, elem);  // out-of-bound elements read as zero
                        return (int)TILE_SIMT_OK;
                      });
}

int tma_store(const tile_simt_tensor_map& map, const unsigned char* src, const int* coords, int rank,
              const unsigned char* smem, unsigned long long smem_bytes, const unsigned char* async_view,
              char* error, size_t error_size) {
  unsigned char* tensor = reinterpret_cast<unsigned char*>((uintptr_t)map.address);
  const unsigned elem = map.elem_bytes;
  const bool in_window = smem && src >= smem && src < smem + smem_bytes;
  long long bytes = 0;
  return walk_tma_box(map, src, coords, rank, smem, smem_bytes, &bytes, "source", error, error_size,
                      [&](unsigned long long offset, long long global) {
                        const unsigned char* from = src + offset;
                        if (in_window && async_view) {
                          // the copy reads through the async proxy: what it sees is the async view
                          const unsigned char* seen = async_view + (from - smem);
                          if (memcmp(seen, from, elem) != 0) {
                            snprintf(error, error_size,
                                     "TMA store: it reads shared bytes at offset %llu that the generic proxy wrote "
                                     "with no fence.proxy.async since (the store would send stale data)",
                                     (unsigned long long)(from - smem));
                            return (int)TILE_SIMT_MISUSE;
                          }
                          from = seen;
                        }
                        if (global >= 0) memcpy(tensor + global, from, elem);  // out of bounds: not written
                        return (int)TILE_SIMT_OK;
                      });
}

}  // namespace tile_simt
