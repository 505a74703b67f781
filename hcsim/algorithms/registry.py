"""Registry of algorithms per collective, keyed by name; a user's callable is accepted too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ScheduleError, bad_value, unknown_name
from .cost import AlphaBetaGamma
from .schedule import COLLECTIVES, ROOTED, CollectiveArgs, Schedule

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
        ``cost(args, abg) -> seconds``, the closed form (None for a user algorithm).
    summary, source : str
        One line on what it does; where its cost formula comes from.
    """

    name: str
    collective: str
    build: BuildFn
    cost: CostFn | None = None
    summary: str = ""
    source: str = ""
    user: bool = False


REGISTRY: dict[str, dict[str, AlgorithmSpec]] = {c: {} for c in COLLECTIVES}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    """Add an algorithm to the registry (its name must be new for its collective)."""
    check_collective(spec.collective)
    if spec.name in REGISTRY[spec.collective]:
        raise bad_value("algorithm", spec.name, f"already registered for {spec.collective}")
    REGISTRY[spec.collective][spec.name] = spec
    return spec


def check_collective(collective: str) -> str:
    if collective not in COLLECTIVES:
        raise unknown_name("collective", collective, COLLECTIVES)
    return collective


def algorithms_for(collective: str) -> list[str]:
    """Names of the algorithms registered for ``collective``."""
    return list(REGISTRY[check_collective(collective)])


def get_algorithm(collective: str, algorithm) -> AlgorithmSpec:
    """Look up an algorithm by name, or wrap a user's ``build(args) -> Schedule`` callable."""
    check_collective(collective)
    if isinstance(algorithm, AlgorithmSpec):
        return algorithm
    if callable(algorithm):
        name = getattr(algorithm, "__name__", "custom")
        return AlgorithmSpec(name, collective, algorithm, None, "user algorithm", "user", user=True)
    known = REGISTRY[collective]
    if algorithm not in known:
        raise unknown_name(f"algorithm for {collective}", algorithm, known)
    return known[algorithm]


def make_args(collective: str, p: int, nbytes: int, root: int = 0) -> CollectiveArgs:
    check_collective(collective)
    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        raise bad_value("ranks", p, "at least 2 ranks")
    if collective in ROOTED:
        if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < p:
            raise bad_value("root", root, f"a rank from 0 to {p - 1}")
    return CollectiveArgs(collective, p, int(nbytes), int(root))


def build_schedule(collective: str, algorithm, p: int, nbytes: int, root: int = 0) -> Schedule:
    """Schedule ``collective`` on ``p`` ranks with ``algorithm`` (name or callable).

    Examples
    --------
    >>> s = build_schedule("allgather", "ring", p=4, nbytes=4096)
    >>> len(s.steps), int(s.steps[0].nbytes[0])
    (3, 1024)
    """
    spec = get_algorithm(collective, algorithm)
    return run_builder(spec, make_args(collective, p, nbytes, root))


def run_builder(spec: AlgorithmSpec, args: CollectiveArgs) -> Schedule:
    """Call an algorithm's builder and check it answered the call it was given."""
    sched = spec.build(args)
    if not isinstance(sched, Schedule):
        raise ScheduleError(f"algorithm {spec.name!r} returned {type(sched).__name__}, not a Schedule")
    if sched.args != args:
        raise ScheduleError(f"algorithm {spec.name!r} returned a schedule for {sched.args}, asked for {args}")
    return sched
