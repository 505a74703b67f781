"""Compiled max-min (numba), for the optional ``hcsim[fast]`` extra.

The same progressive filling as :func:`hcsim.engine.fairshare.max_min_rates`, with the same
floating-point operations in the same order per resource and per flow, so its rates are
bit-identical (tests/test_fairshare.py compares them); only the loop is compiled. Imported
on first need by ``fairshare``; without numba the numpy form runs. ``hot_build`` and
``hot_resume`` are the engine's whole recomputation (``Fabric._recompute_rates``), built once
and then resumed where only flows drained (tests/test_hot_kernel.py compares them with the
numpy engine, bit for bit).

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



# ---------------------------------------------------------------- the engine's recomputation
#
# Fabric._recompute_rates shares the hot resources max-min among the active flows that cross
# them, each flow also capped at its path's bottleneck (one cap resource per flow). The
# functions below do that whole recomputation compiled, bit for bit as the numpy form, and
# keep what a later recomputation needs to redo only the rounds that changed.
#
# Entries: 0..n_res-1 are the hot resources, n_res.. one per distinct bottleneck value. The
# cap resources of flows with equal bottlenecks are one entry: each cap has count 1 while its
# flow is unfrozen, so all of them start equal and are lowered by the same ``s * 1.0`` every
# round; their remaining capacities stay equal to the last bit and they saturate in the same
# round. A round costs the hot resources and the few distinct bottlenecks in play, not one
# cap per flow. A group's count stays 1.0 (its arithmetic); ``live`` counts its unfrozen flows.
#
# Resuming: a recomputation whose flows only went away (drained, or no longer crossing a hot
# resource) and whose hot resources only cooled repeats every filling round before the first
# round k in which a flow that went away froze, or a resource that cooled had a flow freeze:
# a flow that went away lowers the count of its resources, which only raises their shares
# (rounding is monotone), and none of them saturated before that flow froze; a cooled
# resource did not saturate before any of its flows froze. So the filling restarts from the
# state at the start of round k (kept every ``ck_every`` rounds, the resources the gone flows
# crossed replayed from round 1 with their new counts). Drained flows are usually those that
# froze last (the fastest), so a drain redoes the last few rounds, not hundreds.


@njit(cache=True, error_model="numpy")
def _fill(k0, level, n_res, rem, cnt, on, live, res_ptr, res_flow, grp_ptr, grp_flow, flow_ptr, flow_res, group_of,
          frozen, rate, fround, s_hist, lvl_hist, ck_rem, ck_cnt, ck_every, sat_rtol):  # pragma: no cover - compiled
    """Progressive filling from the state at the start of round ``k0 + 1`` (``rem``, ``cnt``,
    ``live``, ``frozen``, ``level``); records each round's increment and level, each flow's
    freezing round, and the state every ``ck_every`` rounds. Returns the number of rounds and
    the (possibly regrown) records.

    The entries in play are kept packed (remaining, count side by side), so a round is a few
    straight passes. An entry that leaves play is parked (infinite remaining, count 1: never
    the smallest share, never saturated) until a quarter of them are parked, then the rest are
    packed again. Per entry and round the arithmetic is the plain form's:
    ``share = remaining / count``, ``remaining -= s * count``."""
    n_all = rem.size
    b_id = np.empty(n_all, dtype=np.int64)
    b_rem = np.empty(n_all)
    b_cnt = np.empty(n_all)
    b_on = np.empty(n_all, dtype=np.bool_)
    pos = np.empty(n_all, dtype=np.int64)  # entry -> its place in the packed arrays
    nb = 0
    for e in range(n_all):
        if on[e] and ((cnt[e] > 0) if e < n_res else (live[e - n_res] > 0)):
            b_id[nb] = e
            b_rem[nb] = rem[e]
            b_cnt[nb] = cnt[e]
            b_on[nb] = True
            pos[e] = nb
            nb += 1
    n_on = nb
    share = np.empty(n_all)
    sat = np.empty(n_all, dtype=np.int64)
    rnd = k0
    while n_on > 0:
        if rnd % ck_every == 0 and rnd // ck_every >= ck_rem.shape[0]:  # full: keep every other
            half = (ck_rem.shape[0] + 1) // 2
            for i in range(half):
                ck_rem[i, :] = ck_rem[2 * i, :]
                ck_cnt[i, :] = ck_cnt[2 * i, :]
            ck_every *= 2
        if rnd % ck_every == 0:  # the state at the start of round rnd + 1
            c = rnd // ck_every
            ck_cnt[c, :] = 0.0
            for j in range(nb):
                if b_on[j]:
                    e = b_id[j]
                    ck_rem[c, e] = b_rem[j]
                    ck_cnt[c, e] = b_cnt[j] if e < n_res else live[e - n_res]
        rnd += 1
        if rnd >= s_hist.size:
            grown = np.empty(2 * s_hist.size)
            grown[:s_hist.size] = s_hist
            s_hist = grown
            grown = np.empty(2 * lvl_hist.size)
            grown[:lvl_hist.size] = lvl_hist
            lvl_hist = grown
        for j in range(nb):
            share[j] = b_rem[j] / b_cnt[j]
        s = np.inf
        for j in range(nb):
            if share[j] < s:
                s = share[j]
        level += s
        s_hist[rnd] = s
        lvl_hist[rnd] = level
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
                fround[f] = rnd
                g = group_of[f]
                live[g] -= 1
                if live[g] == 0:
                    j = pos[n_res + g]
                    b_on[j] = False
                    b_rem[j] = np.inf
                    b_cnt[j] = 1.0
                    n_on -= 1
                for m in range(flow_ptr[f], flow_ptr[f + 1]):
                    e2 = flow_res[m]
                    if not on[e2]:
                        continue
                    j = pos[e2]
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
    return rnd, ck_every, s_hist, lvl_hist, ck_rem, ck_cnt


@njit(cache=True, error_model="numpy")
def hot_build(path_mat, slots, paths, hot, capacity, bw, bw_class, class_bw, local, n_slots, ck_every,
              sat_rtol):  # pragma: no cover - compiled
    """The engine's recomputation from scratch: finds the active flows (slots ``slots``, on
    ``paths``) that cross a hot resource and shares the hot resources max-min among them,
    each capped at its path's bottleneck. Returns every flow's rate (the others keep their
    bottleneck), how many flows were shared, and the state :func:`hot_resume` continues from
    (the filling's state is kept every ``ck_every`` rounds, a power of 2, fewer as rounds add
    up).

    ``local`` is scratch indexed by resource id, all -1 on entry and on return."""
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
    for j in range(n_res):
        local[res_ids[j]] = -1
    n_all = n_res + n_groups
    # per entry: remaining capacity and count
    rem = np.empty(n_all)
    cnt = np.zeros(n_all)
    for j in range(n_res):
        rem[j] = capacity[res_ids[j]]
    for g in range(n_groups):
        rem[n_res + g] = class_bw[g]
        cnt[n_res + g] = 1.0
    for q in range(n_pairs):
        cnt[flow_res[q]] += 1.0
    # CSR the other way: a hot resource's flows; a group's flows
    res_ptr = np.zeros(n_res + 1, dtype=np.int64)
    for j in range(n_res):
        res_ptr[j + 1] = res_ptr[j] + np.int64(cnt[j])
    grp_ptr = np.zeros(n_groups + 1, dtype=np.int64)
    for g in range(n_groups):
        grp_ptr[g + 1] = grp_ptr[g] + live[g]
    fill_r = res_ptr[:-1].copy()
    fill_g = grp_ptr[:-1].copy()
    res_flow = np.empty(n_pairs, dtype=np.int64)
    grp_flow = np.empty(n_hot, dtype=np.int64)
    flow_slot = np.empty(n_hot, dtype=np.int64)
    slot_k = np.full(n_slots, -1, dtype=np.int64)
    for k in range(n_hot):
        for q in range(flow_ptr[k], flow_ptr[k + 1]):
            j = flow_res[q]
            res_flow[fill_r[j]] = k
            fill_r[j] += 1
        g = group_of[k]
        grp_flow[fill_g[g]] = k
        fill_g[g] += 1
        flow_slot[k] = slots[hot_flow[k]]
        slot_k[flow_slot[k]] = k
    init_rem = rem.copy()
    on = np.ones(n_all, dtype=np.bool_)
    frozen = np.zeros(n_hot, dtype=np.bool_)
    gone = np.zeros(n_hot, dtype=np.bool_)
    rate = np.zeros(n_hot)
    fround = np.zeros(n_hot, dtype=np.int64)
    s_hist = np.empty(64)
    lvl_hist = np.empty(64)
    s_hist[0] = lvl_hist[0] = 0.0
    rows = max(8, min(256, 4_000_000 // max(n_all, 1)))
    ck_rem = np.empty((rows, n_all))
    ck_cnt = np.empty((rows, n_all))
    rounds, ck_every, s_hist, lvl_hist, ck_rem, ck_cnt = _fill(
        0, 0.0, n_res, rem, cnt, on, live, res_ptr, res_flow, grp_ptr, grp_flow, flow_ptr, flow_res, group_of,
        frozen, rate, fround, s_hist, lvl_hist, ck_rem, ck_cnt, ck_every, sat_rtol)
    for k in range(n_hot):
        rates[hot_flow[k]] = rate[k]
    meta = np.array([n_hot, n_res, rounds, ck_every, n_hot], dtype=np.int64)
    state = (meta, res_ids[:n_res].copy(), init_rem, on, res_ptr, res_flow, grp_ptr, grp_flow, flow_ptr,
             flow_res[:n_pairs].copy(), group_of[:n_hot].copy(), flow_slot, slot_k, class_bw.copy(), rate, fround,
             gone, s_hist, lvl_hist, ck_rem, ck_cnt)
    return rates, n_hot, state


@njit(cache=True)
def active_flows(s_active, s_path, res_demand, hot_at, hot):  # pragma: no cover - compiled
    """The active slots (in slot order) and their paths, and ``hot`` set to which resources are
    hot (``res_demand > hot_at``): what ``hot_build`` takes, in one pass instead of numpy's
    ``flatnonzero``, gather and comparison over every slot and resource."""
    n = 0
    for s in range(s_active.size):
        if s_active[s]:
            n += 1
    slots = np.empty(n, dtype=np.int64)
    paths = np.empty(n, dtype=np.int64)
    i = 0
    for s in range(s_active.size):
        if s_active[s]:
            slots[i] = s
            paths[i] = s_path[s]
            i += 1
    for r in range(hot.size):
        hot[r] = res_demand[r] > hot_at[r]
    return slots, paths


@njit(cache=True)
def demand_sums(s_active, s_path, path_mat, path_bw, big, pad, out):  # pragma: no cover - compiled
    """``out`` set to the demand on each resource summed afresh: over the active slots in slot
    order, each cell of their path-matrix row in order, ``min(bottleneck, big)`` added, as
    ``np.bincount`` over the rows' cells adds its weights (element by element, in order), so
    the same sums to the last bit; the padding's entry then zeroed."""
    out[:] = 0.0
    width = path_mat.shape[1]
    for s in range(s_active.size):
        if s_active[s]:
            p = s_path[s]
            v = path_bw[p] if path_bw[p] < big else big
            for c in range(width):
                out[path_mat[p, c]] += v
    out[pad] = 0.0


