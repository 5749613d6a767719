"""Independent reference tables for GPU instruction-level layouts and semantics.

Written from the vendor documents cited in ``gpu-isa-facts.md`` (NVIDIA PTX ISA,
CUDA Driver API / Programming Guide, AMD Matrix Instruction Calculator, ROCm
docs). No code from TileLang or TVM. Pure Python; no imports beyond the standard
library. Every function is small and total over its documented domain; anything
outside the domain raises ``ValueError``.

Conventions
-----------
* ``lane``: 0..31 (NVIDIA warp) or 0..63 (AMD wave64). ``tid``: 0..127 in a
  warpgroup (``lane = tid % 32``, ``warp = tid // 32``).
* PTX fragment element index ``i`` is the ``a_i`` / ``b_i`` / ``c_i`` / ``d_i``
  numbering of the PTX ISA. Registers hold elements "low to high": element ``i``
  lives in register ``i // per_reg`` at sub-position ``i % per_reg``
  (sub-position 0 = least-significant bits).
* Matrix coordinates: A is (row=m, col=k); B is (row=k, col=n); C/D is (m, n).
* Addresses are byte addresses.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil, prod

# ---------------------------------------------------------------------------
# 1-2. NVIDIA mma.sync fragments (PTX "Matrix Fragments for mma.m16n8k*")
# ---------------------------------------------------------------------------


def _gid_tig(lane: int) -> tuple[int, int]:
    if not 0 <= lane < 32:
        raise ValueError(f"lane {lane} out of range")
    return lane >> 2, lane % 4


def _check(i: int, n: int) -> None:
    if not 0 <= i < n:
        raise ValueError(f"fragment index {i} out of range [0,{n})")


def mma_m16n8k16_f16_a(lane: int, i: int) -> tuple[int, int]:
    """A (16x16, .row) of mma.m16n8k16 .f16/.bf16: a_i -> (m, k). 4 regs x 2 halves."""
    g, t = _gid_tig(lane)
    _check(i, 8)
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def mma_m16n8k16_f16_b(lane: int, i: int) -> tuple[int, int]:
    """B (16x8, .col) of mma.m16n8k16 .f16/.bf16: b_i -> (k, n). 2 regs x 2 halves."""
    g, t = _gid_tig(lane)
    _check(i, 4)
    return 2 * t + (i & 1) + 8 * (i >> 1), g


def mma_m16n8_c(lane: int, i: int) -> tuple[int, int]:
    """C/D (16x8) of m16n8k8/k16/k32 with .f32/.s32 (4 regs): c_i -> (m, n).

    Also the .f16 accumulator (2 .f16x2 regs, c_i in reg i//2, half i%2)."""
    g, t = _gid_tig(lane)
    _check(i, 4)
    return g + 8 * (i >> 1), 2 * t + (i & 1)


def mma_m16n8k32_s8_a(lane: int, i: int) -> tuple[int, int]:
    """A (16x32) of mma.m16n8k32 .s8/.u8 (also e4m3/e5m2): a_i -> (m, k). 4 regs x 4 bytes."""
    g, t = _gid_tig(lane)
    _check(i, 16)
    return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)


def mma_m16n8k32_s8_b(lane: int, i: int) -> tuple[int, int]:
    """B (32x8) of mma.m16n8k32 .s8/.u8: b_i -> (k, n). 2 regs x 4 bytes."""
    g, t = _gid_tig(lane)
    _check(i, 8)
    return 4 * t + (i & 3) + 16 * (i >> 2), g


def mma_m16n8k8_tf32_a(lane: int, i: int) -> tuple[int, int]:
    """A (16x8) of mma.m16n8k8 .tf32: a_i -> (m, k). 4 .b32 regs, one element each."""
    g, t = _gid_tig(lane)
    _check(i, 4)
    return g + 8 * (i & 1), t + 4 * (i >> 1)


