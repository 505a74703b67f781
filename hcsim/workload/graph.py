"""The operation graph of a job: communicators, operations, streams and events.

A :class:`Workload` is a list of operations in program order. Every operation runs on one
*stream* of each rank it involves; a rank is an NPU, numbered in the topology's rank order
(``Topology.npus``). On one rank, the operations of one stream run one after another in
list order; operations on different streams of a rank overlap. Order across streams is given
the way ACL gives it: an operation's ``after`` names earlier operations it waits for on the
same rank (``aclrtRecordEvent`` after those, ``aclrtStreamWaitEvent`` before this one), and
:class:`RecordEvent` / :class:`WaitEvent` do the same with a named event. Order across ranks
comes only from communication: a collective's transfer starts when both its ranks have
reached it, and a :class:`SendRecv` when the sender and the receiver both have.

The graph is data: building it runs nothing. :func:`hcsim.workload.run` (the engine) plays it
on one network, where every operation's flows share links and NPU endpoints max-min fairly.

Examples
--------
Data-parallel gradient AllReduce on its own stream, overlapped with backward compute:

>>> w = Workload(name="overlap")
>>> world = w.communicator("world", range(4))
>>> _ = w.compute("backward", ranks=range(4), duration_s=2e-3)
>>> _ = w.collective("grad_allreduce", world, "allreduce", size_bytes=64 << 20, stream="comm")
>>> [op.name for op in w.ops]
['backward', 'grad_allreduce']
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass, field

from ..errors import ConfigError, HcsimError, bad_value, is_int, is_real

COMPUTE_STREAM = "compute"
"""Default stream of compute tasks."""

COMM_STREAM = "comm"
"""Default stream of collectives and send/recv."""

REDUCE_OPS = ("sum", "avg", "max", "min", "prod")
"""Reduce operations (HCCL's HcclReduceOp: sum, prod, max, min; avg as sum then a scale)."""


def _name(field_name: str, value) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise bad_value(field_name, value, "a non-empty name of at most 200 characters")
    return value


def _ranks(field_name: str, ranks, world: int | None = None) -> tuple[int, ...]:
    from ..limits import MAX_NPUS

    if isinstance(ranks, (str, bytes)):
        raise bad_value(field_name, ranks, "a list of rank numbers")
    try:
        out = tuple(itertools.islice(ranks, MAX_NPUS + 1))  # range(10**12) is refused, not materialised
    except TypeError:
        raise bad_value(field_name, ranks, "a list of rank numbers") from None
    if len(out) > MAX_NPUS:
        raise bad_value(field_name, f"more than {MAX_NPUS} ranks", f"at most {MAX_NPUS} rank numbers (hcsim.limits.MAX_NPUS)")
    for r in out:
        if not is_int(r) or r < 0 or (world is not None and r >= world):
            allowed = f"rank numbers from 0 to {world - 1}" if world is not None else "rank numbers >= 0"
            raise bad_value(field_name, r, allowed)
    out = tuple(int(r) for r in out)
    if not out:
        raise bad_value(field_name, ranks, "at least one rank")
    if len(set(out)) != len(out):
        raise bad_value(field_name, ranks, "distinct ranks (one rank appears twice)")
    return out


def _byte_count(field_name: str, value) -> int:
    from ..limits import MAX_SIZE_BYTES

    if not is_int(value) or not 0 <= value <= MAX_SIZE_BYTES:
        raise bad_value(field_name, value, f"a whole byte count from 0 to {MAX_SIZE_BYTES} (1 PiB)")
    return int(value)


def _check_algorithm(name: str, collective: str, algorithm) -> None:
    """``algorithm`` is None, ``"auto"``, a callable or a name :func:`get_algorithm` knows."""
    if algorithm is None or (isinstance(algorithm, str) and algorithm == "auto") or callable(algorithm):
        return
    from ..algorithms.registry import AlgorithmSpec, get_algorithm

    if isinstance(algorithm, AlgorithmSpec):
        return
    if not isinstance(algorithm, str):
        raise bad_value(f"op {name!r}: algorithm", algorithm,
                        "an algorithm name (hcsim algos), 'auto', None (hcsim's default) or a callable")
    try:
        get_algorithm(collective, algorithm)
    except HcsimError as exc:
        raise ConfigError(f"op {name!r}: {exc}") from None


def _seconds(field_name: str, value) -> float:
    if not is_real(value) or not math.isfinite(value) or not 0 <= value <= 1e9:
        raise bad_value(field_name, value, "seconds from 0 to 1e9")
    return float(value)


@dataclass(frozen=True)
class Communicator:
    """An ordered group of ranks that collectives run on (HCCL's ``HcclComm``).

    Attributes
    ----------
    name : str
    ranks : tuple of int
        Global ranks (the topology's rank order); collective rank i is ``ranks[i]``.
    """

    name: str
    ranks: tuple[int, ...]

    def __post_init__(self):
        _name("communicator.name", self.name)
        object.__setattr__(self, "ranks", _ranks(f"communicator {self.name!r}: ranks", self.ranks))

    @property
    def size(self) -> int:
        return len(self.ranks)


@dataclass(frozen=True)
class Op:
    """What every operation has.

    Attributes
    ----------
    name : str
        Unique in its workload.
    stream : str
        The stream it runs on, on each of its ranks.
    after : tuple of str
        Earlier operations it waits for, on each of its ranks that they involve (an
        operation that does not involve a rank is waited for as a whole: until every one
        of its ranks is done).
    """

    name: str
    stream: str
    after: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return type(self).__name__.lower()

    def involved(self) -> tuple[int, ...]:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True)
