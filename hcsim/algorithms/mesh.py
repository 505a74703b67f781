"""Mesh (full-mesh direct): every rank talks to all its peers at once, one step per phase.

RS: rank r sends block j to rank j, which reduces the p-1 blocks it receives one after
another; AG: rank r sends its block to everyone; AR = RS + AG. Broadcast and Reduce are
HCCL's Star (the root talks to everyone in one step); AlltoAll sends every block directly.

Costs (HCCL docs coll_algo_intro Mesh / Star, FACTS.md s1; b = n/p):
RS a + b beta + (p-1) b gamma; AG a + b beta; AR 2a + 2b beta + (p-1) b gamma;
Bcast a + n beta; Reduce a + n beta + (p-1) n gamma; AlltoAll a + b beta.
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, data_bytes, make_step, split_bytes

SOURCE = "hicann/hccl docs/zh/user_guide/coll_algo_intro (Mesh, Star); FACTS.md s1"


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


def _star(args: CollectiveArgs, reduce: bool) -> Schedule:
    p, root = args.p, args.root
    others = np.array([r for r in range(p) if r != root])
    src, dst = (others, root) if reduce else (root, others)
    step = make_step(np.broadcast_to(src, others.shape), np.broadcast_to(dst, others.shape),
                     args.nbytes, reduce, 0, 1)
    return Schedule(args, 1, [step], split_bytes(args.nbytes, 1), "mesh")


def _alltoall(args: CollectiveArgs) -> Schedule:
    p = args.p
    space = ChunkSpace(split_bytes(data_bytes(args), p * p))
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


def cost_broadcast(args, m):
    return m.alpha_s + args.nbytes * m.beta_s_per_B


def cost_reduce(args, m):
    return m.alpha_s + args.nbytes * m.beta_s_per_B + (args.p - 1) * args.nbytes * m.gamma_s_per_B


def cost_alltoall(args, m):
    return m.alpha_s + args.nbytes / args.p * m.beta_s_per_B


register(AlgorithmSpec("mesh", "allreduce", lambda a: _mesh(a, ("rs", "ag")), cost_allreduce,
                       "full-mesh reduce-scatter then full-mesh allgather, 2 steps", SOURCE))
register(AlgorithmSpec("mesh", "reducescatter", lambda a: _mesh(a, ("rs",)), cost_reducescatter,
                       "every rank sends block j to rank j at once", SOURCE))
register(AlgorithmSpec("mesh", "allgather", lambda a: _mesh(a, ("ag",)), cost_allgather,
                       "every rank sends its block to every peer at once", SOURCE))
register(AlgorithmSpec("mesh", "broadcast", lambda a: _star(a, False), cost_broadcast,
                       "Star: the root sends the buffer to every rank at once", SOURCE))
register(AlgorithmSpec("mesh", "reduce", lambda a: _star(a, True), cost_reduce,
                       "Star: every rank sends to the root, which reduces them in turn", SOURCE))
register(AlgorithmSpec("mesh", "alltoall", _alltoall, cost_alltoall,
                       "every rank sends every block straight to its destination at once", SOURCE))
