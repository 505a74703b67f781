"""Double ring: two rings in opposite directions, each carrying half of every block at once.

Ring 0 runs r -> r+1 over the first half of each block, ring 1 runs r -> r-1 over the
second half, in the same steps. HCCL uses it inside A3 nodes (ring 1 is ring 0 reversed;
hcomm coll_comm_executor.cc, MutliSegSlicePrepare) and on 910A's multiple 8-card rings.

Costs (b = n/p; two disjoint links per step, so each ring costs half a block):
RS (p-1)(a + (b/2)(beta+gamma)); AG (p-1)(a + (b/2) beta); AR their sum. With p = 2 both rings
share the single link between the ranks, so the bandwidth term is a whole block.
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
    data_bytes,
    make_step,
    split_bytes,
)

SOURCE = "hcomm coll_comm_executor.cc (double ring); FACTS.md s1"


def _double_ring(args: CollectiveArgs, phases) -> Schedule:
    p = args.p
    halves = np.concatenate([split_bytes(b, 2) for b in split_bytes(data_bytes(args), p)])
    space = ChunkSpace(halves)  # chunk 2b: ring 0's half of block b; 2b+1: ring 1's
    src = np.arange(p)
    fwd, bwd = (src + 1) % p, (src - 1) % p
    both_src = np.concatenate([src, src])
    both_dst = np.concatenate([fwd, bwd])
    n_rs = p - 1 if "rs" in phases else 0
    n_ag = p - 1 if "ag" in phases else 0

    def step(k):
        if k < n_rs:
            b0, b1, red = (src - k - 1) % p, (src + k + 1) % p, True
        else:
            j = k - n_rs
            b0, b1, red = (src - j) % p, (src + j) % p, False
        lo = np.concatenate([2 * b0, 2 * b1 + 1])
        return make_step(both_src, both_dst, space.range_bytes(lo, lo + 1), red, lo, lo + 1)

    return Schedule(args, 2 * p, LazySteps(n_rs + n_ag, step), space.chunk_bytes, "double_ring")


def _half(args):
    return args.nbytes / args.p if args.p == 2 else args.nbytes / args.p / 2


def cost_allgather(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return (args.p - 1) * (m.alpha_s + _half(args) * m.beta_s_per_B)


def cost_reducescatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    # each rank reduces both halves it receives: the reduction unit handles a whole block
    return (args.p - 1) * (m.alpha_s + _half(args) * m.beta_s_per_B + args.nbytes / args.p * m.gamma_s_per_B)


def cost_allreduce(args, m):
    return cost_reducescatter(args, m) + cost_allgather(args, m)


for _coll, _cost, _ph in (("allreduce", cost_allreduce, ("rs", "ag")),
                          ("reducescatter", cost_reducescatter, ("rs",)),
                          ("allgather", cost_allgather, ("ag",))):
    register(AlgorithmSpec("double_ring", _coll, (lambda ph: (lambda a: _double_ring(a, ph)))(_ph), _cost,
                           "two opposite rings, half of every block each", SOURCE))
