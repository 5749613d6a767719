"""More of TileLang's ``T.*`` names: wide loads/stores, persistent loops, reducers, bitwise
reductions, split-phase copies, warp collectives and wgmma fences. Each kernel runs on the
CPU (or the CUDA emulator for thread-level names) and is checked against numpy or a
hand-computed case."""

from __future__ import annotations

import numpy as np
import pytest

import tile.lang as tilelang
import tile.lang.language as T
from tile.ir.errors import TargetError
from tile.lang.errors import TileTypeError
from tile.testsupport.markers import needs_backend

RNG = np.random.default_rng(19)


@T.prim_func
def _wide(
    X: T.Tensor((64,), "float16"),
    Y: T.Tensor((64,), "float16"),
    Z: T.Tensor((64,), "float32"),
    L: T.Tensor((16,), "uint32"),
):
    with T.Kernel(4, threads=16) as bx:
        S = T.alloc_shared((16,), "float16")
        for i in T.serial(2):
            T.sts128(S[i * 8 : i * 8 + 8], T.ldg128(X[bx * 16 + i * 8 : bx * 16 + i * 8 + 8]))
        for i in T.serial(4):  # the tile's four 4-element quarters, in reverse; the last one skipped
            T.stg64(Y[bx * 16 + i * 4 : bx * 16 + i * 4 + 4], T.lds64(S[(3 - i) * 4]), pred=i < 3)
        for i in T.serial(2):
            v = T.ldg64(X[bx * 16 + i * 8 : bx * 16 + i * 8 + 4])
            T.stg32(L[bx * 4 + i * 2], T.extract_lane(v, 1))
            T.stg32(L[bx * 4 + i * 2 + 1], T.ldg32(X[bx * 16 + i * 8]), pred=bx < 3)
        for i in T.serial(16):
            T.atomic_store(Z[bx * 16 + i], T.cast(T.atomic_load(X[bx * 16 + i]), "float32") * 2.0)


def test_wide_loads_and_stores_move_the_bits_on_the_cpu():
    x = RNG.standard_normal(64).astype("float16")
    y = np.full(64, 7, "float16")
    lanes = np.zeros(16, "uint32")
    kernel = tilelang.compile(_wide, out_idx=[2], target="cpu")
    z = kernel(x, y, lanes)
    quarters = x.reshape(4, 4, 4)
    expected = np.full((4, 4, 4), 7, "float16")
    expected[:, :3] = quarters[:, ::-1][:, :3]
    np.testing.assert_array_equal(y.reshape(4, 4, 4), expected)
    words = x.view("uint32").reshape(4, 2, 4)  # per block, 8-element (4-word) halves
    np.testing.assert_array_equal(lanes.reshape(4, 2, 2)[:, :, 0], words[:, :, 1])
    np.testing.assert_array_equal(lanes.reshape(4, 2, 2)[:3, :, 1], words[:3, :, 0])
    assert (lanes.reshape(4, 2, 2)[3, :, 1] == 0).all()  # pred=bx < 3: not stored
    np.testing.assert_array_equal(z, x.astype("float32") * 2)
    with pytest.raises(TileTypeError, match="stores 128 bits"):

        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                T.stg128(A[0:4], A[0])

    from tvm import tirx

    vector = tirx.Var("v", "float16x2")
    assert str(T.extract_lane(vector, tirx.IntImm("int32", 1)).ty) == "float16"
    for bad_vector, bad_lane in (
        (1, 0),
        (tirx.Var("s", "float16"), 0),
        (vector, 2),
        (vector, tirx.Var("i", "int32")),
    ):
        with pytest.raises(TileTypeError, match=r"T\.extract_lane"):
            T.extract_lane(bad_vector, bad_lane)


_TM, _TN, _W = 5, 3, 4


@T.prim_func
def _persistent(Out: T.Tensor((_TM, _TN), "int32"), Out2: T.Tensor((_TM, _TN), "int32")):
    with T.Kernel(_W, threads=32) as bid:
        for bx, by in T.Persistent([_TM, _TN], _W, bid, 2):
            Out[bx, by] = bid * 100 + bx * 10 + by
        sched = T.PersistentTileScheduler(_TM, _TN, swizzle_size=2)
        sched.init(bid)
        while sched.valid():
            Out2[sched.m_idx, sched.n_idx] = bid * 1000 + sched.current_iter
            sched.next_tile()


