"""Rabenseifner AllReduce as Open MPI runs it: neighbours first.

Reduce-scatter by recursive vector halving with the distance doubling: at step k (distance
2^k) each of the p' = 2^floor(log2 p) virtual ranks splits the range it still reduces in two,
keeps the half its bit k selects and sends the other half to v XOR 2^k; then the allgather
mirrors it (distance halving, the range doubling). Non-power-of-two p folds as
:mod:`hcsim.algorithms.hd` does. The transfers' sizes are those of HCCL's H-D_R, but the
order of distances is reversed, so on a hierarchical network (leaf-spine) the half of the
buffer moves between neighbours and only 1/p' of it crosses the farthest distance
(Open MPI ``ompi_coll_base_allreduce_intra_redscat_allgather``; Rabenseifner 2004).

Cost where no link is shared (FACTS.md s7): as ``hd``: 2 log p a + 2((p-1)/p) n beta +
((p-1)/p) n gamma for p a power of two.
"""

from __future__ import annotations

import numpy as np

from .hd import _fold_steps, _virtual, cost_allreduce
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, make_step, split_bytes

SOURCE = "Open MPI coll base allreduce redscat_allgather (Rabenseifner 2004); FACTS.md s7"


def _rabenseifner(args: CollectiveArgs) -> Schedule:
    p = args.p
    pp, r, real = _virtual(p)
    v = np.arange(pp)
    space = ChunkSpace(split_bytes(args.nbytes, pp))
    steps = []
    if r:
        steps.append(_fold_steps(args, space, r, p, full_range=True))
    lo, hi = np.zeros(pp, dtype=np.int64), np.full(pp, pp, dtype=np.int64)
    ranges = []
    m = 1
    while m < pp:
        mid = (lo + hi) // 2
        upper = (v & m) != 0
        send_lo, send_hi = np.where(upper, lo, mid), np.where(upper, mid, hi)  # the half the partner keeps
        partner = v ^ m
        steps.append(make_step(real[v], real[partner], space.range_bytes(send_lo[v], send_hi[v]), True,
                               send_lo, send_hi))
        lo, hi = np.where(upper, mid, lo), np.where(upper, hi, mid)
        ranges.append((m, lo.copy(), hi.copy()))
        m *= 2
    for m, lo_k, hi_k in reversed(ranges):  # allgather: send what I hold to the partner of that step
        steps.append(make_step(real[v], real[v ^ m], space.range_bytes(lo_k, hi_k), False, lo_k, hi_k))
    if r:
        i = np.arange(r)
        steps.append(make_step(2 * i, 2 * i + 1, space.range_bytes(0, space.count), False, 0, space.count))
    return Schedule(args, space.count, steps, space.chunk_bytes, "rabenseifner")


register(AlgorithmSpec("rabenseifner", "allreduce", _rabenseifner, cost_allreduce,
                       "recursive halving with the distance doubling (neighbours first), then the mirror allgather",
                       SOURCE))