def mma_m16n8k8_tf32_b(lane: int, i: int) -> tuple[int, int]:
    """B (8x8) of mma.m16n8k8 .tf32: b_i -> (k, n). 2 .b32 regs."""
    g, t = _gid_tig(lane)
    _check(i, 2)
    return t + 4 * i, g


#: name -> (function, lanes, elements per lane, elements per 32-bit register, (rows, cols))
MMA_FRAGMENTS = {
    "m16n8k16_f16_A": (mma_m16n8k16_f16_a, 32, 8, 2, (16, 16)),
    "m16n8k16_f16_B": (mma_m16n8k16_f16_b, 32, 4, 2, (16, 8)),
    "m16n8_f32_C": (mma_m16n8_c, 32, 4, 1, (16, 8)),
    "m16n8k32_s8_A": (mma_m16n8k32_s8_a, 32, 16, 4, (16, 32)),
    "m16n8k32_s8_B": (mma_m16n8k32_s8_b, 32, 8, 4, (32, 8)),
    "m16n8k8_tf32_A": (mma_m16n8k8_tf32_a, 32, 4, 1, (16, 8)),
    "m16n8k8_tf32_B": (mma_m16n8k8_tf32_b, 32, 2, 1, (8, 8)),
}


def invert_fragment(fn, lanes: int, elems: int) -> dict[tuple[int, int], tuple[int, int]]:
    """Build {(row, col): (lane, i)} and check the map is a bijection."""
    inv: dict[tuple[int, int], tuple[int, int]] = {}
    for lane in range(lanes):
        for i in range(elems):
            rc = fn(lane, i)
            if rc in inv:
                raise ValueError(f"{fn.__name__}: {rc} held twice")
            inv[rc] = (lane, i)
    return inv


def mma_reference(a, b, c):
    """D = A*B + C on nested lists (row-major), the value-level semantics of mma.sync."""
    m, k, n = len(a), len(b), len(b[0])
    return [[c[r][q] + sum(a[r][x] * b[x][q] for x in range(k)) for q in range(n)] for r in range(m)]


# ---------------------------------------------------------------------------
# 3. ldmatrix / stmatrix (.m8n8, .b16)
# ---------------------------------------------------------------------------