class Compute(Op):
    """Compute on each of ``ranks`` (each rank independently).

    Either ``duration_s`` (the time alone on a full-speed NPU), or ``flops`` and
    ``bytes_moved`` of ``dtype``, which the run turns into a time through the NPU's roofline
    (:class:`hcsim.compute.ComputeSpec` of the topology's NPU). Tasks on one NPU that run at
    the same time (on different streams) share its compute evenly (processor sharing).
    """

    ranks: tuple[int, ...] = ()
    duration_s: float | None = 0.0
    flops: float = 0.0
    bytes_moved: float = 0.0
    dtype: str = "fp16"

    def involved(self) -> tuple[int, ...]:
        return self.ranks


@dataclass(frozen=True)
class Collective(Op):
    """A collective call on a communicator.

    ``size_bytes`` follows nccl-tests' convention (per-rank buffer for allreduce, broadcast,
    reduce; the gathered total for allgather, reducescatter, scatter, gather, alltoall).
    ``algorithm`` is a registered name, ``"auto"`` (what HCCL picks for this group's layout)
    or None (hcsim's default for the collective).
    """

    comm: Communicator | None = None
    collective: str = "allreduce"
    size_bytes: int = 0
    algorithm: str | None = "auto"
    root: int = 0
    reduce_op: str = "sum"
    dtype: str | None = None
    send_matrix: tuple | None = None

    def involved(self) -> tuple[int, ...]:
        return self.comm.ranks


@dataclass(frozen=True)
class SendRecv(Op):
    """A point-to-point message of ``size_bytes`` from rank ``src`` to rank ``dst``
    (HcclSend / HcclRecv): both sides wait for each other, then the bytes move."""

    src: int = 0
    dst: int = 0
    size_bytes: int = 0

    def involved(self) -> tuple[int, ...]:
        return (self.src, self.dst)


@dataclass(frozen=True)
class RecordEvent(Op):
    """``aclrtRecordEvent``: on each of ``ranks``, marks ``event`` done once the stream's
    earlier work there is done."""

    ranks: tuple[int, ...] = ()
    event: str = ""

    def involved(self) -> tuple[int, ...]:
        return self.ranks


@dataclass(frozen=True)
class WaitEvent(Op):
    """``aclrtStreamWaitEvent``: on each of ``ranks``, the stream's later work waits until
    ``event`` was recorded there (an event never recorded on a rank is an error)."""

    ranks: tuple[int, ...] = ()
    event: str = ""

    def involved(self) -> tuple[int, ...]:
        return self.ranks