@njit(cache=True)
def hot_outside(res_demand, hot_at, res_ids, on, mark):  # pragma: no cover - compiled
    """Whether a resource is hot (``res_demand > hot_at``) that is not one of the kept problem's
    hot resources still on (``res_ids[j]`` with ``on[j]``). ``mark`` is scratch indexed by
    resource id, all False on entry and on return."""
    n_res = res_ids.size
    for j in range(n_res):
        if on[j]:
            mark[res_ids[j]] = True
    out = False
    for r in range(res_demand.size):
        if res_demand[r] > hot_at[r] and not mark[r]:
            out = True
            break
    for j in range(n_res):
        mark[res_ids[j]] = False
    return out


@njit(cache=True)
def _cold_rates(out_cold, flow_slot, class_bw, group_of):  # pragma: no cover - compiled
    """The slots of the flows that went cold and their rates (their class's bottleneck)."""
    slots_out = np.empty(out_cold.size, dtype=np.int64)
    rates_out = np.empty(out_cold.size)
    for i in range(out_cold.size):
        slots_out[i] = flow_slot[out_cold[i]]
        rates_out[i] = class_bw[group_of[out_cold[i]]]
    return slots_out, rates_out


@njit(cache=True)
def _all_held(e, last, c, limit, n_res, on, res_ptr, res_flow, flow_ptr, flow_res, group_of, fround, gone, ck_rem,
              ck_cnt):  # pragma: no cover - compiled
    """Whether every flow left on resource entry ``e`` that froze in round ``last`` has another
    entry that saturates in it (``limit``) at the kept state ``c``: its own cap, or a hot
    resource still on. Flows that froze before ``last`` are not concerned."""
    for q in range(res_ptr[e], res_ptr[e + 1]):
        f = res_flow[q]
        if gone[f] or fround[f] != last:
            continue
        g = n_res + group_of[f]
        held = ck_cnt[c, g] > 0 and ck_rem[c, g] <= limit  # its own cap saturates
        if not held:
            for m in range(flow_ptr[f], flow_ptr[f + 1]):
                e2 = flow_res[m]
                if e2 != e and on[e2] and ck_cnt[c, e2] > 0 and ck_rem[c, e2] / ck_cnt[c, e2] <= limit:
                    held = True
                    break
        if not held:
            return False
    return True


