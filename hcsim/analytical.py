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
  closed form, at every size for scatter and gather and at sizes the algorithm's chunks divide
  evenly for the others (otherwise chunks differ by a byte and the closed form uses the mean).
* Elsewhere the closed form is an estimate, not a bound: it charges every step the slowest
  pair, so it is above the event-driven time when most steps run between close ranks (H-D_R
  allreduce on a leaf-spine) and below it when transfers contend.
* :func:`contention_free_time` is the bound: the schedule run with every transfer alone on its
  route, each at its own pair's latency and bottleneck. It is never above the event-driven time
  (contention only lowers rates), equals it when no two concurrent transfers share a resource,
  and is never above the closed form at evenly divided sizes.
"""

from __future__ import annotations

import numpy as np

from .algorithms.cost import AlphaBetaGamma
from .algorithms.schedule import Schedule
from .engine.des import EngineConfig, FlowSimulator
from .engine.fairshare import max_min_rates


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
                    reduce_time_factor: float = 1.0):
    """Alpha, beta and gamma for ``schedule`` on ``topo`` (see module docs).

    With ``levels > 1`` returns a tuple, one :class:`AlphaBetaGamma` per level, each read
    off the rank pairs of that level (0: same server, 1: same pod, 2: different pods, from
    the schedule's server/pod layout); a level no pair uses gets zeros. ``inline_reduce`` and
    ``reduce_time_factor`` mean what they mean in :class:`~hcsim.engine.des.EngineConfig`: no
    link reduces inline, and the reduction unit's time per byte is scaled.
    """
    net = topo.compiled()
    p = schedule.p
    rank_node = np.array([net.node_index[n] for n in rank_nodes], dtype=np.int64)
    seen_arrays = None
    pairs: set[int] = set()
    reducing: set[int] = set()
    for step in schedule.steps:
        if not len(step):
            continue
        keys = step.src * p + step.dst
        if not (seen_arrays is not None and seen_arrays[0] is step.src and seen_arrays[1] is step.dst):
            seen_arrays = (step.src, step.dst)
            pairs.update(np.unique(keys).tolist())
        if step.reduce.any():
            reducing.update(np.unique(keys[step.reduce]).tolist())
    level_of = _pair_levels(schedule.args, levels)
    lat = [0.0] * levels
    bw = [np.inf] * levels
    gamma = [0.0] * levels
    for key in sorted(pairs):
        a, b = divmod(key, p)
        lv = level_of(a, b)
        ids = list(net.route(int(rank_node[a]), int(rank_node[b]), routing, seed, qps))
        _, _, p_lat, p_inline, p_bw = net.paths.arrays()
        lat[lv] = max(lat[lv], float(p_lat[ids].max()))
        bw[lv] = min(bw[lv], float(p_bw[ids[0]]) if len(ids) == 1 else _spray_bandwidth(net, ids))
        if key in reducing and not (inline_reduce and p_inline[ids].all()):
            g = 1.0 / float(net.reduce_Bps[rank_node[b]])
            gamma[lv] = max(gamma[lv], g * reduce_time_factor if reduce_time_factor != 1.0 else g)
    out = tuple(AlphaBetaGamma(step_overhead_s + lat[lv], 0.0 if bw[lv] == np.inf else 1.0 / bw[lv], gamma[lv])
                for lv in range(levels))
    return out[0] if levels == 1 else out


def _pair_levels(args, levels):
    if levels == 1:
        return lambda a, b: 0
    server = np.repeat(np.arange(len(args.server_sizes)), args.server_sizes)
    pods = args.pods or (len(args.server_sizes),)
    pod = np.repeat(np.arange(len(pods)), pods)[server]

    def level(a, b):
        if server[a] == server[b]:
            return 0
        return 1 if pod[a] == pod[b] or levels == 2 else 2

    return level


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