@dataclass
class Workload:
    """Operations in program order, and the communicators they use.

    Build it with the methods below (each checks its arguments and returns the new
    operation), or append :class:`Op` objects to ``ops`` and call :meth:`check`.
    """

    name: str = "workload"
    ops: list = field(default_factory=list)
    communicators: dict = field(default_factory=dict)
    _names: set = field(default_factory=set, repr=False)

    def communicator(self, name: str, ranks) -> Communicator:
        """Add (or return the identical existing) communicator ``name`` over ``ranks``."""
        _name("communicator.name", name)
        comm = Communicator(name, _ranks(f"communicator {name!r}: ranks", ranks))
        old = self.communicators.get(name)
        if old is not None and old != comm:
            raise bad_value("communicator", name, "a new name: it exists with other ranks")
        self.communicators[name] = comm
        return comm

    def _add(self, op: Op) -> Op:
        _name("op.name", op.name)
        if op.name in self._names:
            raise bad_value("op.name", op.name, "a name not used before in this workload")
        _name(f"op {op.name!r}: stream", op.stream)
        after = op.after
        if isinstance(after, str):
            after = (after,)
        try:
            after = tuple(after)
        except TypeError:
            raise bad_value(f"op {op.name!r}: after", op.after, "names of earlier operations") from None
        for a in after:
            if not isinstance(a, str) or a not in self._names:
                raise bad_value(f"op {op.name!r}: after", a, "the name of an earlier operation")
        object.__setattr__(op, "after", after)
        self._names.add(op.name)
        self.ops.append(op)
        return op

    def compute(self, name: str, ranks, duration_s: float | None = None, *, flops: float = 0.0,
                bytes_moved: float = 0.0, dtype: str = "fp16", stream: str = COMPUTE_STREAM, after=()) -> Compute:
        """Append a compute task on each of ``ranks``: ``duration_s`` seconds, or ``flops`` and
        ``bytes_moved`` through the NPU's roofline at run time."""
        ranks = _ranks(f"op {name!r}: ranks", [ranks] if isinstance(ranks, numbers.Integral) else ranks)
        if duration_s is None:
            for field_name, v in (("flops", flops), ("bytes_moved", bytes_moved)):
                if not is_real(v) or not math.isfinite(v) or not 0 <= v <= 1e30:
                    raise bad_value(f"op {name!r}: {field_name}", v, "a number from 0 to 1e30")
            from ..dtypes import parse_dtype

            return self._add(Compute(name, stream, after, ranks, None, float(flops), float(bytes_moved),
                                     parse_dtype(dtype, f"op {name!r}: dtype")))
        return self._add(Compute(name, stream, after, ranks, _seconds(f"op {name!r}: duration_s", duration_s)))

    def collective(self, name: str, comm, collective: str, size_bytes: int, *, algorithm: str | None = "auto",
                   root: int = 0, reduce_op: str = "sum", dtype: str | None = None, send_matrix=None,
                   stream: str = COMM_STREAM, after=()) -> Collective:
        """Append a collective on ``comm`` (a :class:`Communicator` or the name of one)."""
        if isinstance(comm, str):
            if comm not in self.communicators:
                raise bad_value(f"op {name!r}: comm", comm, "a communicator defined before: "
                                + (", ".join(self.communicators) or "none yet"))
            comm = self.communicators[comm]
        if not isinstance(comm, Communicator):
            raise bad_value(f"op {name!r}: comm", comm, "a Communicator or a communicator's name")
        from ..algorithms.schedule import COLLECTIVES

        if not isinstance(collective, str) or collective not in COLLECTIVES:
            raise bad_value(f"op {name!r}: collective", collective, "one of " + ", ".join(COLLECTIVES))
        if not isinstance(reduce_op, str) or reduce_op not in REDUCE_OPS:
            raise bad_value(f"op {name!r}: reduce_op", reduce_op, "one of " + ", ".join(REDUCE_OPS))
        if dtype is not None:
            from ..dtypes import parse_dtype

            dtype = parse_dtype(dtype, f"op {name!r}: dtype")
        size_bytes = _byte_count(f"op {name!r}: size_bytes", size_bytes)
        if not is_int(root) or not 0 <= root < comm.size:
            raise bad_value(f"op {name!r}: root", root, f"a rank of communicator {comm.name!r}, 0 to {comm.size - 1}")
        _check_algorithm(name, collective, algorithm)
        matrix = None
        if send_matrix is not None:
            from ..api import _send_matrix

            try:
                checked = _send_matrix(send_matrix, comm.size, collective)
            except HcsimError as exc:
                raise ConfigError(f"op {name!r}: {exc}") from None
            matrix = tuple(tuple(int(x) for x in row) for row in checked)
        return self._add(Collective(name, stream, after, comm, collective, size_bytes, algorithm, int(root),
                                    reduce_op, dtype, matrix))

    def send(self, name: str, src: int, dst: int, size_bytes: int, *, stream: str = COMM_STREAM,
             after=()) -> SendRecv:
        """Append a point-to-point message of ``size_bytes`` from rank ``src`` to ``dst``."""
        src, dst = _ranks(f"op {name!r}: src/dst", (src, dst))
        return self._add(SendRecv(name, stream, after, src, dst, _byte_count(f"op {name!r}: size_bytes", size_bytes)))

    def record(self, name: str, ranks, event: str, *, stream: str) -> RecordEvent:
        """Append ``aclrtRecordEvent(event, stream)`` on each of ``ranks``."""
        ranks = _ranks(f"op {name!r}: ranks", [ranks] if isinstance(ranks, numbers.Integral) else ranks)
        return self._add(RecordEvent(name, stream, (), ranks, _name(f"op {name!r}: event", event)))

    def wait(self, name: str, ranks, event: str, *, stream: str) -> WaitEvent:
        """Append ``aclrtStreamWaitEvent(stream, event)`` on each of ``ranks``."""
        ranks = _ranks(f"op {name!r}: ranks", [ranks] if isinstance(ranks, numbers.Integral) else ranks)
        return self._add(WaitEvent(name, stream, (), ranks, _name(f"op {name!r}: event", event)))

    def ranks(self) -> tuple[int, ...]:
        """Every rank some operation involves, in order."""
        return tuple(sorted({r for op in self.ops for r in op.involved()}))

    def check(self, world: int) -> None:
        """Check every rank is below ``world`` and every wait has a record before it."""
        recorded: set = set()
        for op in self.ops:
            for r in op.involved():
                if r >= world:
                    raise bad_value(f"op {op.name!r}: rank", r, f"rank numbers from 0 to {world - 1} "
                                    f"(the topology has {world} NPUs)")
            if isinstance(op, RecordEvent):
                recorded.update((r, op.event) for r in op.ranks)
            elif isinstance(op, WaitEvent):
                missing = [r for r in op.ranks if (r, op.event) not in recorded]
                if missing:
                    raise ConfigError(f"op {op.name!r}: event = {op.event!r}: waited for on rank {missing[0]} "
                                      "before any record of it there")
