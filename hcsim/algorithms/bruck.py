"""Bruck AlltoAll (Bruck et al., "Efficient algorithms for all-to-all communications in
multiport message-passing systems", IEEE TPDS 1997), the algorithm Open MPI's coll_tuned fixed
decision runs for an alltoall of less than 200 bytes a peer on more than 12 ranks
(``ompi_coll_base_alltoall_intra_bruck``, coll_base_alltoall.c; the rule in
coll_tuned_decision_fixed.c, :func:`hcsim.corpus.open_mpi_fixed_rule`).

Rank r first rotates its send buffer so that slot i holds its block for rank r+i. Then for
each bit d = 1, 2, 4, ... < p it sends, in one message, every slot i (1 <= i < p) whose bit d
is set to rank r+d, and receives the same slots from r-d. After the step for bit d, slot i of
rank r holds the block that rank r - (i & (2d-1)) has for rank r - (i & (2d-1)) + i; after the
last bit, the block rank r-i has for r. A final local rotation puts the blocks in rank order.

ceil(log2 p) steps, each moving the blocks whose slot has that bit set (about half of them):
sum over bits d of (a + c_d (n/p) b), c_d = #{1 <= i < p : i & d}. Fewer steps than the
linear or pairwise exchange for more bytes: a small-message algorithm. The two local
rotations are memory copies, not priced.
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, block_bytes, make_step, merge_messages

SOURCE = ("Bruck et al. IEEE TPDS 8(11) 1997; Open MPI ompi/mca/coll/base/coll_base_alltoall.c "
          "(ompi_coll_base_alltoall_intra_bruck)")


def _slots(p: int, d: int) -> np.ndarray:
    i = np.arange(1, p, dtype=np.int64)
    return i[(i & d) != 0]


def _bruck(args: CollectiveArgs) -> Schedule:
    p = args.p
    space = ChunkSpace(block_bytes(args))  # block s*p + t: from rank s to rank t
    r = np.arange(p, dtype=np.int64)
    steps = []
    d = 1
    while d < p:
        slots = _slots(p, d)
        rr, ii = np.repeat(r, len(slots)), np.tile(slots, p)
        source = (rr - (ii & (d - 1))) % p  # whose block slot i of rank r holds before this step
        block = source * p + (source + ii) % p
        step = make_step(rr, (rr + d) % p, space.range_bytes(block, block + 1), False, block, block + 1)
        steps.append(merge_messages(step, p))
        d <<= 1
    return Schedule(args, p * p, steps, space.chunk_bytes, "bruck")


def cost_alltoall(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, b = args.p, args.nbytes / args.p
    total, d = 0.0, 1
    while d < p:
        total += m.alpha_s + len(_slots(p, d)) * b * m.beta_s_per_B
        d <<= 1
    return total


register(AlgorithmSpec("bruck", "alltoall", _bruck, cost_alltoall,
                       "Bruck: ceil(log2 p) steps, the blocks whose slot has bit d set to rank + d (Open MPI's "
                       "small-message alltoall)", SOURCE))