def test_persistent_loops_visit_every_tile_once():
    out, out2 = tilelang.compile(_persistent, out_idx=[0, 1], target="cpu")()
    m, n = np.meshgrid(np.arange(_TM), np.arange(_TN), indexing="ij")
    np.testing.assert_array_equal(out % 100, m * 10 + n)  # each tile written with its own coordinates
    owners = out // 100
    assert sorted(np.bincount(owners.ravel(), minlength=_W)) == [3, 4, 4, 4]  # 15 tiles over 4 blocks
    # the scheduler: tile t goes to worker t % 4 as its (t // 4)-th; M fastest, panels of 2 along N
    expected = np.zeros((_TM, _TN), "int64")
    for t in range(_TM * _TN):
        panel, within = divmod(t, _TM * 2)
        width = min(2, _TN - panel * 2)
        mm, nn = within // width, panel * 2 + within % width
        expected[mm, nn] = (t % _W) * 1000 + t // _W
    np.testing.assert_array_equal(out2, expected)


@T.prim_func
def _bitwise(A: T.Tensor((4, 16), "int32"), Out: T.Tensor((3, 4), "int32")):
    with T.Kernel(1, threads=32):
        F = T.alloc_fragment((4, 16), "int32")
        R = T.alloc_fragment((4,), "int32")
        T.copy(A, F)
        T.reduce_bitand(F, R, dim=1)
        T.copy(R, Out[0, :])
        T.reduce_bitor(F, R, dim=1)
        T.copy(R, Out[1, :])
        T.reduce_bitxor(F, R, dim=1)
        T.copy(R, Out[2, :])


