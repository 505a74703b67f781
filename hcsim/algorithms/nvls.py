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

which tends to n (1 + 1/p) beta for many segments. No gamma: the switch reduces at line rate. beta
includes NCCL's chunking at the call's size (:func:`chunk_factor`: 1 for 128 KiB chunks, from 1 GiB on 8
GPUs, more below, where NCCL cuts the call finer and each chunk costs a little besides its bytes).
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


NVLS_CHUNK_BYTES = 128 << 10
"""NCCL's NVLS chunk (``NCCL_NVLS_CHUNKSIZE``, default 128 KiB: src/transport/nvls.cc, read at 5067397c)."""

NVLS_CHANNELS = 16
"""NCCL's NVLS channels on Hopper (``NVLS_NCHANNELS_SM90``, src/transport/nvls.cc; Blackwell: 24 in one NVLink
domain)."""

CHUNK_OVERHEAD_BYTES = 9534
"""What each NVLS chunk costs besides its bytes, in bytes at the in-network rate (about 35 ns at H100's):
measured, not cited. NCCL cuts an NVLS allreduce below 1 GiB (8 H100s) into 64 KiB chunks and the rate falls
from 274.3 to 256.9 GB/s (togethercomputer/together-nccl-tests, H100 all_reduce_nvls.out: the increments 1-8
GiB and 128-512 MiB); (1 + h/128K) / (1 + h/64K) = 256.9 / 274.3 gives h. Checked on a second server (xxrjun's
NCCL 2.29 H100: 259.0 / 276.1, 0.938 against the 0.937 this h gives) and on the first one's 32 KiB chunks
(16-32 MiB: 227 GB/s measured, 228 predicted). docs/validation.md, change 46."""


def nccl_chunk_bytes(nbytes: int, p: int, channels: int = NVLS_CHANNELS) -> int:
    """The chunk NCCL's NVLS allreduce moves at a time: 128 KiB, halved to 64, 32 and 16 KiB as the call falls
    below 64, 8 and 2 chunks per concurrent operation (``calcCollChunking``, src/enqueue.cc, read at 5067397c;
    concurrent operations = NVLS channels x heads, the heads taken as the p GPUs: on 8 H100s the rate steps
    where 16 x 8 gives 1 GiB, 64 MiB and 8 MiB). Checked on 8 Hopper GPUs only: NCCL bounds its NVLS heads
    (``NCCL_MAX_NVLS_ARITY``, not read for this rule) and Blackwell runs 24 NVLS channels, so on 72 GPUs the
    chunks may be larger than this gives. As in NCCL, the time can fall where a size crosses a step (8 GPUs:
    8 MiB - 1 byte 38.89 us, 8 MiB 32.10 us on ``single_switch(8, 450e9, 1e-6, in_network_efficiency=0.85)``).

    Examples
    --------
    >>> [nccl_chunk_bytes(n, 8) >> 10 for n in (8 << 30, 1 << 30, (1 << 30) - 1, 64 << 20, 8 << 20, 1 << 20)]
    [128, 128, 64, 64, 32, 16]
    """
    ops = channels * p
    chunk = NVLS_CHUNK_BYTES
    for times, smaller in ((64, 64 << 10), (8, 32 << 10), (2, 16 << 10)):
        if nbytes < times * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def chunk_factor(nbytes: int, p: int) -> float:
    """The in-network bytes' cost relative to 128 KiB chunks, (1 + h/chunk) / (1 + h/128 KiB) with h
    :data:`CHUNK_OVERHEAD_BYTES`: 1 from 1 GiB on 8 GPUs, where NCCL's ``nvlsEfficiency`` describes the rate.

    Examples
    --------
    >>> round(chunk_factor(8 << 30, 8), 3), round(chunk_factor(256 << 20, 8), 3), round(chunk_factor(16 << 20, 8), 3)
    (1.0, 1.068, 1.203)
    """
    h = CHUNK_OVERHEAD_BYTES
    return (1 + h / nccl_chunk_bytes(nbytes, p)) / (1 + h / NVLS_CHUNK_BYTES)


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
                    protocol_bytes=MAX_SIZE_BYTES, in_network=True, in_network_factor=chunk_factor(n, p))


def cost_allreduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    """The closed form above; ``m.beta_s_per_B`` is the in-network rate's (the link's over the efficiency),
    scaled here by NCCL's chunk size at this call (:func:`chunk_factor`)."""
    p, n = args.p, int(args.nbytes)
    k = segments(n)
    m = AlphaBetaGamma(m.alpha_s, m.beta_s_per_B * chunk_factor(n, p), m.gamma_s_per_B)
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
