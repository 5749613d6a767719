"""Partition a traced graph into kernels: what fuses with what.

Rules, applied in this order (each node lands in exactly one kernel, or in none when it is
an input, a constant, or a view that a kernel reads through an index map):

1. ``softmax(q @ k.mT * scale) @ v`` (written with any mix of ``tb.softmax`` and the
   primitives it expands to) becomes one FlashAttention-style kernel: an online softmax over
   key tiles, never materializing the seq x seq scores.
2. Each other ``@`` is a GEMM kernel; element-wise operations of the product's shape that
   consume it (bias, activation, scaling, casts) fuse into its epilogue.
3. A reduction over the last axis anchors a row kernel: each block owns whole rows; the
   element-wise producers of the reduced array, further last-axis reductions of it, and
   consumers of the row's shape or of the per-row results join it (softmax, RMSNorm and
   LayerNorm are one kernel each).
4. The remaining element-wise operations group by output shape into element-wise kernels.
5. Reductions over other axes are standalone reduction kernels.

Everything that crosses a kernel boundary goes through global memory; ``plan`` says which.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from tile.ir.errors import TileShapeError

from .graph import Dim, Node, broadcast_shapes

ELEMENTWISE = ("unary", "binary", "where", "cast")
MAX_ROW = 16384
"""Longest static row a row kernel keeps in a fragment (elements); longer rows are unfused."""


@dataclasses.dataclass(eq=False)
class Kernel:
    """One kernel of the plan."""

    kind: str  # "elementwise" | "rows" | "reduce" | "matmul" | "attention" | "transpose"
    nodes: list[Node]
    anchor: tuple[Dim, ...]
    inputs: list[Node] = dataclasses.field(default_factory=list)
    outputs: list[Node] = dataclasses.field(default_factory=list)
    info: dict[str, object] = dataclasses.field(default_factory=dict)


def topo_order(outputs: Sequence[Node]) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(n, False) for n in reversed(outputs)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((i, False) for i in reversed(node.inputs) if id(i) not in seen)
    return order


def consumers_of(order: Iterable[Node]) -> dict[int, list[Node]]:
    users: dict[int, list[Node]] = {}
    for node in order:
        for i in node.inputs:
            users.setdefault(id(i), []).append(node)
    return users


def is_last_axis_reduce(node: Node) -> bool:
    return (
        node.op == "reduce" and node.inputs[0].ndim >= 1 and node.attrs["axes"] == (node.inputs[0].ndim - 1,)
    )


def is_elementwise(node: Node, op: str, fn: str) -> bool:
    """``node`` is the ``op`` ("unary" or "binary") node of function ``fn`` ("exp", "sub", ...)."""
    return node.op == op and node.attrs["fn"] == fn


def is_row_reduce_of(node: Node, kind: str, source: Node) -> bool:
    """``node`` is a ``kind`` reduction of ``source`` over its last axis that keeps the axis
    (``source.max(-1, keepdims=True)``): a softmax's row max or row sum."""
    return (
        node.op == "reduce"
        and node.attrs["kind"] == kind
        and is_last_axis_reduce(node)
        and bool(node.attrs["keepdims"])
        and node.inputs[0] is source
    )


def per_row_shape(anchor: tuple[Dim, ...]) -> tuple[Dim, ...]:
    return (*anchor[:-1], 1)