def ldmatrix_row_addr_owner(lane: int, num: int):
    """Which (matrix, row) address lane ``lane`` supplies for .x1/.x2/.x4 (num=1/2/4).

    Returns None if the lane's address is ignored (sm_80+; on sm_75 and below
    every lane must still hold a valid address)."""
    if num not in (1, 2, 4) or not 0 <= lane < 32:
        raise ValueError("bad num/lane")
    return (lane // 8, lane % 8) if lane < 8 * num else None


def ldmatrix_dst(lane: int, reg: int, half: int, trans: bool = False) -> tuple[int, int, int]:
    """Element that lands in (lane, r[reg], half): -> (matrix, row, col).

    ``row`` indexes the 8 row addresses of matrix ``reg``; ``col`` is the 16-bit
    element within that 16-byte row (byte offset 2*col). half 0 = bits [15:0]."""
    if not (0 <= lane < 32 and 0 <= reg < 4 and half in (0, 1)):
        raise ValueError("bad lane/reg/half")
    g, t = lane >> 2, lane % 4
    if trans:
        return reg, 2 * t + half, g
    return reg, g, 2 * t + half


def ldmatrix_simulate(read16, lane_addrs, num: int, trans: bool = False):
    """Reference ldmatrix.sync.aligned.m8n8.x{num}{.trans}.b16.

    read16(addr) -> 16-bit value; lane_addrs[32] = per-lane address operand.
    Returns regs[lane][reg] = (lo16, hi16)."""
    rows = {}
    for lane in range(32):
        own = ldmatrix_row_addr_owner(lane, num)
        if own is not None:
            if lane_addrs[lane] % 16:
                raise ValueError("ldmatrix row address must be 16-byte aligned")
            rows[own] = lane_addrs[lane]
    out = []
    for lane in range(32):
        regs = []
        for reg in range(num):
            halves = []
            for half in (0, 1):
                mtx, r, col = ldmatrix_dst(lane, reg, half, trans)
                halves.append(read16(rows[(mtx, r)] + 2 * col))
            regs.append(tuple(halves))
        out.append(regs)
    return out


def stmatrix_simulate(write16, lane_addrs, regs, num: int, trans: bool = False) -> None:
    """Reference stmatrix.sync.aligned.m8n8.x{num}{.trans}.b16 (same map as ldmatrix)."""
    rows = {}
    for lane in range(32):
        own = ldmatrix_row_addr_owner(lane, num)
        if own is not None:
            rows[own] = lane_addrs[lane]
    for lane in range(32):
        for reg in range(num):
            for half in (0, 1):
                mtx, r, col = ldmatrix_dst(lane, reg, half, trans)
                write16(rows[(mtx, r)] + 2 * col, regs[lane][reg][half])


# ---------------------------------------------------------------------------
# 4. wgmma (sm_90a)
# ---------------------------------------------------------------------------


def _warp_lane(tid: int) -> tuple[int, int]:
    if not 0 <= tid < 128:
        raise ValueError(f"tid {tid} out of warpgroup range")
    return tid // 32, tid % 32


def wgmma_d(tid: int, i: int, n: int) -> tuple[int, int]:
    """Accumulator D of wgmma.mma_async.m64nNk16 (.f32: N/2 regs; .f16: N/4 f16x2): d_i -> (m, n)."""
    if n % 8 or not 8 <= n <= 256:
        raise ValueError("N must be a multiple of 8 in [8, 256]")
    _check(i, n // 2)
    w, lane = _warp_lane(tid)
    g, t = lane >> 2, lane % 4
    return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)


def wgmma_a_f16(tid: int, i: int) -> tuple[int, int]:
    """Register A (64x16, .f16/.bf16, 4 f16x2 regs) of wgmma m64nNk16: a_i -> (m, k)."""
    _check(i, 8)
    w, lane = _warp_lane(tid)
    g, t = lane >> 2, lane % 4
    return 16 * w + g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


#: swizzle bytes (0 = none) -> 2-bit code in descriptor bits [62,64)
WGMMA_SWIZZLE_CODE = {0: 0, 128: 1, 64: 2, 32: 3}


def _desc_encode(x: int) -> int:
    return (x & 0x3FFFF) >> 4


def wgmma_desc_encode(start_addr: int, lbo_bytes: int, sbo_bytes: int, swizzle: int, base_offset: int = 0) -> int:
    """64-bit matrix descriptor (PTX "Matrix Descriptor Format")."""
    if swizzle not in WGMMA_SWIZZLE_CODE or not 0 <= base_offset < 8:
        raise ValueError("bad swizzle/base_offset")
    return (
        _desc_encode(start_addr)
        | _desc_encode(lbo_bytes) << 16
        | _desc_encode(sbo_bytes) << 32
        | base_offset << 49
        | WGMMA_SWIZZLE_CODE[swizzle] << 62
    )


def wgmma_desc_decode(desc: int) -> dict:
    code = (desc >> 62) & 3
    return {
        "start_addr": (desc & 0x3FFF) << 4,
        "lbo_bytes": ((desc >> 16) & 0x3FFF) << 4,
        "sbo_bytes": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 7,
        "swizzle": {v: k for k, v in WGMMA_SWIZZLE_CODE.items()}[code],
    }


def wgmma_base_offset(pattern_start_addr: int) -> int:
    """Base-offset field when a swizzle pattern does not start on its repeat boundary."""
    return (pattern_start_addr >> 7) & 7


def cute_swizzle(offset: int, b: int, m: int, s: int) -> int:
    """CuTe Swizzle<B,M,S>: XOR bits [M, M+B) with bits [M+S, M+S+B)."""
    mask = ((1 << b) - 1) << (m + s)
    return offset ^ ((offset & mask) >> s)


def swizzle_bits(swizzle_bytes: int) -> int:
    """B of Swizzle<B,4,3> for a 0/32/64/128-byte swizzle mode."""
    return {0: 0, 16: 0, 32: 1, 64: 2, 128: 3}[swizzle_bytes]


def swizzle_byte_addr(addr: int, swizzle_bytes: int) -> int:
    """Physical shared-memory byte address for a 32/64/128B swizzle (Swizzle<B,4,3> on bytes).

    The 16-byte chunk index (addr bits [4,4+B)) is XORed with addr bits [7,7+B):
    32B: bit4^=bit7; 64B: bits[5:4]^=bits[8:7]; 128B: bits[6:4]^=bits[9:7]."""
    return cute_swizzle(addr, swizzle_bits(swizzle_bytes), 4, 3)


def wgmma_canonical_offset(major: str, swizzle: int, mn: int, k: int, elem_bits: int, lbo: int, sbo: int) -> int:
    """Unswizzled byte offset of operand element (mn, k) in the PTX canonical layout.

    major: "K" or "MN"; swizzle: 0 (no-swizzle/interleave), 32, 64, 128 bytes;
    lbo/sbo: leading/stride byte offsets in BYTES (as before >>4 encoding).
    Transcribes PTX Table "Canonical Layouts" (T = 128/elem_bits elements per 16 B):
      K,  none : ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
      K,  SWz  : ((8,m),(T,2k)) : ((S*T,SBO),(1,T))        S = swizzle/16
      MN, none : ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
      MN, SWz  : ((T,S,m),(8,k)) : ((1,T,LBO),(S*T,SBO))
    Within one instruction the K extent of a K-major swizzled operand must stay
    inside one swizzle row (2k*T elements <= S*T)."""
    if elem_bits not in (4, 8, 16, 32, 64):
        raise ValueError("elem_bits")
    tpe = 128 // elem_bits  # elements per 16 B
    eb = elem_bits / 8
    if major == "K":
        r, mi = mn % 8, mn // 8
        t, kk = k % tpe, k // tpe
        if swizzle == 0:
            return int((r * tpe + t) * eb) + mi * sbo + kk * lbo
        s = swizzle // 16
        if kk >= s:
            raise ValueError("K index leaves the swizzle row; advance the start address instead")
        return int((r * s * tpe + kk * tpe + t) * eb) + mi * sbo
    if major == "MN":
        kr, kk = k % 8, k // 8
        if swizzle == 0:
            t, mi = mn % tpe, mn // tpe
            return int((t + kr * tpe) * eb) + mi * sbo + kk * lbo
        s = swizzle // 16
        t, sc, mi = mn % tpe, (mn // tpe) % s, mn // (tpe * s)
        return int((t + sc * tpe + kr * s * tpe) * eb) + mi * lbo + kk * sbo
    raise ValueError("major must be 'K' or 'MN'")


def wgmma_smem_addr(start: int, major: str, swizzle: int, mn: int, k: int, elem_bits: int, lbo: int, sbo: int) -> int:
    """Physical address read by wgmma for element (mn, k), assuming the swizzle atoms
    are aligned to the pattern repeat (1024/512/256 B, i.e. base_offset = 0)."""
    a = start + wgmma_canonical_offset(major, swizzle, mn, k, elem_bits, lbo, sbo)
    return swizzle_byte_addr(a, swizzle) if swizzle else a


# ---------------------------------------------------------------------------
# 5. cp.async (sm_80)
# ---------------------------------------------------------------------------


def cp_async_bytes(src: bytes, cp_size: int, src_size: int | None = None, ignore_src: bool = False) -> bytes:
    """Bytes written to dst by one cp.async: first src_size bytes from src, rest zero."""
    if cp_size not in (4, 8, 16):
        raise ValueError("cp-size must be 4, 8 or 16")
    n = cp_size if src_size is None else src_size
    if n > cp_size:
        raise ValueError("src-size > cp-size is undefined behaviour")
    if ignore_src:
        n = 0
    return bytes(src[:n]) + bytes(cp_size - n)


@dataclass
class CpAsyncGroups:
    """Per-thread cp.async-group bookkeeping (commit_group / wait_group N / wait_all)."""

    pending_uncommitted: list = field(default_factory=list)
    groups: list = field(default_factory=list)  # oldest first; each a list of ops
    completed: int = 0  # number of oldest groups known complete

    def issue(self, op) -> None:
        self.pending_uncommitted.append(op)

    def commit_group(self) -> None:
        self.groups.append(self.pending_uncommitted)  # may be empty (trivially complete)
        self.pending_uncommitted = []

    def wait_group(self, n: int) -> list:
        """Return the ops that must now be complete: every group except the n most recent."""
        upto = max(len(self.groups) - n, self.completed)
        done = [op for g in self.groups[self.completed:upto] for op in g]
        self.completed = upto
        return done

    def wait_all(self) -> list:
        self.commit_group()
        return self.wait_group(0)


# ---------------------------------------------------------------------------
# 6. TMA (cp.async.bulk.tensor, tile mode)
# ---------------------------------------------------------------------------

#: CUtensorMapSwizzle enum value -> swizzle bytes (0 = none)
TMA_SWIZZLE_ENUM = {0: 0, 1: 32, 2: 64, 3: 128}


def tma_box_counts(box_dim, element_strides=None) -> list[int]:
    """Elements actually moved per dimension: ceil(boxDim[i]/elementStrides[i]) (dim 0 stride ignored)."""
    es = list(element_strides or [1] * len(box_dim))
    es[0] = 1  # interleave NONE: elementStrides[0] is ignored
    return [ceil(b / e) for b, e in zip(box_dim, es)]


def tma_box_smem_offset(idx, box_dim, elem_bytes: int, element_strides=None) -> int:
    """Unswizzled byte offset in smem of box element idx (idx[0] = innermost dim).

    The box is stored densely, dimension 0 fastest (PTX: shared memory is linear)."""
    counts = tma_box_counts(box_dim, element_strides)
    off, mul = 0, 1
    for i, c in zip(idx, counts):
        if not 0 <= i < c:
            raise ValueError("index outside the box")
        off += i * mul
        mul *= c
    return off * elem_bytes


def tma_smem_addr(dst: int, idx, box_dim, elem_bytes: int, swizzle_bytes: int, element_strides=None) -> int:
    """Physical smem address of box element idx for a load into dst (absolute-address swizzle)."""
    if swizzle_bytes and box_dim[0] * elem_bytes != swizzle_bytes:
        raise ValueError("only inner box bytes == swizzle span is modelled (see gpu-isa-facts.md 6)")
    a = dst + tma_box_smem_offset(idx, box_dim, elem_bytes, element_strides)
    return swizzle_byte_addr(a, swizzle_bytes) if swizzle_bytes else a


def tma_load_tile(read_elem, global_dim, coords, box_dim, elem_bytes: int, swizzle_bytes: int = 0,
                  element_strides=None, oob_value=0, dst: int = 0):
    """Reference global->shared tile-mode TMA load.

    read_elem(gidx) returns the element at global index tuple gidx (gidx[0] innermost).
    Returns ({smem_addr: value}, complete_tx_bytes). Out-of-bound elements get
    oob_value (0 for FLOAT_OOB_FILL_NONE; a NaN for NAN_REQUEST_ZERO_FMA)."""
    counts = tma_box_counts(box_dim, element_strides)
    es = list(element_strides or [1] * len(box_dim))
    es[0] = 1
    out = {}

    def rec(d, idx):
        if d < 0:
            g = tuple(c + i * s for c, i, s in zip(coords, idx, es))
            inb = all(0 <= x < n for x, n in zip(g, global_dim))
            out[tma_smem_addr(dst, idx, box_dim, elem_bytes, swizzle_bytes, element_strides)] = (
                read_elem(g) if inb else oob_value)
            return
        for i in range(counts[d]):
            idx[d] = i
            rec(d - 1, idx)

    rec(len(counts) - 1, [0] * len(counts))
    return out, prod(counts) * elem_bytes


# ---------------------------------------------------------------------------
# 7. mbarrier
# ---------------------------------------------------------------------------

_MAX = (1 << 20) - 1


@dataclass
class MBarrier:
    """State machine of PTX mbarrier (phase, pending arrivals, expected arrivals, tx-count)."""

    phase: int = 0
    pending: int = 0
    expected: int = 0
    tx: int = 0

    @classmethod
    def init(cls, count: int) -> MBarrier:
        if not 1 <= count <= _MAX:
            raise ValueError("count must be in [1, 2^20-1]")
        return cls(phase=0, pending=count, expected=count, tx=0)

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected

    def arrive(self, count: int = 1) -> int:
        """arrive-on; returns the 'state' (phase before the arrival)."""
        state = self.phase
        if count < 1 or count > self.pending:
            raise ValueError("arrive count exceeds pending arrivals (undefined)")
        self.pending -= count
        self._maybe_complete()
        return state

    def expect_tx(self, n: int) -> None:
        self.tx += n
        if not -_MAX <= self.tx <= _MAX:
            raise ValueError("tx-count out of range")

    def complete_tx(self, n: int) -> None:
        self.tx -= n
        if not -_MAX <= self.tx <= _MAX:
            raise ValueError("tx-count out of range")
        self._maybe_complete()

    def arrive_expect_tx(self, n: int) -> int:
        """mbarrier.arrive.expect_tx: expect-tx(n) first, then arrive-on with count 1."""
        self.expect_tx(n)
        return self.arrive(1)

    def test_wait_parity(self, parity: int) -> bool:
        """True iff the phase with this parity has completed (valid for current/previous phase)."""
        return (parity & 1) != (self.phase & 1)

    def test_wait_state(self, state: int) -> bool:
        return state < self.phase


# ---------------------------------------------------------------------------
# 8. Warp shuffles and votes
# ---------------------------------------------------------------------------


def shfl_c_operand(mode: str, width: int = 32) -> int:
    """c operand CUDA's __shfl*_sync emit: ((32-width)<<8) | clamp, clamp=0 for up else 0x1f."""
    if width not in (1, 2, 4, 8, 16, 32):
        raise ValueError("width must be a power of two <= 32")
    return ((32 - width) << 8) | (0 if mode == "up" else 0x1F)


def shfl_sync(values, mode: str, b, c, membermask: int = 0xFFFFFFFF):
    """PTX shfl.sync.{up,down,bfly,idx}.b32 pseudocode over one warp.

    values[32]; b and c may be scalars or per-lane lists. Returns (d[32], p[32]).
    Lanes not in membermask get None (their behaviour is undefined)."""
    out, pred = [None] * 32, [None] * 32
    for lane in range(32):
        if not (membermask >> lane) & 1:
            continue
        bl = b[lane] if isinstance(b, (list, tuple)) else b
        cl = c[lane] if isinstance(c, (list, tuple)) else c
        bval, cval, segmask = bl & 0x1F, cl & 0x1F, (cl >> 8) & 0x1F
        max_lane = (lane & segmask) | (cval & ~segmask & 0x1F)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bval
            pval = j >= max_lane
        elif mode == "down":
            j = lane + bval
            pval = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            pval = j <= max_lane
        elif mode == "idx":
            j = min_lane | (bval & ~segmask & 0x1F)
            pval = j <= max_lane
        else:
            raise ValueError(mode)
        if not pval:
            j = lane
        if not (membermask >> j) & 1:
            raise ValueError(f"lane {lane} reads non-member lane {j} (undefined)")
        out[lane], pred[lane] = values[j], pval
    return out, pred


def vote_ballot(preds, membermask: int = 0xFFFFFFFF) -> int:
    return sum(1 << l for l in range(32) if (membermask >> l) & 1 and preds[l])


def vote_all(preds, membermask: int = 0xFFFFFFFF) -> bool:
    return all(preds[l] for l in range(32) if (membermask >> l) & 1)


def vote_any(preds, membermask: int = 0xFFFFFFFF) -> bool:
    return any(preds[l] for l in range(32) if (membermask >> l) & 1)


def vote_uni(preds, membermask: int = 0xFFFFFFFF) -> bool:
    return len({bool(preds[l]) for l in range(32) if (membermask >> l) & 1}) <= 1


# ---------------------------------------------------------------------------
# 9. AMD MFMA (wave64, CDNA2 gfx90a / CDNA3 gfx942)
# ---------------------------------------------------------------------------


def _lane64(lane: int) -> None:
    if not 0 <= lane < 64:
        raise ValueError("lane out of wave64 range")


def mfma_16x16x16_f16_a(lane: int, v: int) -> tuple[int, int]:
    """A[i][k] of v_mfma_f32_16x16x16_f16: element v (0..3; VGPR v//2, half v%2) -> (i, k)."""
    _lane64(lane)
    _check(v, 4)
    return lane % 16, 4 * (lane // 16) + v


def mfma_16x16x16_f16_b(lane: int, v: int) -> tuple[int, int]:
    """B[k][j]: element v -> (k, j)."""
    _lane64(lane)
    _check(v, 4)
    return 4 * (lane // 16) + v, lane % 16


def mfma_16x16x16_f32_d(lane: int, g: int) -> tuple[int, int]:
    """C/D[i][j] (f32, 4 VGPRs): VGPR g -> (i, j)."""
    _lane64(lane)
    _check(g, 4)
    return 4 * (lane // 16) + g, lane % 16


def mfma_32x32x8_f16_a(lane: int, v: int) -> tuple[int, int]:
    """A[i][k] of v_mfma_f32_32x32x8_f16 (gfx90a name v_mfma_f32_32x32x8f16)."""
    _lane64(lane)
    _check(v, 4)
    return lane % 32, 4 * (lane // 32) + v


def mfma_32x32x8_f16_b(lane: int, v: int) -> tuple[int, int]:
    _lane64(lane)
    _check(v, 4)
    return 4 * (lane // 32) + v, lane % 32


def mfma_32x32_f32_d(lane: int, g: int) -> tuple[int, int]:
    """C/D of single-block 32x32 MFMAs (16 VGPRs): 4 groups of 4 VGPRs, each group covers 8 rows."""
    _lane64(lane)
    _check(g, 16)
    return 8 * (g // 4) + 4 * (lane // 32) + g % 4, lane % 32


# ---------------------------------------------------------------------------
# 10. Shared-memory / LDS banks
# ---------------------------------------------------------------------------


def smem_bank(addr: int) -> int:
    """NVIDIA shared memory and AMD CDNA LDS: 32 banks x 4 bytes."""
    return (addr >> 2) & 31


def bank_conflict_ways(addrs, access_bytes: int = 4) -> int:
    """Max number of distinct 4-byte words any bank must serve for one request
    (same word in the same bank counts once: broadcast)."""
    words: dict[int, set] = {}
    for a in addrs:
        for w in range(a >> 2, (a + access_bytes + 3) >> 2):
            words.setdefault(w & 31, set()).add(w)
    return max((len(s) for s in words.values()), default=0)


def ldmatrix_matrix_conflict_free(row_addrs) -> bool:
    """Derived rule: one 8x8 b16 matrix (8 rows x 16 B) touches each of the 32 banks
    exactly once iff its 8 row addresses are 16B-aligned with distinct (addr>>4)&7."""
    return all(a % 16 == 0 for a in row_addrs) and len({(a >> 4) & 7 for a in row_addrs}) == 8
