"""The acceptance test of tile-ops with torch: ``torch.compile(fullgraph=True)`` of a small
transformer block built from tile ops traces on the CPU with no graph break, and matches eager
and a pure-torch reference, gradients included.

CI compiles with ``backend="aot_eager"`` (the full dynamo + AOTAutograd trace, through the fake
kernels); inductor, which builds C++, is the same test behind ``--run-slow``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tile.ops  # noqa: E402

DIM, HEADS, KV_HEADS, SEQ = 32, 4, 2, 16


class Block(torch.nn.Module):
    """Pre-norm attention (GQA, causal) with a residual, then a softmax router over 8 experts;
    ``reference=True`` runs the same math with torch's own ops."""

    def __init__(self, reference: bool = False) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.reference = reference
        self.hd = DIM // HEADS
        self.norm_w = torch.nn.Parameter(1 + 0.1 * torch.randn(DIM, generator=g))
        self.wqkv = torch.nn.Parameter(torch.randn(DIM, DIM + 2 * KV_HEADS * self.hd, generator=g) / DIM**0.5)
        self.wo = torch.nn.Parameter(torch.randn(DIM, DIM, generator=g) / DIM**0.5)
        self.router = torch.nn.Parameter(torch.randn(DIM, 8, generator=g) / DIM**0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        F = torch.nn.functional
        ref = self.reference
        mm = torch.matmul if ref else tile.ops.matmul
        b, n, d = x.shape
        h = F.rms_norm(x, (d,), self.norm_w, 1e-6) if ref else tile.ops.rms_norm(x, self.norm_w, 1e-6)
        qkv = mm(h, self.wqkv)
        q = qkv[..., :d].reshape(b, n, HEADS, self.hd).transpose(1, 2)
        kv = qkv[..., d:].reshape(b, n, 2, KV_HEADS, self.hd)
        k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
        if ref:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            o = tile.ops.flash_attention(q, k, v, causal=True)
        x = x + mm(o.transpose(1, 2).reshape(b, n, d), self.wo)
        logits = mm(x, self.router)
        return x, (torch.softmax(logits, -1) if ref else tile.ops.softmax(logits, -1))


def _run(model: torch.nn.Module, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    model.zero_grad()
    out = model(x)
    (out[0].square().mean() + out[1][..., 0].sum()).backward()
    return [o.detach() for o in out], [p.grad.clone() for p in model.parameters()]


@pytest.fixture(scope="module")
def inputs() -> tuple[Block, torch.Tensor, tuple[list[torch.Tensor], list[torch.Tensor]]]:
    x = torch.randn(2, SEQ, DIM, generator=torch.Generator().manual_seed(1))
    block = Block()
    eager = _run(block, x)
    reference = _run(Block(reference=True), x)
    for got, want in zip(eager[0] + eager[1], reference[0] + reference[1], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    return block, x, eager


def test_block_traces_without_graph_breaks(inputs):
    block, x, _ = inputs
    explanation = torch._dynamo.explain(block)(x)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_compiled_block_matches_eager_with_gradients(inputs, backend):
    block, x, eager = inputs
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, backend=backend)
    got = _run(compiled, x)
    for g, e in zip(got[0] + got[1], eager[0] + eager[1], strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
