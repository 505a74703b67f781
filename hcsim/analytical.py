"""Analytical mode: closed-form alpha-beta-gamma cost, with parameters read off the topology.

Alpha is the per-step overhead plus the largest path latency among the rank pairs the
schedule uses; beta is one over the smallest bottleneck bandwidth of those paths (summed
over equal-cost paths under ``spray``); gamma is one over the slowest reducing NPU's
reduction rate, or zero when every reducing transfer crosses links that reduce inline.
Under ``spray`` a lone transfer's bandwidth is the number of its paths times the slowest
path's max-min share when the equal parts share links or NPU limits with each other.
What the closed forms are, exactly (each part is a property test in
``tests/test_invariants.py``):

* On a topology where every pair the schedule uses has the same latency and bottleneck and no
  two concurrent transfers share a resource (a full mesh), the event-driven time equals the
  closed form, at every size for flat scatter and gather and at sizes the algorithm's chunks
  divide evenly for the others, level compositions of scatter and gather included (otherwise
  chunks differ by a byte and the closed form uses the mean: within a byte per chunk a rank
  pair moves in a step; docs/architecture.md, "Analytical mode").
* Elsewhere the closed form is an estimate, not a bound: it charges every step the slowest
  pair, so it is above the event-driven time when most steps run between close ranks (H-D_R
  allreduce on a leaf-spine) and below it when transfers contend.
* :func:`contention_free_time` is the bound: the schedule run with every transfer alone on its
  route, each at its own pair's latency and bottleneck. It is never above the event-driven time
  (contention only lowers rates), equals it when no two concurrent transfers share a resource,
  and is never above the closed form at evenly divided sizes.
* Message regimes with eager messages (``start_when = "sender"``,
  :class:`~hcsim.engine.regimes.MessageRegimes`): the closed forms price a schedule as a sum of
  steps, each step as long as its slowest pair, which is the rendezvous rule with every rank in
  step; under the eager rule a rank waits only for the ranks that send to it, so a slow pair is
  not paid in every step (a ring's inter-node hop about once a lap) and the sum is neither the
  time nor a bound of it. Analytical mode therefore refuses a topology with such regimes (as it
  refuses any non-trivial regime table); :func:`contention_free_time` follows the eager rule and
  stays the lower bound, equal to the event-driven time when nothing contends.
"""

from __future__ import annotations

import hashlib
import weakref

import numpy as np

from .algorithms.cost import AlphaBetaGamma
from .algorithms.schedule import Schedule, in_network_factors
from .engine.des import EngineConfig, FlowSimulator, in_network_switch
from .engine.fairshare import max_min_rates
from .errors import WorkLimitError
from .limits import WORK_PER_INSTANT, grow_work, hop_work, search_work, walk_work


def contention_free_time(topo, rank_nodes, schedule: Schedule, config: EngineConfig | None = None) -> float:
    """Time of ``schedule`` if every transfer ran alone on its route (seconds, launch included).

    Same execution rule, barriers, overheads, latencies, message regimes and reduction units as
    the event-driven engine, but no transfer shares a resource with another (transfers of one
    rank pair in one step still share their route, as they do on any topology). A lower bound
    of the event-driven time on every topology, equal to it when no two concurrent transfers
    share a resource; one pass over the steps.

    Examples
    --------
    >>> from hcsim.topology import leaf_spine
    >>> from hcsim.algorithms import build_schedule
    >>> topo = leaf_spine(3, 4, 1, 200e9, 3.3e-7)
    >>> t = contention_free_time(topo, topo.npus, build_schedule("allreduce", "hd", 12, 1 << 24))
    >>> round(t * 1e6, 2)
    322.49
    """
    return FlowSimulator(topo, rank_nodes, schedule, config or EngineConfig(record=False)).contention_free_time()


