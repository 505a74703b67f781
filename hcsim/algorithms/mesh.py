"""Mesh (full-mesh direct): every rank talks to all its peers at once, one step per phase.

RS: rank r sends block j to rank j, which reduces the p-1 blocks it receives one after
another; AG: rank r sends its block to everyone; AR = RS + AG; AlltoAll(V) sends every
block directly. (Rooted collectives in one step are :mod:`.star`.)

Costs (HCCL docs coll_algo_intro Mesh / Star, FACTS.md s1; b = n/p):
RS a + b beta + (p-1) b gamma; AG a + b beta; AR 2a + 2b beta + (p-1) b gamma;
AlltoAll a + b beta; AlltoAllV a + beta max_ij n(i, j).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import (
    ChunkSpace,
    CollectiveArgs,
    Schedule,
    block_bytes,
    data_bytes,
    make_step,
    split_bytes,
)

SOURCE = "hicann/hccl docs/zh/user_guide/coll_algo_intro (Mesh); FACTS.md s1"


def _pairs(p):
    s, d = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    keep = s != d
    return s[keep], d[keep]


def _mesh(args: CollectiveArgs, phases) -> Schedule:
    p = args.p
    space = ChunkSpace(split_bytes(data_bytes(args), p))
    s, d = _pairs(p)
    steps = []
    if "rs" in phases:
        steps.append(make_step(s, d, space.range_bytes(d, d + 1), True, d, d + 1))
    if "ag" in phases:
        steps.append(make_step(s, d, space.range_bytes(s, s + 1), False, s, s + 1))
    return Schedule(args, p, steps, space.chunk_bytes, "mesh")


def _alltoall(args: CollectiveArgs) -> Schedule:
    p = args.p
    space = ChunkSpace(block_bytes(args))
    s, d = _pairs(p)
    blk = s * p + d
    step = make_step(s, d, space.range_bytes(blk, blk + 1), False, blk, blk + 1)
    return Schedule(args, p * p, [step], space.chunk_bytes, "mesh")


def cost_reducescatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    b = args.nbytes / args.p
    return m.alpha_s + b * m.beta_s_per_B + (args.p - 1) * b * m.gamma_s_per_B


def cost_allgather(args, m):
    return m.alpha_s + args.nbytes / args.p * m.beta_s_per_B


def cost_allreduce(args, m):
    return cost_reducescatter(args, m) + cost_allgather(args, m)


def cost_alltoall(args, m):
    return m.alpha_s + args.nbytes / args.p * m.beta_s_per_B


def cost_alltoallv(args, m):
    sizes = np.array(args.send_matrix, dtype=float)
    np.fill_diagonal(sizes, 0)
    return float(m.alpha_s + sizes.max() * m.beta_s_per_B)


register(AlgorithmSpec("mesh", "allreduce", lambda a: _mesh(a, ("rs", "ag")), cost_allreduce,
                       "full-mesh reduce-scatter then full-mesh allgather, 2 steps", SOURCE))
register(AlgorithmSpec("mesh", "reducescatter", lambda a: _mesh(a, ("rs",)), cost_reducescatter,
                       "every rank sends block j to rank j at once", SOURCE))
register(AlgorithmSpec("mesh", "allgather", lambda a: _mesh(a, ("ag",)), cost_allgather,
                       "every rank sends its block to every peer at once", SOURCE))
register(AlgorithmSpec("mesh", "alltoall", _alltoall, cost_alltoall,
                       "every rank sends every block straight to its destination at once", SOURCE))
register(AlgorithmSpec("mesh", "alltoallv", _alltoall, cost_alltoallv,
                       "every rank sends every block straight to its destination at once", SOURCE))
