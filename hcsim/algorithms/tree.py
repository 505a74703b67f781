"""Binomial tree for Broadcast and Reduce: ceil(log2 p) steps of the whole buffer.

Broadcast step k: ranks at distance < 2^k from the root (that already hold the data) send
to the rank 2^k further on. Reduce runs the same tree backwards, reducing at each parent.

Costs (Thakur, Rabenseifner & Gropp 2005, FACTS.md s7): Bcast ceil(log2 p)(a + n beta);
Reduce ceil(log2 p)(a + n(beta + gamma)).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma, log2_ceil
from .registry import AlgorithmSpec, register
from .schedule import CollectiveArgs, Schedule, make_step, split_bytes

SOURCE = "Thakur, Rabenseifner & Gropp 2005 (binomial tree); FACTS.md s7"


def _tree(args: CollectiveArgs, reduce: bool) -> Schedule:
    p, root, n = args.p, args.root, args.nbytes
    levels = log2_ceil(p)
    steps = []
    for k in range(levels):
        mask = 1 << k
        rel = np.arange(p)
        if reduce:
            senders = rel[(rel % (2 * mask)) == mask]
            src, dst = senders, senders - mask
        else:
            senders = rel[(rel < mask) & (rel + mask < p)]
            src, dst = senders, senders + mask
        steps.append(make_step((src + root) % p, (dst + root) % p, n, reduce, 0, 1))
    return Schedule(args, 1, steps, split_bytes(n, 1), "tree")


def cost_broadcast(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return log2_ceil(args.p) * (m.alpha_s + args.nbytes * m.beta_s_per_B)


def cost_reduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return log2_ceil(args.p) * (m.alpha_s + args.nbytes * (m.beta_s_per_B + m.gamma_s_per_B))


register(AlgorithmSpec("tree", "broadcast", lambda a: _tree(a, False), cost_broadcast,
                       "binomial tree from the root, ceil(log2 p) steps", SOURCE))
register(AlgorithmSpec("tree", "reduce", lambda a: _tree(a, True), cost_reduce,
                       "binomial tree into the root, ceil(log2 p) steps", SOURCE))