def path_parameters(topo, rank_nodes, schedule: Schedule, routing: str = "ecmp", seed: int = 0,
                    step_overhead_s: float = 0.0, levels: int = 1, qps: int = 1, *, inline_reduce: bool = True,
                    reduce_time_factor: float = 1.0, max_work: int | None = None, _pairs: list | None = None):
    """Alpha, beta and gamma for ``schedule`` on ``topo`` (see module docs).

    With ``levels > 1`` returns a tuple, one :class:`AlphaBetaGamma` per level, each read
    off the rank pairs of that level (0: same server, 1: same pod, 2: different pods, from
    the schedule's server/pod layout); a level no pair uses gets zeros. ``inline_reduce`` and
    ``reduce_time_factor`` mean what they mean in :class:`~hcsim.engine.des.EngineConfig`: no
    link reduces inline, and the reduction unit's time per byte is scaled.

    Every distinct rank pair is routed once, then read off the path arrays in one pass
    (linear in the pairs; :func:`cached_path_parameters` keeps the answer for later calls).
    Routing counts as the engine counts it, :data:`~hcsim.limits.WORK_PER_INSTANT` units a pair
    and :func:`~hcsim.limits.hop_work` for a long path, :func:`~hcsim.limits.walk_work` for many
    long equal-cost ones: a schedule whose pairs would pass
    ``max_work`` is refused before any is routed, and one whose long paths do as soon as they
    have (:class:`~hcsim.errors.WorkLimitError`; None: no bound).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> from hcsim.algorithms import build_schedule
    >>> topo = single_switch(4, 25e9, 1e-6)
    >>> m = path_parameters(topo, topo.npus, build_schedule("allreduce", "ring", 4, 1 << 20))
    >>> round(m.alpha_s * 1e6, 3), round(1 / m.beta_s_per_B / 1e9, 1)
    (2.0, 25.0)
    """
    net = topo.compiled()
    p = schedule.endpoints
    efficiency = 1.0
    if schedule.in_network:  # the switch is endpoint p: its pairs at its share of the link rate, no reduction cost
        switch, efficiency = in_network_switch(topo, rank_nodes)
        # the schedule's per-chunk factor is the algorithm's closed form's to apply; checked here as the engine does
        in_network_factors(schedule)
        rank_nodes = [*rank_nodes, switch]
    rank_node = np.array([net.node_index[n] for n in rank_nodes], dtype=np.int64)
    pairs, reducing = _schedule_pairs(schedule, p)
    if _pairs is not None:  # for cached_path_parameters: a cached answer is bounded as a fresh one
        _pairs.append((len(pairs), schedule.algorithm, 0))
    _check_pairs(len(pairs), schedule.algorithm, max_work)
    src, dst = np.divmod(pairs, p)
    # Route every pair first: routing appends to the path store, whose arrays are rebuilt
    # after each addition, so they are read once, after the last route.
    a_nodes, b_nodes = rank_node[src].tolist(), rank_node[dst].tolist()
    extra = 0
    longest, walked = net.paths.longest, net.walked

    def priced(k, ids):
        # a long path's search costs more than an instant (hcsim.limits.FREE_HOPS), and so does one
        # that finds many long equal-cost paths (a torus: hcsim.limits.walk_work) or, without the
        # compiled search, grows far (hcsim.limits.grow_work)
        nonlocal extra
        more = (hop_work(longest(ids)) + walk_work(walked(a_nodes[k], b_nodes[k]))
                + grow_work(net.grown(a_nodes[k], b_nodes[k])))
        if more:
            extra += more
            if max_work is not None and len(pairs) * WORK_PER_INSTANT + extra > max_work:
                if _pairs is not None:
                    _pairs[-1] = (len(pairs), schedule.algorithm, extra)
                _check_pairs(len(pairs), schedule.algorithm, max_work, extra)

    def ahead(hops, walked):  # the compiled search's whole batch, before its routes are built
        more = search_work(hops, walked)
        if max_work is not None and len(pairs) * WORK_PER_INSTANT + extra + more > max_work:
            if _pairs is not None:
                _pairs[-1] = (len(pairs), schedule.algorithm, extra + more)
            _check_pairs(len(pairs), schedule.algorithm, max_work, extra + more)

    # every pair in one call (the compiled search where it pays), priced as each is routed
    routes = net.route_many(a_nodes, b_nodes, [False] * len(a_nodes), routing, seed, qps, after=priced, ahead=ahead)
    if _pairs is not None:
        _pairs[-1] = (len(pairs), schedule.algorithm, extra)
    _, _, p_lat, p_inline, p_bw = net.paths.arrays()
    counts = np.fromiter((len(ids) for ids in routes), dtype=np.int64, count=len(routes))
    flat = np.fromiter((i for ids in routes for i in ids), dtype=np.int64, count=int(counts.sum()))
    owner = np.repeat(np.arange(len(routes)), counts)
    pair_lat = np.full(len(routes), -np.inf)
    np.maximum.at(pair_lat, owner, p_lat[flat])
    pair_inline = np.ones(len(routes), dtype=bool)
    np.logical_and.at(pair_inline, owner, p_inline[flat])
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(routes) else counts
    pair_bw = p_bw[flat[first]] if len(routes) else np.zeros(0)
    for i in np.flatnonzero(counts > 1).tolist():
        pair_bw[i] = _spray_bandwidth(net, list(routes[i]))
    level = _pair_level_array(schedule.args, levels, src, dst)
    charged = reducing & ~(inline_reduce & pair_inline)
    if schedule.in_network:
        switched = (src == schedule.p) | (dst == schedule.p)
        pair_bw = np.where(switched, pair_bw * efficiency, pair_bw)
        charged &= dst != schedule.p
    g = 1.0 / net.reduce_Bps[rank_node[dst]]
    if reduce_time_factor != 1.0:
        g = g * reduce_time_factor
    out = []
    for lv in range(levels):
        mine = level == lv
        lat = float(pair_lat[mine].max()) if mine.any() else 0.0
        bw = float(pair_bw[mine].min()) if mine.any() else np.inf
        mine &= charged
        gamma = float(g[mine].max()) if mine.any() else 0.0
        out.append(AlphaBetaGamma(step_overhead_s + lat, 0.0 if bw == np.inf else 1.0 / bw, gamma))
    return out[0] if levels == 1 else tuple(out)


