"""Multi-ring: k rings at once, each over its own links, each carrying 1/k of every block.

Ring j sends rank r -> r + s_j (mod p) with a stride s_j coprime to p, so every ring visits
every rank; on a full mesh (the 910B server's HCCS, an MI300X node's xGMI) rings of different
strides use different directed links, and the k rings move a block in the time one ring moves
1/k of it. The strides are taken in the order 1, p-1, 3, p-3, 5, ... on an even p (1, p-1, 2, p-2, ... on an odd one; each ring and its
reverse), skipping those not coprime to p, up to :data:`MAX_RINGS`: 4 rings on 8 ranks (1, 7,
3, 5), 2 on 4 (1, 3), 1 on 2. This is the channel parallelism of NCCL and RCCL (several rings
over different NVLink / xGMI links at once: RCCL's topology table gives 8-GPU MI300X nodes 28
ring orders, rccl src/graph/rome_models.cc) and of HCCL's several 8-card rings on 910A
(hcomm topo_info_extractor.cc, FACTS.md s1), with HCCL's fixed orders replaced by strides.

Each ring is the ring algorithm on its own rank order: in reduce-scatter step t (0-based) rank r
sends ring j's part of block r - (t+1) s_j, reduced into the receiver's copy; in all-gather step
t it forwards ring j's part of block r - t s_j. After p-1 reduce-scatter steps rank r holds its
block r whole, as the ring leaves it.

Costs (b = n/p; k rings on disjoint links): RS (p-1)(a + (b/k) beta + b gamma) (each rank
reduces every part it receives: a whole block a step); AG (p-1)(a + (b/k) beta); AR their sum.
On a topology where the rings share links (one NIC per rank, a physical ring) the event-driven
mode charges the sharing and the closed form is optimistic, as for ``double_ring``.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ScheduleError
from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import (
    ChunkSpace,
    CollectiveArgs,
    LazySteps,
    Schedule,
    data_bytes,
    make_step,
    split_bytes,
)

SOURCE = "NCCL/RCCL channels (rccl src/graph/rome_models.cc); hcomm topo_info_extractor.cc (910A rings); FACTS.md s1"

MAX_RINGS = 8
"""Most rings run at once (NCCL runs up to 32 channels; 8 covers a full mesh of 8 to 16 ranks
and keeps a step's transfers at 8 per rank)."""


def ring_strides(p: int) -> tuple[int, ...]:
    """The strides of the rings on ``p`` ranks: 1, p-1, 3, p-3, ... (even p; 1, p-1, 2, p-2, ... odd p) coprime to p, at most
    :data:`MAX_RINGS`.

    Examples
    --------
    >>> ring_strides(8), ring_strides(4), ring_strides(2), ring_strides(6), ring_strides(64)
    ((1, 7, 3, 5), (1, 3), (1,), (1, 5), (1, 63, 3, 61, 5, 59, 7, 57))
    """
    out: list[int] = []
    for s in range(1, p, 2 if p % 2 == 0 else 1):
        for stride in (s, p - s):
            if len(out) < MAX_RINGS and math.gcd(stride, p) == 1 and stride not in out:
                out.append(stride)
        if len(out) >= MAX_RINGS or s > p - s:
            break
    return tuple(out) or (1,)


def rings_schedule(args: CollectiveArgs, phases, strides, name: str) -> Schedule:
    """Rings of the given strides at once, each carrying its share of every block (chunk
    ``k * b + j``: ring j's part of block b); ``phases`` among ``"rs"`` and ``"ag"``. The
    double ring is this with strides (1, p-1): ring j is the order 0, s_j, 2 s_j, ... (mod p)
    (:func:`orders_schedule`)."""
    p = args.p
    strides = np.asarray(strides, dtype=np.int64)
    orders = (np.arange(p, dtype=np.int64)[None, :] * strides[:, None]) % p
    return orders_schedule(args, phases, orders, name)


def _checked_orders(orders, p: int) -> np.ndarray:
    """``orders`` as a (k, p) integer array of k >= 1 permutations of the p ranks, or a one-line ScheduleError."""
    allowed = f"k >= 1 permutations of the {p} ranks, shape (k, {p})"
    try:
        out = np.asarray(orders, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise ScheduleError(f"orders = {orders!r:.80}: {allowed}") from None
    if out.ndim != 2 or out.shape[0] < 1 or out.shape[1] != p or \
            not (np.sort(out, axis=1) == np.arange(p, dtype=np.int64)[None, :]).all():
        raise ScheduleError(f"orders = {np.asarray(orders).tolist()!r:.80}: {allowed}")
    return out


def orders_schedule(args: CollectiveArgs, phases, orders, name: str) -> Schedule:
    """Rings over the given rank orders at once, each carrying its share of every block (chunk ``k * b + j``: ring
    j's part of block b, block b being rank b's); ``orders`` is k permutations of the p ranks, ring j sending
    ``orders[j][i] -> orders[j][i + 1]`` (mod p); ``phases`` among ``"rs"`` and ``"ag"``.

    In reduce-scatter step t (0-based) the rank at position i of ring j sends ring j's part of the block of the
    rank at position i - (t+1), reduced into the receiver's copy; in all-gather step t it forwards ring j's part
    of the block of the rank at position i - t. Within a step the transfers are listed ring by ring, each ring's
    by sending rank.

    Examples
    --------
    >>> from hcsim.algorithms.schedule import CollectiveArgs
    >>> s = orders_schedule(CollectiveArgs("allgather", 4, 4096), ("ag",), [[0, 1, 2, 3], [0, 2, 1, 3]], "x")
    >>> [(int(a), int(b)) for a, b in zip(s.steps[0].src, s.steps[0].dst)]
    [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (1, 3), (2, 1), (3, 0)]
    """
    p = args.p
    orders = _checked_orders(orders, p)
    k = len(orders)
    parts = np.concatenate([split_bytes(b, k) for b in split_bytes(data_bytes(args), p)])
    space = ChunkSpace(parts)  # chunk k*b + j: ring j's part of block b
    pos = np.empty_like(orders)
    np.put_along_axis(pos, orders, np.arange(p, dtype=np.int64)[None, :].repeat(k, axis=0), axis=1)
    src = np.tile(np.arange(p, dtype=np.int64), k)
    ring = np.repeat(np.arange(k, dtype=np.int64), p)
    at = pos[ring, src]  # each sender's position in its ring
    dst = orders[ring, (at + 1) % p]
    n_rs = p - 1 if "rs" in phases else 0
    n_ag = p - 1 if "ag" in phases else 0

    def step(t):
        if t < n_rs:  # ring j's part of the block t+1 positions back, reduced into the receiver's copy
            block, red = orders[ring, (at - (t + 1)) % p], True
        else:  # ring j's part of the block t' positions back, forwarded as it is
            block, red = orders[ring, (at - (t - n_rs)) % p], False
        lo = k * block + ring
        return make_step(src, dst, space.range_bytes(lo, lo + 1), red, lo, lo + 1)

    return Schedule(args, k * p, LazySteps(n_rs + n_ag, step), space.chunk_bytes, name)


def ring_family_costs(part_bytes):
    """The closed forms of rings that each move ``part_bytes(args)`` a step on their own links: AllGather, ReduceScatter
    and AllReduce (p-1 steps of a + part beta; ReduceScatter adds a whole block's reduction, b gamma with b = n/p, as
    each rank reduces every part it receives; AllReduce is their sum), as a dict by collective.

    Examples
    --------
    >>> from hcsim.algorithms.cost import AlphaBetaGamma
    >>> from hcsim.algorithms.schedule import CollectiveArgs
    >>> costs = ring_family_costs(lambda a: a.nbytes / a.p / 2)
    >>> costs["allgather"](CollectiveArgs("allgather", 4, 4000), AlphaBetaGamma(1e-6, 1e-9, 0.0)) * 1e6
    4.5
    """

    def cost_allgather(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
        return (args.p - 1) * (m.alpha_s + part_bytes(args) * m.beta_s_per_B)

    def cost_reducescatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
        return (args.p - 1) * (m.alpha_s + part_bytes(args) * m.beta_s_per_B + args.nbytes / args.p * m.gamma_s_per_B)

    def cost_allreduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
        return cost_reducescatter(args, m) + cost_allgather(args, m)

    return {"allgather": cost_allgather, "reducescatter": cost_reducescatter, "allreduce": cost_allreduce}


def register_rings(name: str, strides, parallel, summary: str, source: str) -> None:
    """Register a family of rings for AllReduce, ReduceScatter and AllGather: ``strides(p)`` the
    rings' strides, ``parallel(p)`` how many of them run on disjoint links (their closed forms
    charge ``b / parallel(p)`` a step, b = n/p: RS (p-1)(a + (b/k) beta + b gamma), AG
    (p-1)(a + (b/k) beta), AR their sum)."""

    costs = ring_family_costs(lambda args: args.nbytes / args.p / parallel(args.p))
    cost_allreduce, cost_reducescatter, cost_allgather = (costs[c] for c in ("allreduce", "reducescatter", "allgather"))

    for coll, cost, phases in (("allreduce", cost_allreduce, ("rs", "ag")),
                               ("reducescatter", cost_reducescatter, ("rs",)),
                               ("allgather", cost_allgather, ("ag",))):
        register(AlgorithmSpec(name, coll, (lambda ph: (lambda a: rings_schedule(a, ph, strides(a.p), name)))(phases),
                               cost, summary, source))


register_rings("multiring", ring_strides, lambda p: len(ring_strides(p)),
               "k rings of coprime strides at once, 1/k of every block each", SOURCE)
