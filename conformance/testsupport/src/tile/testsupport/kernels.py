"""Test kernels that the tests of several packages build alike (tile.ir's, tile.lang's and
the backends'). tile.lang and tile.ir are imported only when a kernel is built, so the tests
that use this package without them (tile-layout's) never pull them in."""

from __future__ import annotations

from typing import Any


def shared_copy_module(n: int, src_dtype: str = "float32", dst_dtype: str = "float32") -> Any:
    """An IR module built by hand (no tile.lang): kernel ``k`` copies ``A`` (``n`` of
    ``src_dtype``) into ``B`` (``n`` of ``dst_dtype``) through a 32-element shared tile ``S``
    with two ``tile.copy`` ops, one block ``bx`` per 32 elements (the last one partial when 32
    does not divide ``n``). For pass and backend tests that start below the language."""
    import tvm  # type: ignore[import-untyped]
    from tvm import ir, tirx

    from tile.ir.ops import Copy

    A = tirx.decl_buffer((n,), src_dtype, name="A")
    B = tirx.decl_buffer((n,), dst_dtype, name="B")
    S = tirx.decl_buffer((32,), dst_dtype, name="S", scope="shared")
    bx = tirx.Var("bx", "int32")
    body = tirx.SeqStmt(
        [
            tirx.AllocBuffer(S),
            tirx.Evaluate(Copy.build(tirx.BufferLoad(A, [bx * 32]), S).encode()),
            tirx.Evaluate(Copy.build(S, tirx.BufferLoad(B, [bx * 32])).encode()),
        ]
    )
    grid = (n + 31) // 32
    body = tirx.AttrStmt(tirx.IterVar(ir.Range(0, grid), bx, 1, "blockIdx.x"), "thread_extent", grid, body)
    return tvm.IRModule({"k": tirx.PrimFunc([A, B], body).with_attr("global_symbol", "k")})


def staged_add(
    M: int, N: int, block_M: int, block_N: int, dtype: str = "float32", out_dtype: str | None = None
) -> Any:
    """``C = A + B`` for ``M x N`` tensors, one ``block_M x block_N`` tile per block of 128
    threads: A and B staged in shared tiles ``A_shared`` and ``B_shared`` (B's copied as a
    slice), summed in ``out_dtype`` (default ``dtype``) with ``T.Parallel`` into the fragment
    ``C_local``, copied out; the tails of sizes no block divides are ``T.copy``'s bounds guards."""
    import tile.lang.language as T

    out = out_dtype or dtype

    @T.prim_func
    def add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), out)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), dtype)
            B_shared = T.alloc_shared((block_M, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), out)
            T.copy(A[by * block_M, bx * block_N], A_shared)
            T.copy(B[by * block_M : (by + 1) * block_M, bx * block_N : (bx + 1) * block_N], B_shared)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.cast(A_shared[i, j], out) + T.cast(B_shared[i, j], out)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return add


