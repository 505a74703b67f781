"""Binomial broadcast in which every node sends to all its children at once.

This is the binomial tree of Open MPI's coll base (``bcast`` algorithm 6, one segment): for
the rank at distance v from the root, the children are v XOR mask for every power of two
mask above v's highest set bit (mask from 1 at the root) that stays below p, so the root's
children are 1, 2, 4, ...; a node posts its sends to all its children together once it
holds the buffer. Step d is the sends of the nodes at depth d (popcount of v), so the
schedule has max over v < p of popcount(v) steps.

Unlike :mod:`hcsim.algorithms.tree` (one child per step), the sends of one node share its
injection bandwidth, so where a rank's endpoint is the bottleneck the critical path costs
log p + (log p - 1) + ... + 1 buffer times, not log p.

Cost on a topology where concurrent sends do not share a link (FACTS.md s7 for the tree):
D (a + n beta) with D = max popcount(v), v < p (= log2 p for p a power of two).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import CollectiveArgs, Schedule, make_step

SOURCE = "Open MPI coll base binomial tree (ompi_coll_base_topo_build_bmtree); FACTS.md s7"


def _popcount(v: np.ndarray) -> np.ndarray:
    return np.array([bin(int(x)).count("1") for x in v], dtype=np.int64)


def edges(p: int) -> tuple[np.ndarray, np.ndarray]:
    """(parent, child) distances from the root of every edge of the tree, in sending order."""
    parents, children = [], []
    for v in range(p):
        mask = 1 if v == 0 else 1 << v.bit_length()
        while mask < p and (v ^ mask) < p:
            parents.append(v)
            children.append(v ^ mask)
            mask <<= 1
    return np.array(parents, dtype=np.int64), np.array(children, dtype=np.int64)


def depth(p: int) -> int:
    return int(_popcount(np.arange(p)).max()) if p > 1 else 0


def _bmtree(args: CollectiveArgs) -> Schedule:
    p, root, n = args.p, args.root, args.nbytes
    par, child = edges(p)
    level = _popcount(par)
    steps = []
    for d in range(depth(p)):
        sel = level == d
        steps.append(make_step((par[sel] + root) % p, (child[sel] + root) % p, n, False, 0, 1))
    return Schedule(args, 1, steps, np.array([n], dtype=np.int64), "bmtree")


def cost_broadcast(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return depth(args.p) * (m.alpha_s + args.nbytes * m.beta_s_per_B)


register(AlgorithmSpec("bmtree", "broadcast", _bmtree, cost_broadcast,
                       "binomial tree, each node sends to all its children at once (Open MPI's binomial)",
                       SOURCE))