PAIR_BITMAP = 1 << 26
"""Up to this many rank pairs (p x p: 8,192 ranks) :func:`_schedule_pairs` marks a schedule's
pairs in a boolean array (one byte a pair), linear in its transfers."""


def _schedule_pairs(schedule: Schedule, p: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rank pairs of ``schedule`` (``src * p + dst``, sorted) and whether each
    ever reduces. On up to :data:`PAIR_BITMAP` pairs they are marked in boolean arrays (a ring
    gather on 8,192 ranks: 33M transfers in 8,191 steps of different pairs, each sorted before:
    8 s); above, each distinct step content is sorted once."""
    if p * p <= PAIR_BITMAP:
        seen = np.zeros(p * p, dtype=bool)
        red = np.zeros(p * p, dtype=bool)
        last = None
        for step in schedule.steps:
            if not len(step):
                continue
            if last is not None and last[0] is step.src and last[1] is step.dst:
                keys = last[2]
            else:
                keys = step.src.astype(np.int64) * p + step.dst
                last = (step.src, step.dst, keys)
            seen[keys] = True
            if step.reduce.any():
                red[keys if step.reduce.all() else keys[step.reduce]] = True
        pairs = np.flatnonzero(seen)
        return pairs, red[pairs]
    seen_arrays = None
    seen_content: dict = {}  # steps whose rank arrays repeat an earlier step's, in new arrays
    used: list[np.ndarray] = []
    red: list[np.ndarray] = []
    all_reduced = False  # every pair of the current rank arrays already listed as reducing
    for step in schedule.steps:
        if not len(step):
            continue
        if not (seen_arrays is not None and (seen_arrays[0] is step.src and seen_arrays[1] is step.dst or (
                len(seen_arrays[0]) == len(step) and np.array_equal(seen_arrays[0], step.src)
                and np.array_equal(seen_arrays[1], step.dst)))):
            all_reduced = False
            seen_arrays = (step.src, step.dst)
            # a ring's steps repeat their pairs in new arrays: listing them once per content
            # keeps this linear in the schedule's distinct pair sets, not in its steps
            digest = hashlib.blake2b(step.src.tobytes() + step.dst.tobytes(), digest_size=16).digest()
            current = seen_content.get(digest)
            if current is None:
                current = seen_content[digest] = np.unique(step.src * p + step.dst)
                used.append(current)
        if all_reduced or not step.reduce.any():
            continue
        if step.reduce.all():  # a ring's reduce-scatter: the arrays' pairs, once
            red.append(current)
            all_reduced = True
        else:
            red.append(np.unique((step.src * p + step.dst)[step.reduce]))
        if len(red) > 64:  # bounded memory over thousands of steps
            red = [np.unique(np.concatenate(red))]
    pairs = np.unique(np.concatenate(used)) if used else np.zeros(0, dtype=np.int64)
    reducing = np.isin(pairs, np.concatenate(red)) if red else np.zeros(len(pairs), dtype=bool)
    return pairs, reducing


def _check_pairs(n: int, algorithm: str, max_work: int | None, extra: int = 0) -> None:
    """Refuse routing ``n`` rank pairs past ``max_work`` (WORK_PER_INSTANT units each, and
    ``extra`` for paths longer than FREE_HOPS, as far as they are known)."""
    if max_work is not None and n * WORK_PER_INSTANT + extra > max_work:
        raise WorkLimitError(
            f"max_work = {max_work}: mode 'analytical' routes every distinct rank pair of "
            f"{algorithm}'s schedule, {n:,} here ({WORK_PER_INSTANT} units each: "
            f"{n * WORK_PER_INSTANT:,}" + (f", and {extra:,} for long paths or many equal-cost ones" if extra else "")
            + "); use fewer ranks, or raise max_work (--max-work)")


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
CACHE_LIMIT = 4096
"""Entries :func:`cached_path_parameters` keeps per compiled topology (all dropped when full)."""


def cached_path_parameters(topo, rank_nodes, schedule_key, schedule, routing: str = "ecmp", seed: int = 0,
                           step_overhead_s: float = 0.0, levels: int = 1, qps: int = 1, *,
                           inline_reduce: bool = True, reduce_time_factor: float = 1.0, net=None,
                           max_work: int | None = None):
    """:func:`path_parameters`, remembered per compiled topology and ``schedule_key``.

    ``schedule_key`` (hashable) must determine the rank pairs ``schedule`` uses and which of
    them reduce -- for hcsim's own algorithms: the algorithm, the collective, the ranks, the
    server/pod layout, the root and an alltoallv send matrix, but not the size (the pairs of
    a schedule do not depend on its size; ``tests/test_analytical_fast.py`` checks this for
    every algorithm family). ``schedule`` is the schedule or a function that builds it, called
    only when the answer is not cached. The cache follows the topology: an edited graph
    compiles to a new view (:meth:`~hcsim.topology.model.Topology.compiled`) with an empty one.
    ``net``: ``topo.compiled()`` if the caller has it (it checks the graph's fingerprint).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> from hcsim.algorithms import build_schedule
    >>> topo = single_switch(4, 25e9, 1e-6)
    >>> build = lambda: build_schedule("allgather", "ring", 4, 4096)
    >>> a = cached_path_parameters(topo, topo.npus, ("ring", "allgather", 4), build)
    >>> a == cached_path_parameters(topo, topo.npus, ("ring", "allgather", 4), None)  # not built again
    True
    """
    net = topo.compiled() if net is None else net
    table = _CACHE.get(net)
    if table is None:
        table = _CACHE[net] = {}
    key = (schedule_key, tuple(rank_nodes), routing, int(seed), float(step_overhead_s), int(levels), int(qps),
           bool(inline_reduce), float(reduce_time_factor))
    hit = table.get(key)
    if hit is None or hit[0] is None:
        if hit is not None:  # refused before: refused again without building, unless the bound now fits
            _check_pairs(hit[1], hit[2], max_work, hit[3])
        sched = schedule() if callable(schedule) else schedule
        pairs = []
        if len(table) >= CACHE_LIMIT:
            table.clear()
        try:
            abg = path_parameters(topo, rank_nodes, sched, routing, seed, step_overhead_s, levels, qps,
                                  inline_reduce=inline_reduce, reduce_time_factor=reduce_time_factor,
                                  max_work=max_work, _pairs=pairs)
        except WorkLimitError:
            if pairs:  # the pairs were counted, the bound refused them: remember how many
                table[key] = (None, *pairs[0])
            raise
        hit = table[key] = (abg, *pairs[0])
    else:  # whether the bound refuses a call does not depend on what ran before it
        _check_pairs(hit[1], hit[2], max_work, hit[3])
    return hit[0]


def _pair_level_array(args, levels, src, dst):
    """Level of each rank pair (0: same server, 1: same pod, 2: different pods)."""
    if levels == 1:
        return np.zeros(len(src), dtype=np.int64)
    server = np.repeat(np.arange(len(args.server_sizes)), args.server_sizes)
    pods = args.pods or (len(args.server_sizes),)
    pod = np.repeat(np.arange(len(pods)), pods)[server]
    same_pod = (pod[src] == pod[dst]) | (levels == 2)
    return np.where(server[src] == server[dst], 0, np.where(same_pod, 1, 2))


def _spray_bandwidth(net, path_ids) -> float:
    """Bandwidth of one transfer split evenly over ``path_ids``: k x the slowest part's share."""
    res_ptr, res, *_ = net.paths.arrays()
    flows, resources = [], []
    for i, pid in enumerate(path_ids):
        part = res[res_ptr[pid]:res_ptr[pid + 1]]
        flows.extend([i] * len(part))
        resources.extend(part.tolist())
    rates = max_min_rates(np.array(flows), np.array(resources), net.capacity_Bps, len(path_ids))
    return float(len(path_ids) * rates.min())
