"""A straightforward reference of the event-driven engine, for differential tests.

Plain Python, one object per transfer, no batching, no slot table, no demand bookkeeping,
no contention-free shortcut: at every event it recomputes every active flow's max-min rate
by textbook progressive filling and advances time to the next event. It implements the
engine's documented rules (docs/architecture.md, "Engine"): per-rank step synchronisation, a
transfer starts at ready + per-step overhead + path latency, drains at its max-min share of
every resource on its path, and, when it reduces over links that cannot, then waits for the
destination's reduction unit (first come first served, ties by transfer index). Routes come
from the topology's own router (single path: ``ecmp``), which is tested on its own.
"""

from __future__ import annotations

import math


def max_min(flows: dict, capacity) -> dict:
    """Progressive filling over ``flows`` ({id: [resources]}); returns {id: rate}: raise all
    unfrozen flows together until the resources with the smallest fair share are full, freeze
    the flows crossing them, repeat."""
    rate = {f: 0.0 for f in flows}
    left = {r: float(capacity[r]) for res in flows.values() for r in res}
    unfrozen = set(flows)
    while unfrozen:
        users: dict = {}
        for f in unfrozen:
            for r in flows[f]:
                users[r] = users.get(r, 0) + 1
        shares = {r: left[r] / n for r, n in users.items()}
        share = min(shares.values())
        full = {r for r, s in shares.items() if s <= share * (1 + 1e-12)}
        for f in unfrozen:
            rate[f] += share
        for r, n in users.items():
            left[r] -= share * n
        unfrozen -= {f for f in unfrozen if any(r in full for r in flows[f])}
    return rate


def simulate(topo, schedule, step_overhead_s: float = 0.0, launch_overhead_s: float = 0.0) -> list[float]:
    """Each rank's finish time (s) for ``schedule`` on ``topo`` (ranks = ``topo.npus``)."""
    net = topo.compiled()
    pad = len(net.capacity_Bps)
    capacity = list(net.capacity_Bps)
    mat = net.paths.matrix(pad)
    node = [net.node_index[n] for n in topo.npus]
    p = schedule.p
    steps = [schedule.steps[k] for k in range(len(schedule.steps))]
    transfers = []  # (step, idx, src, dst, bytes, reduce, resources, latency, inline)
    for k, st in enumerate(steps):
        for i in range(len(st)):
            s, d = int(st.src[i]), int(st.dst[i])
            (pid,) = net.route(node[s], node[d], "ecmp", 0, 1)
            _, _, lat, inline, _ = net.paths.arrays()
            mat = net.paths.matrix(pad)
            res = [int(r) for r in mat[pid] if r != pad]
            transfers.append((k, i, s, d, float(st.nbytes[i]), bool(st.reduce[i]), res, float(lat[pid]),
                              bool(inline[pid])))
    by_step = [[t for t in range(len(transfers)) if transfers[t][0] == k] for k in range(len(steps))]
    step_of = [0] * p
    left = [0] * p  # transfers a rank still waits for in its step
    entered = [[None] * p for _ in steps]
    finish = [math.nan] * p
    pending = []  # (time, kind, transfer): kind 0 start, 1 reduced
    active: dict = {}  # transfer -> bytes left
    unit_free = {}
    t = launch_overhead_s

    def enter(r, k, now):
        while True:
            if k == len(steps):
                finish[r] = now
                return
            step_of[r], entered[k][r] = k, now
            mine = [x for x in by_step[k] if transfers[x][2] == r or transfers[x][3] == r]
            left[r] = len(mine)
            for x in mine:
                other = transfers[x][3] if transfers[x][2] == r else transfers[x][2]
                if entered[k][other] is not None and (step_of[other] == k):
                    pending.append((now + step_overhead_s + transfers[x][7], 0, x))
            if mine:
                return
            k += 1

    def done(x, now):
        for r in {transfers[x][2], transfers[x][3]}:
            left[r] -= 1
            if left[r] == 0:
                enter(r, transfers[x][0] + 1, now)

    for r in range(p):
        enter(r, 0, t)
    while active or pending:
        rates = max_min({x: transfers[x][6] for x in active}, capacity) if active else {}
        t_drain = min((t + active[x] / rates[x] for x in active), default=math.inf)
        t_next = min([t_drain] + [e[0] for e in pending])
        for x in active:
            active[x] -= rates[x] * (t_next - t)
        t = t_next
        eps = 1e-12 * max(t, 1e-30)
        arrived = sorted(x for x in active if active[x] <= rates[x] * eps)
        for x in arrived:
            del active[x]
        now_events = sorted((e for e in pending if e[0] <= t + eps), key=lambda e: (e[1], e[2]))
        pending[:] = [e for e in pending if e[0] > t + eps]
        for _, kind, x in now_events:
            if kind == 0:
                if transfers[x][4] <= 0:
                    arrived.append(x)
                else:
                    active[x] = transfers[x][4]
            else:
                done(x, t)
        for x in sorted(arrived, key=lambda x: (transfers[x][3], x)):
            _, _, _, d, nbytes, red, _, _, inline = transfers[x]
            reduce_Bps = float(net.reduce_Bps[node[d]])
            if red and not inline and nbytes > 0 and math.isfinite(reduce_Bps):
                start = max(t, unit_free.get(d, -math.inf))
                unit_free[d] = start + nbytes / reduce_Bps
                pending.append((unit_free[d], 1, x))
            else:
                done(x, t)
    return finish
