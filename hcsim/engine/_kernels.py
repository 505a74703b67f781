"""Compiled max-min (numba), for the optional ``hcsim[fast]`` extra.

The same progressive filling as :func:`hcsim.engine.fairshare.max_min_rates`, with the same
floating-point operations in the same order per resource and per flow, so its rates are
bit-identical (tests/test_fairshare.py compares them); only the loop is compiled. Imported
on first need by ``fairshare``; without numba the numpy form runs.

Why compiled code here: profiles of contended runs (an A3 pipeline allreduce: 75,838
recomputations, 67% of the time in ``max_min_rates``; an alltoall mesh on a 64-server pod,
827 recomputations with up to 266 distinct rates each) spend their time in numpy call
overhead, a dozen calls per progressive-filling round; a compiled round costs the resources
in play plus the pairs it freezes and no call overhead.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def max_min_kernel(pair_flow, local, remaining, n_flows, sat_rtol):  # pragma: no cover - compiled
    n_res = remaining.size
    n_pairs = pair_flow.size
    count = np.zeros(n_res)
    flow_n = np.zeros(n_flows + 1, dtype=np.int64)
    for i in range(n_pairs):
        count[local[i]] += 1.0
        flow_n[pair_flow[i] + 1] += 1
    res_ptr = np.zeros(n_res + 1, dtype=np.int64)
    for r in range(n_res):
        res_ptr[r + 1] = res_ptr[r] + np.int64(count[r])
    flow_ptr = np.cumsum(flow_n)
    fill_r = res_ptr[:-1].copy()
    fill_f = flow_ptr[:-1].copy()
    res_flow = np.empty(n_pairs, dtype=np.int64)
    flow_res = np.empty(n_pairs, dtype=np.int64)
    for i in range(n_pairs):
        r = local[i]
        f = pair_flow[i]
        res_flow[fill_r[r]] = f
        fill_r[r] += 1
        flow_res[fill_f[f]] = r
        fill_f[f] += 1
    rate = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=np.bool_)
    busy = np.empty(n_res, dtype=np.int64)
    n_busy = 0
    for r in range(n_res):
        if count[r] > 0:
            busy[n_busy] = r
            n_busy += 1
    share = np.empty(n_res)
    level = 0.0
    while n_busy > 0:
        s = np.inf
        for j in range(n_busy):
            r = busy[j]
            share[j] = remaining[r] / count[r]
            if share[j] < s:
                s = share[j]
        level += s
        for j in range(n_busy):
            r = busy[j]
            remaining[r] -= s * count[r]
        limit = s * (1 + sat_rtol)
        for j in range(n_busy):
            if share[j] <= limit:
                r = busy[j]
                for k in range(res_ptr[r], res_ptr[r + 1]):
                    f = res_flow[k]
                    if not frozen[f]:
                        frozen[f] = True
                        rate[f] = level
                        for m in range(flow_ptr[f], flow_ptr[f + 1]):
                            count[flow_res[m]] -= 1.0
        kept = 0
        for j in range(n_busy):
            r = busy[j]
            if count[r] > 0:
                busy[kept] = r
                kept += 1
        n_busy = kept
    return rate


@njit(cache=True)
def hot_max_min_kernel(path_mat, paths, hot, capacity, bw, bw_class, class_bw, local, sat_rtol):  # pragma: no cover
    """The engine's recomputation (``Fabric._recompute_rates``) in one call: finds the active
    flows that cross a hot resource and shares the hot resources max-min among them, each
    flow capped at its path's bottleneck; returns every flow's rate (the others keep their
    bottleneck) and how many flows were shared.

    The same progressive filling as :func:`max_min_kernel` on the problem the engine builds
    (the hot resources plus one cap resource per flow), bit for bit, with one difference in
    how it is carried out: the cap resources of flows with equal bottlenecks are one group.
    Each has count 1 while its flow is unfrozen, so all of a group's caps start equal and
    are lowered by the same ``s * 1.0`` every round: their remaining capacities stay equal
    to the last bit and they saturate in the same round. A round then costs the hot resources
    and the few distinct bottlenecks in play, not one cap per flow.

    ``local`` is scratch indexed by resource id, all -1 on entry and on return.
    """
    n = paths.size
    width = path_mat.shape[1]
    rates = np.empty(n)
    for i in range(n):
        rates[i] = bw[paths[i]]
    # one pass over the path matrix: the hot flows (numbered in order), their hot resources
    # (numbered as first met) and bottleneck groups
    res_ids = np.empty(min(hot.size, n * width + 1), dtype=np.int64)
    hot_flow = np.empty(n, dtype=np.int64)
    flow_ptr = np.zeros(n + 1, dtype=np.int64)
    flow_res = np.empty(n * width, dtype=np.int64)
    group_of = np.empty(n, dtype=np.int64)
    n_groups = class_bw.size
    live = np.zeros(n_groups, dtype=np.int64)  # unfrozen flows of each group
    n_hot = 0
    n_pairs = 0
    n_res = 0
    for i in range(n):
        p = paths[i]
        m = n_pairs
        for c in range(width):
            r = path_mat[p, c]
            if hot[r]:
                j = local[r]
                if j < 0:
                    j = n_res
                    local[r] = j
                    res_ids[j] = r
                    n_res += 1
                flow_res[m] = j
                m += 1
        if m > n_pairs:
            n_pairs = m
            hot_flow[n_hot] = i
            flow_ptr[n_hot + 1] = m
            g = bw_class[p]
            group_of[n_hot] = g
            live[g] += 1
            n_hot += 1
    if n_hot == 0:
        return rates, 0
    n_all = n_res + n_groups
    # per resource (hot ones, then one per bottleneck group): remaining capacity and count
    remaining = np.empty(n_all)
    count = np.zeros(n_all)
    for j in range(n_res):
        remaining[j] = capacity[res_ids[j]]
    for g in range(n_groups):
        remaining[n_res + g] = class_bw[g]
        count[n_res + g] = 1.0
    for q in range(n_pairs):
        count[flow_res[q]] += 1.0
    # CSR the other way: a hot resource's flows; a group's flows
    res_ptr = np.zeros(n_res + 1, dtype=np.int64)
    for j in range(n_res):
        res_ptr[j + 1] = res_ptr[j] + np.int64(count[j])
    grp_ptr = np.zeros(n_groups + 1, dtype=np.int64)
    for g in range(n_groups):
        grp_ptr[g + 1] = grp_ptr[g] + live[g]
    fill_r = res_ptr[:-1].copy()
    fill_g = grp_ptr[:-1].copy()
    res_flow = np.empty(n_pairs, dtype=np.int64)
    grp_flow = np.empty(n_hot, dtype=np.int64)
    for k in range(n_hot):
        for q in range(flow_ptr[k], flow_ptr[k + 1]):
            j = flow_res[q]
            res_flow[fill_r[j]] = k
            fill_r[j] += 1
        g = group_of[k]
        grp_flow[fill_g[g]] = k
        fill_g[g] += 1
    for j in range(n_res):
        local[res_ids[j]] = -1
    rate = _fill(n_res, n_groups, remaining, count, live, res_ptr, res_flow, grp_ptr, grp_flow, flow_ptr, flow_res,
                 group_of, n_hot, sat_rtol)
    for k in range(n_hot):
        rates[hot_flow[k]] = rate[k]
    return rates, n_hot


@njit(cache=True, error_model="numpy")
def _fill(n_res, n_groups, remaining, count, live, res_ptr, res_flow, grp_ptr, grp_flow, flow_ptr, flow_res, group_of,
          n_hot, sat_rtol):  # pragma: no cover - compiled
    """Progressive filling for :func:`hot_max_min_kernel`: entries 0..n_res-1 are resources,
    n_res.. the bottleneck groups (count 1 while any of their flows is unfrozen).

    The entries in play are kept packed (remaining, count side by side), so a round is two
    straight passes the compiler vectorises. An entry that leaves play is parked (infinite
    remaining, count 1: never the smallest share, never saturated) until a quarter of them
    are parked, then the rest are packed again. Per entry and round the arithmetic is the
    plain form's: ``share = remaining / count``, ``remaining -= s * count``."""
    n_all = n_res + n_groups
    rate = np.zeros(n_hot)
    frozen = np.zeros(n_hot, dtype=np.bool_)
    b_id = np.empty(n_all, dtype=np.int64)
    b_rem = np.empty(n_all)
    b_cnt = np.empty(n_all)
    b_on = np.empty(n_all, dtype=np.bool_)
    pos = np.empty(n_all, dtype=np.int64)  # entry -> its place in the packed arrays
    nb = 0
    for e in range(n_all):
        if (count[e] > 0) if e < n_res else (live[e - n_res] > 0):
            b_id[nb] = e
            b_rem[nb] = remaining[e]
            b_cnt[nb] = count[e]
            b_on[nb] = True
            pos[e] = nb
            nb += 1
    n_on = nb
    share = np.empty(n_all)
    sat = np.empty(n_all, dtype=np.int64)
    level = 0.0
    while n_on > 0:
        for j in range(nb):
            share[j] = b_rem[j] / b_cnt[j]
        s = np.inf
        for j in range(nb):
            if share[j] < s:
                s = share[j]
        level += s
        for j in range(nb):
            b_rem[j] -= s * b_cnt[j]
        limit = s * (1 + sat_rtol)
        n_sat = 0
        for j in range(nb):
            if share[j] <= limit and b_on[j]:
                sat[n_sat] = b_id[j]
                n_sat += 1
        for i in range(n_sat):
            e = sat[i]
            if e < n_res:
                lo, hi, members = res_ptr[e], res_ptr[e + 1], res_flow
            else:
                lo, hi, members = grp_ptr[e - n_res], grp_ptr[e - n_res + 1], grp_flow
            for q in range(lo, hi):
                f = members[q]
                if frozen[f]:
                    continue
                frozen[f] = True
                rate[f] = level
                g = group_of[f]
                live[g] -= 1
                if live[g] == 0:
                    j = pos[n_res + g]
                    b_on[j] = False
                    b_rem[j] = np.inf
                    b_cnt[j] = 1.0
                    n_on -= 1
                for m in range(flow_ptr[f], flow_ptr[f + 1]):
                    j = pos[flow_res[m]]
                    b_cnt[j] -= 1.0
                    if b_cnt[j] == 0.0:
                        b_on[j] = False
                        b_rem[j] = np.inf
                        b_cnt[j] = 1.0
                        n_on -= 1
        if 4 * (nb - n_on) > nb:  # pack the entries still in play
            kept = 0
            for j in range(nb):
                if b_on[j]:
                    b_id[kept] = b_id[j]
                    b_rem[kept] = b_rem[j]
                    b_cnt[kept] = b_cnt[j]
                    b_on[kept] = True
                    pos[b_id[kept]] = kept
                    kept += 1
            nb = kept
    return rate
