"""Recursive doubling AllReduce: every step exchanges and reduces the whole buffer.

With p' = 2^floor(log2 p) and r = p - p', ranks 2i+1 (i < r) first fold their buffer into
rank 2i; the p' remaining ranks exchange the whole buffer with the partner at distance
1, 2, ..., p'/2 (virtual ranks, as in :mod:`hcsim.algorithms.hd`), reducing it each time;
the folded ranks get the result back last. It is the small-message AllReduce of MPICH
and Open MPI (coll_tuned allreduce algorithm 3); HCCL has no such executor.

Cost (Thakur, Rabenseifner & Gropp 2005, FACTS.md s7): log2 p (a + n(beta + gamma)) for
p a power of two, plus a + n(beta + gamma) and a + n beta otherwise.
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma, log2_floor
from .hd import _levels, _virtual
from .registry import AlgorithmSpec, register
from .schedule import CollectiveArgs, Schedule, make_step

SOURCE = "Thakur, Rabenseifner & Gropp 2005 (recursive doubling); FACTS.md s7"


def _rd(args: CollectiveArgs) -> Schedule:
    p, n = args.p, args.nbytes
    pp, r, real = _virtual(p)
    v = np.arange(pp)
    i = np.arange(r)
    steps = []
    if r:
        steps.append(make_step(2 * i + 1, 2 * i, n, True, 0, 1))
    for m in _levels(pp, halving=False):
        steps.append(make_step(real[v], real[v ^ m], n, True, 0, 1))
    if r:
        steps.append(make_step(2 * i, 2 * i + 1, n, False, 0, 1))
    return Schedule(args, 1, steps, np.array([n], dtype=np.int64), "rd")


def cost_allreduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, n = args.p, args.nbytes
    a, be, ga = m.alpha_s, m.beta_s_per_B, m.gamma_s_per_B
    t = log2_floor(p) * (a + n * (be + ga))
    if p != 1 << log2_floor(p):
        t += (a + n * (be + ga)) + (a + n * be)
    return t


register(AlgorithmSpec("rd", "allreduce", _rd, cost_allreduce,
                       "recursive doubling: log2 p exchanges of the whole buffer (+2 when p is not a power of two)",
                       SOURCE))