def test_bitwise_reductions_match_numpy():
    a = RNG.integers(0, 1 << 20, (4, 16)).astype("int32") | 0x11
    out = tilelang.compile(_bitwise, out_idx=[1], target="cpu")(a)
    ref = [np.bitwise_and.reduce(a, 1), np.bitwise_or.reduce(a, 1), np.bitwise_xor.reduce(a, 1)]
    np.testing.assert_array_equal(out, np.stack(ref))
    with pytest.raises(TileTypeError, match="no bitwise operations"):

        @T.prim_func
        def bad(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.reduce_bitor(A, B, dim=1)


@T.prim_func
def _reducers_and_copies(
    A: T.Tensor((64, 32), "float32"),
    Mask: T.Tensor((4,), "bool"),
    Acc: T.Tensor((8,), "float32"),
    Sum: T.Tensor((64,), "float32"),
    Max: T.Tensor((64,), "float32"),
    Tr: T.Tensor((32, 64), "float32"),
    Flags: T.Tensor((5,), "int32"),
):
    with T.Kernel(1, threads=128):
        R = T.alloc_reducer((64,), "float32", replication="all")
        M = T.alloc_reducer(64, "float32", op="max")
        S = T.alloc_shared((64, 32), "float32")
        St = T.alloc_shared((32, 64), "float32")
        F = T.alloc_fragment((64, 32), "float32")
        T.async_copy(A, S)
        T.copy(S, F)
        T.clear(R)
        T.reducer_init(M)
        for i, j in T.Parallel(64, 32):
            R[i] += F[i, j]
            T.reducer_update(M[i], F[i, j])
        T.finalize_reducer(R)
        T.finalize_reducer(M, Max)
        T.copy(R, Sum)
        T.transpose(S, St)
        T.tma_copy(St, Tr)
        L = T.alloc_shared((4,), "int32")
        for i in T.Parallel(4):
            L[i] = i
        Flags[0] = T.cast(T.all_of(L), "int32")
        Flags[1] = T.cast(T.any_of(L), "int32")
        Flags[2] = T.cast(T.all_of(L[1:4]), "int32")
        Flags[3] = T.cast(T.any_of(L[0:1]), "int32")
        Shared_mask = T.alloc_shared((4,), "bool")
        T.copy(Mask, Shared_mask)
        Flags[4] = T.cast(T.any_of(Shared_mask), "int32") + 2 * T.cast(T.all_of(Mask), "int32")
        for i in T.Parallel(2):
            T.atomic_addx2(Acc[i * 2], S[i, 0:2])
        for i in T.Parallel(1):
            T.atomic_addx4(Acc[4:8], S[2 + i, 4])


@pytest.fixture(params=["cpu", pytest.param("emu", marks=needs_backend("cuda"))])
def cpu_or_emulator(request, monkeypatch):
    """The CPU backend, or CUDA sm_80 on the emulator (threads really contend there)."""
    if request.param == "cpu":
        return "cpu"
    monkeypatch.setenv("TILE_DEVICE", "emu")
    return {"kind": "cuda", "arch": "sm_80"}


def test_reducers_copies_and_predicates(cpu_or_emulator):
    target = cpu_or_emulator
    a = RNG.standard_normal((64, 32)).astype("float32")
    acc = np.ones(8, "float32")
    kernel = tilelang.compile(_reducers_and_copies, out_idx=[3, 4, 5, 6], target=target)
    total, most, tr, flags = kernel(a, np.arange(4) > 1, acc)
    np.testing.assert_allclose(total, a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(most, a.max(1))
    np.testing.assert_array_equal(tr, a.T)
    np.testing.assert_array_equal(flags, [0, 1, 1, 0, 1])
    np.testing.assert_allclose(acc, 1 + np.concatenate([a[0, :2], a[1, :2], a[2, 4:8]]), rtol=1e-6)


def test_reducer_ops_and_misuse_are_typed_errors():
    with pytest.raises(TileTypeError, match="combine by sum"):

        @T.prim_func
        def nand_reducer(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32):
                T.alloc_reducer((4,), "int32", op="nand")

    with pytest.raises(TileTypeError, match="from T\\.alloc_reducer"):

        @T.prim_func
        def not_a_reducer(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((4,), "float32")
                T.finalize_reducer(S)


@T.prim_func
def _gemm_and_annotations(
    A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")
):
    with T.Kernel(1, threads=128):
        T.annotate_ws_schedule(
            T.WSSchedule(
                num_warps=4,
                roles=[T.WSRole("load", warps_lo=0, warps_hi=1), T.WSRole("math", warps_lo=1, warps_hi=4)],
                pipelines=[T.WSPipeline("smem", [A], depth=2)],
                scopes=[T.WSScope(T.WSScope.ROOT, {"load": ["copy_A", T.WSSync.producer_commit("smem")]})],
            )
        )
        T.annotate_safe_value({A: 0})
        T.annotate_restrict_buffers(A, B)
        As = T.alloc_shared((32, 32), "float32")
        Bs = T.alloc_shared((32, 32), "float32")
        Cf = T.alloc_fragment((32, 32), "float32")
        with T.ws_op("loads"):
            T.copy(A, As, annotations={T.WSID: "copy_A"})
            T.copy(B, Bs)
        T.clear(Cf)
        T.wgmma_gemm(As, Bs, Cf, transpose_B=True)
        T.copy(Cf, C)


def test_wgmma_gemm_and_schedule_annotations_compute_the_product():
    a, b = RNG.standard_normal((2, 32, 32)).astype("float32")
    c = tilelang.compile(_gemm_and_annotations, out_idx=[2], target="cpu")(a, b)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)
    assert T.WSSync.consumer_wait("p", 1) == T.WSSync(T.WSSyncKind.CONSUMER_WAIT, "p", 1)
    with pytest.raises(TileTypeError, match="not declared"):
        T.WSSchedule(1, [T.WSRole("a", warps_lo=0, warps_hi=1)], [], [T.WSScope("s", {"b": []})])
    with pytest.raises(TileTypeError, match="empty"):
        T.WSRole("a", warps_lo=2, warps_hi=2)


@T.prim_func
def _warp_collectives(
    A: T.Tensor((64,), "float32"),
    Ints: T.Tensor((64,), "int32"),
    B: T.Tensor((64,), "float32"),
    C: T.Tensor((64, 7), "int32"),
):
    with T.Kernel(1, threads=128):
        t = T.get_thread_binding(0)
        tx = t % 64
        v = A[tx]
        iv = Ints[tx]
        s = T.warp_reduce_sum(v) + T.warp_reduce_max(v) * 1000.0 + T.warp_reduce_min(v) * 100000.0
        c0 = T.warp_reduce_bitand(iv)
        c1 = T.warp_reduce_bitor(iv)
        c2 = T.cast(T.ballot(iv % 2 == 1) % T.uint64(65536), "int32")
        c3 = T.cast(T.match_any_sync(iv % 4), "int32")
        c4 = T.cast(T.match_all_sync(iv * 0 + 3) == T.uint32(0xFFFFFFFF), "int32")
        c5 = T.syncthreads_count(iv % 3 == 0)
        c6 = T.syncthreads_and(iv >= 0) + 10 * T.syncthreads_or(iv > 1000)
        T.warpgroup_arrive()
        T.warpgroup_commit_batch()
        T.warpgroup_wait(0)
        T.wait_wgmma(0)
        T.tma_store_arrive()
        T.tma_store_wait()
        if t < 64:
            B[tx] = s
            C[tx, 0] = c0
            C[tx, 1] = c1
            C[tx, 2] = c2
            C[tx, 3] = c3
            C[tx, 4] = c4
            C[tx, 5] = c5
            C[tx, 6] = c6


@needs_backend("cuda")
def test_warp_and_block_collectives_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_warp_collectives, out_idx=[2, 3], target={"kind": "cuda", "arch": "sm_90a"})
    a = RNG.integers(-50, 50, 64).astype("float32")
    i = RNG.integers(0, 1000, 64).astype("int32")
    b, c = kernel(a, i)
    w, iw = a.reshape(2, 32), i.reshape(2, 32)
    np.testing.assert_array_equal(
        b.reshape(2, 32), np.repeat((w.sum(1) + w.max(1) * 1000 + w.min(1) * 100000)[:, None], 32, 1)
    )
    np.testing.assert_array_equal(
        c[:, 0].reshape(2, 32), np.repeat(np.bitwise_and.reduce(iw, 1)[:, None], 32, 1)
    )
    np.testing.assert_array_equal(
        c[:, 1].reshape(2, 32), np.repeat(np.bitwise_or.reduce(iw, 1)[:, None], 32, 1)
    )
    ballot = [sum(1 << lane for lane in range(16) if iw[g, lane] % 2) for g in range(2)]
    np.testing.assert_array_equal(c[:, 2].reshape(2, 32), np.repeat(np.array(ballot)[:, None], 32, 1))
    same = [
        [sum(1 << m for m in range(32) if iw[g, m] % 4 == iw[g, n] % 4) for n in range(32)] for g in range(2)
    ]
    np.testing.assert_array_equal(
        c[:, 3].reshape(2, 32), np.array(same, "int64").astype("uint32").view("int32")
    )
    assert (c[:, 4] == 1).all()
    assert (c[:, 5] == 2 * (i % 3 == 0).sum()).all()  # 128 threads read the 64 values twice
    assert (c[:, 6] == 1).all()


@T.prim_func
def _barrier_family(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=16):
        S = T.alloc_shared((64,), "float32", scope="shared")
        bars = T.alloc_shared((1,), "uint64", scope="shared")
        tx = T.get_thread_binding(0)
        if tx == 0:
            T.ptx_init_barrier_thread_count(bars[0], 16)
            T.ptx_fence_barrier_init()
        T.sync_threads()
        T.ptx_cp_async(T.access_ptr(S[tx * 4], "w"), T.access_ptr(A[tx * 4], "r"), 4)
        T.ptx_commit_group()
        T.cp_async_barrier_noinc(bars[0])
        T.mbarrier_wait_parity(bars[0], 0)
        T.ptx_arrive_barrier(bars[0])
        T.mbarrier_wait_parity(bars[0], 1)
        for i in T.serial(4):
            B[tx * 4 + i] = S[63 - tx * 4 - i]


@needs_backend("cuda")
def test_cp_async_completes_on_an_mbarrier_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_barrier_family, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    a = np.arange(64, dtype="float32")
    np.testing.assert_array_equal(kernel(a), a[::-1])


def _philox(counter, key):
    """Philox4x32-10 written from its paper (Salmon et al., SC 2011), in Python integers."""
    c, k = list(counter), list(key)
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [
            ((p1 >> 32) ^ c[1] ^ k[0]) & 0xFFFFFFFF,
            p1 & 0xFFFFFFFF,
            ((p0 >> 32) ^ c[3] ^ k[1]) & 0xFFFFFFFF,
            p0 & 0xFFFFFFFF,
        ]
        k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return c


@T.prim_func
def _random(A: T.Tensor((4, 8), "uint32"), F: T.Tensor((4, 8), "float32"), N: T.Tensor((4, 8), "float64")):
    with T.Kernel(4, threads=1) as bx:
        T.rng_init(42, 3, bx * 100, generator="curandStatePhilox4_32_10_t")
        for i in T.serial(8):
            A[bx, i] = T.rng_rand()
        for i in T.Parallel(8):  # iteration i draws what a serial loop's i-th draw would
            F[bx, i] = T.rng_rand_float()
        for i in T.serial(8):
            N[bx, i] = T.rng_rand_float(bit=64, dist="normal")


def test_random_numbers_are_philox4x32_10():
    assert [hex(w) for w in _philox([0, 0, 0, 0], [0, 0])] == [
        "0x6627e8d5",
        "0xe169c58d",
        "0xbc57ac4c",
        "0x9b00dbd8",
    ]
    a, f, n = tilelang.compile(_random, out_idx=[0, 1, 2], target="cpu")()
    blocks = [[_philox([b * 100 + i, 0, 3, 0], [42, 0]) for i in range(24)] for b in range(4)]
    np.testing.assert_array_equal(a, [[w[0] for w in blk[:8]] for blk in blocks])
    np.testing.assert_array_equal(f, [[(w[0] >> 8) * 2.0**-24 for w in blk[8:16]] for blk in blocks])

    def uniform53(hi, lo):
        return (((hi >> 5) << 26) + (lo >> 6)) * 2.0**-53

    normal = [
        [
            np.sqrt(-2 * np.log(1 - uniform53(w[0], w[1]))) * np.cos(2 * np.pi * uniform53(w[2], w[3]))
            for w in blk[16:]
        ]
        for blk in blocks
    ]
    np.testing.assert_allclose(n, normal, rtol=1e-12, atol=1e-12)
    with pytest.raises(TileTypeError, match="bit is 32 or 64"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.rng_init(0)
                A[0] = T.rng_rand_float(bit=16)


@T.prim_func
def _bit_atomics(A: T.Tensor((4,), "int32"), Old: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding(0)
        T.atomic_or(A[0], T.shift_left(1, tx % 31))
        T.atomic_and(A[1], T.bitwise_not(T.shift_left(1, tx % 31)))
        T.atomic_xor(A[2], tx)
        Old[tx] = T.atomic_or(A[3], 1, return_prev=True)


@needs_backend("cuda")
def test_bitwise_atomics_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    a = np.array([0, -1, 0, 0], "int32")
    old = tilelang.compile(_bit_atomics, out_idx=[1], target={"kind": "cuda", "arch": "sm_80"})(a)
    assert (
        a[0] == (1 << 31) - 1
        and a[1] == -1 - ((1 << 31) - 1)
        and a[2] == np.bitwise_xor.reduce(np.arange(64))
    )
    assert a[3] == 1 and sorted(old) == [0] + [1] * 63  # one thread saw 0 before its OR


@T.prim_func
def _configured(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=16):
        T.annotate_pass_configs(
            {tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True, "tl.disable_warp_specialized": 1}
        )
        for i in T.Parallel(16):
            B[i] = A[i] + 1.0


def test_annotated_pass_configs_reach_the_target():
    kernel = tilelang.compile(_configured, out_idx=[-1], target="cpu")
    assert kernel.target.option("tl.disable_tma_lower") == "1"
    assert kernel.target.option("tl.disable_warp_specialized") == "1"
    np.testing.assert_array_equal(kernel(np.arange(16, dtype="float32")), np.arange(16) + 1)
    with pytest.raises(TargetError, match="unknown pass config"):

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.annotate_pass_configs({"tl.nope": True})


@T.prim_func
def _running_max(
    A: T.Tensor((8, 16), "float32"), B: T.Tensor((8, 16), "float32"), C: T.Tensor((16,), "float32")
):
    with T.Kernel(1, threads=32):
        S = T.alloc_shared((8, 16), "float32")
        R = T.alloc_shared((8, 16), "float32")
        V = T.alloc_shared((16,), "float32")
        T.copy(A, S)
        T.cummax(S, R, dim=1)
        T.copy(R, B)
        T.copy(A[0, :], V)
        T.cummax(V, reverse=True)
        T.copy(V, C)


def test_cummax_matches_numpy(cpu_or_emulator):
    target = cpu_or_emulator
    a = RNG.standard_normal((8, 16)).astype("float32")
    b, c = tilelang.compile(_running_max, out_idx=[1, 2], target=target)(a)
    np.testing.assert_array_equal(b, np.maximum.accumulate(a, axis=1))
    np.testing.assert_array_equal(c, np.maximum.accumulate(a[0, ::-1])[::-1])


@T.prim_func
def _named_barriers(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=96):
        S = T.alloc_shared((32,), "float32", scope="shared")
        tx = T.get_thread_binding(0)
        if tx >= 64:  # producer warp: fill S, signal barrier 1, go on
            S[tx - 64] = A[tx - 64] * 3.0
            T.named_barrier_arrive(1, 64)
        if tx < 32:  # consumer warp waits at barrier 1 for its 32 + the producer's 32 threads
            T.sync_threads(1, 64)
            B[tx] = S[31 - tx]


@needs_backend("cuda")
def test_named_barrier_arrive_releases_the_waiting_warp_on_the_emulator(monkeypatch):
    monkeypatch.setenv("TILE_DEVICE", "emu")
    kernel = tilelang.compile(_named_barriers, out_idx=[-1], target={"kind": "cuda", "arch": "sm_90a"})
    a = np.arange(32, dtype="float32")
    np.testing.assert_array_equal(kernel(a), 3 * a[::-1])
    with pytest.raises(TileTypeError, match="needs the number of threads"):
        T.sync_threads(1)


@T.prim_func
def _let_bound(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=1):
        for i in T.serial(8):
            off = T.int32()
            T.let(off, 7 - i)
            B[i] = A[off]


def test_let_binds_a_declared_variable():
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(tilelang.compile(_let_bound, out_idx=[1], target="cpu")(a), a[::-1])
    with pytest.raises(TileTypeError, match="binds a variable"):
        T.let(3, 4)


@needs_backend("cuda")
def test_warp_collectives_of_python_numbers(monkeypatch):
    # T.match_all_sync(7) and T.warp_reduce_sum(1.5) (TileLang's warp_vote tests): the number
    # is every lane's value; it stopped the parse ("'int' object has no attribute 'ty'")
    @T.prim_func
    def kernel(C: T.Tensor((32, 3), "int32"), F: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            C[tx, 0] = T.cast(T.match_all_sync(7), "int32")
            C[tx, 1] = T.cast(T.match_any_sync(3), "int32")
            C[tx, 2] = T.cast(T.shfl_sync(5, 0), "int32")
            F[tx] = T.warp_reduce_sum(1.5)

    monkeypatch.setenv("TILE_DEVICE", "emu")
    c, f = tilelang.compile(kernel, out_idx=[0, 1], target={"kind": "cuda", "arch": "sm_80"})()
    c, f = np.asarray(c), np.asarray(f)
    assert (c[:, 0] == -1).all() and (c[:, 1] == -1).all() and (c[:, 2] == 5).all()  # the full mask
    assert (f == 48.0).all()


def test_submodules_are_attributes_after_import_tilelang_alone():
    # TileLang's `import tilelang` imports transform, tools, profiler, ... so programs write
    # tilelang.transform.PassConfigKey.X without importing tilelang.transform themselves
    import subprocess
    import sys

    program = (
        "import tile.lang as tilelang\n"
        "print(tilelang.transform.PassConfigKey.TL_DISABLE_TMA_LOWER.value)\n"
        "print(tilelang.profiler.do_bench.__name__, tilelang.tools.plot_layout.__name__)\n"
        "print(type(tilelang.env).__name__)\n"
        "try:\n"
        "    tilelang.no_such_module\n"
        "except AttributeError as e:\n"
        "    print('AttributeError', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "tl.disable_tma_lower",
        "do_bench plot_layout",
        "module",
        "AttributeError module 'tile.lang' has no attribute 'no_such_module'",
    ]
