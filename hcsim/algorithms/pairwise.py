"""Pairwise AlltoAll and AlltoAllV: p-1 steps; in step k rank i sends block (i, i+k) to rank i+k and
receives block (i-k, i) from rank i-k.

Cost (HCCL docs coll_algo_intro Pairwise, FACTS.md s1): (p-1) a + beta sum_k max_i n(i, i+k),
which for a uniform alltoall of n bytes per rank is (p-1)(a + (n/p) beta).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import (
    ChunkSpace,
    CollectiveArgs,
    LazySteps,
    Schedule,
    block_bytes,
    make_step,
)

SOURCE = "hicann/hccl docs/zh/user_guide/coll_algo_intro (Pairwise); FACTS.md s1"


def _pairwise(args: CollectiveArgs) -> Schedule:
    p = args.p
    space = ChunkSpace(block_bytes(args))
    src = np.arange(p)

    def step(k):
        dst = (src + k + 1) % p
        blk = src * p + dst
        return make_step(src, dst, space.range_bytes(blk, blk + 1), False, blk, blk + 1)

    return Schedule(args, p * p, LazySteps(p - 1, step), space.chunk_bytes, "pairwise")


def cost_alltoall(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return (args.p - 1) * (m.alpha_s + args.nbytes / args.p * m.beta_s_per_B)


def cost_alltoallv(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    """HCCL's form, (p-1) a + beta sum_k max_i n(i, i+k): exact when every step's largest
    block sits on one chain of ranks (a uniform matrix); otherwise an upper bound, since a
    rank only waits for its own two partners, not for the whole step."""
    p = args.p
    sizes = np.array(args.send_matrix, dtype=float)
    i = np.arange(p)
    return sum(m.alpha_s + sizes[i, (i + k) % p].max() * m.beta_s_per_B for k in range(1, p))


register(AlgorithmSpec("pairwise", "alltoall", _pairwise, cost_alltoall,
                       "p-1 steps, step k sends block (i, i+k) to rank i+k", SOURCE))
register(AlgorithmSpec("pairwise", "alltoallv", _pairwise, cost_alltoallv,
                       "p-1 steps, step k sends block (i, i+k) to rank i+k", SOURCE))
