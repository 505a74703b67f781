"""Ring: p-1 steps, each rank sends one block to its right neighbour (rank r -> r+1).

AllReduce runs ReduceScatter then AllGather on the same ring. Broadcast and Reduce run the
whole buffer along the chain from the root (no pipelining). SendRecv is nccl-tests'
pattern: every rank sends its buffer to the next one in a single step.

Costs (HCCL docs coll_algo_intro, FACTS.md section 1; b = n/p):
RS (p-1)(a + b(beta+gamma)); AG (p-1)(a + b beta); AR the sum;
Bcast (p-1)(a + n beta); Reduce (p-1)(a + n(beta+gamma)); Scatter and Gather (pipelined
chain) (p-1)(a + b beta); SendRecv a + n beta.

Scatter and Gather are exact at every size: with n = q p + e the first e ranks' blocks are
one byte larger, and the chain ends when the largest such block the farthest from the root
(d* hops) has travelled, so the time is (p-1)(a + q beta) + d* beta (see
:func:`cost_scatter`).
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
    data_bytes,
    make_step,
    split_bytes,
)

SOURCE = "hicann/hccl docs/zh/user_guide/coll_algo_intro (Ring); FACTS.md s1"


def _ring_phases(args: CollectiveArgs, phases: tuple[str, ...]) -> Schedule:
    p = args.p
    space = ChunkSpace(split_bytes(data_bytes(args), p))
    src = np.arange(p, dtype=np.int64)
    dst = (src + 1) % p
    n_rs = p - 1 if "rs" in phases else 0
    n_ag = p - 1 if "ag" in phases else 0

    def step(k):
        if k < n_rs:  # block (r - k - 1) travels one hop and is reduced into the receiver's copy
            lo = (src - k - 1) % p
            red = True
        else:  # block (r - j) is forwarded as it is
            lo = (src - (k - n_rs)) % p
            red = False
        return make_step(src, dst, space.range_bytes(lo, lo + 1), red, lo, lo + 1)

    return Schedule(args, p, LazySteps(n_rs + n_ag, step), space.chunk_bytes, "ring")


def _chain(args: CollectiveArgs, reduce: bool) -> Schedule:
    p, root = args.p, args.root
    space = ChunkSpace(split_bytes(args.nbytes, 1))
    steps = []
    for k in range(p - 1):
        rel = k + 1 if reduce else k  # reduce: 1 -> 2 -> ... -> p-1 -> 0 ; bcast: 0 -> 1 -> ...
        s = (rel + root) % p
        d = (rel + 1 + root) % p
        steps.append(make_step([s], d, args.nbytes, reduce, 0, 1))
    return Schedule(args, 1, steps, space.chunk_bytes, "ring")


def _sendrecv(args: CollectiveArgs) -> Schedule:
    p = args.p
    space = ChunkSpace(split_bytes(data_bytes(args), p))
    src = np.arange(p)
    return Schedule(args, p, [make_step(src, (src + 1) % p, space.range_bytes(src, src + 1), False, src, src + 1)],
                    space.chunk_bytes, "ring")


def _ring_scatter(args: CollectiveArgs, gather: bool) -> Schedule:
    """Pipelined chain: the root feeds the farthest block first, every rank forwards one block
    a step, so all blocks land at the last step. Gather is the same run backwards in time."""
    p, root = args.p, args.root
    space = ChunkSpace(block_bytes(args))
    steps = []
    for k in range(p - 1):
        rel = np.arange(k + 1)            # ranks rel 0..k forward this step
        dest = p - 1 - k + rel            # the block each one forwards is for rank rel dest
        src, dst, blk = (rel + root) % p, (rel + 1 + root) % p, (dest + root) % p
        steps.append((src, dst, blk))
    if gather:  # reverse time and direction: blocks flow to the root
        steps = [(dst, src, blk) for src, dst, blk in reversed(steps)]
    return Schedule(args, p, [make_step(s, d, space.range_bytes(b, b + 1), False, b, b + 1) for s, d, b in steps],
                    space.chunk_bytes, "ring")


def cost_allgather(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, b = args.p, args.nbytes / args.p
    return (p - 1) * (m.alpha_s + b * m.beta_s_per_B)


def cost_scatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    """Pipelined chain scatter (and gather, the same run backwards), exact at every size.

    Every path through the chain's steps takes one transfer per step (p-1 in all), and a
    step's transfer carries the block of one destination; a path can only reach the block
    for the rank d hops from the root at step p-1-d, so it carries at most d large blocks.
    The slowest path follows the root's sends, then the largest block that goes farthest.
    """
    p = args.p
    q, e = divmod(int(args.nbytes), p)
    big = [d for d in range(1, p) if (args.root + d) % p < e]
    path_bytes = (p - 1) * q + (max(big) if big else 0)  # an exact integer, monotone in the size,
    return (p - 1) * m.alpha_s + path_bytes * m.beta_s_per_B  # so the time is monotone to the last bit


def cost_reducescatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, b = args.p, args.nbytes / args.p
    return (p - 1) * (m.alpha_s + b * (m.beta_s_per_B + m.gamma_s_per_B))


def cost_allreduce(args, m):
    return cost_reducescatter(args, m) + cost_allgather(args, m)


def cost_broadcast(args, m):
    return (args.p - 1) * (m.alpha_s + args.nbytes * m.beta_s_per_B)


def cost_reduce(args, m):
    return (args.p - 1) * (m.alpha_s + args.nbytes * (m.beta_s_per_B + m.gamma_s_per_B))


def cost_sendrecv(args, m):
    return m.alpha_s + args.nbytes * m.beta_s_per_B


register(AlgorithmSpec("ring", "allreduce", lambda a: _ring_phases(a, ("rs", "ag")), cost_allreduce,
                       "ring reduce-scatter then ring allgather, 2(p-1) steps", SOURCE))
register(AlgorithmSpec("ring", "reducescatter", lambda a: _ring_phases(a, ("rs",)), cost_reducescatter,
                       "p-1 steps, a block per step to the right neighbour, reduced there", SOURCE))
register(AlgorithmSpec("ring", "allgather", lambda a: _ring_phases(a, ("ag",)), cost_allgather,
                       "p-1 steps, a block per step to the right neighbour", SOURCE))
register(AlgorithmSpec("ring", "broadcast", lambda a: _chain(a, False), cost_broadcast,
                       "the whole buffer along the chain root -> root+1 -> ...", SOURCE))
register(AlgorithmSpec("ring", "reduce", lambda a: _chain(a, True), cost_reduce,
                       "the whole buffer along the chain root+1 -> ... -> root, reduced at each hop",
                       SOURCE))
register(AlgorithmSpec("ring", "scatter", lambda a: _ring_scatter(a, False), cost_scatter,
                       "chain from the root, farthest block first, p-1 pipelined steps", SOURCE))
register(AlgorithmSpec("ring", "gather", lambda a: _ring_scatter(a, True), cost_scatter,
                       "chain into the root, p-1 pipelined steps (scatter run backwards)", SOURCE))
register(AlgorithmSpec("ring", "sendrecv", _sendrecv, cost_sendrecv,
                       "every rank sends its buffer to rank+1 (nccl-tests sendrecv_perf)",
                       "NVIDIA/nccl-tests src/sendrecv.cu pattern; FACTS.md s6"))
