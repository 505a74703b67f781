"""Pairwise AlltoAll and AlltoAllV: p-1 steps; in step k rank i sends block (i, i+k) to rank i+k and
receives block (i-k, i) from rank i-k.

Cost (HCCL docs coll_algo_intro Pairwise, FACTS.md s1): (p-1)(a + (n/p) beta) for a uniform
alltoall of n bytes per rank. For AlltoAllV, HCCL's (p-1) a + beta sum_k max_i n(i, i+k) is an
upper bound; :func:`cost_alltoallv` evaluates the execution rule exactly instead.
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
    """Exact for any send matrix when every pair costs the same alpha and beta and no two
    transfers share a resource (a full mesh): the engine's execution rule, evaluated.

    Rank i enters step k when its own two transfers of step k-1 are done (the one it sent
    to i+k-1 and the one it received from i-k+1), not when the whole step is; transfer
    i -> i+k starts when both ends have entered step k and takes a + n(i, i+k) beta. So
    ``E_i(k+1) = max(end(i, k), end(i-k, k))`` with ``end(i, k) = max(E_i(k), E_{i+k}(k)) +
    a + n(i, i+k) beta``, and the time is the last end: O(p^2). For a uniform matrix it is
    HCCL's (p-1) a + beta sum_k max_i n(i, i+k) (coll_algo_intro, Pairwise), which for any
    other matrix is an upper bound of it.
    """
    p = args.p
    if p <= 64:  # plain Python: the same operations per element as the numpy form below
        return _alltoallv_small(p, args.send_matrix, m.alpha_s, m.beta_s_per_B)
    sizes = np.asarray(args.send_matrix, dtype=np.int64)
    i = np.arange(p)
    enter = np.zeros(p)
    for k in range(1, p):
        to = (i + k) % p
        end = np.maximum(enter, enter[to]) + (m.alpha_s + sizes[i, to] * m.beta_s_per_B)
        enter = np.maximum(end, end[(i - k) % p])
    return float(enter.max())


def _alltoallv_small(p: int, matrix, alpha: float, beta: float) -> float:
    enter = [0.0] * p
    for k in range(1, p):
        end = [max(enter[i], enter[(i + k) % p]) + (alpha + float(matrix[i][(i + k) % p]) * beta) for i in range(p)]
        enter = [max(end[i], end[(i - k) % p]) for i in range(p)]
    return float(max(enter))


register(AlgorithmSpec("pairwise", "alltoall", _pairwise, cost_alltoall,
                       "p-1 steps, step k sends block (i, i+k) to rank i+k", SOURCE))
register(AlgorithmSpec("pairwise", "alltoallv", _pairwise, cost_alltoallv,
                       "p-1 steps, step k sends block (i, i+k) to rank i+k", SOURCE))