class Partitioner:
    def __init__(self, outputs: Sequence[Node]) -> None:
        self.outputs = list(outputs)
        self.order = topo_order(self.outputs)
        self.users = consumers_of(self.order)
        self.owner: dict[int, Kernel] = {}
        self.kernels: list[Kernel] = []
        self.output_ids = {id(n) for n in self.outputs}

    # -- helpers ----------------------------------------------------------------------------
    def descendants(self, roots: Iterable[Node]) -> set[int]:
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            node = stack.pop()
            for user in self.users.get(id(node), []):
                if id(user) not in seen:
                    seen.add(id(user))
                    stack.append(user)
        return seen

    def free(self, node: Node) -> bool:
        return id(node) not in self.owner and node.op not in ("input", "const")

    def private(self, node: Node, members: set[int]) -> bool:
        """Whether every use of ``node`` is inside ``members`` and it is not a result."""
        return id(node) not in self.output_ids and all(id(u) in members for u in self.users.get(id(node), []))

    def claim(self, kernel: Kernel) -> None:
        for node in kernel.nodes:
            self.owner[id(node)] = kernel
        self.kernels.append(kernel)

    # -- rule 1: attention ----------------------------------------------------------------------
    def match_attention(self, out: Node) -> Kernel | None:
        probs, v = out.inputs
        chain = [out]
        if probs.op == "cast":
            chain.append(probs)
            probs = probs.inputs[0]
        if not is_elementwise(probs, "binary", "div"):
            return None
        exp_node, denom = probs.inputs
        if not is_row_reduce_of(denom, "sum", exp_node) or not is_elementwise(exp_node, "unary", "exp"):
            return None
        shifted = exp_node.inputs[0]
        if not is_elementwise(shifted, "binary", "sub"):
            return None
        scores, row_max = shifted.inputs
        if not is_row_reduce_of(row_max, "max", scores):
            return None
        chain += [probs, denom, exp_node, shifted, row_max]
        scale = 1.0
        node = scores
        while node.op == "binary" and node.attrs["fn"] in ("mul", "div"):
            a, b = node.inputs
            if b.op == "const":
                scale = (
                    scale * float(b.attrs["value"])
                    if node.attrs["fn"] == "mul"
                    else scale / float(b.attrs["value"])
                )
                chain.append(node)
                node = a
            elif a.op == "const" and node.attrs["fn"] == "mul":
                scale *= float(a.attrs["value"])
                chain.append(node)
                node = b
            else:
                return None
        if node.op == "cast":
            chain.append(node)
            node = node.inputs[0]
        if node.op != "matmul":
            return None
        chain.append(node)
        q, kt = node.inputs
        if kt.op != "transpose" or kt.attrs["perm"] != (*range(kt.ndim - 2), kt.ndim - 1, kt.ndim - 2):
            return None
        k = kt.inputs[0]
        lead = q.shape[:-2]
        if k.shape[:-2] != lead or v.shape[:-2] != lead or v.shape[-2] != k.shape[-2]:
            return None
        if not all(isinstance(d, int) for d in (q.shape[-1], v.shape[-1])):
            return None
        if q.dtype != k.dtype or q.dtype != v.dtype or q.dtype not in ("float16", "bfloat16", "float32"):
            return None
        members = {id(n) for n in chain}
        if not all(self.private(n, members) for n in chain if n is not out):
            return None
        if any(not self.free(n) for n in chain):
            return None
        inputs = [q, k, v]  # k itself: the kernel reads K rows and multiplies by them transposed
        return Kernel(
            "attention", list(reversed(chain)), out.shape, inputs=inputs, outputs=[out], info={"scale": scale}
        )

    # -- rule 2: matmul + epilogue --------------------------------------------------------------
    def grow_elementwise(self, seed_nodes: list[Node], anchor: tuple[Dim, ...], row_ok: bool) -> list[Node]:
        """Add consumers of ``seed_nodes`` that are element-wise over ``anchor`` (or, when
        ``row_ok``, over its per-row shape or last-axis reductions) and whose other inputs
        are already computed outside."""
        members = {id(n) for n in seed_nodes}
        banned = self.descendants(seed_nodes)
        added = list(seed_nodes)
        changed = True
        while changed:
            changed = False
            for node in self.order:
                if id(node) in members or not self.free(node):
                    continue
                if not any(id(i) in members for i in node.inputs):
                    continue
                fits = node.op in ELEMENTWISE and self.compatible(node, members, anchor, row_ok)
                if row_ok and is_last_axis_reduce(node) and node.inputs[0].shape == anchor:
                    fits = isinstance(anchor[-1], int)
                if not fits:
                    continue
                outside = [i for i in node.inputs if id(i) not in members]
                if any(id(i) in banned for i in outside):
                    continue  # it needs a value that depends on this kernel's results
                pulled = self.pull_producers(outside, members, anchor, row_ok)
                if pulled is None:
                    continue  # an input is computed by a kernel that cannot run before this one
                for extra in pulled:
                    members.add(id(extra))
                    added.append(extra)
                if node.dtype == "bool" and not self.users.get(id(node)):
                    continue
                members.add(id(node))
                added.append(node)
                changed = True
        return added

    def pull_producers(
        self, values: list[Node], members: set[int], anchor: tuple[Dim, ...], row_ok: bool
    ) -> list[Node] | None:
        """Free element-wise producers of ``values`` that can join the kernel (so that it
        never reads a value computed by a later kernel), or None when one cannot."""
        pulled: list[Node] = []
        seen = set(members)
        stack = [v for v in values if self.free(v) and v.op != "transpose"]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            if node.op not in ELEMENTWISE or not self.compatible(node, seen | members, anchor, row_ok):
                return None
            seen.add(id(node))
            pulled.append(node)
            stack.extend(i for i in node.inputs if self.free(i) and i.op != "transpose" and id(i) not in seen)
        for view in values:
            if view.op == "transpose" and self.free(view.inputs[0]):
                return None
        return pulled

    def compatible(self, node: Node, members: set[int], anchor: tuple[Dim, ...], row_ok: bool) -> bool:
        """Whether element-wise ``node`` can be computed at a kernel's elements: its shape
        broadcasts into the anchor (it is then recomputed where it is broadcast), or, in a
        row kernel, it is a per-row value; a per-row value without the kept axis
        (``keepdims=False``) only feeds other per-row values of its shape."""
        rows = (per_row_shape(anchor), anchor[:-1])
        if row_ok and node.shape == anchor[:-1]:
            return all(i.shape == node.shape for i in node.inputs if id(i) in members)
        if len(node.shape) > len(anchor) or _broadcast(node.shape, anchor) != anchor:
            return False
        for i in node.inputs:
            if id(i) in members and row_ok and i.shape == anchor[:-1] and i.shape != node.shape:
                return False
        return not (node.shape in rows and not row_ok and node.shape != anchor)

    def matmul_kernel(self, mm: Node) -> Kernel:
        nodes = self.grow_elementwise([mm], mm.shape, row_ok=False)
        return Kernel("matmul", nodes, mm.shape)

    # -- rule 3: row kernels ----------------------------------------------------------------------
    def row_kernel(self, red: Node) -> Kernel | None:
        src = red.inputs[0]
        anchor = src.shape
        if not isinstance(anchor[-1], int) or int(anchor[-1]) > MAX_ROW:
            return None
        nodes: list[Node] = []
        # producers of the reduced array with its full shape
        stack = [src]
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.op in ELEMENTWISE and node.shape == anchor and self.free(node):
                nodes.append(node)
                stack.extend(node.inputs)
        nodes.reverse()
        nodes = self.grow_elementwise([*nodes, red] if nodes else [red], anchor, row_ok=True)
        return Kernel("rows", self.in_order(nodes), anchor)

    def in_order(self, nodes: list[Node]) -> list[Node]:
        ids = {id(n) for n in nodes}
        return [n for n in self.order if id(n) in ids]

    # -- the whole partition -----------------------------------------------------------------------
    def run(self) -> list[Kernel]:
        for node in reversed(self.order):
            if node.op == "matmul" and self.free(node):
                kernel = self.match_attention(node)
                if kernel is not None:
                    self.claim(kernel)
        # Row kernels before GEMM epilogues: an element-wise value a row reduction reads is
        # better computed in the row kernel than written out by the GEMM as a second result.
        for node in self.order:
            if is_last_axis_reduce(node) and self.free(node):
                kernel = self.row_kernel(node)
                if kernel is not None:
                    self.claim(kernel)
        for node in self.order:
            if node.op == "matmul" and self.free(node):
                self.claim(self.matmul_kernel(node))
        for node in self.order:
            if node.op in ELEMENTWISE and self.free(node) and self.deferred_condition(node):
                continue  # computed in the kernel of the tb.where that reads it (below)
            if node.op in ELEMENTWISE and self.free(node):
                seeds = [*self.conditions_of(node), node]
                nodes = self.grow_elementwise(seeds, node.shape, row_ok=False)
                self.claim(Kernel("elementwise", self.in_order(nodes), node.shape))
            elif node.op == "reduce" and self.free(node):
                self.claim(Kernel("reduce", [node], node.inputs[0].shape))
        for node in self.order:  # a condition no reader's kernel could take: a kernel of its own
            if node.op in ELEMENTWISE and self.free(node):
                nodes = self.grow_elementwise([node], node.shape, row_ok=False)
                self.claim(Kernel("elementwise", self.in_order(nodes), node.shape))
        for node in self.order:
            # a transpose that some kernel must see materialized (a result, or read by a
            # reduction / matmul in a way no index map covers) is an element-wise copy
            if node.op == "transpose" and self.free(node) and self.needs_materializing(node):
                self.claim(Kernel("elementwise", [node], node.shape))
        for kernel in self.kernels:
            kernel.nodes = self.in_order(kernel.nodes)
            self.finish(kernel)
        return self.schedule()

    def deferred_condition(self, node: Node) -> bool:
        """A boolean value read by other nodes and not a result: it cannot cross a kernel
        boundary, so the kernel of an element-wise reader computes it (``conditions_of``)."""
        return node.dtype == "bool" and id(node) not in self.output_ids and bool(self.users.get(id(node)))

    def conditions_of(self, node: Node) -> list[Node]:
        """The free boolean inputs of ``node`` (with their free element-wise producers) that can
        be computed at ``node``'s elements; none where one of them cannot."""
        wanted = [i for i in node.inputs if i.dtype == "bool" and self.free(i) and i.op in ELEMENTWISE]
        if not wanted:
            return []
        pulled = self.pull_producers(wanted, {id(node)}, node.shape, row_ok=False)
        return pulled or []

    def schedule(self) -> list[Kernel]:
        """Kernels in an order where each runs after the kernels whose outputs it reads."""
        made_by = {id(n): k for k in self.kernels for n in k.outputs}
        done: set[int] = set()
        ordered: list[Kernel] = []

        def visit(kernel: Kernel, path: set[int]) -> None:
            if id(kernel) in done:
                return
            if id(kernel) in path:  # pragma: no cover - the partition rules never make cycles
                raise RuntimeError("internal: kernels depend on each other")
            path.add(id(kernel))
            for value in kernel.inputs:
                origin = value.inputs[0] if value.op == "transpose" else value
                producer = made_by.get(id(origin))
                if producer is not None and producer is not kernel:
                    visit(producer, path)
            done.add(id(kernel))
            ordered.append(kernel)

        for kernel in sorted(self.kernels, key=lambda k: min(self.order.index(n) for n in k.nodes)):
            visit(kernel, set())
        return ordered

    def needs_materializing(self, node: Node) -> bool:
        """Kernels read a transpose through an index map (or a gemm transpose flag), except a
        result and a gemm operand whose permutation is not a swap of its last two axes."""
        if id(node) in self.output_ids:
            return True
        for user in self.users.get(id(node), []):
            kernel = self.owner.get(id(user))
            if (
                kernel is not None
                and kernel.kind == "matmul"
                and user.op == "matmul"
                and not _swaps_last_two(node)
            ):
                return True
        return False

    def finish(self, kernel: Kernel) -> None:
        members = {id(n) for n in kernel.nodes}
        inputs: list[Node] = []
        seen: set[int] = set()
        for node in kernel.nodes:
            for i in node.inputs:
                if id(i) in members or id(i) in seen or i.op == "const":
                    continue
                if kernel.kind == "attention" and i.op == "transpose":
                    continue
                seen.add(id(i))
                inputs.append(i)
        if kernel.kind == "attention":
            inputs = list(kernel.inputs)
        kernel.inputs = inputs
        kernel.outputs = [
            n
            for n in kernel.nodes
            if id(n) in self.output_ids or any(id(u) not in members for u in self.users.get(id(n), []))
        ]
        if kernel.kind == "attention":
            kernel.outputs = [kernel.nodes[-1]]


def _broadcast(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    """numpy's broadcast of two shapes (graph.broadcast_shapes), or None where they do not."""
    try:
        return broadcast_shapes(a, b, None)
    except TileShapeError:
        return None


def _swaps_last_two(node: Node) -> bool:
    perm = node.attrs.get("perm", ())
    nd = len(perm)
    return nd >= 2 and tuple(perm) == (*range(nd - 2), nd - 1, nd - 2)


def partition(outputs: Sequence[Node]) -> list[Kernel]:
    """The kernels that compute ``outputs``, in an order that respects their dependencies."""
    return Partitioner(outputs).run()
