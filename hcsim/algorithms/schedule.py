"""The schedule IR: what an algorithm produces and the engine and verifier consume.

A :class:`Schedule` is a sequence of :class:`Step`. A step holds numpy arrays, one entry
per transfer: source rank, destination rank, bytes, whether the destination reduces what it
receives, and the half-open chunk range ``[chunk_lo, chunk_hi)`` the transfer carries (the
verifier follows chunks; the engine only reads ranks, bytes and the reduce flag).

Execution rule: a rank enters step k once every transfer of step k-1 it takes part in has
finished; a transfer starts when both its ranks have entered its step (per-rank
synchronisation, like HCCL's notify handshakes, not a global barrier). Sends read the data
their rank held when it entered the step. A schedule may list *barriers*: step indices k
before which every rank waits until all ranks have finished every step before k (HCCL's
CCL-buffer loops: each loop is a complete collective on its piece, see ``hccl/buffer.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ScheduleError, bad_value, is_int
from ..limits import MAX_SIZE_BYTES

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "scatter", "gather",
               "alltoall", "alltoallv", "sendrecv")
"""Collectives hcsim simulates."""

ROOTED = ("broadcast", "reduce", "scatter", "gather")
REDUCING = ("allreduce", "reducescatter", "reduce")
PER_RANK_BLOCKS = ("allgather", "reducescatter", "scatter", "gather", "sendrecv")
"""Collectives whose data is one block per rank (rank r owns / ends with block r)."""

BUSBW_FACTOR = {
    # nccl-tests doc/PERFORMANCE.md (FACTS.md section 6)
    "allreduce": lambda p: 2 * (p - 1) / p,
    "reducescatter": lambda p: (p - 1) / p,
    "allgather": lambda p: (p - 1) / p,
    "alltoall": lambda p: (p - 1) / p,
    "alltoallv": lambda p: (p - 1) / p,
    "scatter": lambda p: (p - 1) / p,
    "gather": lambda p: (p - 1) / p,
    "broadcast": lambda p: 1.0,
    "reduce": lambda p: 1.0,
    "sendrecv": lambda p: 1.0,
}
"""Bus-bandwidth factor per collective, as nccl-tests defines it."""


def min_size(collective: str, p: int) -> int:
    """Smallest size (nccl-tests convention) HCCL can be called with on ``p`` ranks.

    AllGather, ReduceScatter, Scatter and Gather take a per-rank count and their size is
    count x ranks; AlltoAll's is the per-rank send buffer, count x ranks: at least one byte per
    rank. The others (AllReduce, Broadcast, Reduce, SendRecv, AlltoAllV's matrix) need one byte.
    Below it, blocks of zero bytes could leave a call with nothing to move (a scatter of 1 byte
    keeps its only byte at the root), so its time would be the launch alone, 0 without one.
    """
    return p if collective in ("allgather", "reducescatter", "scatter", "gather", "alltoall") else 1


@dataclass(frozen=True)
class CollectiveArgs:
    """What an algorithm is asked to schedule.

    Attributes
    ----------
    collective : str
        One of :data:`COLLECTIVES`.
    p : int
        Number of ranks.
    nbytes : int
        Message size with nccl-tests' meaning: the per-rank buffer for allreduce,
        broadcast, reduce, alltoall (whole send buffer) and sendrecv; the total gathered /
        scattered size (count x ranks) for allgather and reducescatter.
    root : int
        Root rank of broadcast, reduce, scatter and gather.
    servers : tuple of int
        Ranks per server, in rank order (ranks of one server are consecutive). Flat
        algorithms ignore it; hierarchical ones run level 0 inside each server and level 1
        between same-index ranks of different servers. ``()`` means one server of p ranks.
    pods : tuple of int
        Servers per pod (supernode), for level 2; ``()`` means one pod.
    send_matrix : tuple of tuple of int
        AlltoAllV only: ``send_matrix[i][j]`` bytes go from rank i to rank j.
    """

    collective: str
    p: int
    nbytes: int
    root: int = 0
    servers: tuple = ()
    pods: tuple = ()
    send_matrix: tuple | None = None

    @property
    def server_sizes(self) -> tuple:
        """Ranks per server (one server of all ranks when no layout is given)."""
        return self.servers or (self.p,)


@dataclass(frozen=True)
class Step:
    """One step: parallel arrays, one entry per transfer.

    A *message step* (``expand`` set) holds one transfer per (source, destination, reduce)
    of the step, its bytes the sum of the chunks it carries; its ``chunk_lo``/``chunk_hi``
    are None and :meth:`chunks` gives the chunk-level transfers (made on demand, for the
    verifier). The engine only reads ranks, bytes and the reduce flag, so it runs on messages:
    an NHR step on p ranks is p transfers, not p^2/2, and a pair's chunks take one share of a
    contended link, not one share each.
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    reduce: np.ndarray
    chunk_lo: np.ndarray | None
    chunk_hi: np.ndarray | None
    expand: Callable[[], Step] | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.src)

    @property
    def is_message(self) -> bool:
        """Whether this is a message step (chunk ranges made on demand by :meth:`chunks`)."""
        return self.expand is not None

    def chunks(self) -> Step:
        """The chunk-level view: this step itself, or a message step's chunk transfers."""
        return self if self.expand is None else self.expand()


