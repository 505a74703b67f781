"""Message-size regimes: a transport's per-message cost that depends on the message's size.

MPI libraries switch protocol with the message size: below the eager limit a message
goes at once, above it a rendezvous (request, clear-to-send, then the data) precedes it.
Each regime has its own fixed cost and its own rate. SimGrid's SMPI models this with
piecewise ``smpi/lat-factor`` and ``smpi/bw-factor`` tables keyed by message size
(https://simgrid.org/doc/latest/Configuring_SimGrid.html#smpi-lat-factor); here a regime
adds ``overhead_s`` to each transfer's start and makes it cost ``nbytes / efficiency`` of
every resource it crosses (so a less efficient regime also takes more of a shared link).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import bad_value, is_int

EFFICIENCY_ALLOWED = "a number from 1e-6 to 1e6 (the share of the link rate a message gets)"


def _efficiency(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and 1e-6 <= v <= 1e6


@dataclass(frozen=True)
class MessageRegimes:
    """Piecewise per-message cost by message size.

    Attributes
    ----------
    from_bytes : tuple of int
        Where each regime starts, ascending, the first 0: a message of ``n`` bytes is in
        the last regime whose ``from_bytes <= n``.
    overhead_s : tuple of float
        Seconds added to each transfer's start in that regime (on top of the step overhead).
    efficiency : tuple of float
        The fraction of its resources' rate a transfer in that regime achieves: it is
        charged ``nbytes / efficiency`` bytes.
    pair_limit : tuple of bool or None
        Whether the NPUs' pair-exchange limit (``NpuSpec.exchange_Bps``) holds in that
        regime (None: in every regime). Open MPI's TCP transport overlaps the two
        directions of an eager exchange but not of a rendezvous one, whose clear-to-send
        queues behind the peer's own data.
    overhead_when : tuple of str or None
        When that regime's ``overhead_s`` is paid (None: always): ``"always"``, or
        ``"receiver_sending"``, only by a message whose receiver sends, in the same step, to
        a rank other than this message's sender. Open MPI's rendezvous handshake is slow
        only then: the receiver's clear-to-send queues behind its own outgoing data (a
        one-way rendezvous message pays nothing; a shift step, where every rank sends on,
        pays it).
    new_peer_efficiency : tuple of float or None
        A further efficiency (None: 1 in every regime) for a message that goes to a peer its
        sender did not send to in its previous step, and whose receiver sends in the same
        step too: a connection used once per step under load runs slower than one
        reused step after step (Open MPI over TCP, measured with a rotating-peer probe
        against the fixed-peer shift). A sender's first step is always to new peers.
    many_peer_efficiency : tuple of float or None
        A further efficiency (None: 1 in every regime) for a message of a many-to-many step:
        its sender sends to two or more peers and its receiver receives from two or more, in
        that step (a linear alltoall, a mesh). Open MPI over TCP moves a host's bytes at a
        different rate when it juggles many connections at once than the one- and two-peer
        probes show (slower for eager messages, faster for rendezvous ones on the netns
        testbed); measured with an every-rank-to-every-rank probe.
    local_efficiency : tuple of float or None
        A further efficiency (None: 1 in every regime) for a message whose two ranks are on
        the same server (:attr:`hcsim.topology.spec.NpuSpec.server`): a transport that moves a
        message inside a node through shared memory and between nodes through the NIC may
        run one protocol's intra-node copies at their own rate (UCX's rendezvous through a
        single kernel copy against its eager copy-in/copy-out) while its NIC transfers keep
        the link's rate.
    send_overhead_s : tuple of float or None
        Per regime (None: 0 in every regime), the sender's CPU time of one message's send
        call: a sender's messages of one step in such a regime go out one after another, its
        k-th (in the order of its peers' distance, rank + 1 first, as Open MPI's linear alltoall
        and MPICH's isend/irecv one post them: :func:`send_order`) starting ``k x
        send_overhead_s`` plus the earlier messages' bytes over ``send_copy_Bps`` later. An
        eager message is copied out by the sender's CPU in the send call itself (LogGP's
        overhead o, Alexandrov et al. 1995), so the CPU cannot start the next one before.
    send_copy_Bps : tuple of float or None
        Per regime (None: infinite in every regime), the rate at which the sender's CPU copies
        a message out in the send call (with ``send_overhead_s``; infinite: not charged).
    start_when : tuple of str or None
        Per regime (None: ``"both"`` in every regime), what makes a transfer of step k
        *ready*: ``"both"``, its two ranks have entered step k (a rendezvous: the receiver
        must be there to accept the data, which is how the engine runs every transfer
        without regimes); ``"sender"``, its sender alone has entered step k (an eager
        message: the MPI standard lets a standard-mode send complete before the matching
        receive is posted, the library buffering the message, and MPI libraries do so below
        their eager limit). Under ``"sender"`` the sender is done with the transfer when its
        flow has drained (its bytes have left and arrived); the receiver when it has entered
        step k and the transfer has completed (a reducing one is reduced by the receiver's
        reduction unit only from when the receiver has entered the step, in the engine's
        first-come order). A message that drains before its receiver has entered its step
        waits for it (MPI's unexpected-message queue), so a late rank delays only the ranks
        it sends to, not the ranks that send to it.
    call_overhead_s : tuple of float or None
        Per regime (None: 0 in every regime), seconds a whole call pays once, after its launch
        and before its first step, in the regime of its largest message (or of
        :attr:`hcsim.algorithms.schedule.Schedule.protocol_bytes`): a library that picks one
        protocol per call and pays a fixed cost for it (NCCL's ``baseLat``, per protocol, on top
        of its per-step ``hwLat``). An in-network schedule (NVLS) pays none: NCCL's base latency
        of NVLS is 0. In :func:`hcsim.api.simulate` each CCL-buffer loop is a call and pays it; a
        job's collective (:mod:`hcsim.workload.runner`), its loops one looped schedule
        (:func:`hcsim.hccl.buffer.looped`), pays it once, after its launch.

    Examples
    --------
    >>> r = MessageRegimes(from_bytes=(0, 65536), overhead_s=(0.0, 1e-3), efficiency=(1.0, 0.5))
    >>> extra, charged = r.costs(np.array([1000.0, 65536.0]))
    >>> extra.tolist(), charged.tolist()
    ([0.0, 0.001], [1000.0, 131072.0])
    """

    from_bytes: tuple = (0,)
    overhead_s: tuple = (0.0,)
    efficiency: tuple = (1.0,)
    pair_limit: tuple | None = None
    overhead_when: tuple | None = None
    new_peer_efficiency: tuple | None = None
    many_peer_efficiency: tuple | None = None
    local_efficiency: tuple | None = None
    send_overhead_s: tuple | None = None
    send_copy_Bps: tuple | None = None
    start_when: tuple | None = None
    call_overhead_s: tuple | None = None

    def __post_init__(self):
        k = len(self.from_bytes)
        if self.start_when is not None:
            sw = self.start_when
            if isinstance(sw, (str, bytes)) or not hasattr(sw, "__len__") or len(sw) != k:
                raise bad_value("message_regimes.start_when", sw, f"{k} of {', '.join(START_WHEN)}, one per regime")
            for i, w in enumerate(sw):
                if not isinstance(w, str) or w not in START_WHEN:
                    raise bad_value(f"message_regimes[{i}].start_when", w, "one of " + ", ".join(START_WHEN))
        for name, ok, allowed in (
                ("send_overhead_s", lambda v: 0 <= v <= 1, "seconds from 0 to 1"),
                ("call_overhead_s", lambda v: 0 <= v <= 1, "seconds from 0 to 1"),
                ("send_copy_Bps", lambda v: 1 <= v <= 1e15 or v == np.inf, "bytes per second from 1 to 1e15, or inf")):
            vals = getattr(self, name)
            if vals is None:
                continue
            if isinstance(vals, (str, bytes)) or not hasattr(vals, "__len__") or len(vals) != k:
                raise bad_value(f"message_regimes.{name}", vals, f"{k} numbers, one per regime")
            for i, v in enumerate(vals):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(v):
                    raise bad_value(f"message_regimes[{i}].{name}", v, allowed)
        for name in ("new_peer_efficiency", "many_peer_efficiency", "local_efficiency"):
            effs = getattr(self, name)
            if effs is None:
                continue
            if len(effs) != k:
                raise bad_value(f"message_regimes.{name}", effs, f"{k} numbers, one per regime")
            for i, v in enumerate(effs):
                if not _efficiency(v):
                    raise bad_value(f"message_regimes[{i}].{name}", v, EFFICIENCY_ALLOWED)
        if self.overhead_when is not None and (len(self.overhead_when) != k
                                               or any(w not in OVERHEAD_WHEN for w in self.overhead_when)):
            raise bad_value("message_regimes.overhead_when", self.overhead_when,
                            f"{k} of {', '.join(OVERHEAD_WHEN)}, one per regime")
        if self.pair_limit is not None and (len(self.pair_limit) != k
                                            or not all(isinstance(v, (bool, np.bool_)) for v in self.pair_limit)):
            raise bad_value("message_regimes.pair_limit", self.pair_limit, f"{k} booleans, one per regime")
        if k == 0 or len(self.overhead_s) != k or len(self.efficiency) != k:
            raise bad_value("message_regimes", f"{k} starts, {len(self.overhead_s)} overheads, "
                            f"{len(self.efficiency)} efficiencies", "one of each per regime, at least one regime")
        if self.from_bytes[0] != 0:
            raise bad_value("message_regimes[0].from_bytes", self.from_bytes[0], "0 (the first regime starts at 0)")
        for i, b in enumerate(self.from_bytes):
            if not is_int(b) or b < 0:
                raise bad_value(f"message_regimes[{i}].from_bytes", b, "an integer number of bytes >= 0")
            if i and b <= self.from_bytes[i - 1]:
                raise bad_value(f"message_regimes[{i}].from_bytes", b, f"more than the regime before ({self.from_bytes[i - 1]})")
        for i, v in enumerate(self.overhead_s):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1e20:
                raise bad_value(f"message_regimes[{i}].overhead_s", v, "a number (int or float) of seconds from 0 to 1e20")
        for i, v in enumerate(self.efficiency):
            if not _efficiency(v):
                raise bad_value(f"message_regimes[{i}].efficiency", v, EFFICIENCY_ALLOWED)

    @property
    def trivial(self) -> bool:
        """True when no regime adds a cost (the model without regimes)."""
        return (all(v == 0 for v in self.overhead_s) and all(e == 1 for e in self.efficiency)
                and (self.pair_limit is None or all(self.pair_limit)) and not self.peer_aware
                and not self.many_aware and not self.local_aware and not self.serial_aware
                and not self.eager_aware and not any(self.call_overhead_s or ()))

    @property
    def eager_aware(self) -> bool:
        """True when some regime starts a transfer as soon as its sender is ready (``start_when``)."""
        return self.start_when is not None and any(w == "sender" for w in self.start_when)

    def sender_starts(self, message_bytes) -> np.ndarray:
        """For each message size, whether its regime's transfers start when the sender alone is
        ready (``start_when`` ``"sender"``, an eager message).

        Examples
        --------
        >>> r = MessageRegimes(from_bytes=(0, 65536), overhead_s=(0.0, 0.0), efficiency=(1.0, 1.0),
        ...                    start_when=("sender", "both"))
        >>> r.sender_starts([8, 65535, 65536]).tolist()
        [True, True, False]
        """
        if not self.eager_aware:
            return np.zeros(np.shape(message_bytes), dtype=bool)
        return np.asarray([w == "sender" for w in self.start_when], dtype=bool)[self.regime_of(message_bytes)]

    @property
    def peer_aware(self) -> bool:
        """True when some regime charges a message to a new peer differently."""
        return self.new_peer_efficiency is not None and any(e != 1 for e in self.new_peer_efficiency)

    @property
    def many_aware(self) -> bool:
        """True when some regime charges a message of a many-to-many step differently."""
        return self.many_peer_efficiency is not None and any(e != 1 for e in self.many_peer_efficiency)

    @property
    def local_aware(self) -> bool:
        """True when some regime charges a message inside one server differently."""
        return self.local_efficiency is not None and any(e != 1 for e in self.local_efficiency)

    @property
    def serial_aware(self) -> bool:
        """True when some regime sends a sender's messages of a step one after another at a cost."""
        return ((self.send_overhead_s is not None and any(v > 0 for v in self.send_overhead_s))
                or (self.send_copy_Bps is not None and any(v != np.inf for v in self.send_copy_Bps)))

    def serial_delay(self, src, dst, nbytes) -> np.ndarray:
        """Seconds each transfer of a step starts late because its sender's earlier messages
        of the step, in regimes with a send cost, go out first (:func:`send_order`)."""
        n = np.asarray(nbytes, dtype=float)
        if not self.serial_aware or n.size == 0:
            return np.zeros(n.shape)
        k = self.regime_of(message_bytes(src, dst, n))
        o = np.asarray(self.send_overhead_s if self.send_overhead_s is not None else (0.0,) * len(self.from_bytes),
                       float)[k]
        c = np.asarray(self.send_copy_Bps if self.send_copy_Bps is not None else (np.inf,) * len(self.from_bytes),
                       float)[k]
        serial = (o > 0) | (c != np.inf)
        order, before = send_order(src, dst, n, serial)
        return np.where(serial & (n > 0), order * o + before / c, 0.0)

    def pair_limited(self, nbytes) -> np.ndarray:
        """Whether the pair-exchange limit holds for each message size."""
        if self.pair_limit is None:
            return np.ones(np.shape(nbytes), dtype=bool)
        return np.asarray(self.pair_limit, dtype=bool)[self.regime_of(nbytes)]

    def regime_of(self, nbytes) -> np.ndarray:
        """Index of the regime of each message size."""
        return np.searchsorted(np.asarray(self.from_bytes), np.asarray(nbytes, dtype=float), side="right") - 1

    @property
    def conditional(self) -> bool:
        """True when some regime pays its overhead only under a condition."""
        return self.overhead_when is not None and any(w != "always" for w in self.overhead_when)

    def costs(self, nbytes, message_bytes=None, receiver_sending=None, new_peer=None,
              receiver_active=None, many=None, local=None) -> tuple[np.ndarray, np.ndarray]:
        """``(overhead_s, charged_bytes)`` for each transfer of ``nbytes``, in the regime of
        its message (``message_bytes``, by default the transfer itself: see
        :func:`message_bytes`). ``receiver_sending`` (:func:`receiver_sending`; None: every
        receiver sends elsewhere), ``new_peer`` (:func:`new_peers`; None: no transfer goes to
        a new peer), ``receiver_active`` (whether the receiver sends anything in the step;
        None: it does), ``many`` (:func:`many_to_many`; None: no transfer is) and ``local``
        (whether its two ranks share a server; None: none does) decide the conditional costs."""
        n = np.asarray(nbytes, dtype=float)
        k = self.regime_of(n if message_bytes is None else message_bytes)
        extra = np.asarray(self.overhead_s, float)[k]
        busy = np.ones(n.shape, bool) if receiver_sending is None else np.asarray(receiver_sending, bool)
        if self.conditional:
            only_then = np.asarray([w == "receiver_sending" for w in self.overhead_when])[k]
            extra = np.where(only_then & ~busy, 0.0, extra)
        eff = np.asarray(self.efficiency, float)[k]
        if self.peer_aware and new_peer is not None:
            active = np.ones(n.shape, bool) if receiver_active is None else np.asarray(receiver_active, bool)
            eff = np.where(np.asarray(new_peer, bool) & active, eff * np.asarray(self.new_peer_efficiency, float)[k],
                           eff)
        if self.many_aware and many is not None:
            eff = np.where(np.asarray(many, bool), eff * np.asarray(self.many_peer_efficiency, float)[k], eff)
        if self.local_aware and local is not None:
            eff = np.where(np.asarray(local, bool), eff * np.asarray(self.local_efficiency, float)[k], eff)
        return extra, n / eff


OVERHEAD_WHEN = ("always", "receiver_sending")
"""When a regime's overhead is paid (:attr:`MessageRegimes.overhead_when`)."""

START_WHEN = ("both", "sender")
"""What makes a regime's transfer ready (:attr:`MessageRegimes.start_when`): both ranks in the step
(rendezvous), or its sender alone (eager)."""


def _pairs(src, dst, nbytes):
    """``(src, dst, live, m, pairs)``: the rank arrays as int64, which transfers move bytes, a
    key base ``m`` above every rank, and the distinct live (sender, receiver) pairs as sorted
    keys ``src * m + dst`` (None when nothing moves)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    live = np.asarray(nbytes, dtype=float) > 0
    if not live.any():
        return src, dst, live, 0, None
    m = int(max(src.max(), dst.max())) + 1
    return src, dst, live, m, np.unique(src[live] * m + dst[live])


def receiver_sending(src, dst, nbytes) -> np.ndarray:
    """For each transfer of a step, whether its receiver sends, in the same step, bytes to a
    rank other than the transfer's sender.

    Examples
    --------
    A shift (0->1->2->0) and an exchange (0<->1):

    >>> receiver_sending(np.array([0, 1, 2]), np.array([1, 2, 0]), np.ones(3)).tolist()
    [True, True, True]
    >>> receiver_sending(np.array([0, 1]), np.array([1, 0]), np.ones(2)).tolist()
    [False, False]
    """
    src, dst, live, m, pairs = _pairs(src, dst, nbytes)
    if pairs is None:
        return np.zeros(src.shape, dtype=bool)
    peers = np.bincount(pairs // m, minlength=m)  # distinct ranks each rank sends to
    back = np.isin(dst * m + src, pairs)            # the receiver also sends to this sender
    return peers[dst] - back > 0


def many_to_many(src, dst, nbytes) -> np.ndarray:
    """For each transfer of a step, whether its sender sends to two or more distinct peers and
    its receiver receives from two or more, in that step.

    Examples
    --------
    Every rank to every other (3 ranks), then a star from rank 0:

    >>> src, dst = np.array([0, 0, 1, 1, 2, 2]), np.array([1, 2, 0, 2, 0, 1])
    >>> many_to_many(src, dst, np.ones(6)).tolist()
    [True, True, True, True, True, True]
    >>> many_to_many(np.array([0, 0]), np.array([1, 2]), np.ones(2)).tolist()
    [False, False]
    """
    src, dst, live, m, pairs = _pairs(src, dst, nbytes)
    if pairs is None:
        return np.zeros(src.shape, dtype=bool)
    out_deg = np.bincount(pairs // m, minlength=m)
    in_deg = np.bincount(pairs % m, minlength=m)
    return live & (out_deg[src] >= 2) & (in_deg[dst] >= 2)


def new_peers(steps) -> list[np.ndarray]:
    """For each step of a schedule, whether each transfer goes to a peer its sender did not
    send to in its own previous step (the last earlier step in which it sent anything; a
    sender's first step is always to new peers).

    Examples
    --------
    A ring (same peer every step) and a pairwise exchange (a new peer every step), 4 ranks:

    >>> from types import SimpleNamespace as S
    >>> r = np.arange(4)
    >>> ring = [S(src=r, dst=(r + 1) % 4, nbytes=np.ones(4))] * 3
    >>> [bool(m.any()) for m in new_peers(ring)]
    [True, False, False]
    >>> pw = [S(src=r, dst=(r + k) % 4, nbytes=np.ones(4)) for k in (1, 2, 3)]
    >>> [bool(m.all()) for m in new_peers(pw)]
    [True, True, True]
    """
    keys, out = [], []
    m = 1 + max((int(max(s.src.max(), s.dst.max())) for s in steps if len(s.src)), default=0)
    last = np.full(m, -1, dtype=np.int64)
    for k, s in enumerate(steps):
        src, dst = np.asarray(s.src, dtype=np.int64), np.asarray(s.dst, dtype=np.int64)
        live = np.asarray(s.nbytes, float) > 0
        keys.append(np.unique(src[live] * m + dst[live]))
        prev = last[src]
        new = np.ones(src.shape, dtype=bool)
        for j in np.unique(prev[prev >= 0]):
            sel = prev == j
            new[sel] = ~np.isin(src[sel] * m + dst[sel], keys[j])
        out.append(new)
        last[np.unique(src[live])] = k
    return out


def message_bytes(src, dst, nbytes) -> np.ndarray:
    """For each transfer of a step, the bytes its sender sends its receiver in that step.

    A schedule may list a step's data to one peer as several transfers (one per block, as
    the Bruck and NHR builders do), but a library sends it as one message (HCCL lays the
    blocks out contiguously; Open MPI's Bruck sends them with one ``sendrecv``), and a
    transport picks its protocol by the message's size, not the block's.

    Examples
    --------
    >>> message_bytes(np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([100, 200, 50])).tolist()
    [300.0, 300.0, 50.0]
    """
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    n = np.asarray(nbytes, dtype=float)
    if n.size == 0:
        return n
    _, inv = np.unique(src * (int(max(src.max(), dst.max())) + 1) + dst, return_inverse=True)
    return np.bincount(inv, weights=n)[inv]


def send_order(src, dst, nbytes, counted=None) -> tuple[np.ndarray, np.ndarray]:
    """For each transfer of a step, ``(k, before)``: how many of its sender's other messages of
    the step go out before its own, and their bytes. A sender's messages (all its bytes to one
    peer, :func:`message_bytes`) go out in the order of the peer's distance ``(dst - src) mod
    p``, nearest first, ``p`` one more than the highest rank in the step; only live messages
    that are ``counted`` (default all) count.

    Examples
    --------
    Rank 0 sends to 1, 2 and 3 (100, 200, 300 B), rank 1 to 0 only:

    >>> k, before = send_order(np.array([0, 0, 0, 1]), np.array([3, 1, 2, 0]), np.array([300, 100, 200, 50]))
    >>> k.tolist(), before.tolist()
    ([2, 0, 1, 0], [300.0, 0.0, 100.0, 0.0])
    """
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    n = np.asarray(nbytes, dtype=float)
    if n.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    p = int(max(src.max(), dst.max())) + 1
    live = n > 0 if counted is None else (n > 0) & np.asarray(counted, bool)
    key = src * p + (dst - src) % p          # a message: sender, then distance
    keys, inv = np.unique(key, return_inverse=True)
    msg = np.bincount(inv, weights=np.where(live, n, 0.0))  # bytes of each message
    used = np.bincount(inv, weights=live.astype(float)) > 0
    sender = keys // p
    # messages sorted by sender then distance (np.unique sorts keys): rank within each sender
    first = np.concatenate([[True], sender[1:] != sender[:-1]])
    start = np.maximum.accumulate(np.where(first, np.arange(keys.size), 0))
    cnt = np.cumsum(used) - used                  # used messages before, over all senders
    k = cnt - cnt[start]
    cum = np.cumsum(msg) - msg
    before = cum - cum[start]
    return k[inv].astype(np.int64), before[inv]
