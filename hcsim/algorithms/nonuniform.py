"""HCCL's nonuniform algorithms for any rank count: NHR (nonuniform hierarchical ring) and NB
(nonuniform Bruck). Both take T = ceil(log2 p) steps and move (p-1)/p of the data.

With S(s) = floor((p - 1 + 2^s) / 2^(s+1)) (blocks moved at step s), ranks mod p:

* NHR ReduceScatter, step s: rank r sends blocks (r - 2^s) - i 2^(s+1), i < S(s), to
  r - 2^s, which reduces them. NHR AllGather, step t (k = T-1-t): r sends blocks
  r - i 2^(k+1), i < S(k), to r + 2^k. AllReduce = RS + AG.
* NB ReduceScatter, step s: r sends blocks (r + 2^s) + i 2^(s+1), i < S(s), to r + 2^s.
  NB AllGather (Bruck), step s: r sends its 2^s newest blocks r, r-1, ..., r-2^s+1 (the last
  step p - 2^(T-1) of them) to r + 2^s.
* Scatter (binomial, both): at step s each rank at distance d < 2^s from the root (that
  already holds data) sends to the rank at distance d + 2^s the blocks at distances
  d + 2^s + i 2^(s+1) < p; NHR counts distances downwards (r - d), NB upwards (r + d).
  Broadcast = Scatter + AllGather.

Sources: hcomm src/algorithm/base/alg_template/temp_*/{reduce_scatter,all_gather,all_reduce,
scatter,broadcast}_{nhr,nb}.cc (read through a same-layout mirror of hicann/hcomm);
costs from hicann/hccl docs coll_algo_intro NHR.md and NB.md (FACTS.md s1):
RS T a + ((p-1)/p) n (beta + gamma); AG and Scatter T a + ((p-1)/p) n beta (Scatter exact
at every size by :func:`cost_scatter`);
AR 2T a + 2((p-1)/p) n beta + ((p-1)/p) n gamma; Bcast 2T a + 2((p-1)/p) n beta.
A step's blocks to one peer travel as one message (HCCL reorders memory so they are
contiguous and sends them in one transfer): the engine sees p messages per step, not p^2/2
chunks, and the verifier expands each message into its blocks (:class:`~.schedule.Step`).
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma, log2_ceil
from .registry import AlgorithmSpec, register
from .schedule import (
    PER_RANK_BLOCKS,
    ChunkSpace,
    CollectiveArgs,
    Schedule,
    block_bytes,
    data_bytes,
    make_message_step,
    make_step,
    merge_messages,
    split_bytes,
)

SOURCE = {"nhr": "hicann/hccl docs coll_algo_intro NHR.md; hcomm temp_*_nhr.cc; FACTS.md s1",
          "nb": "hicann/hccl docs coll_algo_intro NB.md; hcomm temp_*_nb.cc; FACTS.md s1"}


def blocks_at(p: int, s: int) -> int:
    """S(s): blocks a rank moves at step s of NHR/NB reduce-scatter."""
    return (p - 1 + (1 << s)) // (1 << (s + 1))


def _step(src, dst, blk, space, reduce):
    return make_step(src, dst, space.range_bytes(blk, blk + 1), reduce, blk, blk + 1)


def _strided_bytes(space, start, stride: int, n: int, p: int) -> np.ndarray:
    """Bytes of blocks ``(start + i * stride) % p``, i < n, summed per entry of ``start``."""
    cb = space.chunk_bytes
    if cb.min() == cb.max():  # equal blocks (sizes divisible by p): no per-block work
        return np.full(len(start), n * int(cb[0]), dtype=np.int64)
    out = np.empty(len(start), dtype=np.int64)
    rows = max(1, (1 << 22) // max(n, 1))  # bounded memory for p^2/2 blocks
    offsets = stride * np.arange(n)
    for a in range(0, len(start), rows):
        out[a:a + rows] = cb[(start[a:a + rows, None] + offsets[None, :]) % p].sum(axis=1)
    return out


def _strided_message(p, space, dst, first, stride, n, reduce):
    """Rank r sends to ``dst[r]`` the n blocks ``(first[r] + i * stride) % p`` as one message;
    the chunk-level transfers (one per block) are made only when asked for."""
    src = np.arange(p)

    def expand():
        r = np.repeat(src, n)
        return _step(r, np.repeat(dst, n), (np.repeat(first, n) + np.tile(np.arange(n), p) * stride) % p,
                     space, reduce)

    return make_message_step(src, dst, _strided_bytes(space, first, stride, n, p), reduce, expand)


def _rs_steps(p, space, kind):
    steps = []
    r = np.arange(p)
    for s in range(log2_ceil(p)):
        n = blocks_at(p, s)
        if kind == "nhr":
            dst = (r - (1 << s)) % p
            steps.append(_strided_message(p, space, dst, dst, -(2 << s), n, True))
        else:
            dst = (r + (1 << s)) % p
            steps.append(_strided_message(p, space, dst, dst, 2 << s, n, True))
    return steps


def _ag_steps(p, space, kind):
    steps = []
    t_count = log2_ceil(p)
    r = np.arange(p)
    for t in range(t_count):
        if kind == "nhr":
            k = t_count - 1 - t
            steps.append(_strided_message(p, space, (r + (1 << k)) % p, r, -(2 << k), blocks_at(p, k), False))
        else:
            n = (1 << t) if t < t_count - 1 else p - (1 << t)
            steps.append(_strided_message(p, space, (r + (1 << t)) % p, r, -1, n, False))
    return steps


def _scatter_steps(p, root, space, kind):
    sign = -1 if kind == "nhr" else 1
    steps = []
    for s in range(log2_ceil(p)):
        src, dst, blk = [], [], []
        for d in range(min(1 << s, p - (1 << s))):
            far = np.arange(d + (1 << s), p, 2 << s)  # distances of the blocks it hands on
            src.append(np.full(far.size, (root + sign * d) % p))
            dst.append(np.full(far.size, (root + sign * (d + (1 << s))) % p))
            blk.append((root + sign * far) % p)
        steps.append(merge_messages(_step(np.concatenate(src), np.concatenate(dst), np.concatenate(blk), space,
                                          False), p))
    return steps


def _build(args: CollectiveArgs, kind: str) -> Schedule:
    p, coll = args.p, args.collective
    space = ChunkSpace(block_bytes(args) if coll in ("reducescatter", "allgather", "scatter")
                       else split_bytes(args.nbytes, p))
    steps = []
    if coll in ("reducescatter", "allreduce"):
        steps += _rs_steps(p, space, kind)
    if coll in ("scatter", "broadcast"):
        steps += _scatter_steps(p, args.root, space, kind)
    if coll in ("allgather", "allreduce", "broadcast"):
        steps += _ag_steps(p, space, kind)
    return Schedule(args, p, steps, space.chunk_bytes, kind)


def cost_reducescatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p = args.p
    return log2_ceil(p) * m.alpha_s + (p - 1) / p * args.nbytes * (m.beta_s_per_B + m.gamma_s_per_B)


def cost_allgather(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p = args.p
    return log2_ceil(p) * m.alpha_s + (p - 1) / p * args.nbytes * m.beta_s_per_B


def cost_scatter(args: CollectiveArgs, m: AlphaBetaGamma, kind: str = "nhr") -> float:
    """Binomial scatter, exact at every size (T a + ((p-1)/p) n beta when p divides n).

    A rank at distance x from the root that holds data at step s sends its child x + 2^s the
    blocks at distances x + 2^s + i 2^(s+1), then both go on: G(x, s) = a + V(x, s) beta +
    max(G(x, s+1), G(x + 2^s, s+1)), or G(x, s+1) when x has no child at step s; the time is
    G(0, 0). With blocks of unequal size (n not a multiple of p) the slowest path need not be
    the root's. ``kind``: NHR counts distances downwards from the root, NB upwards.
    """
    p = args.p
    return _binomial_time(p, args, -1 if kind == "nhr" else 1, m)


def _binomial_time(p: int, args: CollectiveArgs, sign: int, m: AlphaBetaGamma) -> float:
    if p <= _SMALL_P and args.collective in PER_RANK_BLOCKS:
        return _binomial_time_small(p, args, sign, m)
    by_distance = block_bytes(args)[(args.root + sign * np.arange(p)) % p].astype(float)
    g = np.zeros(p)
    for s in reversed(range(log2_ceil(p))):
        half = 1 << s
        senders = min(half, p - half)
        padded = np.zeros(-(-p // (2 * half)) * 2 * half)
        padded[:p] = by_distance
        volume = padded.reshape(-1, 2 * half).sum(axis=0)[half:half + senders]
        d = np.arange(senders)
        g[d] = m.alpha_s + volume * m.beta_s_per_B + np.maximum(g[d], g[d + half])
    return float(g[0])


_SMALL_P = 64
"""Up to this many ranks :func:`_binomial_time` runs as plain Python (the same additions in
the same order as the numpy form, so the same result; a sweep prices hundreds of sizes)."""


def _binomial_time_small(p: int, args: CollectiveArgs, sign: int, m: AlphaBetaGamma) -> float:
    base, extra = divmod(int(data_bytes(args)), p)  # block r holds base (+1 for r < extra) bytes (split_bytes)
    root = args.root
    by_distance = [float(base + (1 if (root + sign * x) % p < extra else 0)) for x in range(p)]
    g = [0.0] * p
    alpha, beta = m.alpha_s, m.beta_s_per_B
    for s in reversed(range(log2_ceil(p))):
        half = 1 << s
        width = 2 * half
        rows = -(-p // width)
        for d in range(min(half, p - half)):
            volume = 0.0
            for r in range(rows):  # the numpy form sums the padded rows in order: 0.0 + ...
                x = r * width + half + d
                volume += by_distance[x] if x < p else 0.0
            g[d] = alpha + volume * beta + max(g[d], g[d + half])
    return float(g[0])


def cost_allreduce(args, m):
    return cost_reducescatter(args, m) + cost_allgather(args, m)


def cost_broadcast(args, m):
    return 2 * cost_allgather(args, m)


for _kind in ("nhr", "nb"):
    _name = "NHR" if _kind == "nhr" else "NB"
    for _coll, _cost, _what in (
            ("reducescatter", cost_reducescatter, "ceil(log2 p) steps, halving volumes, any p"),
            ("allgather", cost_allgather, "ceil(log2 p) steps, doubling volumes, any p"),
            ("allreduce", cost_allreduce, "reduce-scatter then allgather, 2 ceil(log2 p) steps"),
            ("scatter", (lambda k: (lambda a, m: cost_scatter(a, m, k)))(_kind), "binomial scatter, ceil(log2 p) steps"),
            ("broadcast", cost_broadcast, "scatter then allgather, 2 ceil(log2 p) steps")):
        register(AlgorithmSpec(_kind, _coll, (lambda k: (lambda a: _build(a, k)))(_kind), _cost,
                               f"{_name}: {_what}", SOURCE[_kind]))

