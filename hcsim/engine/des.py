"""The event-driven engine: a fluid flow model on a SimPy clock.

Transfers become flows; active flows share every link (and NPU endpoint resource) max-min
fairly, recomputed once per distinct event instant. Everything that starts, drains,
arrives or completes at one instant is handled as one batch of numpy arrays, so a
symmetric ring step on 1024 ranks costs one pass, not 1024 events.

Life of a transfer of step k from rank s to rank d:

1. *ready*: both s and d have entered step k (each finished every step-(k-1) transfer it
   takes part in);
2. *start* = ready + per-step overhead: its flow(s) become active and drain at their
   fair share;
3. *arrive* = drained + path latency;
4. *complete* = arrive, or, if it reduces and its links cannot reduce inline, when d's
   reduction unit (one per NPU, first come first served) has reduced its bytes.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
import simpy

from ..errors import StuckScheduleError, bad_value
from ..topology.model import ROUTING_POLICIES
from .fairshare import max_min_rates

_ARRIVE, _COMPLETE, _ACTIVATE = 0, 1, 2


@dataclass(frozen=True)
class EngineConfig:
    """How the engine runs a schedule.

    Attributes
    ----------
    step_overhead_s : float
        Added to each transfer between *ready* and *start* (per-step handshake).
    launch_overhead_s : float
        Time before any rank enters step 0.
    routing : str
        ``"ecmp"`` (one hashed path per rank pair) or ``"spray"`` (split over all equal-cost paths).
    ecmp_seed : int
        Changes the ECMP hash (a different source port).
    record : bool
        Keep per-transfer times (needed for the transfer table and critical path).
    """

    step_overhead_s: float = 0.0
    launch_overhead_s: float = 0.0
    routing: str = "ecmp"
    ecmp_seed: int = 0
    record: bool = True

    def __post_init__(self):
        for name in ("step_overhead_s", "launch_overhead_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise bad_value(name, v, "seconds >= 0")
        if self.routing not in ROUTING_POLICIES:
            raise bad_value("routing", self.routing, "one of " + ", ".join(ROUTING_POLICIES))


def _csr_rows(ptr: np.ndarray, rows: np.ndarray):
    """Positions of the CSR entries of ``rows`` (concatenated) and each row's length."""
    starts = ptr[rows]
    counts = ptr[rows + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), counts
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return np.arange(total, dtype=np.int64) + offs, counts


class _StepState:
    """Live state of one step that some rank has entered."""

    __slots__ = ("k", "src", "dst", "nbytes", "reduce", "n", "entered", "left", "sub_ptr", "sub_path",
                 "lat", "inline", "sub_left", "deg", "gid0", "t_ready", "t_start", "t_end", "pred")

    def __init__(self, k, step, routing, p, gid0, record):
        self.k = k
        self.src, self.dst = step.src, step.dst
        self.nbytes = step.nbytes.astype(float)
        self.reduce = np.asarray(step.reduce, dtype=bool)
        self.n = len(step)
        self.entered = np.zeros(self.n, dtype=np.int8)
        self.left = self.n
        self.sub_ptr, self.sub_path, self.lat, self.inline, self.deg = routing
        self.sub_left = np.diff(self.sub_ptr).astype(np.int64)
        self.gid0 = gid0
        if record:
            self.t_ready = np.full(self.n, np.nan)
            self.t_start = np.full(self.n, np.nan)
            self.t_end = np.full(self.n, np.nan)
            self.pred = np.full(self.n, -1, dtype=np.int64)


