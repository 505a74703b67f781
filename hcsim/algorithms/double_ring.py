"""Double ring: two rings in opposite directions, each carrying half of every block at once.

Ring 0 runs r -> r+1 over the first half of each block, ring 1 runs r -> r-1 over the
second half, in the same steps: the multi-ring schedule with strides 1 and p-1
(:func:`hcsim.algorithms.multiring.rings_schedule`). HCCL uses it inside A3 nodes (ring 1 is ring 0 reversed;
hcomm coll_comm_executor.cc, MutliSegSlicePrepare) and on 910A's multiple 8-card rings.

Costs (b = n/p; two disjoint links per step, so each ring costs half a block):
RS (p-1)(a + (b/2)(beta+gamma)); AG (p-1)(a + (b/2) beta); AR their sum. With p = 2 both rings
share the single link between the ranks, so the bandwidth term is a whole block.
"""

from __future__ import annotations

from .cost import AlphaBetaGamma
from .multiring import rings_schedule
from .registry import AlgorithmSpec, register
from .schedule import CollectiveArgs, Schedule

SOURCE = "hcomm coll_comm_executor.cc (double ring); FACTS.md s1"


def _double_ring(args: CollectiveArgs, phases) -> Schedule:
    # ring 0 r -> r+1 over the first half of each block, ring 1 r -> r-1 (stride p-1) over the second
    return rings_schedule(args, phases, (1, args.p - 1), "double_ring")


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
