"""The event-driven engine: a fluid flow model on a SimPy clock.

Transfers become flows; active flows share every link (and NPU endpoint resource) max-min
fairly, recomputed once per distinct event instant. Everything that starts, drains or
completes at one instant is handled as one batch of numpy arrays, so a symmetric ring step
on 1024 ranks costs one pass, not 1024 events.

Life of a transfer of step k from rank s to rank d (a rank *enters* step k once it is done
with every step-(k-1) transfer it takes part in):

1. *ready*: both s and d have entered step k (a rendezvous);
2. *start* = ready + per-step overhead + path latency: its flow(s) become active and
   drain at their fair share (latency is paid before the bytes move, as in SimGrid's
   flow model, so a transfer costs two events, not three);
3. *complete* = drained, or, if it reduces and its links cannot reduce inline, when d's
   reduction unit (one per NPU, first come first served) has reduced its bytes. Both s and
   d are done with it then.

An *eager* transfer (its message in a regime with ``start_when = "sender"``,
:class:`~hcsim.engine.regimes.MessageRegimes`) needs only its sender:

1. *ready*: s has entered step k (d may still be in an earlier step);
2. *start* = ready + per-step overhead (its bytes leave at once); its flow drains at its fair
   share, and s is done with it when it has drained (its bytes have left);
3. *arrived* = drained + path latency (the same arrival as a rendezvous transfer's when it
   runs alone); *complete* = arrived, or, if it reduces off the links, when d's reduction
   unit has reduced it, which starts no earlier than d's entering step k. d is done with it
   when it has completed and d has entered step k: a message that arrives before d is there
   waits for it (MPI's unexpected-message queue), so a late rank holds up the ranks it sends
   to, not the ranks that send to it. A rank all of whose transfers of a step completed
   before it entered leaves the step at once.

In a streamed schedule (:attr:`Schedule.streamed`, the pipelined chain) a transfer whose pair also had a
transfer in step k-1 (not across a barrier) continues that stream: its *start* is its *ready*, without the
per-step overhead, the path latency or its regime's overhead, which the segment before it paid. Its message
regime is chosen by :attr:`Schedule.protocol_bytes` where the schedule gives one.

A schedule's barriers (:attr:`Schedule.barriers`, CCL-buffer loops) hold every rank that
reaches one until all ranks have; the last arrival releases them all at that instant.

:meth:`FlowSimulator.contention_free_time` evaluates the same schedule without the flow
model: every transfer drains at its path's bottleneck as if it were alone. Since contention
only ever lowers a flow's rate, that time is a lower bound of :meth:`FlowSimulator.run`, and
equal to it when no two concurrent transfers share a resource.

Flows live in a slot table (arrays indexed by slot, a stack of free slots), so an instant
costs work in proportion to the flows that change plus two vectorised scans, and rates
are recomputed in full only when a changed flow shares a resource with another flow;
otherwise a new flow simply gets its path's bottleneck bandwidth.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import itertools
import math
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..algorithms.schedule import check_streaming, in_network_factors
from ..errors import StuckScheduleError, WorkLimitError, bad_value, is_int, is_real
from ..limits import (
    FLOWS_PER_UNIT,
    LONE_TRANSFERS_PER_UNIT,
    MAX_FLOW_UPDATES,
    RANKS_PER_UNIT,
    WORK_PER_INSTANT,
    WORK_PER_ROUTED_STEP,
    WORK_UNITS,
    grow_work,
    hop_work,
    search_work,
    walk_work,
)
from ..topology.routing import ROUTING_POLICIES, collector_paused
from . import fairshare
from .fairshare import _SAT_RTOL, hot_kernel, max_min_rates
from .regimes import MessageRegimes, many_to_many, message_bytes, new_peers, receiver_sending

if TYPE_CHECKING:
    import simpy

_COMPLETE, _ACTIVATE, _CALL, _LAND = 0, 1, 2, 3


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
    qps : int
        Queue pairs per connection: a transfer with several equal-cost paths is split over
        this many ECMP-hashed subflows.
    record : bool
        Keep per-transfer times (needed for the transfer table and critical path).
    message_regimes : MessageRegimes or None
        Per-message cost by size (eager versus rendezvous): an overhead added to each
        transfer's start and an efficiency that scales the bytes it is charged.
    reduce_time_factor : float
        Multiplies the time an NPU's reduction unit spends per byte (``reduce_Bps`` is the
        rate for fp32 sum; :func:`hcsim.dtypes.reduce_time_factor` gives the factor for
        another data type and reduce operation). 1.0 changes nothing, bit for bit.
    inline_reduce : bool
        False: no link reduces inline in this run, every reduction goes through the NPUs'
        reduction units (HCCL reduces a data type or operation its DMA engines cannot on the
        vector core: :func:`hcsim.dtypes.inline_reduce_supported`).
    """

    step_overhead_s: float = 0.0
    launch_overhead_s: float = 0.0
    routing: str = "ecmp"
    ecmp_seed: int = 0
    record: bool = True
    qps: int = 1
    message_regimes: MessageRegimes | None = None
    max_flow_updates: int = MAX_FLOW_UPDATES
    """Work bound: the run stops with :class:`~hcsim.errors.WorkLimitError` once this many flow
    rates have been recomputed (deterministic: the same call stops at the same point)."""
    max_work: int | None = None
    """Work bound in engine units (:data:`hcsim.limits.WORK_UNITS`; :attr:`Fabric.work`):
    the run stops with
    :class:`~hcsim.errors.WorkLimitError` once it has done more (deterministic, like
    ``max_flow_updates``). None: no bound but ``max_flow_updates``."""
    reduce_time_factor: float = 1.0
    inline_reduce: bool = True

    def __post_init__(self):
        for name in ("step_overhead_s", "launch_overhead_s"):
            v = getattr(self, name)
            if not is_real(v) or not math.isfinite(v) or v < 0:
                raise bad_value(name, v, "a finite number (int or float) of seconds >= 0")
            object.__setattr__(self, name, float(v))  # a numpy float32 too, as a Python float
        if self.routing not in ROUTING_POLICIES:
            raise bad_value("routing", self.routing, "one of " + ", ".join(ROUTING_POLICIES))
        if not is_int(self.qps) or not 1 <= self.qps <= 8:
            raise bad_value("qps", self.qps, "queue pairs per connection, 1 to 8 (HCCL_RDMA_QPS_PER_CONNECTION)")
        object.__setattr__(self, "qps", int(self.qps))
        f = self.reduce_time_factor
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not (0 < f < math.inf):
            raise bad_value("reduce_time_factor", f, "a finite number > 0")


def _csr_rows(ptr: np.ndarray, rows: np.ndarray):
    """Positions of the CSR entries of ``rows`` (concatenated) and each row's length."""
    starts = ptr[rows]
    counts = ptr[rows + 1] - starts
    return _rows_of(starts, counts), counts


def _shared_drain(pair: np.ndarray, start: np.ndarray, nbytes: np.ndarray, bw: np.ndarray,
                  distinct: bool = False) -> np.ndarray:
    """Drain time of each transfer of a step when only transfers of the same rank pair that
    start together share their route: they take equal shares of it (max-min on identical
    routes), so the i-th smallest of m ends after (sum of the i-1 smaller + (m-i+1) x its
    bytes) / bandwidth. Zero-byte transfers take no time. ``distinct``: no pair repeats."""
    moving = nbytes > 0
    alone = np.where(moving, nbytes / np.where(moving, bw, 1.0), 0.0)
    if pair.size < 2 or distinct:
        return alone
    order = np.lexsort((nbytes, start, pair))
    key_p, key_t = pair[order], start[order]
    first = np.concatenate([[True], (key_p[1:] != key_p[:-1]) | (key_t[1:] != key_t[:-1])])
    if first.all():
        return alone
    group = np.cumsum(first) - 1
    size = np.bincount(group)
    head = np.flatnonzero(first)
    s = nbytes[order]
    csum = np.cumsum(s)
    before = csum - s - (csum - s)[head][group]  # bytes of the smaller ones in the group
    rank_in = np.arange(s.size) - head[group]
    out = np.empty_like(alone)
    out[order] = np.where(s > 0, (before + (size[group] - rank_in) * s) / np.where(s > 0, bw[order], 1.0), 0.0)
    return out


