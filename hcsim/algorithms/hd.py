"""Recursive halving-doubling (HCCL's H-D_R), with HCCL's folding for any p.

With p' = 2^floor(log2 p) and r = p - p', ranks 2i+1 (i < r) first fold into rank 2i,
the p' remaining "virtual" ranks (v < r is real rank 2v, v >= r is real rank v + r) run
recursive halving (reduce-scatter: exchange half the current range with the partner at
distance p'/2, p'/4, ..., 1) and/or recursive doubling (allgather: exchange the gathered
range with the partner at distance 1, 2, ..., p'/2), and the folded ranks get their
result back last.

Costs (FACTS.md s1 RHD row; Thakur, Rabenseifner & Gropp 2005, FACTS.md s7), exact for
sizes that split evenly (b = n/p, virtual rank v < r owns two blocks):
AR: [a + n(beta+gamma)] + sum_{m=p'/2..1} (a + n m/p' (beta+gamma)) + sum_{m=1..p'/2} (a + n m/p' beta) + [a + n beta]
RS: [a + n(beta+gamma)] + sum_m (a + b(m + min(r, m))(beta+gamma)) + [a + b beta]
AG: [a + b beta] + sum_m (a + b(m + min(r, m)) beta) + [a + (n - b) beta]
(bracketed terms only when p is not a power of two). For p a power of two AR is
2 log p a + 2((p-1)/p) n beta + ((p-1)/p) n gamma, as HCCL documents.
"""

from __future__ import annotations

import numpy as np

from .cost import AlphaBetaGamma, log2_floor
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, concat_steps, make_step, split_bytes

SOURCE = "hicann/hccl docs/zh/user_guide/coll_algo_intro (H-D_R); FACTS.md s1, s7"


def _virtual(p: int):
    pp = 1 << log2_floor(p)
    r = p - pp
    v = np.arange(pp)
    real = np.where(v < r, 2 * v, v + r)
    return pp, r, real


def _levels(pp, halving: bool):
    ms = []
    m = 1
    while m < pp:
        ms.append(m)
        m *= 2
    return ms[::-1] if halving else ms


def _fold_steps(args, space, r, p, full_range: bool):
    i = np.arange(r)
    if full_range:
        return make_step(2 * i + 1, 2 * i, space.range_bytes(0, space.count), True, 0, space.count)
    lo = 2 * i + 1
    return make_step(2 * i + 1, 2 * i, space.range_bytes(lo, lo + 1), False, lo, lo + 1)


def _exchange(real, v, m, lo, hi, space, reduce):
    partner = v ^ m
    return make_step(real[v], real[partner], space.range_bytes(lo, hi), reduce, lo, hi)


def _hd(args: CollectiveArgs, kind: str) -> Schedule:
    p = args.p
    pp, r, real = _virtual(p)
    v = np.arange(pp)
    steps = []
    if kind == "allreduce":
        space = ChunkSpace(split_bytes(args.nbytes, pp))

        def vstart(x):
            return x
    else:
        space = ChunkSpace(split_bytes(args.nbytes, p))

        def vstart(x):  # first real block owned by virtual rank x (x may be pp)
            return np.where(x <= r, 2 * x, x + r)

    if r and kind in ("allreduce", "reducescatter"):
        steps.append(_fold_steps(args, space, r, p, full_range=True))
    elif r:
        steps.append(_fold_steps(args, space, r, p, full_range=False))
    if kind in ("allreduce", "reducescatter"):
        for m in _levels(pp, halving=True):
            base = (v // (2 * m)) * (2 * m)
            send_lo = np.where(v & m, base, base + m)  # the partner's half
            steps.append(_exchange(real, v, m, vstart(send_lo), vstart(send_lo + m), space, True))
    if kind in ("allreduce", "allgather"):
        for m in _levels(pp, halving=False):
            base = (v // m) * m
            steps.append(_exchange(real, v, m, vstart(base), vstart(base + m), space, False))
    if r:
        i = np.arange(r)
        if kind == "allreduce":
            steps.append(make_step(2 * i, 2 * i + 1, space.range_bytes(0, space.count), False, 0, space.count))
        elif kind == "reducescatter":
            lo = 2 * i + 1
            steps.append(make_step(2 * i, lo, space.range_bytes(lo, lo + 1), False, lo, lo + 1))
        else:  # allgather: everything but the block the folded rank already has
            lo1, hi1, lo2, hi2 = np.zeros(r, int), 2 * i + 1, 2 * i + 2, np.full(r, p)
            steps.append(concat_steps(
                make_step(2 * i, 2 * i + 1, space.range_bytes(lo1, hi1), False, lo1, hi1),
                make_step(2 * i, 2 * i + 1, space.range_bytes(lo2, hi2), False, lo2, hi2)))
    return Schedule(args, space.count, steps, space.chunk_bytes, "hd")


def cost_allreduce(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, n = args.p, args.nbytes
    pp = 1 << log2_floor(p)
    a, be, ga = m.alpha_s, m.beta_s_per_B, m.gamma_s_per_B
    t = sum(a + n * k / pp * (be + ga) for k in _levels(pp, True))
    t += sum(a + n * k / pp * be for k in _levels(pp, False))
    if p != pp:
        t += (a + n * (be + ga)) + (a + n * be)
    return t


def cost_reducescatter(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, n = args.p, args.nbytes
    pp = 1 << log2_floor(p)
    r, b = p - pp, n / p
    a, be, ga = m.alpha_s, m.beta_s_per_B, m.gamma_s_per_B
    t = sum(a + b * (k + min(r, k)) * (be + ga) for k in _levels(pp, True))
    if r:
        t += (a + n * (be + ga)) + (a + b * be)
    return t


def cost_allgather(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, n = args.p, args.nbytes
    pp = 1 << log2_floor(p)
    r, b = p - pp, n / p
    a, be = m.alpha_s, m.beta_s_per_B
    t = sum(a + b * (k + min(r, k)) * be for k in _levels(pp, False))
    if r:
        t += (a + b * be) + (a + (n - b) * be)
    return t


for _coll, _cost, _what in (
        ("allreduce", cost_allreduce, "recursive halving reduce-scatter then recursive doubling allgather"),
        ("reducescatter", cost_reducescatter, "recursive halving, log2 p steps (+2 when p is not a power of two)"),
        ("allgather", cost_allgather, "recursive doubling, log2 p steps (+2 when p is not a power of two)")):
    register(AlgorithmSpec("hd", _coll, (lambda c: (lambda a: _hd(a, c)))(_coll), _cost, _what, SOURCE))
