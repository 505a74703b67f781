"""Rail rings: one ring per local index, all at once, each crossing between servers on its own rail.

On S servers of L ranks each (rank s * L + l is local index l of server s), ring c (c = 0..L-1) enters server s at
local index e_s and leaves it from local index e_{s+1} (e_S = e_0), so every crossing between two servers joins
ranks of one local index: on a rail-optimised network (``leaf_spine(rails=True)``, each local index its own rail
switch) a crossing takes its rail alone. The entries alternate, e_s = c on even s and c-1 on odd s, so that server s
is visited in the order c, c+1, ..., c-1 (even s) or c-1, c-2, ..., c (odd s), and for an even S the cycle closes;
for an odd S the last server is entered at c-2 instead (visited c-2, then the others upwards from c-1 skipping c,
then c; the server before it leaves from c-2, visited c-1, then the others downwards skipping c-2, then c-2), which
needs L >= 3. For a given pair of servers and direction the crossings of the L rings then use L different rails.
With an odd S and L = 2 no such cycle exists: the wrap from the last server to server 0 joins local c-1 to local c,
which the network routes through a peer inside either server, and two rings' wraps may then share a rail (measured
on a 3 x 2 rails topology in tests/test_railring.py). On one server every rail ring would be the same cycle
(rotated), so there the schedule is the ring itself, one ring carrying whole blocks.

This is how NCCL runs a ring across nodes: several channels, each a ring whose path through a node enters and
leaves by the NICs of one rail, so that together they drive every NIC (NVIDIA/nccl src/graph/search.cc and
connect.cc, ``ncclTopoCompute`` / ring setup; the channel count and per-channel rate of its tuner,
src/graph/tuning.cc, read at 5067397c); each ring carries 1/L of every block, as
:func:`hcsim.algorithms.multiring.orders_schedule` runs rings over given rank orders.

Costs (b = n/p, k = L rings each on its own rail, k = 1 on one server; the links inside a server taken as not
binding): RS (p-1)(a + (b/k) beta + b gamma); AG (p-1)(a + (b/k) beta); AR their sum; exact where each step's
slowest transfers are the crossings and the rails are the only shared resource they use (a rails topology with fast
links inside the servers). Where the rings share links (inside a server, or one NIC per server) the event-driven
mode charges the sharing and the closed form is optimistic, as for ``multiring``.
"""

from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from .multiring import orders_schedule, ring_family_costs
from .registry import AlgorithmSpec, register
from .schedule import CollectiveArgs

SOURCE = ("NVIDIA/nccl src/graph/search.cc, connect.cc (rings per channel through a node's NICs), "
          "src/graph/tuning.cc (read at 5067397c)")


def _path(first: int, last: int, local: int, step: int) -> list[int]:
    """The local indexes from ``first`` to ``last`` (``first`` != ``last``), the others in between in the direction
    ``step`` (+1 or -1) from ``first``, skipping ``last``."""
    middle = [(first + step * i) % local for i in range(1, local)]
    return [first] + [x for x in middle if x != last] + [last]


def rail_orders(servers: int, local: int) -> np.ndarray:
    """The L = ``local`` rank orders of the rail rings on ``servers`` servers (rank s * L + l), shape (L, S L).

    Parameters
    ----------
    servers, local : int
        Servers (S >= 1) and ranks a server (L >= 1).

    Returns
    -------
    numpy.ndarray
        Row c: ring c's ranks in the order it visits them.

    Examples
    --------
    >>> rail_orders(2, 4).tolist()
    [[0, 1, 2, 3, 7, 6, 5, 4], [1, 2, 3, 0, 4, 7, 6, 5], [2, 3, 0, 1, 5, 4, 7, 6], [3, 0, 1, 2, 6, 5, 4, 7]]
    >>> rail_orders(3, 3)[0].tolist()
    [0, 1, 2, 5, 3, 4, 7, 8, 6]
    >>> rail_orders(1, 3).tolist()
    [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    """
    out = np.empty((local, servers * local), dtype=np.int64)
    for c in range(local):
        if local == 1:
            entries = [0] * servers
        else:
            entries = [c if s % 2 == 0 else (c - 1) % local for s in range(servers)]
            if servers % 2 == 1 and servers > 1 and local >= 3:
                entries[-1] = (c - 2) % local  # an odd cycle: a third local index for the last server
        for s in range(servers):
            first, last = entries[s], entries[(s + 1) % servers]
            if local == 1:
                order = [0]
            elif first == last:  # one server, or an odd count of servers with L = 2: the plain rotation
                order = [(first + i) % local for i in range(local)]
            else:
                order = _path(first, last, local, 1 if s % 2 == 0 else -1)
            out[c, s * local:(s + 1) * local] = s * local + np.asarray(order, dtype=np.int64)
    return out


def _layout(args: CollectiveArgs) -> tuple[int, int]:
    sizes = args.server_sizes
    if len(set(sizes)) != 1:
        raise ScheduleError(f"servers = {sizes} (ranks per server, from the topology and the ranks chosen): railring "
                            "needs servers of equal size")
    return len(sizes), sizes[0]


def _schedule(phases):
    def build(args: CollectiveArgs):
        servers, local = _layout(args)
        orders = rail_orders(servers, local) if servers > 1 else np.arange(args.p, dtype=np.int64)[None, :]
        return orders_schedule(args, phases, orders, "railring")
    return build


def _part_bytes(args: CollectiveArgs) -> float:
    servers, local = _layout(args)
    return args.nbytes / args.p / (local if servers > 1 else 1)


_COSTS = ring_family_costs(_part_bytes)
cost_allgather, cost_reducescatter, cost_allreduce = (_COSTS[c] for c in ("allgather", "reducescatter", "allreduce"))


for _coll, _cost, _phases in (("allreduce", cost_allreduce, ("rs", "ag")),
                              ("reducescatter", cost_reducescatter, ("rs",)),
                              ("allgather", cost_allgather, ("ag",))):
    register(AlgorithmSpec("railring", _coll, _schedule(_phases), _cost,
                           "one ring per local index, each crossing servers on its own rail (NCCL's channels)",
                           SOURCE, equal_servers=True))