def _rows_of(off: np.ndarray, n: np.ndarray):
    """Positions of rows starting at ``off`` with ``n`` entries each (concatenated)."""
    total = int(n.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.arange(total, dtype=np.int64) + np.repeat(off - (np.cumsum(n) - n), n)


class _RouteTable:
    """The node pairs one fabric has routed under one set of routing options, each with its
    route group (its paths as ids in the topology's path store, their largest latency, whether
    all reduce inline), looked up a step at a time with numpy instead of a call per pair.

    Keys are the engine's pair keys (``(src node * nodes + dst node) * 2 + exchange``). They sit
    in a sorted array and a small sorted array of recent additions, merged into the first once
    it has grown to a quarter of its size, so adding keys costs amortised O(log) each. A key may
    be *counted* (its routing work charged to the fabric) before it is routed: its group is -1
    until then (a work bound can stop a run between the two)."""

    def __init__(self):
        empty = np.zeros(0, dtype=np.int64)
        self.keys, self.gid = empty, empty  # sorted keys and their groups
        self.new_keys, self.new_gid = empty, empty  # recent additions, sorted
        self.n_groups = 0
        self.g_off = np.zeros(64, dtype=np.int64)  # group -> its first path in ``flat``
        self.g_n = np.zeros(64, dtype=np.int64)  # group -> how many paths
        self.g_lat = np.zeros(64)
        self.g_inline = np.zeros(64, dtype=bool)
        self.flat = np.zeros(256, dtype=np.int64)
        self.n_flat = 0

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Group of each of ``keys``: -2 for a key never counted, -1 for one counted but not
        routed yet."""
        out = np.full(keys.size, -2, dtype=np.int64)
        for k, g in ((self.keys, self.gid), (self.new_keys, self.new_gid)):
            if k.size:
                pos = np.minimum(np.searchsorted(k, keys), k.size - 1)
                hit = k[pos] == keys
                out[hit] = g[pos[hit]]
        return out

    def count(self, keys: np.ndarray) -> None:
        """Add ``keys`` (sorted, none of them present) as counted, not yet routed."""
        if not keys.size:
            return
        k = np.concatenate([self.new_keys, keys])
        g = np.concatenate([self.new_gid, np.full(keys.size, -1, dtype=np.int64)])
        order = np.argsort(k, kind="stable")
        self.new_keys, self.new_gid = k[order], g[order]
        if self.new_keys.size * 4 > self.keys.size:
            k = np.concatenate([self.keys, self.new_keys])
            g = np.concatenate([self.gid, self.new_gid])
            order = np.argsort(k, kind="stable")
            self.keys, self.gid = k[order], g[order]
            self.new_keys, self.new_gid = self.new_keys[:0], self.new_gid[:0]

    def set_groups(self, keys: np.ndarray, groups: list, paths) -> None:
        """Record the routes of ``keys`` (sorted, all counted): ``groups[i]`` the path ids of
        ``keys[i]`` in ``paths`` (the topology's :class:`~hcsim.topology.model.PathStore`, whose
        latencies and inline flags are read for these paths only)."""
        m = len(groups)
        if not m:
            return
        n = np.fromiter(map(len, groups), dtype=np.int64, count=m)
        ids = [pid for g in groups for pid in g]
        flat = np.array(ids, dtype=np.int64)
        lat = np.fromiter(map(paths.latency_s.__getitem__, ids), dtype=float, count=flat.size)
        inline = np.fromiter(map(paths.inline_reduce.__getitem__, ids), dtype=bool, count=flat.size)
        ptr = np.concatenate([[0], np.cumsum(n)])
        g0, f0 = self.n_groups, self.n_flat
        self._reserve(g0 + m, f0 + flat.size)
        self.g_off[g0:g0 + m] = f0 + ptr[:-1]
        self.g_n[g0:g0 + m] = n
        self.g_lat[g0:g0 + m] = np.maximum.reduceat(lat, ptr[:-1])
        self.g_inline[g0:g0 + m] = np.logical_and.reduceat(inline, ptr[:-1])
        self.flat[f0:f0 + flat.size] = flat
        self.n_groups, self.n_flat = g0 + m, f0 + flat.size
        ids = np.arange(g0, g0 + m, dtype=np.int64)
        for k, g in ((self.keys, self.gid), (self.new_keys, self.new_gid)):
            if k.size:
                pos = np.minimum(np.searchsorted(k, keys), k.size - 1)
                hit = k[pos] == keys
                g[pos[hit]] = ids[hit]

    def _reserve(self, groups: int, flat: int) -> None:
        if groups > self.g_off.size:
            size = max(groups, 2 * self.g_off.size)
            for name in ("g_off", "g_n", "g_lat", "g_inline"):
                a = getattr(self, name)
                b = np.zeros(size, dtype=a.dtype)
                b[:a.size] = a
                setattr(self, name, b)
        if flat > self.flat.size:
            b = np.zeros(max(flat, 2 * self.flat.size), dtype=np.int64)
            b[:self.flat.size] = self.flat
            self.flat = b


@dataclass(frozen=True)
class _StepRouting:
    """What a step's rank arrays determine; shared by steps that reuse the same arrays."""

    sub_ptr: np.ndarray   # transfer -> its subflows (CSR)
    sub_path: np.ndarray  # path id of each subflow
    lat: np.ndarray       # per transfer: largest latency over its paths
    inline: np.ndarray    # per transfer: every path reduces inline
    out_ptr: np.ndarray   # rank -> transfers it sends (CSR)
    out_tr: np.ndarray
    in_ptr: np.ndarray    # rank -> transfers it receives (CSR)
    in_tr: np.ndarray
    deg: np.ndarray       # per rank: transfers it takes part in
    single: bool          # every transfer has exactly one path
    one_each: bool        # every rank sends at most one and receives at most one transfer
    members: np.ndarray | None = None
    """The step's ranks, sorted, when few of the run's ranks take part: then ``out_ptr``,
    ``in_ptr`` and ``deg`` are indexed by position in it, not by rank (a chain's step on 16,384
    ranks holds 2 entries, not 16,384; :meth:`positions`). None: indexed by rank."""

    def degree(self, ranks: np.ndarray) -> np.ndarray:
        """Transfers each of ``ranks`` takes part in (0 for a rank not in the step)."""
        if self.members is None:
            return self.deg[ranks]
        m = self.members
        if not m.size:
            return np.zeros(len(ranks), dtype=self.deg.dtype)
        i = np.minimum(np.searchsorted(m, ranks), m.size - 1)
        return np.where(m[i] == ranks, self.deg[i], 0)

    def positions(self, ranks: np.ndarray) -> np.ndarray:
        """Where ``ranks`` (all of them in the step) are in ``out_ptr``, ``in_ptr`` and ``deg``."""
        return ranks if self.members is None else np.searchsorted(self.members, ranks)


def _first_come(dst: np.ndarray, here: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, int]:
    """When each reduction ends on its destination's reduction unit, first come first served.

    ``dst``, ``here`` (when each transfer's data is there and its receiver in the step) and
    ``cost`` (its reduction's seconds) are in service order: by destination, then ``here``. A
    reduction ends at ``max(the previous one's end, here) + cost``, its destination's previous
    end starting at -inf. Returns the ends and how many of them were computed one by one.

    The same floating-point operations in the same order for every transfer, so the same bits
    however they are grouped: the k-th reduction of every destination at once (one numpy round
    per k) while there are many destinations; a Python loop over the rest when a few
    destinations reduce many transfers each (a rooted reduce), where rounds of a few entries
    would cost more than the loop.

    Examples
    --------
    >>> ends, looped = _first_come(np.array([0, 0, 1]), np.array([1.0, 1.5, 0.0]), np.array([1.0, 1.0, 2.0]))
    >>> ends.tolist(), looped  # destination 0's second reduction waits for its first
    ([2.0, 3.0, 2.0], 1)
    """
    n = dst.size
    ends = np.empty(n)
    if not n:
        return ends, 0
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(dst[1:], dst[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    pos = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    # round k serves the k-th reduction of every destination; rounds while they serve at least
    # _ROUND_MIN reductions each, then one by one
    per_round = np.bincount(pos)
    rounds = int(np.count_nonzero(per_round >= _ROUND_MIN)) or 1
    by_pos = np.argsort(pos, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(per_round)])
    for k in range(rounds):
        cur = by_pos[bounds[k]:bounds[k + 1]]
        ends[cur] = (here[cur] if k == 0 else np.maximum(ends[cur - 1], here[cur])) + cost[cur]
    rest = by_pos[bounds[rounds]:]
    if rest.size:  # in service order: each after its destination's previous reduction
        rest = np.sort(rest)
        for i in rest.tolist():
            ends[i] = max(ends[i - 1], here[i]) + cost[i]
    return ends, int(rest.size)


_ROUND_MIN = 32
"""Reductions a round of :func:`_first_come` serves at least (a round's numpy calls cost about as
much as 32 steps of a Python loop)."""


class _StepState:
    """Live state of one step that some rank has entered."""

    __slots__ = ("k", "src", "dst", "nbytes", "charged", "extra_s", "pays", "reduce", "n", "src_in", "dst_in", "left", "route", "sub_left",
                 "gid0", "t_ready", "t_start", "t_end", "pred", "reduce_s", "any_reduce", "has_zero", "eager", "held",
                 "early")

    def __init__(self, k, step, route: _StepRouting, gid0, record, reduce_Bps, regimes=None, new_peer=None,
                 inline_ok=True, server=None, continued=None, protocol_bytes=None, in_network=None):
        self.k = k
        self.src, self.dst = step.src, step.dst
        self.nbytes = step.nbytes.astype(float)
        # eager: per transfer, whether it starts when its sender alone is ready (None: no transfer
        # of the step does); held / early: an eager transfer that drained (held, it reduces) or
        # completed (early) before its receiver entered the step, waiting for the receiver
        self.eager = self.held = self.early = None
        if regimes is None:
            self.charged, self.extra_s = self.nbytes, None
        else:  # what each transfer costs its resources, and what it adds to its start
            busy = (receiver_sending(step.src, step.dst, step.nbytes)
                    if regimes.conditional or regimes.peer_aware else None)
            active = (np.isin(step.dst, step.src[step.nbytes > 0]) if new_peer is not None else None)
            many = many_to_many(step.src, step.dst, step.nbytes) if regimes.many_aware else None
            local = server[step.src] == server[step.dst] if server is not None else None
            msg = (message_bytes(step.src, step.dst, step.nbytes) if protocol_bytes is None
                   else np.full(len(step), float(protocol_bytes)))
            self.extra_s, self.charged = regimes.costs(self.nbytes, msg, busy, new_peer, active, many, local)
            if regimes.eager_aware:
                eager = regimes.sender_starts(msg)
                if eager.any():
                    self.eager = eager
                    self.held = np.zeros(len(step), dtype=bool)
                    self.early = np.zeros(len(step), dtype=bool)
            if regimes.serial_aware:  # a sender's messages of the step go out one after another
                self.extra_s = self.extra_s + regimes.serial_delay(step.src, step.dst, step.nbytes)
        if in_network is not None:  # (switch endpoint, efficiency): its transfers move at that share of the rate
            switch, efficiency = in_network
            touch = (step.src == switch) | (step.dst == switch)
            if touch.any():
                self.charged = np.where(touch, self.charged / efficiency, self.charged)
        # pays: per transfer, 1.0 if it pays the per-step overhead, its path latency and its regime's
        # overhead; 0.0 for one that continues a stream (Schedule.streamed). None: every one pays.
        self.pays = None if continued is None or not continued.any() else np.where(continued, 0.0, 1.0)
        if self.pays is not None and self.extra_s is not None:
            self.extra_s = self.extra_s * self.pays
        self.reduce = np.asarray(step.reduce, dtype=bool)
        self.n = len(step)
        self.src_in = np.zeros(self.n, dtype=bool)  # the sender has entered this step
        self.dst_in = np.zeros(self.n, dtype=bool)  # the receiver has entered this step
        self.left = self.n
        self.route = route
        self.sub_left = np.diff(route.sub_ptr)
        self.gid0 = gid0
        # time the destination's reduction unit spends on each transfer (0: none or inline)
        offload = ~route.inline if inline_ok else True
        self.reduce_s = np.where(self.reduce & offload, self.nbytes / reduce_Bps[self.dst], 0.0)
        self.any_reduce = bool((self.reduce_s > 0).any())
        self.has_zero = bool((self.nbytes <= 0).any())
        if record:
            self.t_ready = np.full(self.n, np.nan)
            self.t_start = np.full(self.n, np.nan)
            self.t_end = np.full(self.n, np.nan)
            self.pred = np.full(self.n, -1, dtype=np.int64)


_HOT = 1.0 + 1e-9
"""A resource is hot when its demand exceeds its capacity by more than this factor. A
resource exactly full (one flow on its own bottleneck, k flows whose bottlenecks add up to the
link) limits nobody; the margin keeps the rounding of the running demand sums (about 1e-15
relative; they are recomputed exactly every ``_RESYNC_EVERY`` recomputations) from making it hot. A
demand within 1e-9 above capacity lets its flows exceed it by at most that fraction."""

_RESYNC_EVERY = 64
"""The running demand sums are recomputed exactly at every 64th max-min recomputation (adds
and subtracts of the same values drift by about 1e-16 of the magnitudes involved, far inside
the 1e-9 margin of ``_HOT`` over 64 recomputations' worth of changes)."""

SKIP_INDEX_AFTER = 16
"""Idle steps a group of entering ranks walks one by one before the run indexes every rank's
steps (:meth:`FlowSimulator._active_index`) and jumps: a rooted hierarchical reduce on 8,192
ranks walked 2.1M (group, step) pairs."""
ROUTES_CACHE_BYTES = 256 << 20
"""Most a fabric keeps of its steps' routings for steps that repeat them (emptied when full)."""
ACTIVE_INDEX_TRANSFERS = 8_000_000
"""Largest schedule (transfers) the run indexes by rank and step (16 bytes a transfer)."""

_SMALL_STEP = 8
"""Steps of at most this many transfers are routed with Python lists (:meth:`FlowSimulator._route_small`)."""

_BIG_Bps = 1e30
"""Demand counted for a path with no finite bottleneck (keeps the running sums finite)."""


_PAUSE_RANKS = 1024
"""Runs of at least this many ranks pause the cyclic collector (:func:`collector_paused`)."""


class Fabric:
    """One network: the flows of every operation running on it, and its event queue.

    Any number of :class:`FlowSimulator` runs (collectives, point-to-point messages) can share
    one fabric: their flows take max-min fair shares of the same links and NPU endpoint
    resources, and their events go through one queue processed instant by instant. Other work
    (compute, a job's dependencies) joins through :meth:`call_at`. A run made without a fabric
    gets one of its own, so a single collective works as it always has.

    Parameters
    ----------
    net : compiled topology (``Topology.compiled()``)
    max_flow_updates, max_work : int
        Work bounds (see :class:`EngineConfig`); ``max_work`` None: none.
    """

    force_full_recompute = False
    """Recompute max-min rates at every instant (tests compare this with the fast path)."""

    def __init__(self, net, max_flow_updates: int = MAX_FLOW_UPDATES, max_work: int | None = None):
        self.net = net
        self.max_flow_updates = max_flow_updates
        self.max_work = max_work
        self.lone_work = 0
        """Work of contention-free passes run on this fabric (:data:`WORK_PER_INSTANT` a step)."""
        self.route_work = 0
        """Work of routing: :data:`WORK_PER_INSTANT` per rank pair the fabric's runs route."""
        self.route_tables: dict = {}  # routing options -> _RouteTable of the node pairs counted
        self.job_work = 0
        """Work a job's runner counts for its own bookkeeping (:data:`hcsim.limits.WORK_PER_RANK_OP`)."""
        self.rank_units = 0
        """Units an instant or step entry counts beyond :data:`WORK_PER_INSTANT`: one per
        :data:`~hcsim.limits.RANKS_PER_UNIT` ranks of the largest run on this fabric so far."""
        self.rank_work = 0
        """Work of those extra units, counted as the instants, entries and routed steps happen."""
        # Resource ids index these arrays; one extra, infinite resource pads short path rows.
        self.pad = len(net.capacity_Bps)
        self.capacity = np.append(net.capacity_Bps, np.inf)
        self._hot_Bps = self.capacity * _HOT  # demand above which a resource is hot
        # Demand on each resource: the sum of its flows' path bottlenecks (what they would take
        # alone). A resource whose demand fits its capacity never limits anyone ("cold"); only
        # flows crossing a "hot" one need max-min, and only changes on hot ones need it again.
        self.res_demand = np.zeros(self.pad + 1)
        self._local = np.zeros(self.pad + 1, dtype=np.int64)  # scratch: resource -> local index
        self._scratch = np.full(self.pad + 1, -1, dtype=np.int64)  # the same for the compiled form (-1: none)
        self._hot_mask = None  # the compiled form's scratch: which resources are hot (made on first need)
        self._kept_mask = None  # and the kept problem's resources (``_kernels.hot_outside``)
        self._started_since = False  # flows started since the last compiled recomputation (hot or not)
        # the compiled recomputation's state (``_kernels.hot_build``), and what changed since it
        self._hot = None
        self._hot_started = False  # flows started since
        self._hot_drained: list = []  # slots drained since
        # the compiled starts and drains (``_kernels.start_flows``, ``drain_due``): the same module,
        # in use once a recomputation has been compiled (a run that never needs numba never loads it)
        self._book = None
        self.reduce_free = np.zeros(len(net.node_names))  # each NPU's reduction unit: free from
        self.runs: list = []
        self.routes: dict = {}  # (rank nodes, routing options, step id) -> (step, _StepRouting)
        self.routes_bytes = 0   # what the routings kept in it hold (ROUTES_CACHE_BYTES)
        self.heap: list = []
        self.seq = 0
        self._path_rows = -1
        self._refresh_paths()
        self._grow(1024)
        self._need_full = False
        self._next_drain = math.inf
        self._min_end = math.inf  # the earliest drain time (s_end.min()) unless _ends_dirty
        self._ends_dirty = False  # some drain time may have risen since _min_end was taken
        # the flows that may drain soon: every slot whose drain time is at most _near_T is in
        # _near (marked in s_near), so a drain by then scans those, not every slot
        self._near = np.zeros(0, dtype=np.int64)
        self._near_T = -math.inf
        self._t0 = 0.0
        self.instants = 0
        self.entries = 0
        """Calls of a run's step entry (ranks entering a step together): per-event work too."""
        self.full_recomputes = 0
        self.flow_updates = 0
        """Flows whose max-min rate was recomputed, summed over every full recompute: the
        engine's work, counted against ``max_flow_updates``."""
        self.flows_started = 0
        """Flows started on this fabric (:data:`~hcsim.limits.FLOWS_PER_UNIT` of them a work unit)."""

    def attach(self, run) -> int:
        """Register a run; returns its id in the slot table."""
        self.runs.append(run)
        return len(self.runs) - 1

    def _refresh_paths(self):
        """Path matrix and bottlenecks, again if the topology's path store has grown."""
        rows = len(self.net.paths.latency_s)
        if rows != self._path_rows:
            self._path_mat = self.net.paths.matrix(self.pad)
            bw = self._path_bw = self.net.paths.arrays()[4]
            # the distinct bottlenecks, and each path's (the compiled recomputation groups by them):
            # np.unique(bw, return_inverse=True), taken over the paths added since the last time
            # only (a large run adds paths step by step; sorting them all again was quadratic)
            start = self._path_rows
            if not 0 < start < rows:
                self._bw_values, self._path_bw_class = np.unique(bw, return_inverse=True)
            else:
                values, new = self._bw_values, bw[start:]
                at = np.searchsorted(values, new)
                if not (at < values.size).all() or not (values[np.minimum(at, values.size - 1)] == new).all():
                    merged = np.unique(np.concatenate([values, new]))  # the same values as all of bw's
                    self._path_bw_class = np.searchsorted(merged, values)[self._path_bw_class]
                    values = self._bw_values = merged
                    at = np.searchsorted(values, new)
                self._path_bw_class = np.concatenate([self._path_bw_class, at])
            self._path_rows = rows

    # ---------------------------------------------------------------- events
    def push(self, t, kind, run_id, k, idx):
        heapq.heappush(self.heap, (t, kind, self.seq, run_id, k, idx))
        self.seq += 1

    def push_grouped(self, times, kind, run_id, k, idx):
        """Push one heap entry per distinct time (usually there is just one)."""
        first = times[0]
        if times.size == 1 or (times == first).all():
            self.push(float(first), kind, run_id, k, idx)
            return
        uniq, inv = np.unique(times, return_inverse=True)
        for j, t in enumerate(uniq):
            self.push(float(t), kind, run_id, k, idx[inv == j])

    def call_at(self, t: float, fn) -> None:
        """Call ``fn(now)`` at simulated time ``t``, within that instant."""
        self.push(float(t), _CALL, -1, fn, None)

    def start(self, now: float) -> None:
        """Set the time origin that event merging is relative to."""
        self._t0 = now

    def next_time(self) -> float:
        """The next instant: the earliest queued event or flow drain. The earliest drain time is
        scanned for again only after drains or new rates (a start can only lower it)."""
        if self._ends_dirty:
            near = self._near
            m = float(self.s_end[near].min()) if near.size else math.inf
            if m > self._near_T:  # none due by _near_T: the earliest is further out, found by a full scan
                m = float(self.s_end.min())
                if m < math.inf:
                    self._rebuild_near(m)
            self._min_end = m
            self._ends_dirty = False
        self._next_drain = self._min_end  # what the next instant drains by
        t = self.heap[0][0] if self.heap else math.inf
        return min(t, self._next_drain)

    def process(self, env: simpy.Environment):
        """SimPy process: runs instants until nothing is left to happen."""
        while True:
            t = self.next_time()
            if t == math.inf:
                self._hot = None  # nothing left to share: the compiled recomputation's state goes
                return
            yield env.timeout(max(0.0, t - env.now))
            self.instant(t)

    @property
    def work(self) -> int:
        """Engine work so far, in the units of :attr:`EngineConfig.max_work`."""
        return (WORK_PER_INSTANT * (self.instants + self.entries) + self.rank_work + self.lone_work + self.route_work
                + self.job_work + self.flow_updates + self.flows_started // FLOWS_PER_UNIT)

    def check_work(self, now: float | None, doing: str = "") -> None:
        """Raise :class:`WorkLimitError` once :attr:`work` has passed ``max_work``."""
        if self.max_work is not None and self.work > self.max_work:
            raise _work_error(self.work, WorkLimitError(
                f"max_work = {self.max_work}: the run passed {self.work} units of engine work "
                f"({WORK_UNITS}) {doing if now is None else f'at {now:.6g} s of simulated time'}; "
                "use mode='analytical', fewer ranks or sizes, or raise max_work (--max-work)"))

    def instant(self, now: float):
        self.instants += 1
        self.rank_work += self.rank_units
        if self.max_work is not None:
            self.check_work(now)
        tol = 1e-12 * (now - self._t0) + 1e-18  # relative to the run's own time scale
        if self._next_drain <= now + tol:
            self._drain(now, tol)
        while self.heap and self.heap[0][0] <= now + tol:
            _, kind, _, rid, k, idx = heapq.heappop(self.heap)
            if kind == _CALL:
                k(now)
                continue
            run = self.runs[rid]
            if kind == _ACTIVATE:
                run._activate(run.states[k], idx, now)
            elif kind == _COMPLETE:
                run._complete(run.states[k], idx, now)
            else:
                run._land(run.states[k], idx, now)
        if self._need_full or self.force_full_recompute:
            self._recompute_rates(now)

    # ---------------------------------------------------------------- flow slots
    def _grow(self, need):
        old = getattr(self, "s_end", np.zeros(0)).size
        size = max(1024, old * 2, old + need)
        def ext(name, fill, dtype):
            a = np.full(size, fill, dtype=dtype)
            if old:
                a[:old] = getattr(self, name)
            setattr(self, name, a)
        ext("s_run", 0, np.int64)
        ext("s_step", 0, np.int64)
        ext("s_local", 0, np.int64)
        ext("s_path", 0, np.int64)
        ext("s_rem", 0.0, float)
        ext("s_rate", 0.0, float)
        ext("s_t0", 0.0, float)
        ext("s_end", np.inf, float)
        ext("s_active", False, bool)
        ext("s_near", False, bool)
        free_old = getattr(self, "free", np.zeros(0, dtype=np.int64))[: getattr(self, "n_free", 0)]
        self.free = np.concatenate([free_old, np.arange(size - 1, old - 1, -1, dtype=np.int64),
                                    np.zeros(size, dtype=np.int64)])
        self.n_free = free_old.size + size - old

    def _alloc(self, m):
        if self.n_free < m:
            self._grow(m)
        self.n_free -= m
        return self.free[self.n_free:self.n_free + m].copy()

    def _release(self, slots):
        self.free[self.n_free:self.n_free + slots.size] = slots
        self.n_free += slots.size

    def add_flows(self, run_id, k, paths, tr, nbytes, now):
        """Start flows of run ``run_id``'s step ``k``: transfer ``tr[i]`` moves ``nbytes[i]``
        over path ``paths[i]``."""
        self._refresh_paths()  # routes made since the last flows started (a cheap test otherwise)
        self._started_since = True
        self.flows_started += paths.size
        if self._book is not None:
            slots = self._alloc(paths.size)
            hot, earliest, near = self._book.start_flows(  # (scalars cast: one compiled signature)
                slots, int(run_id), int(k), tr.astype(np.int64, copy=False), paths.astype(np.int64, copy=False),
                nbytes.astype(float, copy=False), float(now), self._path_mat, self._path_bw, _BIG_Bps, self.res_demand,
                self._hot_Bps, self.pad, self.s_run, self.s_step, self.s_local, self.s_path, self.s_rem, self.s_t0,
                self.s_active, self.s_rate, self.s_end, self.s_near, self._near_T, self.force_full_recompute)
            if hot:
                self._need_full = True
                self._hot_started = True
            elif not self.force_full_recompute:
                self._min_end = min(self._min_end, earliest)
                if near.size:
                    self._near = np.concatenate([self._near, near])
            return
        mat = self._path_mat[paths]
        res = mat.ravel()
        np.add.at(self.res_demand, res, self._demand(paths, mat.shape[1]))
        self.res_demand[self.pad] = 0.0
        hot = (self.res_demand[res] > self._hot_Bps[res]).any()
        if hot:
            self._need_full = True
            self._hot_started = True  # the max-min problem gained flows (and maybe hot resources)
        slots = self._alloc(paths.size)
        self.s_run[slots] = run_id
        self.s_step[slots] = k
        self.s_local[slots] = tr
        self.s_path[slots] = paths
        self.s_rem[slots] = nbytes
        self.s_t0[slots] = now
        self.s_active[slots] = True
        if hot or self.force_full_recompute:  # rates wait for the max-min recomputation
            self.s_rate[slots] = 0.0
        else:  # no hot resource touched: its rate is its path's bottleneck, nobody else changes
            # (also when a recomputation is due at this instant: it would give them just that)
            rate = self._path_bw[paths]
            self.s_rate[slots] = rate
            ends = now + nbytes / rate
            self.s_end[slots] = ends
            self._min_end = min(self._min_end, float(ends.min()))
            self._near_add(slots[ends <= self._near_T])

    def _near_add(self, slots):
        """Flows ``slots`` now drain by ``_near_T``: into the near set (once)."""
        if slots.size:
            slots = slots[~self.s_near[slots]]
            self.s_near[slots] = True
            self._near = np.concatenate([self._near, slots])

    def _rebuild_near(self, x: float) -> None:
        """The near set again, for a horizon ``_near_T`` of at least ``x``: about the sixteenth of
        the flows that drain first (estimated on a sample of the slots), at least those due by ``x``."""
        ends = self.s_end
        sample = ends[::16]
        k = sample.size // 16
        t = float(np.partition(sample, k)[k])
        if t == math.inf:  # few flows: all of them
            finite = ends[ends < math.inf]
            t = float(finite.max()) if finite.size else x
        horizon = max(x, t)
        self.s_near[self._near] = False
        near = np.flatnonzero(ends <= horizon)
        self.s_near[near] = True
        self._near, self._near_T = near, horizon

    def _drain(self, now, tol):
        x = now + tol
        if x > self._near_T:
            self._rebuild_near(x)
        near = self._near
        if self._book is not None:  # the same, compiled
            done, self._near, crossed, self.n_free, d_runs, d_steps, d_local, earliest = self._book.drain_due(
                float(x), near, self.s_end, self.s_near, self.s_active, self.s_path, self.s_run, self.s_step,
                self.s_local, self._path_mat, self._path_bw, _BIG_Bps, self.res_demand, self._hot_Bps, self.pad,
                self.free, self.n_free, not self._need_full)
            if not done.size:
                return
            self._need_full = self._need_full or crossed
            if earliest <= self._near_T:  # the earliest drain time left (what next_time would find)
                self._min_end = earliest
            else:
                self._ends_dirty = True
            if self._hot is not None:
                self._hot_drained.append(done)
            self._dispatch(d_runs, d_steps, d_local, now)
            return
        due = self.s_end[near] <= x
        if not due.any():
            return
        done = np.sort(near[due])  # every flow due by x, in slot order
        self.s_near[done] = False
        self._near = near[~due]
        d_runs = self.s_run[done]
        d_steps = self.s_step[done]
        d_local = self.s_local[done]
        mat = self._path_mat[self.s_path[done]]
        freed = mat.ravel()
        if not self._need_full and (self.res_demand[freed] > self._hot_Bps[freed]).any():
            self._need_full = True  # a hot resource frees capacity: its other flows' rates may rise
        np.subtract.at(self.res_demand, freed, self._demand(self.s_path[done], mat.shape[1]))
        self.res_demand[self.pad] = 0.0
        self.s_end[done] = np.inf
        self._ends_dirty = True
        self.s_active[done] = False
        if self._hot is not None:
            self._hot_drained.append(done)
        self._release(done)
        self._dispatch(d_runs, d_steps, d_local, now)

    def _dispatch(self, d_runs, d_steps, d_local, now):
        """Hand drained flows (run, step, local transfer index) to their runs."""
        if (d_runs == d_runs[0]).all():
            self.runs[int(d_runs[0])]._drained(d_steps, d_local, now)
            return
        for rid in np.unique(d_runs).tolist():
            sel = d_runs == rid
            self.runs[rid]._drained(d_steps[sel], d_local[sel], now)

    def _recompute_rates(self, now):
        """Max-min rates for every active flow; only flows whose rate changed get a new end.

        Exact by construction: a flow gets at most its path's bottleneck, so a resource whose
        flows' bottlenecks sum to no more than its capacity (cold) never limits any of them.
        Flows that cross no hot resource run at their bottleneck; the others share the hot
        resources max-min, each also capped at its bottleneck (which stands for every cold
        resource it crosses). With ``force_full_recompute`` every active flow is recomputed
        over every resource instead (the reference the property tests compare with).
        """
        self.full_recomputes += 1
        kernels = None if self.force_full_recompute else hot_kernel((self.s_end.size - self.n_free)
                                                                    * self._path_mat.shape[1])
        if kernels is not None:
            self._book = kernels  # from now on starts and drains are compiled too
            self._recompute_compiled(kernels, now)
            return
        self._hot = None  # the compiled form's state no longer follows the flows
        active = np.flatnonzero(self.s_active)
        mat = self._path_mat[self.s_path[active]]
        if self.force_full_recompute:
            self._count_updates(active.size, now)
            flow = np.broadcast_to(np.arange(active.size)[:, None], mat.shape)
            real = mat != self.pad
            rates = max_min_rates(flow[real], mat[real], self.capacity, active.size)
        else:
            paths = self.s_path[active]
            rates = self._path_bw[paths]
            if self.full_recomputes % _RESYNC_EVERY == 1:  # the running sums summed again exactly
                # (float even with no flow: bincount of nothing is int64 whatever its weights)
                self.res_demand = np.bincount(mat.ravel(), self._demand(paths, mat.shape[1]),
                                              minlength=self.pad + 1).astype(float, copy=False)
                self.res_demand[self.pad] = 0.0
            hot_res = self.res_demand > self._hot_Bps
            rows, col = np.nonzero(hot_res[mat])  # (flow, position) of every hot crossing, row-major
            if rows.size:
                first = np.empty(rows.size, dtype=bool)  # a flow's first hot crossing
                first[0] = True
                np.not_equal(rows[1:], rows[:-1], out=first[1:])
                hot_flow = rows[first]
            else:
                hot_flow = rows
            n = hot_flow.size
            self._count_updates(n, now)
            if n:
                rates = rates.copy()
                hot_ids = np.flatnonzero(hot_res)
                self._local[hot_ids] = np.arange(hot_ids.size)
                # flows numbered 0..n-1 in the order of hot_flow
                flow = rows if n == active.size else np.cumsum(first) - 1
                res = self._local[mat[rows, col]]
                per_flow = np.arange(n)
                caps = np.concatenate([self.capacity[hot_ids], rates[hot_flow]])  # + one cap per flow
                rates[hot_flow] = max_min_rates(np.concatenate([flow, per_flow]),
                                                np.concatenate([res, hot_ids.size + per_flow]), caps, n)
        self._set_rates(active, rates, now)

    def _recompute_compiled(self, kernels, now):
        """:meth:`_recompute_rates` by the compiled kernels (:mod:`hcsim.engine._kernels`), the
        same rates bit for bit. After a recomputation, if since then flows only drained and
        resources only cooled, the filling is resumed (``hot_resume``) instead of redone:
        the rounds before the first one a drained flow or cooled resource took part in are
        the same, and drained flows are mostly the fastest, frozen in the last rounds."""
        resync = self.full_recomputes % _RESYNC_EVERY == 1
        if resync:  # the running sums summed again exactly (as np.bincount sums them, in one pass)
            kernels.demand_sums(self.s_active, self.s_path, self._path_mat, self._path_bw, _BIG_Bps, self.pad,
                                self.res_demand)
        st = self._hot
        # only a start or a resync can make a resource hot: between them flows only drain. A
        # resync with no flow started since the last recomputation resumes too if no resource is
        # hot (by the exact sums) outside the kept problem: the flows crossing a hot resource are
        # then the kept ones still there, as a build would find them
        resume = st is not None and not self._hot_started
        if resume and resync:
            if self._kept_mask is None:
                self._kept_mask = np.zeros(self.pad + 1, dtype=bool)
            resume = not self._started_since and not kernels.hot_outside(self.res_demand, self._hot_Bps, st[1],
                                                                          st[3], self._kept_mask)
        if resume:
            drained = (np.concatenate(self._hot_drained) if len(self._hot_drained) > 1 else self._hot_drained[0]
                       if self._hot_drained else np.zeros(0, dtype=np.int64))
            slots, rates, n, *records = kernels.hot_resume(drained, self.res_demand, self._hot_Bps, *st[:17],
                                                           *st[17:], _SAT_RTOL)
            self._hot = (*st[:17], *records)
        else:
            if self._hot_mask is None:
                self._hot_mask = np.zeros(self.pad + 1, dtype=bool)
            active, paths = kernels.active_flows(self.s_active, self.s_path, self.res_demand, self._hot_Bps,
                                                 self._hot_mask)
            rates, n, self._hot = kernels.hot_build(
                self._path_mat, active, paths, self._hot_mask, self.capacity, self._path_bw, self._path_bw_class,
                self._bw_values, self._scratch, self.s_end.size, fairshare.CHECKPOINT_EVERY, _SAT_RTOL)
            slots = active
        self._hot_started = False
        self._started_since = False
        self._hot_drained = []
        self._count_updates(n, now)
        self._set_rates(slots, rates, now)

    def _set_rates(self, active, rates, now):
        """Flows ``active`` run at ``rates`` from ``now``: only those whose rate changed get a
        new drain time."""
        if self._book is not None:  # the same, compiled
            changed, near = self._book.set_rates(active, rates, float(now), self.s_rate, self.s_rem, self.s_t0,
                                                 self.s_end, self.s_near, self._near_T)
            if changed:
                self._ends_dirty = True
                if near.size:
                    self._near = np.concatenate([self._near, near])
            self._need_full = False
            return
        sel = rates != self.s_rate[active]
        changed, new = active[sel], rates[sel]
        if changed.size:
            rem = self.s_rem[changed] - self.s_rate[changed] * (now - self.s_t0[changed])
            self.s_rem[changed] = rem
            self.s_t0[changed] = now
            self.s_rate[changed] = new
            ends = now + rem / new
            self.s_end[changed] = ends
            self._ends_dirty = True
            self._near_add(changed[ends <= self._near_T])
        self._need_full = False

    def _demand(self, paths: np.ndarray, width: int) -> np.ndarray:
        """What flows on ``paths`` ask of each resource on them (their path's bottleneck), one
        entry per cell of their ``width``-wide path-matrix rows."""
        return np.repeat(np.minimum(self._path_bw[paths], _BIG_Bps), width)

    def _count_updates(self, n: int, now: float):
        self.flow_updates += n
        if self.max_work is not None:
            self.check_work(now)
        if self.flow_updates > self.max_flow_updates:
            raise WorkLimitError(
                f"max_flow_updates = {self.max_flow_updates}: the run passed {self.flow_updates} flow-rate updates "
                f"at {now:.6g} s of simulated time (contention made {n} concurrent flows finish apart); "
                "use mode='analytical', fewer ranks or a smaller size, or raise max_flow_updates (--max-flow-updates)")


def _search_work(net, groups: list, is_new: list, srcs: list, dsts: list) -> int:
    """The work the per-pair hook of ``FlowSimulator._route_pairs`` counts for pairs
    ``groups[k]`` (path ids) routed from ``srcs[k]`` to ``dsts[k]``, summed over the new pairs
    (``is_new[k]``) at once: :func:`~hcsim.limits.hop_work` of the pair's path (its longest one if
    it has several) plus :func:`~hcsim.limits.walk_work` of what its search walked and
    :func:`~hcsim.limits.grow_work` of what a Python search grew. The same integers, so the same total."""
    n = len(groups)
    new = np.flatnonzero(np.array(is_new[:n], dtype=bool))
    if not new.size:
        return 0
    ptr = net.paths.arrays()[0]
    ids = [groups[k] for k in new.tolist()]
    sizes = np.fromiter(map(len, ids), dtype=np.int64, count=new.size)
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(sizes.sum()))
    length = ptr[flat + 1] - ptr[flat]
    starts = np.cumsum(sizes) - sizes
    hops = np.zeros(new.size, dtype=np.int64)
    some = sizes > 0
    hops[some] = np.maximum.reduceat(length, starts[some])
    walked = np.fromiter((net.walked(srcs[k], dsts[k]) for k in new.tolist()), dtype=np.int64, count=new.size)
    grown = sum(grow_work(net.grown(srcs[k], dsts[k])) for k in new.tolist()) if net.searches_grew else 0
    return search_work(hops, walked) + grown


def _work_error(work: int, exc: WorkLimitError) -> WorkLimitError:
    """``exc`` carrying the engine work done before it (``exc.work``), for a caller's budget."""
    exc.work = work
    return exc


def _count_step(moved: dict, route: _StepRouting, nbytes: np.ndarray) -> None:
    """Add one step's bytes (``nbytes`` per transfer) to ``moved``: per routing, the bytes on each
    of its subflows (summed over paths in :func:`moved_bytes`). A routing is shared by every step
    that makes the same transfers, so this keeps one array per routing, not one per step."""
    # keyed by its path array, which it holds (not the routing: its per-rank arrays can be large)
    seen = moved.get(id(route.sub_path))
    if seen is None:
        seen = moved[id(route.sub_path)] = [route.sub_path, np.zeros(route.sub_path.size)]
    if route.single:
        seen[1] += nbytes
    else:
        n_sub = np.diff(route.sub_ptr)
        seen[1] += np.repeat(nbytes / np.maximum(n_sub, 1), n_sub)


def moved_bytes(runs, rows: int) -> np.ndarray:
    """Bytes the ``runs`` together sent down each of ``rows`` paths (:func:`_count_step`): each
    distinct routing's subflow bytes summed over the runs, then over paths once (a job's
    thousands of runs of a few schedules cost a few sums)."""
    per_route: dict = {}
    for run in runs:
        for key, (sub_path, acc) in run._moved.items():
            seen = per_route.get(key)
            if seen is None:
                per_route[key] = [sub_path, acc.copy()]
            else:
                seen[1] += acc
    out = np.zeros(rows)
    for sub_path, acc in per_route.values():
        out += np.bincount(sub_path, weights=acc, minlength=rows)
    return out


class _DemandBound:
    """Running bound of the demand any resource can see (:meth:`FlowSimulator.never_contended`):
    per (sending rank, resource) the most of any one step, summed over the senders."""

    def __init__(self, sim):
        self.sim = sim
        self.n_res = sim.pad + 1
        self.most: dict[int, float] = {}
        self.bound = np.zeros(self.n_res)
        self.seen: set[int] = set()

    def add(self, step, r) -> bool:
        """Take in one step (with its routing); False once some resource could be hot."""
        if id(r) in self.seen:
            return True
        self.seen.add(id(r))
        fabric = self.sim.fabric
        fabric._refresh_paths()
        src = np.repeat(step.src, np.diff(r.sub_ptr))
        mat = fabric._path_mat[r.sub_path]
        key = (src[:, None] * self.n_res + mat).ravel()
        w = fabric._demand(r.sub_path, mat.shape[1])
        real = mat.ravel() != self.sim.pad
        uk, inv = np.unique(key[real], return_inverse=True)
        total = np.bincount(inv, weights=w[real], minlength=uk.size)
        if not self.most:  # the first routing: no maximum to take yet
            self.most = dict(zip(uk.tolist(), total.tolist(), strict=True))
            np.add.at(self.bound, uk % self.n_res, total)
        else:  # the loop "if t > most[k]: bound[k % n_res] += t - most[k]; most[k] = t" over uk, in bulk:
            keys = uk.tolist()  # the same subtractions, added per resource in the same (key) order
            old = np.fromiter(map(self.most.get, keys, itertools.repeat(0.0)), dtype=float, count=len(keys))
            up = np.flatnonzero(total > old)
            if up.size:
                self.most.update(zip(uk[up].tolist(), total[up].tolist(), strict=True))
                np.add.at(self.bound, uk[up] % self.n_res, total[up] - old[up])
        return not (self.bound > fabric._hot_Bps).any()


def in_network_switch(topo, rank_nodes) -> tuple[str, float]:
    """The switch an in-network schedule runs through, and its efficiency: the node linked to every
    rank's node whose ``in_network_efficiency`` is set (the ``single_switch`` builder's parameter).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> in_network_switch(single_switch(4, 1e9, in_network_efficiency=0.85), ["npu0", "npu1"])
    ('sw0', 0.85)
    """
    g = topo.graph
    common = None
    for node in rank_nodes:
        near = {v for v in g.successors(node) if g.nodes[v].get("in_network_efficiency")}
        common = near if common is None else common & near
        if not common:
            break
    if not common:
        from ..errors import ConfigError

        raise ConfigError(f"algorithm nvls: the ranks ({len(rank_nodes)}, on {rank_nodes[0]}...) share no switch that "
                          "reduces in the network (a switch linked to every rank with in_network_efficiency set: "
                          "single_switch(..., in_network_efficiency=0.85), YAML params.in_network_efficiency)")
    if len(common) > 1:  # NVLS spreads over every plane; hcsim runs it through one: refused, not a wrong rate
        from ..errors import ConfigError

        names = sorted(common)
        raise ConfigError(f"algorithm nvls: the ranks share {len(names)} switches that reduce in the network "
                          f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}); hcsim runs it through one: "
                          "draw the planes as one switch with their summed links (as the single_switch builder does)")
    switch = next(iter(common))
    return switch, float(g.nodes[switch]["in_network_efficiency"])


