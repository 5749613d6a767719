"""tile.ops.ssd (Mamba-2 chunk_state / chunk_scan) against numpy.

Each kernel is checked against its own formula, and the pair (with numpy state
passing between them) against the sequential SSM recurrence it must reproduce.
"""

import numpy as np
import pytest

from tile.ops.ssd import chunk_scan, chunk_state


def _inputs(batch, seqlen, nheads, ngroups, headdim, dstate, chunk, dtype, seed=0):
    rng = np.random.default_rng(seed)
    nchunks = seqlen // chunk
    x = rng.standard_normal((batch, seqlen, nheads, headdim)).astype(dtype)
    B = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype(dtype)
    C = rng.standard_normal((batch, seqlen, ngroups, dstate)).astype(dtype)
    dt = (rng.random((batch, nheads, nchunks, chunk)) * 0.2 + 0.01).astype("float32")
    A = -(rng.random(nheads) + 0.5).astype("float32")
    dA_cumsum = np.cumsum(dt * A[None, :, None, None], axis=-1).astype("float32")
    D = rng.standard_normal(nheads).astype("float32")
    return x, B, C, dt, A, dA_cumsum, D


def _chunked(t, chunk, heads_of_group=None):
    b, L = t.shape[:2]
    out = t.astype("float64").reshape(b, L // chunk, chunk, *t.shape[2:])
    return out if heads_of_group is None else out[:, :, :, heads_of_group]


def _groups(nheads, ngroups):
    return np.arange(nheads) // (nheads // ngroups)


def _state_ref(B, x, dt, dA):
    chunk, g = dt.shape[-1], _groups(x.shape[2], B.shape[2])
    weight = np.exp(dA[..., -1:] - dA) * dt
    return np.einsum("bhcs,bcshp,bcshn->bchpn", weight, _chunked(x, chunk), _chunked(B, chunk, g))


def _cb(C, B, chunk):
    return np.ascontiguousarray(np.einsum("bclgn,bcsgn->bcgls", _chunked(C, chunk), _chunked(B, chunk)))


def _scan_ref(C, B, x, dt, dA, prev_states, D):
    chunk, g = dt.shape[-1], _groups(x.shape[2], C.shape[2])
    Cc, Bc = _chunked(C, chunk, g), _chunked(B, chunk, g)
    inter = np.einsum("bclhn,bchpn->bclhp", Cc, prev_states) * np.exp(dA).transpose(0, 2, 3, 1)[..., None]
    causal = np.tril(np.ones((chunk, chunk), bool))
    decay = np.where(causal, np.exp(dA[..., :, None] - dA[..., None, :]), 0) * dt[..., None, :]
    intra = np.einsum(
        "bhcls,bcshp->bclhp", np.einsum("bclhn,bcshn->bhcls", Cc, Bc) * decay, _chunked(x, chunk)
    )
    return (inter + intra).reshape(x.shape) + D[:, None] * x


def _recurrence(x, B, C, dt, A, D):
    """h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T;  y_t = h_t C_t + D x_t, one step at a time."""
    batch, seqlen, nheads, headdim = x.shape
    g = _groups(nheads, B.shape[2])
    steps = dt.transpose(0, 2, 3, 1).reshape(batch, seqlen, nheads).astype("float64")
    h = np.zeros((batch, nheads, headdim, B.shape[3]))
    y = np.zeros(x.shape)
    for t in range(seqlen):
        xt, Bt, Ct = x[:, t].astype("float64"), B[:, t, g].astype("float64"), C[:, t, g].astype("float64")
        h = (
            np.exp(steps[:, t] * A)[..., None, None] * h
            + (steps[:, t, :, None] * xt)[..., None] * Bt[:, :, None]
        )
        y[:, t] = np.einsum("bhpn,bhn->bhp", h, Ct) + D[:, None] * xt
    return y


def test_chunk_state_matches_formula_with_headdim_tail():
    x, B, _, dt, _, dA, _ = _inputs(2, 64, 4, 2, 40, 16, 32, "float32")  # headdim 40: a partial tile
    states = chunk_state(B, x, dt, dA, block=32, target="cpu")
    np.testing.assert_allclose(states, _state_ref(B, x, dt, dA), rtol=1e-5, atol=1e-5)


def test_chunk_scan_matches_formula():
    x, B, C, dt, _, dA, D = _inputs(1, 64, 2, 1, 32, 16, 32, "float32", seed=1)
    prev = np.random.default_rng(2).standard_normal((1, 2, 2, 32, 16)).astype("float32")
    out = chunk_scan(_cb(C, B, 32).astype("float32"), x, dt, dA, C, prev, D, block=16, target="cpu")
    np.testing.assert_allclose(out, _scan_ref(C, B, x, dt, dA, prev, D), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float16", 2e-2)])
def test_chunked_scan_reproduces_the_recurrence(dtype, tol):
    x, B, C, dt, A, dA, D = _inputs(1, 96, 2, 1, 32, 16, 32, dtype, seed=3)
    states = chunk_state(B, x, dt, dA, block=32, target="cpu")
    # State passing: the state entering chunk c is the decayed sum of earlier chunks' states.
    prev = np.zeros_like(states)
    for c in range(1, states.shape[1]):
        prev[:, c] = np.exp(dA[:, :, c - 1, -1])[..., None, None] * prev[:, c - 1] + states[:, c - 1]
    out = chunk_scan(_cb(C, B, 32).astype(dtype), x, dt, dA, C, prev, D, block=32, target="cpu")
    ref = _recurrence(x, B, C, dt, A, D)
    np.testing.assert_allclose(out.astype("float64"), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_chunking_must_divide_the_sequence():
    x, B, _, dt, _, dA, _ = _inputs(1, 64, 2, 1, 16, 16, 32, "float32")
    with pytest.raises(ValueError, match="multiple of chunk_size"):
        chunk_state(B, x[:, :48], dt, dA)
