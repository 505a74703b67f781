"""In-network AllReduce through the switch every rank is linked to (NVLink SHARP, NCCL's NVLS).

The switch reduces what the ranks send it and multicasts what one rank sends it to all of them,
so no rank-to-rank exchange is needed. For each segment of the buffer (NCCL's single-node NVLS
allreduce, NVIDIA/nccl src/device/all_reduce.h ``runNvls``; the bus model in src/graph/tuning.cc,
both read at 5067397c):

(a) every rank sends the whole segment to the switch, which reduces the p copies (``multimem``
    load-reduce);
(b) the switch sends rank i the reduced i-th 1/p of the segment;
(c) rank i sends that reduced piece back to the switch (``multimem`` store);
(d) the switch multicasts every piece to every rank.

Each rank's link to the switch so carries n (1 + 1/p) bytes each way, where a ring's carries
2 (p - 1)/p n: 1.125 n against 1.75 n on 8 ranks. The four stages are pipelined over k segments
(step t holds (a) of segment t, (b) of t-1, (c) of t-2 and (d) of t-3), so a link is busy with
two stages at once, as NCCL's NVLS kernel runs its reduce and multicast warps side by side.
The switch is the schedule's extra endpoint (:attr:`~hcsim.algorithms.schedule.Schedule.in_network`):
the engine finds it and charges its transfers at the switch's ``in_network_efficiency`` of the
link rate (NCCL's ``nvlsEfficiency``: 0.85 on Hopper, 0.74 on Blackwell, tuning.cc).

The schedule is streamed: a (rank, switch) pair that carried a transfer in the step before pays
no per-step overhead or latency again; NCCL runs NVLS with its Simple protocol only (tuning.cc
skips LL and LL128 for it), so the protocol is chosen as for the largest message.

Cost (alpha per pair that starts a stream, beta the seconds per byte at the in-network rate: the
link's over the efficiency; segments s_t, their largest pieces q_t ~ s_t / p, both 0 outside
0..k-1): every transfer involves the switch, which enters a step when its transfers of the step
before have finished, so the steps follow one another, and step t lasts the longer of a rank's
uplink, (s_t + q_{t-2}) beta, and its downlink, (q_{t-1} + s_{t-3}) beta, each with alpha added in
a step where its pair starts a stream (it carried nothing in the step before: step 0 for the
uplink and 1 for the downlink; with one segment also steps 2 and 3). For k >= 2:

    T = alpha + s_0 beta + max(s_1 beta, alpha + q_0 beta) + sum_{t=2}^{k+2} max(s_t + q_{t-2}, q_{t-1} + s_{t-3}) beta,

which tends to n (1 + 1/p) beta for many segments. No gamma: the switch reduces at line rate.
"""

from __future__ import annotations

import numpy as np

from ..limits import MAX_SIZE_BYTES
from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import (
    ChunkSpace,
    CollectiveArgs,
    LazySteps,
    Schedule,
    make_step,
    split_bytes,
)

SOURCE = ("NVIDIA/nccl src/device/all_reduce.h (runNvls) and src/graph/tuning.cc (nvlsEfficiency, NVLS Simple "
          "only), read at 5067397c; NVIDIA, 'NVLink SHARP' (Hopper architecture whitepaper, 2022)")

MIN_SEGMENT_BYTES = 64 << 10
"""Smallest segment (64 KiB): a buffer below twice this is one segment."""

MAX_SEGMENTS = 256
"""Most segments: the pipeline's fill (three stages of one segment) is then at most 3/256 of the
transfer time, and the verifier's state (p + 1 endpoints x 256 p chunks x p contributors) fits
its limit up to 48 ranks."""


NVLS_REDUCTIONS = {**{d: ("sum", "max", "min") for d in ("int32", "uint32", "int64", "uint64", "fp16", "bf16")},
                   "fp32": ("sum",), "fp64": ("sum",)}
"""The data types the switch reduces and with which operations (``ncclNvlsSupported``, NVIDIA/nccl
src/include/device.h, read at 5067397c); NCCL runs anything else without NVLS."""