def shares_in_network_switch(topo, rank_nodes, dtype: str | None = None, reduce_op: str = "sum") -> bool:
    """Whether the ranks on ``rank_nodes`` share a switch that reduces in the network (:func:`in_network_switch`),
    and it reduces ``dtype`` (None: bytes, as fp32) with ``reduce_op`` (:func:`hcsim.algorithms.nvls.check_reduction`):
    whether ``best`` and its kin race an in-network algorithm."""
    from ..algorithms.nvls import NVLS_REDUCTIONS
    from ..errors import ConfigError

    if reduce_op not in NVLS_REDUCTIONS.get(dtype or "fp32", ()):
        return False
    try:
        in_network_switch(topo, list(rank_nodes))
    except ConfigError:
        return False
    return True


class FlowSimulator:
    """Runs one schedule on one topology and collects timings.

    Parameters
    ----------
    topo : Topology
    rank_nodes : list of str
        NPU node of each rank.
    schedule : Schedule
    config : EngineConfig
    fabric : Fabric, optional
        The network to run on, shared with other runs; by default one of its own.
    on_finish : callable, optional
        ``on_finish(ranks, now)``, called as ranks (an array) leave the schedule's last step.

    Examples
    --------
    >>> from hcsim.topology import full_mesh
    >>> from hcsim.algorithms import build_schedule
    >>> topo = full_mesh(4, 1e9)
    >>> sim = FlowSimulator(topo, topo.npus, build_schedule("allgather", "ring", 4, 4000), EngineConfig())
    >>> round(sim.run() * 1e6, 6)   # 3 steps of 1000 B at 1 GB/s
    3.0
    """

    on_progress = None
    """``on_progress(steps)``, optional: called as the run advances with the number of steps
    every rank has finished (up to ``len(schedule.steps)``), for a progress bar. It can drop
    back to 0 once, when the contention-free pass gives up and the event-driven run starts
    over. None (the default) costs one attribute test per finished step."""

    def __init__(self, topo, rank_nodes, schedule, config: EngineConfig, fabric: Fabric | None = None,
                 on_finish=None):
        # runs on a shared fabric use its compiled topology (compiling checks the whole graph)
        self.net = fabric.net if fabric is not None else topo.compiled()
        self.fabric = fabric if fabric is not None else Fabric(self.net, config.max_flow_updates, config.max_work)
        self._own_fabric = fabric is None
        self.fabric.rank_units = max(self.fabric.rank_units, len(rank_nodes) // RANKS_PER_UNIT)
        self.contention_free = False
        """True when :meth:`run` took the contention-free pass (:meth:`never_contended`)."""
        self.lone_steps = 0
        """Steps of the contention-free pass when :meth:`run` took it (its work: about one
        instant's each); 0 when the run was event-driven."""
        # a fabric of its own refers back weakly: no FlowSimulator <-> Fabric reference cycle,
        # so reference counting frees a finished call (no full collection needed; see run())
        self.id = self.fabric.attach(weakref.proxy(self) if self._own_fabric else self)
        self.on_finish = on_finish
        self.schedule = schedule
        self.cfg = config
        self._in_network = None  # (switch endpoint, efficiency) of an in-network schedule (Schedule.in_network)
        self._in_factor = ()  # its per-chunk cost factor, one per step (Schedule.in_network_factor)
        if getattr(schedule, "in_network", False):
            switch, efficiency = in_network_switch(topo, rank_nodes)
            rank_nodes = [*rank_nodes, switch]
            self._in_network = (schedule.p, efficiency)
            self._in_factor = in_network_factors(schedule)
        self.p = len(rank_nodes) if self._in_network else schedule.p  # endpoints: the ranks (and the switch)
        self.n_steps = len(schedule.steps)
        self.rank_node = np.array([self.net.node_index[n] for n in rank_nodes], dtype=np.int64)
        self.n_nodes = len(self.net.node_names)
        # what besides a step's arrays decides its routes (the key of the fabric's shared cache)
        self._nodes_key = (self.rank_node.tobytes(), config.routing, config.ecmp_seed, config.qps,
                           id(config.message_regimes))
        # a data type / reduce op that costs the vector unit f times fp32 sum's time per byte
        self.reduce_Bps = self.net.reduce_Bps[self.rank_node] / config.reduce_time_factor
        if self._in_network:
            self.reduce_Bps[-1] = np.inf  # the switch reduces at line rate
        self.pad = self.fabric.pad
        # bytes sent down each path: accumulated per path array of the steps this run entered
        # (_count_step), summed over paths only when asked (:attr:`path_bytes`)
        self._moved: dict = {}
        # ranks
        self.cur_step = np.full(self.p, -1, dtype=np.int64)
        self.outstanding = np.zeros(self.p, dtype=np.int64)
        self.rank_gate = np.full(self.p, -1, dtype=np.int64)
        self.finish_s = np.full(self.p, np.nan)
        self._mark = np.zeros(self.p, dtype=bool)  # scratch, all False between uses
        # steps
        self.states: dict[int, _StepState] = {}
        self.done_states: list[_StepState] = []
        self._retired_below = 0  # _retire has looked at every step below this
        self.step_ready_s = np.full(self.n_steps, np.inf)
        self.step_end_s = np.full(self.n_steps, -np.inf)
        self.step_count = np.zeros(self.n_steps, dtype=np.int64)
        self.barriers = {int(k): 0 for k in getattr(schedule, "barriers", ())}  # step -> ranks arrived
        self.barriers_at = frozenset(self.barriers)  # kept: the dict above empties as ranks pass them
        check_streaming(schedule)
        self._active = None  # (rank, step) keys of every rank's steps, sorted: built on a long skip
        self._gid_base = None  # with it: each step's first transfer id (the sizes of the steps before)
        self.next_gid = 0
        self._route_cache = None
        regimes = config.message_regimes
        self._regimes = None if regimes is None or regimes.trivial else regimes
        self._pair_split = self._regimes is not None and self._regimes.pair_limit is not None
        self._limits_exchanges = bool(self.net.exchange_res)
        self._new_peer = (new_peers(schedule.steps) if self._regimes is not None and self._regimes.peer_aware
                          else None)
        # each rank's server, where a regime charges messages inside a server apart (local_efficiency):
        # one number per (pod, server), as everywhere else (pods number their servers from 0)
        self._server = None
        if self._regimes is not None and self._regimes.local_aware:
            ids: dict = {}
            self._server = np.array([ids.setdefault((s.pod, s.server), len(ids))
                                     for s in map(topo.npu_spec, rank_nodes[:self.schedule.p])], dtype=np.int64)
            if self._in_network:  # the switch counts as in the first rank's server
                self._server = np.append(self._server, self._server[0])
        # the call's start: its launch, then its protocol's cost once a call (MessageRegimes.call_overhead_s;
        # NCCL's base latency: paid by its ring and tree, not by NVLS, whose row of it is 0). A job enters the
        # ranks itself (workload.runner), after its own launch and this.
        self.call_overhead_s = 0.0
        costs = None if self._regimes is None else self._regimes.call_overhead_s
        if costs is not None and not self._in_network:
            # one cost for every regime needs no walk over the steps (a lazy schedule's are built then)
            self.call_overhead_s = float(costs[0] if len(set(costs)) == 1 else costs[self._call_regime()])
        self._start_s = float(config.launch_overhead_s) + self.call_overhead_s

    # the fabric's counters (a run alone on its fabric: its own)
    @property
    def instants(self) -> int:
        return self.fabric.instants

    @property
    def full_recomputes(self) -> int:
        return self.fabric.full_recomputes

    @property
    def flow_updates(self) -> int:
        return self.fabric.flow_updates

    @property
    def force_full_recompute(self) -> bool:
        return self.fabric.force_full_recompute

    @force_full_recompute.setter
    def force_full_recompute(self, value: bool):
        self.fabric.force_full_recompute = value

    # ---------------------------------------------------------------- public
    def run(self, env: simpy.Environment | None = None) -> float:
        """Run to completion; return the collective's time in seconds.

        A run on its own network that can never be contended (:meth:`never_contended`) is its
        contention-free pass: the same times without an event queue (``contention_free`` is then
        True and no instants are counted), and the same records when it keeps them, so
        ``record`` never changes the time.
        """
        if env is None:
            # a large run only: its allocations would trigger full passes over the whole heap
            # (the topology's graph included) that free nothing; a small run keeps the collector
            with collector_paused() if self.p >= _PAUSE_RANKS else contextlib.nullcontext():
                if self._own_fabric and not self.fabric.force_full_recompute:
                    t = self._lone_pass(fill=True, bound=_DemandBound(self))
                    if t is not None:
                        self.contention_free = True
                        return t
                return self._run_alone()
        proc = env.process(self.process(env))
        env.run(until=proc)
        return proc.value

    def _run_alone(self) -> float:
        """:meth:`process` on a clock of its own instead of a SimPy environment (``run()``
        without one): the same instants at the same times in the same order, the same errors,
        without a SimPy event per instant. Time starts at 0, as a new environment's does."""
        fabric = self.fabric
        t0 = 0  # simpy.Environment().now
        fabric.start(t0)
        now = t0 + self._start_s if self._start_s else t0
        self.enter(np.arange(self.p), now)
        fabric.instant(now)
        while True:
            t = fabric.next_time()
            if t == math.inf:
                fabric._hot = None  # as Fabric.process: nothing left to share
                break
            fabric.instant(t)
        self.check_finished()
        return float(self.finish_s.max()) - t0

    def contention_free_time(self) -> float:
        """The schedule's time if every transfer ran alone on its path (seconds).

        The same execution rule (rendezvous, or eager where a regime says so: the sender's
        entering the step, not both ranks', makes an eager transfer ready), barriers, per-step
        overhead, path latencies, message regimes and reduction units (first come first served,
        ties by transfer index) as :meth:`run`, but each transfer drains at its route's
        bottleneck bandwidth instead of a max-min share. Contention only ever lowers a rate, so this is a lower bound of :meth:`run`'s
        time, and equal to it (to the engine's 1e-12 event merging) when no two concurrent
        transfers share a resource. One pass over the steps, no event queue; it does not
        change the simulator's state that :meth:`run` uses.
        """
        return self._lone_pass(fill=False)

    def never_contended(self) -> bool:
        """Whether no resource can ever be hot (asked for more than its capacity) in this run.

        A sending rank's flows at any moment all belong to its current step (it enters a step
        once its transfers of the step before have finished, in both directions; an eager
        transfer's flow has drained before its sender leaves the step, even if its receiver is
        behind). So the demand on a resource never exceeds the sum, over the sending ranks, of
        the most that rank puts on it in any one step, each flow counted at its path's
        bottleneck. When that bound
        fits every resource, every flow runs at its bottleneck from start to end, and the run
        is its contention-free pass (:meth:`run` then takes it). Work: one pass over the
        steps' distinct routings.
        """
        bound = _DemandBound(self)
        for k in range(self.n_steps):
            step = self.schedule.steps[k]
            if len(step) and not bound.add(step, self._routing(step)):
                return False
        return True

    def _lone_pass(self, fill: bool, bound: _DemandBound | None = None) -> float | None:
        """The contention-free pass; with ``fill`` it also records what :meth:`run` would
        (step table, bytes per path, each rank's finish), for a run that takes it. With a
        ``bound`` it stops (returns None) as soon as a step could make a resource hot.

        A run that keeps records (``record``) gets them here as the event-driven run keeps them:
        each transfer's ready, start and end times, and as its predecessor the transfer that
        last ended for the rank that made it ready (the later of its two ranks to enter the step;
        the sender when both entered together; the sender of an eager transfer), the last to end
        of that rank's previous step (ties: the later transfer index; an eager transfer ends for
        its sender when it drained, and not at all for a receiver that entered after it
        completed)."""
        cfg = self.cfg
        enter = np.full(self.p, self._start_s)
        lone: dict[tuple, float] = {}
        steps, moved = [], {}
        rec = fill and cfg.record
        fabric = self.fabric
        gate = np.full(self.p, -1, dtype=np.int64)  # per rank: the transfer that last ended for it
        recorded, gid0 = [], 0
        for k in range(self.n_steps):
            if k in self.barriers:
                if rec:  # everyone was gated by the last rank to arrive
                    gate[:] = gate[int(np.argmax(enter))]
                enter[:] = enter.max()
            step = self.schedule.steps[k]
            if not len(step):
                continue
            # a step of this pass costs about an instant, more on many ranks, and its transfers
            # (a ring allreduce on 4,096 NPUs: about 240 us a step)
            fabric.lone_work += WORK_PER_INSTANT + fabric.rank_units + len(step) // LONE_TRANSFERS_PER_UNIT
            if fabric.max_work is not None:
                fabric.check_work(float(enter.max()))
            route = self._routing(step)
            if bound is not None and not bound.add(step, route):
                if self.on_progress is not None:
                    self.on_progress(0)  # the event-driven run starts over
                return None
            st = _StepState(k, step, route, gid0, rec, self.reduce_Bps, self._regimes,
                            None if self._new_peer is None else self._new_peer[k], self.cfg.inline_reduce,
                            self._server, self._continued(k, step), self._protocol_bytes(k), self._in_network_at(k))
            r = st.route
            fabric._refresh_paths()
            bw = (self.fabric._path_bw[r.sub_path] if r.single
                  else np.array([self._lone_bandwidth(r.sub_path[r.sub_ptr[i]:r.sub_ptr[i + 1]], lone)
                                 for i in range(st.n)]))
            ready = np.maximum(enter[st.src], enter[st.dst])
            if st.eager is not None:  # an eager transfer waits for its sender only
                ready = np.where(st.eager, enter[st.src], ready)
            # an eager transfer's bytes leave at once and its latency comes after them (the same
            # arrival when it runs alone); ``arrive``: the bytes at the receiver
            lat = r.lat if st.eager is None else np.where(st.eager, 0.0, r.lat)
            start = (ready + cfg.step_overhead_s + lat if st.pays is None
                     else ready + (cfg.step_overhead_s + lat) * st.pays)
            if st.extra_s is not None:
                start = start + st.extra_s
            drained = start + _shared_drain(st.src * self.p + st.dst, start, st.charged, bw, r.one_each)
            arrive = drained if st.eager is None else np.where(st.eager, drained + r.lat, drained)
            done = arrive
            if st.any_reduce:
                done = arrive.copy()
                # reduced from when it has arrived and its receiver is in the step (the same as
                # arrive, bit for bit, unless it is eager and arrived before its receiver entered)
                here = np.maximum(arrive, enter[st.dst]) if st.eager is not None else arrive
                q = np.flatnonzero(st.reduce_s > 0)
                order = q[np.lexsort((q, here[q], st.dst[q]))]  # per destination, first come first served
                done[order], looped = _first_come(st.dst[order], here[order], st.reduce_s[order])
                if looped:  # a few destinations reduce many transfers each: a Python loop, priced
                    fabric.lone_work += looped
                    if fabric.max_work is not None:
                        fabric.check_work(float(enter.max()))
            # when each transfer lets its sender go: once it has drained if it is eager, else done
            sent = done if st.eager is None else np.where(st.eager, drained, done)
            if rec:
                st.t_ready[:], st.t_start[:], st.t_end[:] = ready, start, done
                later = np.where(enter[st.dst] > enter[st.src], st.dst, st.src)
                st.pred[:] = gate[later if st.eager is None else np.where(st.eager, st.src, later)]
                # by end, then index, over both ranks of every transfer at once: the last write wins
                # (an eager transfer that completed before its receiver entered does not gate it)
                both = np.concatenate([np.arange(st.n), np.arange(st.n)])
                ranks = np.concatenate([st.src, st.dst])
                ends = np.concatenate([sent, done])
                if st.eager is not None:
                    mine = np.concatenate([np.ones(st.n, bool), ~(st.eager & (done < enter[st.dst]))])
                    both, ranks, ends = both[mine], ranks[mine], ends[mine]
                order = np.lexsort((both, ends))
                gate[ranks[order]] = gid0 + both[order]
                st.left = 0
                recorded.append(st)
                gid0 += st.n
            nxt = enter.copy()
            np.maximum.at(nxt, st.src, sent)
            np.maximum.at(nxt, st.dst, done)
            enter = nxt
            if fill and self.on_progress is not None:
                self.on_progress(k + 1)
            if fill:  # kept aside until the pass has finished (a bound may still stop it)
                steps.append((k, st.n, ready.min(), done.max()))
                _count_step(moved, r, st.nbytes)
        if fill:
            self.lone_steps = len(steps)
            for k, n, ready_s, end_s in steps:
                self.step_count[k], self.step_ready_s[k], self.step_end_s[k] = n, ready_s, end_s
            self._moved = moved
            self.finish_s[:] = enter
            self.cur_step[:] = self.n_steps
            if rec:
                self.done_states, self.next_gid = recorded, gid0
        return float(enter.max())

    def _lone_bandwidth(self, paths: np.ndarray, cache: dict) -> float:
        """Rate of one transfer split evenly over ``paths`` with nothing else running."""
        key = tuple(paths.tolist())
        bw = cache.get(key)
        if bw is None:
            mat = self.fabric._path_mat[paths]
            flow = np.broadcast_to(np.arange(len(paths))[:, None], mat.shape)
            real = mat != self.pad
            rates = max_min_rates(flow[real], mat[real], self.fabric.capacity, len(paths))
            bw = cache[key] = float(len(paths) * rates.min())
        return bw

    def process(self, env: simpy.Environment):
        """SimPy process: drives the schedule; its value is the time it took (s)."""
        t0 = env.now
        self.fabric.start(t0)
        if self._start_s:
            yield env.timeout(self._start_s)
        now = env.now
        self.enter(np.arange(self.p), now)
        self.fabric.instant(now)
        yield from self.fabric.process(env)
        self.check_finished()
        return float(self.finish_s.max()) - t0

    def enter(self, ranks: np.ndarray, now: float) -> None:
        """Ranks (collective rank numbers) start the schedule at ``now``; an in-network schedule's switch
        (:attr:`~hcsim.algorithms.schedule.Schedule.in_network`) with the first of them."""
        if self._in_network is not None and self.cur_step[self.schedule.p] < 0:
            ranks = np.union1d(np.asarray(ranks, dtype=np.int64), [self.schedule.p])
        self._enter(ranks, 0, now)

    def check_finished(self) -> None:
        """Raise :class:`StuckScheduleError` naming the ranks that never finished."""
        if np.isnan(self.finish_s).any():
            stuck = np.flatnonzero(np.isnan(self.finish_s))
            listed = ", ".join(f"{'the switch' if self._in_network and r == self.schedule.p else int(r)} "
                               f"(step {int(self.cur_step[r])})" for r in stuck[:8])
            raise StuckScheduleError(f"schedule {self.schedule.algorithm} made no progress: ranks {listed}"
                                     f"{' ...' if len(stuck) > 8 else ''} never finished")

    # ---------------------------------------------------------------- steps
    def _in_network_at(self, k: int):
        """(switch endpoint, the share of the link rate its transfers of step k reach), or None."""
        if self._in_network is None:
            return None
        return self._in_network[0], self._in_network[1] / self._in_factor[k]

    def _call_regime(self) -> int:
        """The message regime (protocol) of the whole call: that of the largest size its steps choose their
        regimes by, :attr:`Schedule.protocol_bytes` (one, or one per step: checked by ``check_streaming``) or,
        where it gives none, their messages (:func:`~hcsim.engine.regimes.message_bytes`)."""
        pb = getattr(self.schedule, "protocol_bytes", None)
        if pb is not None:
            largest = float(max(pb) if isinstance(pb, tuple) else pb)
        else:
            largest = max((float(message_bytes(st.src, st.dst, st.nbytes).max()) for st in self.schedule.steps
                           if len(st.src)), default=0.0)
        return int(self._regimes.regime_of(np.array([largest]))[0])

    def _protocol_bytes(self, k: int) -> int | None:
        """The size step ``k``'s transfers choose their message regime by (:attr:`Schedule.protocol_bytes`)."""
        pb = getattr(self.schedule, "protocol_bytes", None)
        return pb[k] if isinstance(pb, tuple) else pb

    def _continued(self, k: int, step) -> np.ndarray | None:
        """For a streamed schedule (:attr:`Schedule.streamed`), per transfer of step ``k``, whether
        its (sender, receiver) pair also had a transfer in step k - 1 (it continues that stream);
        None for any other schedule, step 0, or a step behind a barrier (a new call's first)."""
        if not getattr(self.schedule, "streamed", False) or k == 0 or k in self.barriers_at:
            return None
        before = self.schedule.steps[k - 1]
        m = self.p
        return np.isin(step.src.astype(np.int64) * m + step.dst, before.src.astype(np.int64) * m + before.dst)

    def _routing(self, step) -> _StepRouting:
        cache = self._route_cache
        if (cache is not None and cache[0] is step.src and cache[1] is step.dst
                and (not self._limits_exchanges or cache[3] is step.nbytes)):
            return cache[2]
        # runs of one schedule on the same NPUs (a job's repeated collectives) share routes
        key = (self._nodes_key, id(step.src), id(step.dst), id(step.nbytes) if self._limits_exchanges else 0)
        hit = self.fabric.routes.get(key)
        if hit is not None and hit[0] is step.src and hit[1] is step.dst and (
                not self._limits_exchanges or hit[2] is step.nbytes):
            self._route_cache = (step.src, step.dst, hit[3], step.nbytes)
            return hit[3]
        policy, seed, nn = self.cfg.routing, self.cfg.ecmp_seed, self.n_nodes
        nodes = self.rank_node[step.src] * nn + self.rank_node[step.dst]
        # a transfer whose receiver sends back to its sender is an exchange: it takes a route
        # through both NPUs' exchange limits, unless its message's regime lifts them
        keys = nodes * 2 + (self._exchanges(step) if self._limits_exchanges else 0)
        fabric, qps = self.fabric, self.cfg.qps
        # a step whose transfers repeat an earlier step's, in new arrays (a pipeline's thousands of
        # steps, LazySteps): the same routing, found by content (the node pairs fix the ranks)
        content = ("content", self._nodes_key, hashlib.blake2b(keys.tobytes(), digest_size=16).digest())
        same = fabric.routes.get(content)
        if same is not None and np.array_equal(same[0], keys):
            self._route_cache = (step.src, step.dst, same[1], step.nbytes)
            fabric.routes[key] = (step.src, step.dst, step.nbytes, same[1])
            return same[1]
        # routing is work too: a step routed afresh counts its fixed cost and its transfers, and
        # each rank pair counts once per fabric (a call, or a job), counted and bounded before it
        # is done; whether or not the topology has searched it before, so a call's work (and
        # whether a bound stops it) does not depend on what ran on it earlier
        opts = (policy, seed, qps)
        table = fabric.route_tables.get(opts)
        if table is None:
            table = fabric.route_tables[opts] = _RouteTable()
        route = (self._route_small(step, keys, table) if keys.size <= _SMALL_STEP
                 else self._route_large(step, keys, table))
        self._route_cache = (step.src, step.dst, route, step.nbytes)
        # kept for the steps that repeat these arrays or pairs; a routing holds arrays of one
        # entry per rank, so a schedule of thousands of distinct steps on thousands of ranks (a
        # flat ring reduce on 16,384 NPUs: 7 GB) empties the cache when it holds too much
        size = (sum(a.nbytes for a in (route.sub_ptr, route.sub_path, route.lat, route.inline, route.out_ptr,
                                       route.out_tr, route.in_ptr, route.in_tr, route.deg))
                + keys.nbytes + step.src.nbytes + step.dst.nbytes + step.nbytes.nbytes)
        if fabric.routes_bytes + size > ROUTES_CACHE_BYTES:
            fabric.routes.clear()
            fabric.routes_bytes = 0
        fabric.routes_bytes += size
        fabric.routes[key] = (step.src, step.dst, step.nbytes, route)
        fabric.routes[content] = (keys, route)
        return route

    def _route_large(self, step, keys: np.ndarray, table: _RouteTable) -> _StepRouting:
        """A step's routing from its pair keys, vectorised (:meth:`_routing` past its caches)."""
        uniq, inv = np.unique(keys, return_inverse=True)
        gid = self._route_pairs(table, uniq, keys.size)
        g_n = table.g_n[gid]
        single = bool((g_n == 1).all())
        sub_n = g_n[inv]
        sub_ptr = np.concatenate([[0], np.cumsum(sub_n)])
        gk = gid[inv]
        sub_path = table.flat[table.g_off[gk]] if single else table.flat[_rows_of(table.g_off[gk], sub_n)]
        members, src_at, dst_at, width = None, step.src, step.dst, self.p
        if 16 * len(step) < self.p:  # few ranks take part: index them by position, not by rank
            members = np.unique(np.concatenate([step.src, step.dst]))
            src_at, dst_at, width = np.searchsorted(members, step.src), np.searchsorted(members, step.dst), members.size
        return self._step_routing(sub_ptr, sub_path, table.g_lat[gk], table.g_inline[gk], src_at, dst_at, width,
                                  single, members)

    def _route_small(self, step, keys: np.ndarray, table: _RouteTable) -> _StepRouting:
        """:meth:`_route_large`'s routing for a step of a few transfers, with Python lists where
        numpy's per-call cost would dominate (a chain's one-transfer steps on 16,384 ranks)."""
        kl = keys.tolist()
        uniq = sorted(set(kl))
        gid = self._route_pairs(table, np.array(uniq, dtype=np.int64), len(kl))
        group = dict(zip(uniq, gid.tolist(), strict=True))
        gk = [group[k] for k in kl]
        off, cnt = table.g_off[gk].tolist(), table.g_n[gk].tolist()
        flat = table.flat
        sub_path = [int(flat[o + j]) for o, n in zip(off, cnt, strict=True) for j in range(n)]
        sub_ptr = [0]
        for n in cnt:
            sub_ptr.append(sub_ptr[-1] + n)
        src, dst = step.src.tolist(), step.dst.tolist()
        members, width = None, self.p
        if 16 * len(kl) < self.p:
            members = sorted(set(src) | set(dst))
            at = {r: i for i, r in enumerate(members)}
            src, dst, width = [at[r] for r in src], [at[r] for r in dst], len(members)
            members = np.array(members, dtype=step.src.dtype)
        return self._step_routing(np.array(sub_ptr, dtype=np.int64), np.array(sub_path, dtype=np.int64),
                                  table.g_lat[gk], table.g_inline[gk], np.array(src, dtype=np.int64),
                                  np.array(dst, dtype=np.int64), width, max(cnt, default=1) == 1, members)

    def _step_routing(self, sub_ptr, sub_path, lat, inline, src_at, dst_at, width, single, members) -> _StepRouting:
        """The :class:`_StepRouting` of a step whose transfers go from ``src_at`` to ``dst_at``
        (ranks, or positions in ``members``; ``width`` of them)."""
        n_out = np.bincount(src_at, minlength=width)
        n_in = np.bincount(dst_at, minlength=width)
        return _StepRouting(sub_ptr, sub_path, lat, inline,
                            np.concatenate([[0], np.cumsum(n_out)]), np.argsort(src_at, kind="stable"),
                            np.concatenate([[0], np.cumsum(n_in)]), np.argsort(dst_at, kind="stable"),
                            n_out + n_in, single,
                            bool(n_out.max(initial=0) <= 1 and n_in.max(initial=0) <= 1), members)

    def _route_pairs(self, table: _RouteTable, uniq: np.ndarray, n_transfers: int) -> np.ndarray:
        """The route group of each of ``uniq`` (a step's distinct pair keys, sorted), routing the
        ones this fabric has not routed; the step's routing work is counted and bounded first."""
        fabric, net, nn = self.fabric, self.net, self.n_nodes
        policy, seed, qps = self.cfg.routing, self.cfg.ecmp_seed, self.cfg.qps
        gid = table.lookup(uniq)
        new = uniq[gid == -2]
        table.count(new)
        fabric.route_work += WORK_PER_ROUTED_STEP + 2 * fabric.rank_units + n_transfers + WORK_PER_INSTANT * new.size
        if fabric.max_work is not None:
            fabric.check_work(None, f"before routing {new.size} rank pairs")
        todo = np.flatnonzero(gid < 0)
        if not todo.size:
            return gid
        # pairs this fabric has not routed: the topology's routes (searched, or kept)
        fresh = np.zeros(uniq.size, dtype=bool)
        fresh[np.searchsorted(uniq, new)] = True
        groups, done = [], []
        ptr = net.paths.res_ptr
        try:
            pend = uniq[todo]
            node_pair = pend // 2
            is_new = fresh[todo].tolist()

            srcs, dsts = (node_pair // nn).tolist(), (node_pair % nn).tolist()

            def count(k, g):  # a search costs about an instant up to FREE_HOPS hops, and grows with the
                # path beyond (a ring of 4,096 NPUs: 13 ms for 2,048 hops) and with the links of all
                # its equal-cost paths (a torus): counted as it is routed
                if is_new[k]:
                    hops = ptr[g[0] + 1] - ptr[g[0]] if len(g) == 1 else net.paths.longest(g)
                    extra = (hop_work(hops) + walk_work(net.walked(srcs[k], dsts[k]))
                             + grow_work(net.grown(srcs[k], dsts[k])))
                    if extra:
                        fabric.route_work += extra
                        if fabric.max_work is not None:
                            fabric.check_work(None, f"while routing {len(uniq)} rank pairs ({hops} hops apart)")

            def ahead(hops, walked):  # the compiled search's whole batch, before its routes are built
                more = search_work(hops, walked)
                if fabric.work + more > fabric.max_work:
                    raise _work_error(fabric.work, WorkLimitError(
                        f"max_work = {fabric.max_work}: routing {len(uniq)} rank pairs (up to {int(hops.max())} "
                        f"hops apart) would take at least {more} more units of engine work ({WORK_UNITS}) on top "
                        f"of the run's {fabric.work}; use mode='analytical', fewer ranks or sizes, or raise "
                        "max_work (--max-work)"))

            bulk = fabric.max_work is None  # nothing to stop: the searches' work summed at once after
            try:
                net.route_many(srcs, dsts, (pend % 2).astype(bool).tolist(), policy, seed, qps, out=groups,
                               after=None if bulk else count, ahead=None if bulk else ahead)
            finally:
                done = pend[:len(groups)].tolist()
                if bulk and groups:
                    fabric.route_work += _search_work(net, groups, is_new, srcs, dsts)
        finally:
            table.set_groups(np.array(done, dtype=np.int64), groups, net.paths)
        return table.lookup(uniq)

    @property
    def path_bytes(self) -> np.ndarray:
        """Bytes this run has sent down each path (indexed by path id; the topology's path
        store may have grown since: read it with :func:`hcsim.engine.result.link_table`)."""
        return moved_bytes([self], len(self.net.paths.latency_s))

    def _exchanges(self, step) -> np.ndarray:
        live = step.nbytes > 0
        m = self.p
        back = np.isin(step.dst.astype(np.int64) * m + step.src, step.src[live].astype(np.int64) * m + step.dst[live])
        if self._pair_split:
            back &= self._regimes.pair_limited(message_bytes(step.src, step.dst, step.nbytes))
        return back.astype(np.int64)

    def _state(self, k) -> _StepState:
        st = self.states.get(k)
        if st is None:
            step = self.schedule.steps[k]
            # a step's transfer ids follow the steps before it; in step order (as the walk creates
            # the states) that is next_gid; once ranks jump, from the steps' sizes (_active_index)
            gid0 = self.next_gid if self._gid_base is None else int(self._gid_base[k])
            st = _StepState(k, step, self._routing(step), gid0, self.cfg.record, self.reduce_Bps,
                            self._regimes, None if self._new_peer is None else self._new_peer[k], self.cfg.inline_reduce,
                            self._server, self._continued(k, step), self._protocol_bytes(k), self._in_network_at(k))
            self.next_gid += st.n
            self.step_count[k] = st.n
            _count_step(self._moved, st.route, st.nbytes)  # every byte of the step will cross its paths
            self.states[k] = st
        return st

    def _enter(self, ranks: np.ndarray, k: int, now: float):
        """Ranks (all entering the same step k) enter it at ``now``; cascade through empty steps."""
        fabric = self.fabric
        fabric.entries += 1
        fabric.rank_work += fabric.rank_units
        if fabric.max_work is not None:
            fabric.check_work(now)
        later = []  # (ranks, step) still to walk: ranks an eager step let through at once (_take_part)
        while True:
            self._walk(ranks, k, now, later)
            if not later:
                return
            ranks, k = later.pop()

    def _walk(self, ranks: np.ndarray, k: int, now: float, later: list):
        """:meth:`_enter`'s walk of one group of ranks; groups that an eager step lets through
        at once (every transfer they take part in there has already completed) go to ``later``."""
        skipped = 0
        while ranks.size:
            if k >= self.n_steps:
                self.cur_step[ranks] = self.n_steps
                self.finish_s[ranks] = now
                if self.on_finish is not None:
                    mine = ranks if self._in_network is None else ranks[ranks < self.schedule.p]  # not the switch
                    if mine.size:
                        self.on_finish(mine, now)
                return
            if k in self.barriers:  # wait here until every rank has finished the steps before k
                self.cur_step[ranks] = k
                self.outstanding[ranks] = 0
                arrived = self.barriers.pop(k) + ranks.size
                if arrived < self.p:
                    self.barriers[k] = arrived
                    return
                if self.cfg.record:  # everyone was gated by the last rank to arrive
                    self.rank_gate[:] = self.rank_gate[ranks[0]]
                ranks = np.arange(self.p)
            st = self._state(k)
            deg = st.route.degree(ranks)
            if not deg.any():  # none of them takes part in step k (a rooted phase's idle ranks):
                k += 1         # on to the next, with nothing to record (set where they stop)
                skipped += 1  # jump at once once the index is built, else after a run of idle steps
                indexed = isinstance(self._active, np.ndarray)
                if (indexed or skipped == SKIP_INDEX_AFTER) and self._active_index() is not None:
                    ranks, k = self._jump(ranks, k, now, later)
                    skipped = 0
                continue
            idle = deg == 0
            through = self._take_part(st, ranks[~idle] if idle.any() else ranks, k, now)
            ranks = ranks[idle]
            if through is not None:  # done with step k already: on to k + 1 with the idle ones
                ranks = np.concatenate([ranks, through])
            k += 1

    def _active_index(self) -> np.ndarray | None:
        """Every (rank, step) in which the rank takes part, as sorted keys ``rank * (n_steps + 1)
        + step``; built once, on the first long run of idle steps, for schedules of at most
        :data:`ACTIVE_INDEX_TRANSFERS` transfers (None above: the idle steps are walked)."""
        if self._active is None:
            steps, width, keys, total, sizes = self.schedule.steps, self.n_steps + 1, [], 0, []
            for k in range(self.n_steps):
                step = steps[k]
                sizes.append(len(step))
                total += len(step)
                if total > ACTIVE_INDEX_TRANSFERS:
                    self._active = False
                    return None
                if len(step):
                    keys.append(np.concatenate([step.src, step.dst]).astype(np.int64) * width + k)
            active = np.sort(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
            # distinct keys (a rank that sends and receives in a step is there twice); a sort and
            # a comparison, several times faster than np.unique's hashing on millions of keys
            self._active = active[np.concatenate([[True], active[1:] != active[:-1]])] if active.size else active
            self._gid_base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return None if self._active is False else self._active

    def _jump(self, ranks: np.ndarray, k: int, now: float, later: list):
        """Ranks idle from step k on: each goes to the next step it takes part in, or to the next
        pending barrier, or past the last step, whichever comes first. Those that stop before
        the last such step enter theirs here, step by step in increasing order, as the walk
        would have; the last group is returned ``(ranks, step)`` for the caller to go on with."""
        width = self.n_steps + 1
        keys = self._active
        want = ranks * width + k
        pos = np.searchsorted(keys, want)
        found = np.minimum(pos, len(keys) - 1) if len(keys) else pos
        mine = (pos < len(keys)) & (keys[found] // width == ranks) if len(keys) else np.zeros(len(ranks), bool)
        nxt = np.where(mine, keys[found] - ranks * width if len(keys) else 0, self.n_steps)
        gates = [b for b in self.barriers if b >= k]
        if gates:
            nxt = np.minimum(nxt, min(gates))
        order = np.argsort(nxt, kind="stable")
        ranks, nxt = ranks[order], nxt[order]
        cuts = np.flatnonzero(np.diff(nxt)) + 1
        groups = np.split(np.arange(len(ranks)), cuts)
        for g in groups[:-1]:  # each takes part in its step (it is not a barrier nor the end)
            kk = int(nxt[g[0]])
            through = self._take_part(self._state(kk), ranks[g], kk, now)
            if through is not None:
                later.append((through, kk + 1))
        last = groups[-1]
        return ranks[last], int(nxt[last[0]])

    def _take_part(self, st: _StepState, ranks: np.ndarray, k: int, now: float) -> np.ndarray | None:
        """Ranks that all take part in step k enter it (the walk's step body for them). Returns
        those of them already done with the step (only in a step with eager transfers: every
        transfer they take part in completed before they entered), else None."""
        self.cur_step[ranks] = k
        r = st.route
        at = r.positions(ranks)
        self.outstanding[ranks] = r.deg[at]
        if r.one_each:
            lo = r.out_ptr[at]
            outs = r.out_tr[lo[r.out_ptr[at + 1] > lo]]
            lo = r.in_ptr[at]
            ins = r.in_tr[lo[r.in_ptr[at + 1] > lo]]
        else:
            outs = r.out_tr[_csr_rows(r.out_ptr, at)[0]]
            ins = r.in_tr[_csr_rows(r.in_ptr, at)[0]]
        if st.eager is not None:
            return self._take_part_eager(st, ranks, outs, ins, now)
        ready_in = ins[st.src_in[ins]]
        st.dst_in[ins] = True
        st.src_in[outs] = True
        ready_out = outs[st.dst_in[outs]]
        if ready_in.size or ready_out.size:
            self._start(st, ready_in, ready_out, now)
        return None

    def _take_part_eager(self, st: _StepState, ranks, outs, ins, now) -> np.ndarray | None:
        """:meth:`_take_part` in a step with eager transfers: an eager transfer is ready when its
        sender enters; one that reached its receiver before the receiver entered is taken now
        (counted done, or handed to the receiver's reduction unit)."""
        eager = st.eager
        ready_in = ins[st.src_in[ins] & ~eager[ins]]
        st.dst_in[ins] = True
        st.src_in[outs] = True
        ready_out = outs[st.dst_in[outs] | eager[outs]]
        if ready_in.size or ready_out.size:
            self._start(st, ready_in, ready_out, now)
        early = ins[st.early[ins]]
        if early.size:  # completed before its receiver was here: the receiver counts it now
            st.early[early] = False
            np.subtract.at(self.outstanding, st.dst[early], 1)
        held = ins[st.held[ins]]
        if held.size:  # drained before its receiver was here: reduced from now
            st.held[held] = False
            self._arrive(st, held, now, receiver_only=True)
        if not early.size:
            return None
        through = ranks[self.outstanding[ranks] == 0]
        return through if through.size else None

    def _start(self, st: _StepState, ready_in, ready_out, now):
        idx = np.concatenate([ready_in, ready_out]) if ready_in.size and ready_out.size else (
            ready_in if ready_in.size else ready_out)
        if self.cfg.record:
            st.t_ready[idx] = now
            gate = np.concatenate([st.dst[ready_in], st.src[ready_out]])  # the rank that came last
            st.pred[idx] = self.rank_gate[gate]
        self.step_ready_s[st.k] = min(self.step_ready_s[st.k], now)
        lat = st.route.lat[idx]
        if st.eager is not None:  # an eager transfer's bytes leave at once; its latency comes after them
            lat = np.where(st.eager[idx], 0.0, lat)
        t = (now + self.cfg.step_overhead_s + lat if st.pays is None
             else now + (self.cfg.step_overhead_s + lat) * st.pays[idx])
        self.fabric.push_grouped(t if st.extra_s is None else t + st.extra_s[idx], _ACTIVATE, self.id, st.k, idx)

    # ---------------------------------------------------------------- flows of this run
    def _activate(self, st: _StepState, idx, now):
        if self.cfg.record:
            st.t_start[idx] = now
        if st.route.single:
            paths, tr, nbytes = st.route.sub_path[idx], idx, st.charged[idx]
        else:
            pos, counts = _csr_rows(st.route.sub_ptr, idx)
            paths = st.route.sub_path[pos]
            tr = np.repeat(idx, counts)
            nbytes = st.charged[tr] / np.repeat(counts, counts)
        zero = nbytes <= 0 if st.has_zero else None
        if zero is not None and zero.any():  # nothing to move: it has arrived
            ztr = np.flatnonzero(np.bincount(tr[zero], minlength=st.n))
            st.sub_left[ztr] = 0
            self._arrive(st, ztr, now)
            keep = ~zero
            paths, tr, nbytes = paths[keep], tr[keep], nbytes[keep]
            if not paths.size:
                return
        self.fabric.add_flows(self.id, st.k, paths, tr, nbytes, now)

    def _drained(self, d_steps, d_local, now):
        """The fabric drained these flows (step, local transfer index) of this run."""
        ks = [int(d_steps[0])] if (d_steps == d_steps[0]).all() else np.unique(d_steps).tolist()
        for k in ks:
            st = self.states[k]
            loc = d_local if len(ks) == 1 else d_local[d_steps == k]
            if st.route.single:
                st.sub_left[loc] = 0
                arrived = loc
            else:
                np.subtract.at(st.sub_left, loc, 1)
                drained = np.zeros(st.n, dtype=bool)  # dedupe: sprayed subflows share a transfer
                drained[loc[st.sub_left[loc] == 0]] = True
                arrived = np.flatnonzero(drained)
            if arrived.size:
                self._arrive(st, arrived, now)

    def _arrive(self, st: _StepState, idx, now, receiver_only: bool = False):
        if st.eager is not None and not receiver_only:
            idx = self._arrive_eager(st, idx, now)
            if not idx.size:
                return
        if not st.any_reduce:
            self._complete(st, idx, now)
            return
        if idx.size == 1:  # one transfer (most drains in contended runs): the lines below on scalars
            c = st.reduce_s[idx[0]]
            if not c > 0:
                self._complete(st, idx, now)
                return
            unit = self.fabric.reduce_free
            node = self.rank_node[st.dst[idx[0]]]
            done = np.maximum(now, unit[node]) + (c - (c - c))  # start + (csum - before), as below
            unit[node] = done
            self.fabric.push(float(done), _COMPLETE, self.id, st.k, idx)
            return
        cost = st.reduce_s[idx]
        q = cost > 0
        if not q.all():
            self._complete(st, idx[~q], now)
        if not q.any():
            return
        idx, cost = idx[q], cost[q]
        dst = st.dst[idx]
        order = np.lexsort((idx, dst))  # by destination, ties by transfer index: deterministic
        idx, cost, dst = idx[order], cost[order], dst[order]
        first = np.concatenate([[True], dst[1:] != dst[:-1]])
        csum = np.cumsum(cost)
        group = np.cumsum(first) - 1
        before = (csum - cost)[first][group]
        unit = self.fabric.reduce_free  # the NPU's reduction unit, shared by every run on it
        start = np.maximum(now, unit[self.rank_node[dst]])
        done = start + (csum - before)
        last = np.concatenate([first[1:], [True]])
        unit[self.rank_node[dst[last]]] = done[last]
        self.fabric.push_grouped(done, _COMPLETE, self.id, st.k, idx)

    def _arrive_eager(self, st: _StepState, idx, now) -> np.ndarray:
        """Eager transfers among ``idx`` have drained: their senders are done with them
        (:meth:`_sent`); those that reduce and whose receiver has not entered the step yet wait
        for it (``held``, :meth:`_take_part_eager`). Returns the transfers that go on now."""
        e = st.eager[idx]
        if not e.any():
            return idx
        self._sent(st, idx[e], now)
        lat = np.where(e, st.route.lat[idx], 0.0)
        flying = lat > 0
        if flying.any():  # they reach the receiver one path latency later
            self.fabric.push_grouped(now + lat[flying], _LAND, self.id, st.k, idx[flying])
        wait = e & ~flying & ~st.dst_in[idx] & (st.reduce_s[idx] > 0)
        if wait.any():
            st.held[idx[wait]] = True
        return idx[~(flying | wait)] if (flying.any() or wait.any()) else idx

    def _land(self, st: _StepState, idx, now) -> None:
        """Eager transfers ``idx`` reach their receivers (a path latency after they drained)."""
        wait = ~st.dst_in[idx] & (st.reduce_s[idx] > 0)
        if wait.any():
            st.held[idx[wait]] = True
            idx = idx[~wait]
        if idx.size:
            self._arrive(st, idx, now, receiver_only=True)

    def _sent(self, st: _StepState, idx, now) -> None:
        """Eager transfers ``idx`` have drained: each sender loses one outstanding transfer and
        leaves the step once it has none left."""
        src = st.src[idx]
        np.subtract.at(self.outstanding, src, 1)
        if self.cfg.record:
            self.rank_gate[src] = idx + st.gid0
        done = src[self.outstanding[src] == 0]
        if done.size > 1:
            done = np.unique(done)
        if done.size:
            self._enter(done, st.k + 1, now)

    def _complete_eager(self, st: _StepState, idx, now):
        """:meth:`_complete` in a step with eager transfers: an eager transfer's sender was let go
        when it drained (:meth:`_sent`); its receiver counts it now if it has entered the step,
        else when it enters (``early``)."""
        if self.cfg.record:
            st.t_end[idx] = now
        self.step_end_s[st.k] = max(self.step_end_s[st.k], now)
        st.left -= idx.size
        e = st.eager[idx]
        here = st.dst_in[idx]
        if not here.all():
            st.early[idx[~here]] = True
        s_idx, d_idx = idx[~e], idx[here]
        src, dst = st.src[s_idx], st.dst[d_idx]
        np.subtract.at(self.outstanding, src, 1)
        np.subtract.at(self.outstanding, dst, 1)
        if self.cfg.record:
            self.rank_gate[src] = s_idx + st.gid0
            self.rank_gate[dst] = d_idx + st.gid0
        # a rank is released once: as a receiver, or as a sender that received nothing just now
        done_dst = np.unique(dst[self.outstanding[dst] == 0])
        self._mark[dst] = True
        done_src = np.unique(src[(self.outstanding[src] == 0) & ~self._mark[src]])
        self._mark[dst] = False
        released = np.concatenate([done_dst, done_src]) if done_src.size else done_dst
        if released.size:
            self._enter(released, st.k + 1, now)
        if st.left == 0:
            self._retire()

    def _complete(self, st: _StepState, idx, now):
        if st.eager is not None:
            self._complete_eager(st, idx, now)
            return
        if self.cfg.record:
            st.t_end[idx] = now
        self.step_end_s[st.k] = max(self.step_end_s[st.k], now)
        st.left -= idx.size
        if idx.size == 1:  # one transfer (most completions in contended runs): the lines below on scalars
            self._complete_one(st, int(idx[0]), now)
            return
        src, dst = st.src[idx], st.dst[idx]
        if st.route.one_each:  # no rank twice among the senders, nor among the receivers
            self.outstanding[src] -= 1
            self.outstanding[dst] -= 1
        else:
            np.subtract.at(self.outstanding, src, 1)
            np.subtract.at(self.outstanding, dst, 1)
        if self.cfg.record:
            self.rank_gate[src] = idx + st.gid0
            self.rank_gate[dst] = idx + st.gid0
        # a rank is released once: as a receiver, or as a sender that received nothing just now
        done_dst = dst[self.outstanding[dst] == 0]
        self._mark[dst] = True
        done_src = src[(self.outstanding[src] == 0) & ~self._mark[src]]
        self._mark[dst] = False
        if done_src.size > 1 and not st.route.one_each:
            done_src = np.unique(done_src)
        if done_dst.size > 1 and not st.route.one_each:
            done_dst = np.unique(done_dst)
        released = np.concatenate([done_dst, done_src]) if done_src.size else done_dst
        if released.size:
            self._enter(released, st.k + 1, now)
        if st.left == 0:
            self._retire()

    def _complete_one(self, st: _StepState, i: int, now: float) -> None:
        """:meth:`_complete`'s release of transfer ``i``'s two ranks, on scalars: each loses one
        outstanding transfer; the receiver is released if it has none left, then the sender if it
        has none left and is not the receiver (the same ranks in the same order)."""
        s, d = st.src[i], st.dst[i]
        out = self.outstanding
        out[s] -= 1
        out[d] -= 1
        if self.cfg.record:
            self.rank_gate[s] = i + st.gid0
            self.rank_gate[d] = i + st.gid0
        released = []
        if out[d] == 0:
            released.append(d)
        if out[s] == 0 and s != d:
            released.append(s)
        if released:
            self._enter(np.array(released, dtype=st.dst.dtype), st.k + 1, now)
        if st.left == 0:
            self._retire()

    def _retire(self):
        low = int(self.cur_step.min())
        if self.on_progress is not None:
            self.on_progress(low)
        # every rank is past the steps below low, so each of them is done: looked up from where
        # the last call stopped (low never decreases), not by scanning every live state (a chain
        # on 8,192 ranks keeps 8,191 of them from the start)
        for k in range(self._retired_below, low):
            st = self.states.get(k)
            if st is not None and st.left == 0:
                del self.states[k]
                if self.cfg.record:
                    self.done_states.append(st)
        self._retired_below = max(self._retired_below, low)
