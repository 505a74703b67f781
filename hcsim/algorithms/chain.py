"""Pipelined chain for Broadcast and Reduce: the buffer streams along a chain of the ranks in
segments, every hop forwarding a segment as soon as it has it.

Broadcast: hop h (h = 0..p-2) goes from rank root+h to root+h+1; segment i crosses hop h in
step h + i, so the first segment reaches the last rank in step p-2 and the last one in step
p-2+k-1. Reduce runs the same chain towards the root (root+1 -> root+2 -> ... -> root+p-1 ->
root), every hop reducing the segment it receives into the receiver's own. This is how NCCL runs
both inside one NVLink domain (its ring broadcast and reduce: ``runRing`` in NVIDIA/nccl
src/device/broadcast.h and reduce.h, read at 5067397c, forward each chunk along the ring's order
as it arrives) and Open MPI's segmented pipeline broadcast and reduce.

The schedule is streamed (:attr:`~hcsim.algorithms.schedule.Schedule.streamed`): a segment after
the first on a hop starts without the per-step overhead and latency, which the segment before it
has covered (the library keeps several segments in flight on a connection: NCCL's ``NCCL_STEPS``
= 8 slots); and the protocol is chosen by the whole call, not the segment
(:attr:`~hcsim.algorithms.schedule.Schedule.protocol_bytes`). A library picks the protocol whose
call costs least: the chain's call pays p - 1 hop latencies and moves n bytes at the protocol's
rate, so two protocols cost it alike where n / (p - 1) is the size at which they cost one message
alike, the crossover message regimes are built on (:func:`hcsim.calibrate.nccl_protocol_regimes`);
the chain's protocol size is therefore n // (p - 1).

Segments: ``k = min(max(1, n // MIN_SEGMENT_BYTES), MAX_SEGMENTS)``, equal to a byte. The
schedule's structure depends on the size through k (its spec's ``shape``), so a sweep's analytical
fast path prepares it once per shape (its schedule built, counted and verified, its path parameters
cached with the shape; on thousands of ranks the analytical mode meets the work bound as the
event-driven one does), and it cannot be a level of a composed algorithm (a level is built once, at one size). The chain
costs the transfer time of the whole buffer plus the fill, (p-2) segments' time: with 1,024
segments at most (p-2)/1,024 of the transfer time (0.6% on 8 ranks).

Cost (alpha = a per hop, paid once by each hop's first segment; s0 = ceil(n/k), the largest
segment): every path through the steps' dependencies has k + p - 2 transfers and at most p - 1
first segments, and the longest keeps the first segment down the chain, then takes the rest on
the last hop:

* Bcast (p-1) a + ((p-2) s0 + n) beta;
* Reduce (p-1) a + ((p-2) s0 + n)(beta + gamma).

Without pipelining (k = 1) these are the unsegmented chain's (p-1)(a + n beta) (``ring``).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, LazySteps, Schedule, make_step, split_bytes

SOURCE = ("NVIDIA/nccl src/device/broadcast.h, reduce.h (runRing, read at 5067397c); pipelined chain "
          "cost: Pjesivac-Grbovic et al. 2007, 'Performance analysis of MPI collective operations'")

MIN_SEGMENT_BYTES = 64 << 10
"""Smallest segment the chain cuts a buffer into (64 KiB): a buffer below twice this is one
segment, and the chain is then the unsegmented one."""

MAX_SEGMENTS = 1024
"""Most segments: beyond 64 MiB the segments grow instead, so the schedule stays at most
p - 2 + 1,024 steps of at most p - 1 transfers; the fill is then (p-2)/1,024 of the transfer time."""


def segments(nbytes: int) -> int:
    """How many segments the chain cuts ``nbytes`` into.

    Examples
    --------
    >>> [segments(n) for n in (0, 100_000, 1 << 20, 1 << 33)]
    [1, 1, 16, 1024]
    """
    return max(1, min(int(nbytes) // MIN_SEGMENT_BYTES, MAX_SEGMENTS))


def _chain(args: CollectiveArgs, reduce: bool) -> Schedule:
    p, root, n = args.p, args.root, int(args.nbytes)
    k = segments(n)
    space = ChunkSpace(split_bytes(n, k))

    def step(t):
        hops = np.arange(max(0, t - k + 1), min(t, p - 2) + 1)  # hop h carries segment t - h
        seg = t - hops
        rel = hops + 1 if reduce else hops  # the sender, counted from the root
        return make_step((rel + root) % p, (rel + 1 + root) % p, space.range_bytes(seg, seg + 1), reduce, seg, seg + 1)

    return Schedule(args, k, LazySteps(p - 2 + k, step), space.chunk_bytes, "chain", streamed=True,
                    protocol_bytes=n // (p - 1))


def _path_bytes(args: CollectiveArgs) -> int:
    p, n = args.p, int(args.nbytes)
    k = segments(n)
    return (p - 2) * -(-n // k) + n


def cost_broadcast(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return (args.p - 1) * m.alpha_s + _path_bytes(args) * m.beta_s_per_B


def cost_reduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    return (args.p - 1) * m.alpha_s + _path_bytes(args) * (m.beta_s_per_B + m.gamma_s_per_B)


register(AlgorithmSpec("chain", "broadcast", lambda a: _chain(a, False), cost_broadcast,
                       "the buffer streams down the chain root -> root+1 -> ... in segments", SOURCE,
                       shape=lambda a: segments(a.nbytes)))
register(AlgorithmSpec("chain", "reduce", lambda a: _chain(a, True), cost_reduce,
                       "the buffer streams up the chain root+1 -> ... -> root in segments, reduced at each hop",
                       SOURCE, shape=lambda a: segments(a.nbytes)))