@njit(cache=True, error_model="numpy")
def hot_resume(drained, demand, hot_at, meta, res_ids, init_rem, on, res_ptr, res_flow, grp_ptr, grp_flow, flow_ptr,
               flow_res, group_of, flow_slot, slot_k, class_bw, rate, fround, gone, s_hist, lvl_hist, ck_rem, ck_cnt,
               sat_rtol):  # pragma: no cover - compiled
    """The recomputation after flows ``drained`` (slots) ended and resources cooled (their
    ``demand`` no longer above ``hot_at``), nothing else having changed since :func:`hot_build`
    or the last call (the caller checks that no flow started and no resource became hot): the
    flows whose rate changed (slots, rates), how many flows are shared, and the regrown records."""
    n_hot, n_res, rounds, ck_every = meta[0], meta[1], meta[2], meta[3]
    n_all = init_rem.size
    big = rounds + 1
    kstar = big
    removed = np.empty(n_hot, dtype=np.int64)
    nr = 0
    for i in range(drained.size):
        sl = drained[i]
        if sl < slot_k.size and slot_k[sl] >= 0:
            removed[nr] = slot_k[sl]
            slot_k[sl] = -1
            nr += 1
    n_drained = nr
    cooled = np.empty(n_res, dtype=np.int64)
    nc = 0
    for e in range(n_res):
        if on[e] and not demand[res_ids[e]] > hot_at[res_ids[e]]:
            on[e] = False
            cooled[nc] = e
            nc += 1
            for q in range(res_ptr[e], res_ptr[e + 1]):
                f = res_flow[q]
                if not gone[f] and fround[f] < kstar:
                    kstar = fround[f]
    for i in range(nr):
        f = removed[i]
        gone[f] = True
        if fround[f] < kstar:
            kstar = fround[f]
    out_cold = np.empty(0, dtype=np.int64)
    if nc:  # flows left crossing no hot resource run at their bottleneck
        cold = np.empty(n_hot, dtype=np.int64)
        n_cold = 0
        for i in range(nc):
            e = cooled[i]
            for q in range(res_ptr[e], res_ptr[e + 1]):
                f = res_flow[q]
                if gone[f]:
                    continue
                crossing = False
                for m in range(flow_ptr[f], flow_ptr[f + 1]):
                    if on[flow_res[m]]:
                        crossing = True
                        break
                if not crossing:
                    gone[f] = True
                    slot_k[flow_slot[f]] = -1
                    removed[nr] = f
                    nr += 1
                    cold[n_cold] = f
                    n_cold += 1
        out_cold = cold[:n_cold]
    meta[4] -= nr
    n_live = meta[4]
    if kstar == big:  # nothing in the filling changed
        slots_out, rates_out = _cold_rates(out_cold, flow_slot, class_bw, group_of)
        return slots_out, rates_out, n_live, s_hist, lvl_hist, ck_rem, ck_cnt
    c = (kstar - 1) // ck_every
    r0 = c * ck_every
    # the gone flows' groups: one flow fewer at every kept state up to c (each was unfrozen there)
    for i in range(nr):
        col = n_res + group_of[removed[i]]
        for ci in range(c + 1):
            ck_cnt[ci, col] -= 1.0
    # the resources they crossed: replayed from round 1 with their new counts
    touched = np.zeros(n_all, dtype=np.bool_)
    frs = np.empty(n_hot, dtype=np.int64)
    for i in range(n_drained):
        f = removed[i]
        for m in range(flow_ptr[f], flow_ptr[f + 1]):
            e = flow_res[m]
            if not on[e] or touched[e]:
                continue
            touched[e] = True
            nf = 0
            for q in range(res_ptr[e], res_ptr[e + 1]):
                f2 = res_flow[q]
                if not gone[f2]:
                    frs[nf] = fround[f2]
                    nf += 1
            fr = np.sort(frs[:nf])
            n_un = nf
            x = init_rem[e]
            ptr = 0
            for j in range(1, r0 + 2):  # the state at the start of round j
                if (j - 1) % ck_every == 0:
                    ck_rem[(j - 1) // ck_every, e] = x
                    ck_cnt[(j - 1) // ck_every, e] = n_un
                if j == r0 + 1:
                    break
                if n_un > 0:
                    x -= s_hist[j] * np.float64(n_un)
                while ptr < nf and fr[ptr] == j:
                    n_un -= 1
                    ptr += 1
    n_groups = n_all - n_res
    if kstar == rounds and r0 == rounds - 1:
        # Only the last round changed, and its state is kept: if its increment comes out the
        # same, every resource the gone flows crossed still saturates in it, and every flow
        # that crossed a cooled resource crosses another that saturates, every flow left
        # freezes in it again at the same level (those on the other resources saw no
        # change): nothing to redo. A symmetric phase (every flow at one rate) is one round.
        s = np.inf
        for e in range(n_all):
            x = ck_cnt[c, e]
            if on[e] and x > 0:
                share = ck_rem[c, e] / (x if e < n_res else 1.0)
                if share < s:
                    s = share
        if s == s_hist[kstar]:
            limit = s * (1 + sat_rtol)
            same = True
            # a resource the gone flows crossed that no longer saturates in it (or never did) is
            # checked as a cooled one is: each flow left on it that froze in the last round must
            # be held there by another entry that saturates (the others' rounds are unchanged)
            for e in range(n_res):
                if not same:
                    break
                if touched[e] and ck_cnt[c, e] > 0 and not ck_rem[c, e] / ck_cnt[c, e] <= limit:
                    same = _all_held(e, kstar, c, limit, n_res, on, res_ptr, res_flow, flow_ptr, flow_res, group_of,
                                     fround, gone, ck_rem, ck_cnt)
            for i in range(nc):
                if not same:
                    break
                same = _all_held(cooled[i], kstar, c, limit, n_res, on, res_ptr, res_flow, flow_ptr, flow_res,
                                 group_of, fround, gone, ck_rem, ck_cnt)
            if same:
                slots_out, rates_out = _cold_rates(out_cold, flow_slot, class_bw, group_of)
                return slots_out, rates_out, n_live, s_hist, lvl_hist, ck_rem, ck_cnt
    # restart from the state at the start of round r0 + 1
    rem = ck_rem[c, :].copy()
    cnt = np.empty(n_all)
    live = np.zeros(n_groups, dtype=np.int64)
    for e in range(n_res):
        cnt[e] = ck_cnt[c, e]
    for g in range(n_groups):
        cnt[n_res + g] = 1.0
        live[g] = np.int64(ck_cnt[c, n_res + g])
    frozen = np.empty(n_hot, dtype=np.bool_)
    for f in range(n_hot):
        frozen[f] = gone[f] or fround[f] <= r0
    before = rate.copy()
    rounds, ck_every, s_hist, lvl_hist, ck_rem, ck_cnt = _fill(
        r0, lvl_hist[r0], n_res, rem, cnt, on, live, res_ptr, res_flow, grp_ptr, grp_flow, flow_ptr, flow_res,
        group_of, frozen, rate, fround, s_hist, lvl_hist, ck_rem, ck_cnt, ck_every, sat_rtol)
    meta[2] = rounds
    meta[3] = ck_every
    n_out = out_cold.size
    for f in range(n_hot):
        if not gone[f] and fround[f] > r0 and rate[f] != before[f]:
            n_out += 1
    slots_out = np.empty(n_out, dtype=np.int64)
    rates_out = np.empty(n_out)
    i = 0
    for f in range(n_hot):
        if not gone[f] and fround[f] > r0 and rate[f] != before[f]:
            slots_out[i] = flow_slot[f]
            rates_out[i] = rate[f]
            i += 1
    for f in out_cold:
        slots_out[i] = flow_slot[f]
        rates_out[i] = class_bw[group_of[f]]
        i += 1
    return slots_out, rates_out, n_live, s_hist, lvl_hist, ck_rem, ck_cnt


def hot_max_min_kernel(path_mat, paths, hot, capacity, bw, bw_class, class_bw, local, sat_rtol):
    """:func:`hot_build` without the state: rates of the flows on ``paths`` and how many
    were shared (tests compare it with the plain form)."""
    rates, n, _ = hot_build(path_mat, np.arange(paths.size, dtype=np.int64), paths, hot, capacity, bw, bw_class,
                            class_bw, local, paths.size, 8, sat_rtol)
    return rates, n


# ---------------------------------------------------------------- the fabric's bookkeeping
#
# A flow's start and drain touch a dozen of the fabric's arrays (a numpy call each, a
# microsecond apiece at the few flows an instant moves). Once the fabric's recomputation is
# compiled, these do the same in one call: the same values, the demand sums in the same order
# (np.add.at and np.subtract.at add element by element, in index order, as the loops do).


@njit(cache=True)
def drain_due(x, near, s_end, s_near, s_active, s_path, s_run, s_step, s_local, path_mat, path_bw, big, res_demand,
              hot_at, pad, free, n_free, check_hot):  # pragma: no cover - compiled
    """``Fabric._drain``'s bookkeeping: the flows of the near set ``near`` due by ``x``, in slot
    order (``done``; the rest of the set ``rest``, in its order), taken off: their demand
    subtracted from ``res_demand`` path by path (``min(bottleneck, big)`` on every cell of their
    path-matrix row, the padding's entry then zeroed), their drain time infinite, inactive, out
    of the near set, their slots freed (``free[n_free:]``). With ``check_hot``, whether one of
    them crossed a hot resource (``res_demand > hot_at`` before the subtraction). Returns
    ``(done, rest, crossed_hot, n_free, runs, steps, locals, earliest)``: the done flows' runs,
    steps and local indexes, and the earliest drain time in ``rest``."""
    n_due = 0
    for i in range(near.size):
        if s_end[near[i]] <= x:
            n_due += 1
    done = np.empty(n_due, dtype=np.int64)
    rest = np.empty(near.size - n_due, dtype=np.int64)
    a = b = 0
    earliest = np.inf
    for i in range(near.size):
        s = near[i]
        if s_end[s] <= x:
            done[a] = s
            a += 1
        else:
            rest[b] = s
            b += 1
            if s_end[s] < earliest:
                earliest = s_end[s]
    done.sort()
    width = path_mat.shape[1]
    crossed = False
    if check_hot:
        for i in range(n_due):
            p = s_path[done[i]]
            for c in range(width):
                r = path_mat[p, c]
                if res_demand[r] > hot_at[r]:
                    crossed = True
    for i in range(n_due):
        s = done[i]
        p = s_path[s]
        v = path_bw[p] if path_bw[p] < big else big
        for c in range(width):
            res_demand[path_mat[p, c]] -= v
        s_end[s] = np.inf
        s_active[s] = False
        s_near[s] = False
        free[n_free + i] = s
    res_demand[pad] = 0.0
    runs = np.empty(n_due, dtype=np.int64)
    steps = np.empty(n_due, dtype=np.int64)
    local = np.empty(n_due, dtype=np.int64)
    for i in range(n_due):
        runs[i] = s_run[done[i]]
        steps[i] = s_step[done[i]]
        local[i] = s_local[done[i]]
    return done, rest, crossed, n_free + n_due, runs, steps, local, earliest


@njit(cache=True)
def start_flows(slots, run, k, tr, paths, nbytes, now, path_mat, path_bw, big, res_demand, hot_at, pad, s_run, s_step,
                s_local, s_path, s_rem, s_t0, s_active, s_rate, s_end, s_near, near_t, wait):  # pragma: no cover
    """``Fabric.add_flows``'s bookkeeping for the flows of run ``run``'s step ``k`` (transfers
    ``tr``) on ``paths`` moving ``nbytes``, into ``slots``:
    their demand added to ``res_demand`` (as :func:`drain_due` subtracts it); whether a resource
    they cross is now hot; then either their rates left at 0 for a recomputation (hot, or
    ``wait``), or each runs at its path's bottleneck: its drain time set, the earliest of them
    returned, those due by ``near_t`` added to the near set (``s_near``; returned, in the order
    of ``slots``). Returns ``(hot, earliest, near)``."""
    m = paths.size
    width = path_mat.shape[1]
    for i in range(m):
        p = paths[i]
        v = path_bw[p] if path_bw[p] < big else big
        for c in range(width):
            res_demand[path_mat[p, c]] += v
    res_demand[pad] = 0.0
    hot = False
    for i in range(m):
        p = paths[i]
        for c in range(width):
            r = path_mat[p, c]
            if res_demand[r] > hot_at[r]:
                hot = True
    earliest = np.inf
    n_near = 0
    near = np.empty(m if not (hot or wait) else 0, dtype=np.int64)
    for i in range(m):
        s = slots[i]
        p = paths[i]
        s_run[s] = run
        s_step[s] = k
        s_local[s] = tr[i]
        s_path[s] = p
        s_rem[s] = nbytes[i]
        s_t0[s] = now
        s_active[s] = True
        if hot or wait:
            s_rate[s] = 0.0
        else:
            rate = path_bw[p]
            s_rate[s] = rate
            end = now + nbytes[i] / rate
            s_end[s] = end
            if end < earliest:
                earliest = end
            if end <= near_t and not s_near[s]:
                s_near[s] = True
                near[n_near] = s
                n_near += 1
    return hot, earliest, near[:n_near]


@njit(cache=True)
def set_rates(slots, rates, now, s_rate, s_rem, s_t0, s_end, s_near, near_t):  # pragma: no cover - compiled
    """``Fabric._set_rates``: flows ``slots`` run at ``rates`` from ``now``; those whose rate
    changed keep what they have left (``rem - rate * (now - t0)``) and get a new drain time
    (``now + rem / rate``). Returns whether any changed and those now due by ``near_t`` that
    were not in the near set (``s_near`` set for them), in the order of ``slots``."""
    near = np.empty(slots.size, dtype=np.int64)
    n_near = 0
    changed = False
    for i in range(slots.size):
        s = slots[i]
        new = rates[i]
        if new != s_rate[s]:
            changed = True
            rem = s_rem[s] - s_rate[s] * (now - s_t0[s])
            s_rem[s] = rem
            s_t0[s] = now
            s_rate[s] = new
            end = now + rem / new
            s_end[s] = end
            if end <= near_t and not s_near[s]:
                s_near[s] = True
                near[n_near] = s
                n_near += 1
    return changed, near[:n_near]