def make_step(src, dst, nbytes, reduce, chunk_lo, chunk_hi) -> Step:
    """Build a Step, broadcasting scalars and fixing dtypes."""
    # Arrays already of the right dtype and length are kept as they are (not copied), so
    # steps that share their rank arrays let the engine reuse their routing.
    def arr(x, dtype, field):
        try:
            x = np.asarray(x, dtype=dtype)
            if x.shape != (n,):
                return np.broadcast_to(x, (n,))
        except (TypeError, ValueError, OverflowError):  # not numbers, or not one per transfer
            raise bad_value(f"step.{field}", x, f"{'True/False' if dtype is bool else 'integers'}, one per "
                            f"transfer ({n}) or one for all") from None
        x.flags.writeable = False  # the engine caches routing by array identity: no mutation after
        return x

    try:
        src = np.asarray(src, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise bad_value("step.src", src, "rank numbers, one per transfer") from None
    if src.ndim > 1:
        raise bad_value("step.src", src, "rank numbers, one per transfer")
    n = src.shape[0] if src.ndim else 1
    src = arr(src, np.int64, "src")

    return Step(src, arr(dst, np.int64, "dst"), arr(nbytes, np.int64, "nbytes"), arr(reduce, bool, "reduce"),
                arr(chunk_lo, np.int64, "chunk_lo"), arr(chunk_hi, np.int64, "chunk_hi"))


def make_message_step(src, dst, nbytes, reduce, expand: Callable[[], Step]) -> Step:
    """A message step: one transfer per (src, dst, reduce), ``expand()`` its chunk-level view.

    The verifier checks that the messages carry exactly the bytes of their chunks
    (:func:`hcsim.verify.verify`).
    """
    step = make_step(src, dst, nbytes, reduce, 0, 0)
    return Step(step.src, step.dst, step.nbytes, step.reduce, None, None, expand)


def message_key(step: Step, p: int) -> np.ndarray:
    """One integer per transfer naming its message: (src, dst, reduce) on ``p`` ranks."""
    return (step.src * p + step.dst) * 2 + step.reduce


def sum_by_message(step: Step, p: int, weights=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keys, first, sums)``: the distinct :func:`message_key` values (sorted), the first
    transfer of each, and ``weights`` (default: the bytes) summed per message."""
    keys, first, inverse = np.unique(message_key(step, p), return_index=True, return_inverse=True)
    sums = np.zeros(len(keys), dtype=np.int64)
    np.add.at(sums, inverse, step.nbytes if weights is None else weights)
    return keys, first, sums


def merge_messages(step: Step, p: int) -> Step:
    """``step`` as one message per (src, dst, reduce), in first-appearance order; the step
    itself when its pairs are already distinct. The chunk-level view is ``step``."""
    if step.is_message or len(step) < 2:
        return step
    if np.bincount(step.src, minlength=p).max() <= 1:  # each rank sends once (a ring's step):
        return step                                      # its pairs are distinct, no sort needed
    keys, first, nbytes = sum_by_message(step, p)
    if len(keys) == len(step):
        return step
    order = np.argsort(first, kind="stable")
    return make_message_step(step.src[first[order]], step.dst[first[order]], nbytes[order],
                             step.reduce[first[order]], lambda: step)


def concat_steps(*steps: Step) -> Step:
    """Merge steps into one (their transfers run in the same step); message steps stay messages."""
    if any(s.is_message for s in steps):
        return make_message_step(*(np.concatenate([getattr(s, f) for s in steps]) for f in
                                   ("src", "dst", "nbytes", "reduce")),
                                 lambda: concat_steps(*(s.chunks() for s in steps)))
    return Step(*(np.concatenate([getattr(s, f) for s in steps]) for f in
                  ("src", "dst", "nbytes", "reduce", "chunk_lo", "chunk_hi")))


class LazySteps(Sequence):
    """Steps made on demand, so a 4096-rank ring never holds 8190 steps at once."""

    def __init__(self, count: int, make: Callable[[int], Step]):
        self._count = count
        self._make = make

    def __len__(self):
        return self._count

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self._count))]
        if k < 0:
            k += self._count
        if not 0 <= k < self._count:
            raise IndexError(k)
        return self._make(k)


@dataclass(frozen=True)
class Schedule:
    """An algorithm's plan for one collective call.

    Attributes
    ----------
    args : CollectiveArgs
        The call it implements.
    num_chunks : int
        Chunks the data is cut into for verification. For allgather, reducescatter and
        sendrecv a multiple of p (rank r owns chunks ``[r*C/p, (r+1)*C/p)``); for alltoall a
        multiple of p*p (block i*p+j goes from rank i to rank j); otherwise free.
    steps : Sequence[Step]
    chunk_bytes : np.ndarray
        Bytes of each chunk (sums to the data a chunk index space covers).
    algorithm : str
    """

    args: CollectiveArgs
    num_chunks: int
    steps: Sequence[Step]
    chunk_bytes: np.ndarray
    algorithm: str = "custom"
    notes: dict = field(default_factory=dict)
    chunk_owner: np.ndarray | None = None
    """Block each chunk belongs to (rank for per-rank collectives, i*p+j for alltoall), when
    chunks are not laid out block-major (e.g. CCL-buffer loops); None: block-major."""
    barriers: tuple = ()
    """Step indices k (0 < k < len(steps), increasing) before which all ranks synchronise: no
    rank enters step k before every rank has finished steps 0..k-1 (it costs no time by
    itself). CCL-buffer loops put one before each loop after the first."""
    streamed: bool = False
    """Whether a transfer that continues a stream pays no per-step cost: with it, a transfer of step
    k > 0 between a (sender, receiver) pair that also had a transfer in step k - 1 starts as soon as
    both ranks are in step k, without the per-step overhead, the path latency or its regime's
    overhead (a pipelined chain's later segments: the library keeps several slots in flight on a
    connection, so the handshake and latency of one segment overlap the segment before it). The
    first segment of every hop pays them. False: every transfer pays them."""
    protocol_bytes: int | tuple | None = None
    """The message size the library chooses its protocol by, for every transfer of the schedule
    (message regimes, :class:`hcsim.engine.regimes.MessageRegimes`): a pipelined chain cuts one
    buffer into segments, but its library picks one protocol for the buffer; or a tuple of one per
    step (CCL-buffer loops of such a schedule, each piece its own). None: each transfer's own
    message (:func:`hcsim.engine.regimes.message_bytes`). A streamed transfer never continues a
    stream across a barrier."""
    in_network: bool = False
    """Whether the schedule has one endpoint besides its p ranks: index p is the switch every rank
    is linked to, which reduces what it receives and multicasts what it sends (NVLink SHARP:
    NCCL's NVLS). It holds no data of its own, and the postcondition is checked on the ranks
    alone. The engine finds the switch (the topology node adjacent to every rank whose
    ``in_network_efficiency`` is set) and charges its transfers at that share of the link rate."""
    in_network_factor: float | tuple = 1.0
    """An in-network schedule's transfers cost this many times their bytes besides the switch's efficiency
    (the library's per-chunk cost at this call's chunk size: :func:`hcsim.algorithms.nvls.chunk_factor`); or a
    tuple of one per step (CCL-buffer loops, each piece its own). The event-driven engine applies it; the
    analytical mode takes the time from the algorithm's closed form, which must apply the same factor itself
    (``nvls.cost_allreduce`` does): a closed form of a user's algorithm that ignores it disagrees with the
    engine. Checked by :func:`in_network_factors`."""

    @property
    def p(self) -> int:
        return self.args.p

    @property
    def endpoints(self) -> int:
        """Transfer endpoints: the p ranks, and the switch when :attr:`in_network`."""
        return self.args.p + bool(self.in_network)


def in_network_factors(schedule) -> tuple[float, ...]:
    """A schedule's :attr:`Schedule.in_network_factor`, one per step, or one line naming what is wrong.

    Any real number >= 1 (a numpy scalar too) stands for every step; a sequence must give one per step.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> in_network_factors(SimpleNamespace(in_network_factor=np.float32(1.5), steps=[(), ()]))
    (1.5, 1.5)
    >>> in_network_factors(SimpleNamespace(in_network_factor=[1.0, 2.0, 3.0], steps=[(), ()]))
    Traceback (most recent call last):
    ...
    hcsim.errors.ScheduleError: schedule.in_network_factor: 3 factors for 2 steps (one per step, or one number)
    """
    factor, n = getattr(schedule, "in_network_factor", 1.0), len(schedule.steps)
    per_step = isinstance(factor, (list, tuple, np.ndarray))
    each = list(factor) if per_step else [factor] * n
    if len(each) != n:
        raise ScheduleError(f"schedule.in_network_factor: {len(each)} factors for {n} steps (one per step, or one number)")
    for k, f in enumerate(each):
        if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) or not np.isfinite(f) or f < 1:
            raise ScheduleError(f"schedule.in_network_factor = {f!r}{f' (step {k})' if per_step else ''}: a finite "
                                f"number >= 1, or one per step ({n} steps)")
    return tuple(float(f) for f in each)


MAX_SPLIT_PARTS = 1 << 26
"""Most pieces :func:`split_bytes` cuts a size into (an array of 512 MB)."""


def split_bytes(nbytes: int, parts: int) -> np.ndarray:
    """Cut ``nbytes`` into ``parts`` chunk sizes differing by at most one byte."""
    if not is_int(nbytes) or not 0 <= nbytes <= MAX_SIZE_BYTES:
        raise bad_value("nbytes", nbytes, f"a whole number of bytes from 0 to {MAX_SIZE_BYTES}")
    if not is_int(parts) or not 1 <= parts <= MAX_SPLIT_PARTS:
        raise bad_value("parts", parts, f"a whole number from 1 to {MAX_SPLIT_PARTS}")
    parts = int(parts)
    base, extra = divmod(int(nbytes), parts)
    sizes = np.full(parts, base, dtype=np.int64)
    sizes[:extra] += 1
    return sizes


class ChunkSpace:
    """Chunk sizes with O(1) bytes of any chunk range (prefix sums)."""

    def __init__(self, chunk_bytes: np.ndarray):
        self.chunk_bytes = np.asarray(chunk_bytes, dtype=np.int64)
        self.prefix = np.concatenate([[0], np.cumsum(self.chunk_bytes)])

    @property
    def count(self) -> int:
        return len(self.chunk_bytes)

    def range_bytes(self, lo, hi):
        """Bytes of chunks ``[lo, hi)`` (scalars or arrays)."""
        return self.prefix[np.asarray(hi)] - self.prefix[np.asarray(lo)]


def data_bytes(args: CollectiveArgs) -> int:
    """Bytes the chunk index space covers: the whole alltoall matrix is p x the send buffer."""
    if args.collective in ("alltoall", "sendrecv"):
        return args.nbytes * args.p
    if args.collective == "alltoallv":
        return int(sum(sum(row) for row in args.send_matrix))
    return args.nbytes


def block_bytes(args: CollectiveArgs) -> np.ndarray:
    """Bytes of each of the collective's natural blocks: p per-rank blocks, p*p alltoall blocks
    (row i = from rank i), or one block for the whole buffer."""
    if args.collective == "alltoallv":
        return np.asarray(args.send_matrix, dtype=np.int64).ravel()
    if args.collective == "alltoall":
        return split_bytes(data_bytes(args), args.p * args.p)
    if args.collective in PER_RANK_BLOCKS:
        return split_bytes(data_bytes(args), args.p)
    return split_bytes(args.nbytes, 1)


def check_structure(schedule: Schedule) -> None:
    """Cheap checks every schedule must pass before it is simulated (any size)."""
    p = schedule.endpoints if isinstance(schedule, Schedule) else schedule.p
    c = schedule.num_chunks
    if c < 1 or len(schedule.chunk_bytes) != c:
        raise ScheduleError(f"schedule.num_chunks = {c}: must be >= 1 and match chunk_bytes ({len(schedule.chunk_bytes)})")
    for k, step in enumerate(schedule.steps):
        if not (len(step.src) == len(step.dst) == len(step.nbytes) == len(step.reduce)
                and (step.is_message or len(step.src) == len(step.chunk_lo) == len(step.chunk_hi))):
            raise ScheduleError(f"step {k}: transfer arrays differ in length")
        if len(step) == 0:
            continue
        bad = (step.src < 0) | (step.src >= p) | (step.dst < 0) | (step.dst >= p)
        if bad.any():
            i = int(np.argmax(bad))
            raise ScheduleError(f"step {k} transfer {i}: rank {int(step.src[i])}->{int(step.dst[i])} outside 0..{p - 1}")
        if (step.src == step.dst).any():
            i = int(np.argmax(step.src == step.dst))
            raise ScheduleError(f"step {k} transfer {i}: source and destination are both rank {int(step.src[i])}")
        if (step.nbytes < 0).any():
            raise ScheduleError(f"step {k}: negative byte count")
    check_barriers(schedule)


def check_streaming(schedule) -> None:
    """``streamed`` must be True or False and ``protocol_bytes`` None, a whole number of bytes, or one per
    step (a schedule without them, a user's object, has neither)."""
    streamed = getattr(schedule, "streamed", False)
    if not isinstance(streamed, (bool, np.bool_)):
        raise ScheduleError(f"schedule.streamed = {streamed!r}: True or False")
    pb = getattr(schedule, "protocol_bytes", None)
    if pb is None:
        return
    n = len(schedule.steps)
    each = pb if isinstance(pb, tuple) else (pb,)
    if (isinstance(pb, tuple) and len(pb) != n) or not all(is_int(x) and 0 <= x <= MAX_SIZE_BYTES for x in each):
        raise ScheduleError(f"schedule.protocol_bytes = {pb!r}: None, a whole number of bytes from 0 to "
                            f"{MAX_SIZE_BYTES}, or a tuple of one per step ({n})")


def check_barriers(schedule: Schedule) -> None:
    """Barriers must be increasing step indices strictly inside the schedule."""
    b = schedule.barriers
    n = len(schedule.steps)
    if not isinstance(b, tuple) or any(not is_int(k) for k in b):
        raise ScheduleError(f"schedule.barriers = {b!r}: a tuple of step indices")
    if any(not 0 < k < n for k in b) or any(x >= y for x, y in zip(b[:-1], b[1:], strict=True)):
        raise ScheduleError(f"schedule.barriers = {b!r}: increasing step indices from 1 to {n - 1}")