def split_k_gemm(
    M: int, N: int, K: int, block_M: int, block_N: int, block_K: int, splits: int, dtype: str,
    *, num_stages: int = 2, threads: int = 128,
) -> Any:  # fmt: skip
    """``C += A @ B`` with K cut into ``splits`` slices, one block per (C tile, slice): each
    block ``T.gemm``s its slice and ``T.atomic_add``s the partial product into the float32 C.
    A slice covers a whole number of K tiles; tiles past K read zeros."""
    import tile.lang.language as T

    per_split = (K + splits - 1) // splits
    chunk = (per_split + block_K - 1) // block_K * block_K

    @T.prim_func
    def split_k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits, threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(chunk // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, bz * chunk + ko * block_K], A_shared)
                T.copy(B[bz * chunk + ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return split_k


def pipelined_gemm(
    M: int, N: int, K: int, block_M: int, block_N: int, block_K: int, dtype: str,
    *, trans_a: bool = False, trans_b: bool = False, num_stages: int = 2, threads: int = 128,
    accum: str = "float32", out_dtype: str = "float32", impl: str | None = None,
) -> Any:  # fmt: skip
    """The paper GEMM's K loop, ``C = op(A) op(B)`` with A stored ``(K, M)`` when ``trans_a`` and
    B stored ``(N, K)`` when ``trans_b``: per block, A and B tiles staged in shared memory over a
    ``T.Pipelined`` loop of ``num_stages`` and one ``T.gemm(impl=impl)`` per K step into an
    ``accum`` fragment. A 16-bit ``out_dtype`` goes fragment -> shared tile -> global (stmatrix
    on sm_90a)."""
    import tile.lang.language as T

    a_shape, a_tile = ((K, M), (block_K, block_M)) if trans_a else ((M, K), (block_M, block_K))
    b_shape, b_tile = ((N, K), (block_N, block_K)) if trans_b else ((K, N), (block_K, block_N))
    staged = out_dtype in ("float16", "bfloat16")

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_a:
                    T.copy(A[k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_b:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_a, transpose_B=trans_b, impl=impl)
            if staged:
                C_s = T.alloc_shared((block_M, block_N), out_dtype)
                T.copy(C_f, C_s)
                T.copy(C_s, C[by * block_M, bx * block_N])
            else:
                T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def one_block_gemm(
    M: int, N: int, K: int, dtype: str = "float16", accum: str = "float32",
    *, a_in_registers: bool = False, op: Any = None, **options: Any,
) -> Any:  # fmt: skip
    """``C = A @ B`` in one block of 128 threads: ``A`` (``M x K``) and ``B`` (``K x N``) of
    ``dtype`` copied whole into shared tiles (A into a fragment when ``a_in_registers``), one
    ``op(A, B, C, clear_accum=True, **options)`` (``T.gemm`` unless ``op`` names another, such
    as ``T.wgmma_mma``) into an ``accum`` fragment, copied out to ``C``."""
    import tile.lang.language as T

    gemm = op or T.gemm
    alloc_a = T.alloc_fragment if a_in_registers else T.alloc_shared

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):  # type: ignore[valid-type]
        with T.Kernel(1, threads=128):
            A_t = alloc_a((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            C_f = T.alloc_fragment((M, N), accum)
            T.copy(A, A_t)
            T.copy(B, B_s)
            gemm(A_t, B_s, C_f, clear_accum=True, **options)
            T.copy(C_f, C)

    return main


def printing_copy(limit: float | None = None) -> Any:
    """``B = A`` for 8 float32s in two blocks of 4. Each block prints the 2x2 fragment of its
    four values (``T.print(tile, msg="tile")``) and twice its first value (``msg="twice"``);
    with ``limit``, each value is checked with ``T.device_assert(A[..] < limit, "A too large")``."""
    import tile.lang.language as T

    checked = limit is not None

    @T.prim_func
    def kernel(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):  # type: ignore[valid-type]
        with T.Kernel(2, threads=32) as bx:
            tile = T.alloc_fragment((2, 2), "float32")
            for i, j in T.Parallel(2, 2):
                tile[i, j] = A[bx * 4 + i * 2 + j]
            T.print(tile, msg="tile")
            T.print(A[bx * 4] * 2.0, msg="twice")
            for i in T.Parallel(4):
                if checked:
                    T.device_assert(A[bx * 4 + i] < limit, "A too large")
                B[bx * 4 + i] = A[bx * 4 + i]

    return kernel


def block_tagging_kernel(gx: int, gy: int, panel: int, order: str, threads: int) -> Any:
    """A ``gx x gy`` grid under ``T.use_swizzle(panel, order)`` in which every block writes its
    own coordinate, ``Out[by, bx] = by * gx + bx``: a swizzle that dropped or repeated a block
    leaves the output different from ``arange(gx * gy).reshape(gy, gx)``."""
    import tile.lang.language as T

    @T.prim_func
    def tag(Out: T.Tensor((gy, gx), "int32")):  # type: ignore[no-untyped-def,valid-type]
        with T.Kernel(gx, gy, threads=threads) as (bx, by):
            T.use_swizzle(panel, order=order)
            for i in T.Parallel(1):
                Out[by, bx] = by * gx + bx + i * 0

    return tag
