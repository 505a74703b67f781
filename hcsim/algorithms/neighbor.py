"""Neighbour exchange AllGather (Chen et al., "Performance evaluation of Allgather algorithms
on terascale Linux cluster with fast Ethernet", HPCAsia 2005), the algorithm Open MPI's
coll_tuned fixed decision runs for an allgather of at least 50,000 bytes in all on an even
number of ranks (``ompi_coll_base_allgather_intra_neighborexchange``, coll_base_allgather.c;
the rule in coll_tuned_decision_fixed.c, :func:`hcsim.corpus.open_mpi_fixed_rule`).

p even; rank r's neighbours are r+1 and r-1 (an even rank starts with its right neighbour, an
odd one with its left, so the ranks pair up as (0, 1), (2, 3), ...):

* step 0: every rank swaps its own block with its first neighbour, so each pair (2j, 2j+1)
  holds the two blocks 2j and 2j+1;
* steps i = 1 .. p/2 - 1: every rank sends the two blocks it received last (its own pair at
  step 1) to its other neighbour and receives two from it, alternating neighbours each step.

p/2 steps against the ring's p - 1, for the same bytes: (p/2) a + (p - 1) (n/p) b. On an odd
count Open MPI falls back to the ring; so does this schedule (and its cost).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, get_algorithm, register
from .schedule import (
    ChunkSpace,
    CollectiveArgs,
    LazySteps,
    Schedule,
    data_bytes,
    make_step,
    split_bytes,
)

SOURCE = ("Chen et al. HPCAsia 2005; Open MPI ompi/mca/coll/base/coll_base_allgather.c "
          "(ompi_coll_base_allgather_intra_neighborexchange)")


def _neighbor_exchange(args: CollectiveArgs) -> Schedule:
    p = args.p
    if p % 2:  # Open MPI runs the ring on an odd count
        return get_algorithm("allgather", "ring").build(args)
    space = ChunkSpace(split_bytes(data_bytes(args), p))
    r = np.arange(p, dtype=np.int64)
    even = r % 2 == 0
    first = np.where(even, (r + 1) % p, (r - 1) % p)   # neighbour at step 0 and every even step
    second = np.where(even, (r - 1) % p, (r + 1) % p)  # neighbour at every odd step
    pair, sign = r // 2, np.where(even, 1, -1)

    def step(i):
        if i == 0:
            return make_step(r, first, space.range_bytes(r, r + 1), False, r, r + 1)
        # the pair a rank forwards at step i (the one it received at step i - 1): its own pair
        # moved by 0, -1, +1, -2, +2, ... pairs for an even rank, the opposite for an odd one
        # (each step passes every pair one rank on, the two directions alternating)
        shift = (i // 2) * (1 if i % 2 else -1)
        held = 2 * ((pair + sign * shift) % (p // 2))
        return make_step(r, second if i % 2 else first, space.range_bytes(held, held + 2), False, held, held + 2)

    return Schedule(args, p, LazySteps(p // 2, step), space.chunk_bytes, "ne")


def cost_allgather(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, b = args.p, args.nbytes / args.p
    if p % 2:
        return (p - 1) * (m.alpha_s + b * m.beta_s_per_B)
    return (p // 2) * m.alpha_s + (p - 1) * b * m.beta_s_per_B


register(AlgorithmSpec("ne", "allgather", _neighbor_exchange, cost_allgather,
                       "neighbour exchange: p/2 steps, pairs of blocks to alternating neighbours (Open MPI); "
                       "the ring on an odd count", SOURCE))
