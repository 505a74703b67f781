"""Star: a rooted collective in one step; the root talks to every other rank at once.

Broadcast: the root sends the buffer to everyone; Reduce: everyone sends to the root, which
reduces the p-1 buffers one after another; Scatter: the root sends rank r its block; Gather:
every rank sends its block to the root.

Costs (HCCL docs coll_algo_intro Star, FACTS.md s1; b = n/p): Bcast a + n beta;
Reduce a + n beta + (p-1) n gamma; Scatter and Gather a + b beta, where b is the largest
block a non-root rank gets (n/p rounded up, unless only the root's block is the larger one).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, block_bytes, make_step

SOURCE = "hicann/hccl docs/zh/user_guide/coll_algo_intro (Star); FACTS.md s1"


def _star(args: CollectiveArgs) -> Schedule:
    p, root, coll = args.p, args.root, args.collective
    space = ChunkSpace(block_bytes(args))
    others = np.array([r for r in range(p) if r != root])
    toward_root = coll in ("reduce", "gather")
    src = others if toward_root else np.full(p - 1, root)
    dst = np.full(p - 1, root) if toward_root else others
    if coll in ("scatter", "gather"):
        lo = others
        step = make_step(src, dst, space.range_bytes(lo, lo + 1), False, lo, lo + 1)
    else:
        step = make_step(src, dst, args.nbytes, coll == "reduce", 0, 1)
    return Schedule(args, space.count, [step], space.chunk_bytes, "star")


def cost_broadcast(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return m.alpha_s + args.nbytes * m.beta_s_per_B


def cost_reduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return m.alpha_s + args.nbytes * m.beta_s_per_B + (args.p - 1) * args.nbytes * m.gamma_s_per_B


def cost_scatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p = args.p
    q, e = divmod(int(args.nbytes), p)  # the first e ranks' blocks hold q + 1 bytes
    larger = e >= 2 or (e == 1 and args.root != 0)
    return m.alpha_s + (q + larger) * m.beta_s_per_B


for _coll, _cost, _what in (
        ("broadcast", cost_broadcast, "the root sends the buffer to every rank at once"),
        ("reduce", cost_reduce, "every rank sends to the root, which reduces them in turn"),
        ("scatter", cost_scatter, "the root sends every rank its block at once"),
        ("gather", cost_scatter, "every rank sends its block to the root at once")):
    register(AlgorithmSpec("star", _coll, _star, _cost, _what, SOURCE))
