"""Registry of algorithms per collective, keyed by name; a user's callable is accepted too."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import HcsimError, ScheduleError, bad_value, is_int, unknown_name
from ..limits import MAX_ALLTOALLV_RANKS, MAX_CALL_RANKS, MAX_SIZE_BYTES, MAX_USER_STEPS
from .cost import AlphaBetaGamma
from .schedule import COLLECTIVES, ROOTED, CollectiveArgs, Schedule, split_bytes

BuildFn = Callable[[CollectiveArgs], Schedule]
CostFn = Callable[[CollectiveArgs, AlphaBetaGamma], float]


@dataclass(frozen=True)
class AlgorithmSpec:
    """An algorithm for one collective: how to schedule it and its closed-form cost.

    Attributes
    ----------
    name : str
    collective : str
    build : callable
        ``build(args) -> Schedule``; a pure function.
    cost : callable or None
        ``cost(args, abg) -> seconds``, the closed form (None for a user algorithm). For a
        hierarchical algorithm (``levels > 1``) ``abg`` is a tuple with one
        :class:`AlphaBetaGamma` per level (0: inside a server, 1: between servers of a pod,
        2: between pods).
    summary, source : str
        One line on what it does; where its cost formula comes from.
    levels : int
        1 for a flat algorithm; 2 or 3 for one that follows the server/pod layout.
    shape : callable or None
        ``shape(args) -> hashable``: what of the call's size decides the schedule's structure (its
        steps, rank pairs and chunk ranges), for an algorithm whose structure depends on the size
        (the pipelined chain's segment count); None (default): the structure is the same at every
        size, which the analytical fast path and the work probes rely on. With a shape, the fast
        path, the path-parameter cache and the probes are kept per shape: the structure must be
        the same at every size of one shape (tests/test_analytical_fast.py).
    in_network : bool
        The algorithm runs through a switch that reduces and multicasts in the network
        (:attr:`hcsim.algorithms.schedule.Schedule.in_network`): ``"best"`` races it only where
        the ranks share one (:func:`hcsim.engine.des.shares_in_network_switch`).
    equal_servers : bool
        The schedule joins same-index ranks of different servers, so it needs servers of equal
        size (``pipeline``, ``railring``): ``"best"`` and a sweep's default list leave it out
        where the ranks make servers of unequal size.
    """

    name: str
    collective: str
    build: BuildFn
    cost: CostFn | None = None
    summary: str = ""
    source: str = ""
    user: bool = False
    levels: int = 1
    shape: Callable | None = None
    in_network: bool = False
    equal_servers: bool = False


REGISTRY: dict[str, dict[str, AlgorithmSpec]] = {c: {} for c in COLLECTIVES}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    """Add an algorithm to the registry (its name must be new for its collective). A spec whose
    builder is not hcsim's own is registered as a user's (``user=True``): its schedules are
    checked and verified as a user's algorithm's are, and its exceptions reported in one line."""
    spec = _checked_spec(spec)
    if spec.name in REGISTRY[spec.collective]:
        raise bad_value("algorithm", spec.name, f"already registered for {spec.collective}")
    REGISTRY[spec.collective][spec.name] = spec
    return spec


def _checked_spec(spec, collective: str | None = None) -> AlgorithmSpec:
    """``spec`` if its fields are what an algorithm needs (and it is for ``collective``, if given),
    marked ``user=True`` when its builder is not hcsim's own; else a one-line error."""
    if not isinstance(spec, AlgorithmSpec):
        raise bad_value("spec", spec, "an hcsim.AlgorithmSpec(name, collective, build, cost=None, ...)")
    if not isinstance(spec.name, str) or not spec.name.strip() or "/" in spec.name or spec.name in ("auto", "best"):
        raise bad_value("spec.name", spec.name, "a new algorithm name: a non-empty string without '/', not 'auto' "
                        "or 'best'")
    check_collective(spec.collective)
    if collective is not None and spec.collective != collective:
        raise bad_value("spec.collective", spec.collective, f"{collective!r}, the collective it is used for")
    if not callable(spec.build):
        raise bad_value("spec.build", spec.build, "a function build(args) -> Schedule")
    if spec.cost is not None and not callable(spec.cost):
        raise bad_value("spec.cost", spec.cost, "a function cost(args, AlphaBetaGamma) -> seconds, or None")
    if not is_int(spec.levels) or not 1 <= spec.levels <= 3:
        raise bad_value("spec.levels", spec.levels, "1, 2 or 3 (a flat algorithm, or a level0/level1[/level2] one)")
    if spec.shape is not None and not callable(spec.shape):
        raise bad_value("spec.shape", spec.shape, "None, or a function shape(args) -> what of the size decides the "
                        "schedule's structure")
    if not isinstance(spec.user, (bool, np.bool_)):
        raise bad_value("spec.user", spec.user, "True or False (whether a user, not hcsim, wrote it)")
    if not isinstance(spec.equal_servers, (bool, np.bool_)):
        raise bad_value("spec.equal_servers", spec.equal_servers, "True or False (whether it needs servers of equal size)")
    for field in ("summary", "source"):
        if not isinstance(getattr(spec, field), str):
            raise bad_value(f"spec.{field}", getattr(spec, field), "a str")
    own = str(getattr(spec.build, "__module__", "") or "").startswith("hcsim.")
    return spec if spec.user or own else dataclasses.replace(spec, user=True)


def check_collective(collective: str) -> str:
    if not isinstance(collective, str) or collective not in COLLECTIVES:
        raise unknown_name("collective", collective, COLLECTIVES)
    return collective


def algorithms_for(collective: str) -> list[str]:
    """Names of the algorithms registered for ``collective``."""
    return list(REGISTRY[check_collective(collective)])


def get_algorithm(collective: str, algorithm) -> AlgorithmSpec:
    """Look up an algorithm by name, or wrap a user's ``build(args) -> Schedule`` callable."""
    check_collective(collective)
    if isinstance(algorithm, AlgorithmSpec):
        return _checked_spec(algorithm, collective)
    if callable(algorithm):
        name = getattr(algorithm, "__name__", "custom")
        return AlgorithmSpec(name, collective, algorithm, None, "user algorithm", "user", user=True)
    known = REGISTRY[collective]
    if isinstance(algorithm, str) and algorithm in known:
        return known[algorithm]
    if isinstance(algorithm, str) and "/" in algorithm and RESOLVERS:
        return RESOLVERS[0](collective, algorithm)
    raise unknown_name(f"algorithm for {collective}", algorithm,
                       list(known) + ["auto", "best"] + (["<level0>/<level1>[/<level2>]"] if RESOLVERS else []))


RESOLVERS: list = []
"""Functions ``(collective, name) -> AlgorithmSpec`` for composed names such as ``mesh/ring``
(the hierarchy module installs one)."""


def make_args(collective: str, p: int, nbytes: int, root: int = 0, servers=(), pods=(),
              send_matrix=None) -> CollectiveArgs:
    """Validate and bundle a collective call (see :class:`CollectiveArgs`)."""
    check_collective(collective)
    if not is_int(p) or not 2 <= p <= MAX_CALL_RANKS:
        raise bad_value("ranks", p, f"from 2 to {MAX_CALL_RANKS} ranks (hcsim.limits.MAX_CALL_RANKS)")
    p = int(p)
    if not is_int(nbytes) or not 0 <= nbytes <= MAX_SIZE_BYTES:
        raise bad_value("nbytes", nbytes, f"a whole number of bytes from 0 to {MAX_SIZE_BYTES} (1 PiB)")
    if not is_int(root) or (collective in ROOTED and not 0 <= root < p):
        raise bad_value("root", root, f"a rank from 0 to {p - 1}")
    servers, pods = _counts("servers", servers), _counts("pods", pods)
    if servers and (sum(servers) != p or min(servers) < 1):
        raise bad_value("servers", servers, f"ranks per server, each >= 1, adding up to {p}")
    if pods and (not servers or sum(pods) != len(servers) or min(pods) < 1):
        raise bad_value("pods", pods, f"servers per pod, each >= 1, adding up to {len(servers)} servers")
    matrix = None
    if collective == "alltoallv":
        if p > MAX_ALLTOALLV_RANKS:  # its send matrix (and its schedule's blocks) hold p^2 byte counts
            raise bad_value("ranks", p, f"at most {MAX_ALLTOALLV_RANKS} ranks for alltoallv (its send matrix holds "
                            "p x p byte counts: hcsim.limits.MAX_ALLTOALLV_RANKS)")
        if send_matrix is None:  # uniform: the same as alltoall
            cells = split_bytes(int(nbytes) * p, p * p).reshape(p, p).tolist()
            total = int(nbytes) * p
        else:
            sizes = np.asarray(send_matrix)
            if sizes.shape != (p, p) or sizes.dtype.kind not in "iu" or (sizes < 0).any():  # (a timedelta is an np.integer)
                raise bad_value("send_matrix", f"array of shape {sizes.shape}",
                                f"a {p} x {p} matrix of byte counts >= 0 (row i: what rank i sends)")
            cells = sizes.tolist()  # Python ints: their sums cannot wrap as int64's do
            total = sum(map(sum, cells))
            if total <= 0:
                raise bad_value("send_matrix", "all zeros", "at least one byte to send")
            if total == sum(cells[i][i] for i in range(p)):  # a rank's block for itself stays in its own memory
                raise bad_value("send_matrix", "zero off its diagonal",
                                "at least one byte from one rank to another (row i, column j != i)")
            if -(-total // p) > MAX_SIZE_BYTES:
                raise bad_value("send_matrix", f"a mean send buffer of {-(-total // p)} bytes",
                                f"at most {MAX_SIZE_BYTES} bytes (1 PiB) a rank on average")
        matrix = tuple(map(tuple, cells))
        nbytes = -(-total // p)  # the mean send buffer, the size bandwidth is reported for
    elif send_matrix is not None:
        raise bad_value("send_matrix", "given", "only alltoallv takes a send matrix")
    return CollectiveArgs(collective, p, int(nbytes), int(root), servers, pods, matrix)


def _counts(field: str, value) -> tuple:
    """``servers`` or ``pods`` of :func:`make_args`: a sequence of whole counts, as a tuple of ints."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) \
            or (isinstance(value, np.ndarray) and value.ndim != 1) or len(value) > MAX_CALL_RANKS \
            or not all(is_int(x) for x in value):  # (the length first: a range of 10^9 is not walked)
        raise bad_value(field, value, "a list of whole counts (ranks per server, servers per pod)")
    return tuple(int(x) for x in value)


def build_schedule(collective: str, algorithm, p: int, nbytes: int, root: int = 0, servers=(), pods=(),
                   send_matrix=None) -> Schedule:
    """Schedule ``collective`` on ``p`` ranks with ``algorithm`` (name or callable).

    Examples
    --------
    >>> s = build_schedule("allgather", "ring", p=4, nbytes=4096)
    >>> len(s.steps), int(s.steps[0].nbytes[0])
    (3, 1024)
    """
    spec = get_algorithm(collective, algorithm)
    args = make_args(collective, p, nbytes, root, servers, pods, send_matrix)
    if not spec.user:
        from ..api import PROBE_RANKS, check_work

        if args.p > PROBE_RANKS:  # a schedule too large to hold is refused before it is built, as simulate() does
            check_work(spec, args, None, exact=False)
    return run_builder(spec, args)


def _call(args: CollectiveArgs) -> tuple:
    return (args.collective, args.p, args.nbytes, args.root, args.send_matrix)


def run_builder(spec: AlgorithmSpec, args: CollectiveArgs) -> Schedule:
    """Call an algorithm's builder and check it answered the call it was given.

    A user's builder that raises anything but an hcsim error is reported in one line
    (:class:`ScheduleError` naming the algorithm and the exception), not as its traceback."""
    if not spec.user:
        sched = spec.build(args)
    else:
        try:
            sched = spec.build(args)
        except HcsimError:
            raise
        except Exception as exc:  # a user's callable (or a class such as int given as one)
            raise ScheduleError(f"algorithm {spec.name!r} raised {type(exc).__name__} when called with the call's "
                                f"CollectiveArgs: {exc}") from None
    if not isinstance(sched, Schedule):
        raise ScheduleError(f"algorithm {spec.name!r} returned {type(sched).__name__}, not a Schedule")
    if _call(sched.args) != _call(args):  # the layout (servers, pods) is advice, not part of the call
        raise ScheduleError(f"algorithm {spec.name!r} returned a schedule for {sched.args}, asked for {args}")
    if spec.user:
        _check_shapes(spec.name, sched)
    return sched


def _check_shapes(name: str, sched: Schedule) -> None:
    """A user's schedule is made of what the engine reads: a sequence (list, tuple) of :class:`Step`,
    each of one-dimensional arrays of equal length (integer ranks, chunks and bytes, boolean
    reduce flags), moving some bytes in all; else one :class:`ScheduleError` line."""
    from .schedule import Step

    steps = sched.steps
    if not isinstance(steps, Sequence) or isinstance(steps, (str, bytes)):
        raise ScheduleError(f"algorithm {name!r}: schedule.steps is a {type(steps).__name__}, not a list of Step")
    if len(steps) > MAX_USER_STEPS:
        raise ScheduleError(f"algorithm {name!r}: its schedule holds {len(steps):,} steps, more than "
                            f"MAX_USER_STEPS = {MAX_USER_STEPS:,} (hcsim.limits)")
    moved = False
    for k, st in enumerate(steps):
        if not isinstance(st, Step):
            raise ScheduleError(f"algorithm {name!r}: step {k} is a {type(st).__name__}, not a Step")
        fields = [("src", st.src, "i"), ("dst", st.dst, "i"), ("nbytes", st.nbytes, "i"), ("reduce", st.reduce, "b")]
        if not st.is_message:
            fields += [("chunk_lo", st.chunk_lo, "i"), ("chunk_hi", st.chunk_hi, "i")]
        for field, a, kind in fields:
            if not isinstance(a, np.ndarray) or a.ndim != 1 or (a.dtype.kind not in ("iu" if kind == "i" else "b")):
                what = (f"{a.ndim}-dimensional {a.dtype}" if isinstance(a, np.ndarray) else type(a).__name__)
                raise ScheduleError(f"algorithm {name!r}: step {k}'s {field} is a {what}, not a one-dimensional "
                                    + ("integer" if kind == "i" else "boolean") + " array")
        if len({len(a) for _, a, _ in fields}) > 1:
            raise ScheduleError(f"algorithm {name!r}: step {k}: transfer arrays differ in length")
        moved = moved or bool((st.nbytes > 0).any())
    if not moved:
        raise ScheduleError(f"algorithm {name!r}: its schedule moves no bytes, but a {sched.args.collective} of "
                            f"{sched.args.nbytes} bytes on {sched.p} ranks moves data")
