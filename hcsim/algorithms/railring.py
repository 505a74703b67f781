"""Rail rings: one ring per local index, all at once, each crossing between servers on its own rail.

On S servers of L ranks each (rank s * L + l is local index l of server s), ring c (c = 0..L-1) visits
server 0's ranks in the order c, c+1, ..., c+L-1 (mod L), leaves it from local index c-1, enters server 1 at
the same local index c-1, visits server 1's ranks in the reverse order c-1, c-2, ..., c, leaves from local c,
enters server 2 at local c, and so on, servers alternating between the two orders. Every crossing between
two servers so joins ranks of one local index: on a rail-optimised network (``leaf_spine(rails=True)``, each
local index its own rail switch) a crossing takes its rail alone, and the L rings cross on L different rails
(ring c uses rail c-1 going out of an even server and rail c going out of an odd one). With an odd number of
servers the wrap from the last server (an even one) to server 0 joins local c-1 to local c, which the
network routes as it can (through a peer inside either server). On one server every rail ring would be the
same cycle (rotated), so there the schedule is the ring itself, one ring carrying whole blocks (the same
transfers on the same links, without splitting them in L parts).

This is how NCCL runs a ring across nodes: several channels, each a ring whose path through a node enters and
leaves by the NICs of one rail, so that together they drive every NIC (NVIDIA/nccl src/graph/search.cc and
connect.cc, ``ncclTopoCompute`` / ring setup; the channel count and per-channel rate of its tuner,
src/graph/tuning.cc, read at 5067397c); each ring carries 1/L of every block, as
:func:`hcsim.algorithms.multiring.orders_schedule` runs rings over given rank orders.

Costs (b = n/p, k = L rings each on its own rail, k = 1 on one server; the links inside a server taken as not
binding): RS
(p-1)(a + (b/k) beta + b gamma); AG (p-1)(a + (b/k) beta); AR their sum; exact where each step's slowest
transfers are the crossings and the rails are the only shared resource they use (a rails topology with fast
links inside the servers). Where the rings share links (inside a server, or one NIC per server) the
event-driven mode charges the sharing and the closed form is optimistic, as for ``multiring``.
"""

from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from .multiring import orders_schedule
from .registry import AlgorithmSpec, register
from .schedule import CollectiveArgs

SOURCE = ("NVIDIA/nccl src/graph/search.cc, connect.cc (rings per channel through a node's NICs), "
          "src/graph/tuning.cc (read at 5067397c)")


def rail_orders(servers: int, local: int) -> np.ndarray:
    """The L = ``local`` rank orders of the rail rings on ``servers`` servers (rank s * L + l).

    Examples
    --------
    >>> rail_orders(2, 4).tolist()
    [[0, 1, 2, 3, 7, 6, 5, 4], [1, 2, 3, 0, 4, 7, 6, 5], [2, 3, 0, 1, 5, 4, 7, 6], [3, 0, 1, 2, 6, 5, 4, 7]]
    >>> rail_orders(1, 3).tolist()
    [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    """
    out = np.empty((local, servers * local), dtype=np.int64)
    step = np.arange(local, dtype=np.int64)
    for c in range(local):
        forward = (c + step) % local  # c, c+1, ..., c-1
        backward = (c - 1 - step) % local  # c-1, c-2, ..., c
        for s in range(servers):
            out[c, s * local:(s + 1) * local] = s * local + (forward if s % 2 == 0 else backward)
    return out


def _layout(args: CollectiveArgs) -> tuple[int, int]:
    sizes = args.server_sizes
    if len(set(sizes)) != 1:
        raise ScheduleError(f"servers = {sizes}: railring needs servers of equal size")
    return len(sizes), sizes[0]


def _schedule(phases):
    def build(args: CollectiveArgs):
        servers, local = _layout(args)
        orders = rail_orders(servers, local) if servers > 1 else np.arange(args.p, dtype=np.int64)[None, :]
        return orders_schedule(args, phases, orders, "railring")
    return build


def _part(args: CollectiveArgs) -> float:
    servers, local = _layout(args)
    return args.nbytes / args.p / (local if servers > 1 else 1)


def cost_allgather(args: CollectiveArgs, m) -> float:
    return (args.p - 1) * (m.alpha_s + _part(args) * m.beta_s_per_B)


def cost_reducescatter(args: CollectiveArgs, m) -> float:
    # each rank reduces every part it receives: the reduction unit handles a whole block a step
    return (args.p - 1) * (m.alpha_s + _part(args) * m.beta_s_per_B + args.nbytes / args.p * m.gamma_s_per_B)


def cost_allreduce(args: CollectiveArgs, m) -> float:
    return cost_reducescatter(args, m) + cost_allgather(args, m)


for _coll, _cost, _phases in (("allreduce", cost_allreduce, ("rs", "ag")),
                              ("reducescatter", cost_reducescatter, ("rs",)),
                              ("allgather", cost_allgather, ("ag",))):
    register(AlgorithmSpec("railring", _coll, _schedule(_phases), _cost,
                           "one ring per local index, each crossing servers on its own rail (NCCL's channels)",
                           SOURCE))