class FlowSimulator:
    """Runs one schedule on one topology and collects timings.

    Parameters
    ----------
    topo : Topology
    rank_nodes : list of str
        NPU node of each rank.
    schedule : Schedule
    config : EngineConfig
    """

    def __init__(self, topo, rank_nodes, schedule, config: EngineConfig):
        self.topo = topo
        self.net = topo.compiled()
        self.schedule = schedule
        self.cfg = config
        self.p = schedule.p
        self.n_steps = len(schedule.steps)
        self.rank_node = np.array([self.net.node_index[n] for n in rank_nodes], dtype=np.int64)
        self.n_nodes = len(self.net.node_names)
        self.reduce_Bps = self.net.reduce_Bps[self.rank_node]
        self.capacity = self.net.capacity_Bps
        n_res = len(self.capacity)
        self.res_count = np.zeros(n_res, dtype=np.int64)
        self.res_bytes = np.zeros(n_res)
        # ranks
        self.cur_step = np.full(self.p, -1, dtype=np.int64)
        self.outstanding = np.zeros(self.p, dtype=np.int64)
        self.rank_gate = np.full(self.p, -1, dtype=np.int64)
        self.finish_s = np.full(self.p, np.nan)
        self.reduce_free = np.zeros(self.p)
        # steps
        self.states: dict[int, _StepState] = {}
        self.done_states: list[_StepState] = []
        self.step_ready_s = np.full(self.n_steps, np.inf)
        self.step_end_s = np.full(self.n_steps, -np.inf)
        self.step_count = np.zeros(self.n_steps, dtype=np.int64)
        self.next_gid = 0
        self._route_cache = None
        # events
        self.heap: list = []
        self.seq = 0
        # active flows
        self.f_step = np.zeros(0, dtype=np.int64)
        self.f_local = np.zeros(0, dtype=np.int64)
        self.f_rem = np.zeros(0)
        self.f_rate = np.zeros(0)
        self.f_t0 = np.zeros(0)
        self.f_end = np.zeros(0)
        self.pair_flow = np.zeros(0, dtype=np.int64)
        self.pair_res = np.zeros(0, dtype=np.int64)
        self._added_from = None  # first position of flows added since the last rate update
        self._need_full = False
        self._dirty = False
        self.instants = 0
        self.full_recomputes = 0

    # ---------------------------------------------------------------- public
    def run(self, env: simpy.Environment | None = None) -> float:
        """Run to completion; return the collective's time in seconds."""
        env = env or simpy.Environment()
        proc = env.process(self.process(env))
        env.run(until=proc)
        return proc.value

    def process(self, env: simpy.Environment):
        """SimPy process: drives the schedule; its value is the finish time (s)."""
        t0 = env.now
        if self.cfg.launch_overhead_s:
            yield env.timeout(self.cfg.launch_overhead_s)
        now = env.now
        self._enter(np.arange(self.p), 0, now)
        self._instant(now, drain=False)
        while True:
            t = self._next_time()
            if t == math.inf:
                break
            yield env.timeout(max(0.0, t - env.now))
            self._instant(t)
        if np.isnan(self.finish_s).any():
            stuck = np.flatnonzero(np.isnan(self.finish_s))
            listed = ", ".join(f"{int(r)} (step {int(self.cur_step[r])})" for r in stuck[:8])
            raise StuckScheduleError(f"schedule {self.schedule.algorithm} made no progress: ranks {listed}"
                                     f"{' ...' if len(stuck) > 8 else ''} never finished")
        return float(self.finish_s.max()) - t0

    # ---------------------------------------------------------------- steps
    def _routing(self, step):
        cache = self._route_cache
        if cache is not None and cache[0] is step.src and cache[1] is step.dst:
            return cache[2]
        net, policy, seed = self.net, self.cfg.routing, self.cfg.ecmp_seed
        nodes = self.rank_node[step.src] * self.n_nodes + self.rank_node[step.dst]
        uniq, inv = np.unique(nodes, return_inverse=True)
        groups = [net.route(int(u) // self.n_nodes, int(u) % self.n_nodes, policy, seed) for u in uniq]
        _, _, p_lat, p_inline, _ = net.paths.arrays()
        g_n = np.array([len(g) for g in groups], dtype=np.int64)
        g_ptr = np.concatenate([[0], np.cumsum(g_n)])
        g_flat = np.array([pid for g in groups for pid in g], dtype=np.int64)
        g_lat = np.array([p_lat[list(g)].max() for g in groups])
        g_inline = np.array([p_inline[list(g)].all() for g in groups])
        sub_counts = g_n[inv]
        sub_ptr = np.concatenate([[0], np.cumsum(sub_counts)])
        pos, _ = _csr_rows(g_ptr, inv)
        deg = np.bincount(step.src, minlength=self.p) + np.bincount(step.dst, minlength=self.p)
        routing = (sub_ptr, g_flat[pos], g_lat[inv], g_inline[inv], deg)
        self._route_cache = (step.src, step.dst, routing)
        return routing

    def _state(self, k) -> _StepState:
        st = self.states.get(k)
        if st is None:
            step = self.schedule.steps[k]
            st = _StepState(k, step, self._routing(step), self.p, self.next_gid, self.cfg.record)
            self.next_gid += st.n
            self.step_count[k] = st.n
            self.states[k] = st
        return st

    def _enter(self, ranks: np.ndarray, k: int, now: float):
        """Ranks (all entering the same step k) enter it at ``now``; cascade through empty steps."""
        while ranks.size:
            if k >= self.n_steps:
                self.cur_step[ranks] = self.n_steps
                self.finish_s[ranks] = now
                return
            st = self._state(k)
            self.cur_step[ranks] = k
            deg = st.deg[ranks]
            self.outstanding[ranks] = deg
            if st.n:
                mask = np.zeros(self.p, dtype=bool)
                mask[ranks] = True
                ms, md = mask[st.src], mask[st.dst]
                touched = np.flatnonzero(ms | md)
                st.entered[touched] += ms[touched].astype(np.int8) + md[touched]
                ready = touched[st.entered[touched] == 2]
                if ready.size:
                    self._start(st, ready, now, np.where(ms[ready], st.src[ready], st.dst[ready]))
            ranks = ranks[deg == 0]
            k += 1

    def _start(self, st: _StepState, idx, now, gate_rank):
        if self.cfg.record:
            st.t_ready[idx] = now
            st.pred[idx] = self.rank_gate[gate_rank]
        self.step_ready_s[st.k] = min(self.step_ready_s[st.k], now)
        self._push(now + self.cfg.step_overhead_s, _ACTIVATE, st.k, idx)

    def _push(self, t, kind, k, idx):
        heapq.heappush(self.heap, (t, kind, self.seq, k, idx))
        self.seq += 1

    # ---------------------------------------------------------------- instants
    def _next_time(self) -> float:
        t = self.heap[0][0] if self.heap else math.inf
        if self.f_end.size:
            t = min(t, float(self.f_end.min()))
        return t

    def _instant(self, now: float, drain: bool = True):
        self.instants += 1
        tol = 1e-12 * abs(now) + 1e-18
        if drain and self.f_end.size:
            self._drain(now, tol)
        while self.heap and self.heap[0][0] <= now + tol:
            t, kind, _, k, idx = heapq.heappop(self.heap)
            if kind == _ACTIVATE:
                self._activate(self.states[k], idx, now)
            elif kind == _ARRIVE:
                self._arrive(self.states[k], idx, now)
            else:
                self._complete(self.states[k], idx, now)
        if self._dirty:
            self._update_rates(now)

    def _activate(self, st: _StepState, idx, now):
        if self.cfg.record:
            st.t_start[idx] = now
        pos, counts = _csr_rows(st.sub_ptr, idx)
        paths = st.sub_path[pos]
        tr = np.repeat(idx, counts)
        nbytes = st.nbytes[tr] / counts.repeat(counts)
        zero = nbytes <= 0
        if zero.any():  # nothing to move: straight to arrival after the path latency
            zt = np.unique(tr[zero])
            st.sub_left[zt] = 0
            self._push_arrivals(st, zt, now)
            keep = ~zero
            paths, tr, nbytes = paths[keep], tr[keep], nbytes[keep]
            if not paths.size:
                return
        p_ptr, p_res, *_ = self.net.paths.arrays()
        rpos, rcounts = _csr_rows(p_ptr, paths)
        res = p_res[rpos]
        base = self.f_step.size
        np.add.at(self.res_bytes, res, np.repeat(nbytes, rcounts))
        np.add.at(self.res_count, res, 1)
        if not self._need_full and (self.res_count[res] > 1).any():
            self._need_full = True
        self.pair_flow = np.concatenate([self.pair_flow, base + np.repeat(np.arange(paths.size), rcounts)])
        self.pair_res = np.concatenate([self.pair_res, res])
        self.f_step = np.concatenate([self.f_step, np.full(paths.size, st.k, dtype=np.int64)])
        self.f_local = np.concatenate([self.f_local, tr])
        self.f_rem = np.concatenate([self.f_rem, nbytes])
        self.f_rate = np.concatenate([self.f_rate, np.zeros(paths.size)])
        self.f_t0 = np.concatenate([self.f_t0, np.full(paths.size, now)])
        self.f_end = np.concatenate([self.f_end, np.full(paths.size, np.inf)])
        if self._added_from is None:
            self._added_from = base
        self._dirty = True

    def _drain(self, now, tol):
        done = self.f_end <= now + tol
        if not done.any():
            return
        d_idx = np.flatnonzero(done)
        d_steps = self.f_step[d_idx]
        d_local = self.f_local[d_idx]
        # resources freed: if someone else still uses one, their rates may rise
        drop_pair = done[self.pair_flow]
        freed = self.pair_res[drop_pair]
        np.subtract.at(self.res_count, freed, 1)
        if not self._need_full and (self.res_count[freed] > 0).any():
            self._need_full = True
        keep = ~done
        newpos = np.cumsum(keep) - 1
        self.pair_res = self.pair_res[~drop_pair]
        self.pair_flow = newpos[self.pair_flow[~drop_pair]]
        for name in ("f_step", "f_local", "f_rem", "f_rate", "f_t0", "f_end"):
            setattr(self, name, getattr(self, name)[keep])
        if self._added_from is not None:
            self._added_from = int(newpos[self._added_from - 1] + 1) if self._added_from else 0
        self._dirty = True
        ks = [int(d_steps[0])] if d_steps.min() == d_steps.max() else np.unique(d_steps).tolist()
        for k in ks:
            st = self.states[k]
            loc = d_local if len(ks) == 1 else d_local[d_steps == k]
            np.subtract.at(st.sub_left, loc, 1)
            drained = np.zeros(st.n, dtype=bool)  # dedupe: sprayed subflows share a transfer
            drained[loc[st.sub_left[loc] == 0]] = True
            self._push_arrivals(st, np.flatnonzero(drained), now)

    def _push_arrivals(self, st, idx, now):
        if not idx.size:
            return
        self._push_grouped(now + st.lat[idx], _ARRIVE, st.k, idx)

    def _push_grouped(self, times, kind, k, idx):
        """Push one heap entry per distinct time (usually there is just one)."""
        lo = times.min()
        if lo == times.max():
            self._push(float(lo), kind, k, idx)
            return
        uniq, inv = np.unique(times, return_inverse=True)
        for j, t in enumerate(uniq):
            self._push(float(t), kind, k, idx[inv == j])

    def _arrive(self, st: _StepState, idx, now):
        cost = np.where(st.reduce[idx] & ~st.inline[idx], st.nbytes[idx] / self.reduce_Bps[st.dst[idx]], 0.0)
        now_done = idx[cost == 0]
        if now_done.size:
            self._complete(st, now_done, now)
        q = cost > 0
        if not q.any():
            return
        idx, cost = idx[q], cost[q]
        dst = st.dst[idx]
        order = np.argsort(dst, kind="stable")
        idx, cost, dst = idx[order], cost[order], dst[order]
        first = np.concatenate([[True], dst[1:] != dst[:-1]])
        csum = np.cumsum(cost)
        group = np.cumsum(first) - 1
        before = (csum - cost)[first][group]
        start = np.maximum(now, self.reduce_free[dst])
        done = start + (csum - before)
        last = np.concatenate([first[1:], [True]])
        self.reduce_free[dst[last]] = done[last]
        self._push_grouped(done, _COMPLETE, st.k, idx)

    def _complete(self, st: _StepState, idx, now):
        if self.cfg.record:
            st.t_end[idx] = now
        self.step_end_s[st.k] = max(self.step_end_s[st.k], now)
        st.left -= idx.size
        ends = np.concatenate([st.src[idx], st.dst[idx]])
        np.subtract.at(self.outstanding, ends, 1)
        self.rank_gate[ends] = np.concatenate([idx, idx]) + st.gid0
        touched = np.zeros(self.p, dtype=bool)
        touched[ends] = True
        released = np.flatnonzero(touched & (self.outstanding == 0))
        if released.size:
            self._enter(released, st.k + 1, now)
        if st.left == 0:
            self._retire()

    def _retire(self):
        low = int(self.cur_step.min())
        for k in [k for k, s in self.states.items() if s.left == 0 and k < low]:
            st = self.states.pop(k)
            if self.cfg.record:
                self.done_states.append(st)

    def _update_rates(self, now):
        n = self.f_step.size
        self._dirty = False
        if n == 0:
            self._added_from = None
            self._need_full = False
            return
        if self._need_full:
            self.full_recomputes += 1
            new = max_min_rates(self.pair_flow, self.pair_res, self.capacity, n)
            changed = np.flatnonzero(new != self.f_rate)
        else:
            start = self._added_from if self._added_from is not None else n
            changed = np.arange(start, n)
            new = self.f_rate.copy()
            if changed.size:
                first_pair = np.searchsorted(self.pair_flow, start)
                pf = self.pair_flow[first_pair:] - start
                starts = np.flatnonzero(np.concatenate([[True], pf[1:] != pf[:-1]])) if pf.size else pf
                new[start:] = np.minimum.reduceat(self.capacity[self.pair_res[first_pair:]], starts)
        if changed.size:
            rem = self.f_rem[changed] - self.f_rate[changed] * (now - self.f_t0[changed])
            self.f_rem[changed] = rem
            self.f_t0[changed] = now
            self.f_rate[changed] = new[changed]
            self.f_end[changed] = now + rem / new[changed]
        self._added_from = None
        self._need_full = False