def check_reduction(dtype: str | None, reduce_op: str) -> None:
    """A one-line error unless the switch can reduce ``dtype`` with ``reduce_op`` (None: bytes, taken as fp32).

    Examples
    --------
    >>> check_reduction("bf16", "max")
    >>> check_reduction("fp32", "prod")
    Traceback (most recent call last):
    ...
    hcsim.errors.ConfigError: reduce_op = 'prod': nvls reduces fp32 with sum only (NCCL's ncclNvlsSupported)
    """
    from ..errors import bad_value

    d = dtype or "fp32"
    allowed = NVLS_REDUCTIONS.get(d, ())
    if reduce_op not in allowed:
        raise bad_value("reduce_op" if allowed else "dtype", reduce_op if allowed else d,
                        f"nvls reduces {d} with {' or '.join(allowed)} only (NCCL's ncclNvlsSupported)" if allowed else
                        "one the switch reduces: " + ", ".join(NVLS_REDUCTIONS) + " (NCCL's ncclNvlsSupported)")


def segments(nbytes: int) -> int:
    """How many segments NVLS cuts ``nbytes`` into.

    Examples
    --------
    >>> [segments(n) for n in (0, 100_000, 1 << 20, 1 << 33)]
    [1, 1, 16, 256]
    """
    return max(1, min(int(nbytes) // MIN_SEGMENT_BYTES, MAX_SEGMENTS))


def _nvls(args: CollectiveArgs) -> Schedule:
    p, n = args.p, int(args.nbytes)
    k = segments(n)
    space = ChunkSpace(split_bytes(n, k * p))  # segment t = chunks [t p, (t + 1) p); piece i = chunk t p + i
    ranks = np.arange(p)
    switch = np.full(p, p)
    # stage: (src, dst, reduce, first chunk of segment u, chunks a transfer carries); a = (a) into the switch,
    # b = (b) piece i to rank i, c = (c) piece i back, d = (d) the segment to every rank
    stages = {"a": (ranks, switch, True, lambda u: np.full(p, u * p), p),
              "b": (switch, ranks, False, lambda u: u * p + ranks, 1),
              "c": (ranks, switch, False, lambda u: u * p + ranks, 1),
              "d": (switch, ranks, False, lambda u: np.full(p, u * p), p)}
    arrays: dict = {}  # the rank arrays of each combination of stages, shared by every step that has it, so the
    # engine routes a combination once (it caches routing by array identity)

    def step(t):
        active = [(name, t - lag) for lag, name in enumerate("abcd") if 0 <= t - lag < k]
        key = tuple(name for name, _ in active)
        if key not in arrays:
            arrays[key] = tuple(np.concatenate([stages[name][i] for name, _ in active]) if i < 2 else
                                np.concatenate([np.full(p, stages[name][2]) for name, _ in active]) for i in range(3))
        src, dst, reduce = arrays[key]
        lo = np.concatenate([stages[name][3](u) for name, u in active])
        hi = lo + np.concatenate([np.full(p, stages[name][4]) for name, _ in active])
        return make_step(src, dst, space.range_bytes(lo, hi), reduce, lo, hi)

    return Schedule(args, k * p, LazySteps(k + 3, step), space.chunk_bytes, "nvls", streamed=True,
                    protocol_bytes=MAX_SIZE_BYTES, in_network=True)


def cost_allreduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    """The closed form above; ``m.beta_s_per_B`` is the in-network rate's (the link's over the efficiency)."""
    p, n = args.p, int(args.nbytes)
    k = segments(n)
    chunks = split_bytes(n, k * p).reshape(k, p)
    seg, piece = chunks.sum(axis=1), chunks.max(axis=1)  # a segment, and its largest piece

    def at(a, t):
        return float(a[t]) if 0 <= t < k else 0.0

    def active(t, first):  # a link carries a stage starting at step `first` (and one at first + 2) in step t
        return 0 <= t - first < k or 0 <= t - first - 2 < k

    total = 0.0
    for t in range(k + 3):
        link = []
        if active(t, 0):  # a rank's uplink: (a) segment t, (c) its piece of segment t-2
            link.append(m.alpha_s * (not active(t - 1, 0)) + (at(seg, t) + at(piece, t - 2)) * m.beta_s_per_B)
        if active(t, 1):  # its downlink: (b) its piece of segment t-1, (d) segment t-3
            link.append(m.alpha_s * (not active(t - 1, 1)) + (at(piece, t - 1) + at(seg, t - 3)) * m.beta_s_per_B)
        total += max(link)
    return total


register(AlgorithmSpec("nvls", "allreduce", _nvls, cost_allreduce,
                       "in-network: each rank's buffer reduced and multicast by the switch all ranks share (NVLS)",
                       SOURCE, shape=lambda a: segments(a.nbytes), in_network=True))
