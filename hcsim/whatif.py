"""What-if analysis: run a job (or one collective) as it is and perturbed, side by side.

A perturbation is a frozen description of one change; :func:`perturb` turns a scenario and a
list of them into a **new** scenario (a copied topology with the change made, a copied
workload, new run options) and never edits the original or a compiled topology in place
(docs/architecture.md, "What-if"). :func:`whatif` runs the baseline and each perturbation
and returns one row per case with the difference.

========================  =====================================================================
perturbation              what changes
========================  =====================================================================
:class:`FailLink`         both directions of a link are removed; traffic takes the remaining
                          minimum-hop paths (ECMP or spray over them)
:class:`FailNode`         every link of a node (a NIC, a switch, an NPU) is removed
:class:`FailServer`       every link of a server's NPUs and of the NICs only they use
:class:`DegradeLink`      one link (both directions): rate x factor, plus extra latency
:class:`DegradeTier`      every link of a tier (``roce``, ``hccs``, ...), the same way
:class:`Straggler`        one rank computes ``compute_factor`` x slower and/or starts late
:class:`BackgroundLoad`   another job's inelastic traffic: a directed link loses ``rate_Bps``
:class:`BackgroundJob`    another job's collectives on chosen ranks, sharing the network
                          max-min fairly with the job (elastic traffic)
:class:`EcmpSeed`         a different ECMP hash seed (another placement of flows on paths)
========================  =====================================================================

A cut that leaves two ranks of one communicator (or a send's two ends) with no path between
them is refused in one line naming the perturbations and the pair. Each can be given as an
object, as a mapping (scenario files' ``whatif:`` list) or as text (the command line's
``-p``): ``fail-link=leaf0,spine0``, ``fail-node=spine1``, ``fail-server=2``,
``degrade-link=leaf0,spine0:0.5[:2us]``, ``degrade-tier=roce:0.5[:1us]``,
``straggler=3:2[:100us]``, ``background-load=leaf0,spine0:10GBps``,
``background-job=0-7:allreduce:64M[:4]``, ``ecmp-seed=7``.

Examples
--------
A ring allreduce after 1 ms of compute; rank 2 computing twice as slowly delays the step by
exactly its extra millisecond (the ring waits for it):

>>> wl = {"topology": {"builder": "ring", "params": {"n": 4, "bandwidth_GBps": 1}},
...       "workload": {"communicators": {"all": "all"}, "ops": [
...           {"kind": "compute", "name": "c", "ranks": "all", "duration_us": 1000},
...           {"kind": "collective", "name": "ar", "comm": "all", "collective": "allreduce",
...            "size": 4000000, "algorithm": "ring", "after": ["c"]}]}}
>>> df = whatif(wl, ["straggler=2:2"])
>>> df[["case", "time_us", "delta_us"]].round(3).values.tolist()
[['baseline', 7000.0, 0.0], ['straggler=2:2', 8000.0, 1000.0]]
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from dataclasses import dataclass

from .errors import (
    ConfigError,
    HcsimError,
    TopologyError,
    WorkLimitError,
    bad_value,
    is_int,
    is_real,
)

BACKGROUND_PREFIX = "whatif.bg"
"""Name prefix of a :class:`BackgroundJob`'s operations (they are not the job's own work)."""

RUN_OPTIONS = ("routing", "ecmp_seed", "hccl", "speed", "start_s", "max_transfers", "max_flow_updates", "max_work")
"""Keyword options :func:`whatif_collective` passes on to :func:`hcsim.workload.run`."""

COLUMNS = ("case", "perturbation", "status", "reason", "time_us", "baseline_us", "delta_us", "delta_pct",
           "busiest_link", "busiest_utilization")
"""Columns of :func:`whatif`'s frame."""


# ---- the perturbations ------------------------------------------------------------------------

@dataclass(frozen=True)
class FailLink:
    """The link between ``a`` and ``b`` is down in both directions."""

    a: str
    b: str

    def label(self) -> str:
        return f"fail-link={self.a},{self.b}"

    def describe(self) -> str:
        return f"link {self.a} <-> {self.b} failed"


@dataclass(frozen=True)
class FailNode:
    """Every link of ``node`` (a NIC, a switch or an NPU) is down."""

    node: str

    def label(self) -> str:
        return f"fail-node={self.node}"

    def describe(self) -> str:
        return f"node {self.node} failed (all its links)"


@dataclass(frozen=True)
class FailServer:
    """Server ``server`` (its index, as ``NpuSpec.server``) is down: every link of its NPUs
    and of the NICs only they reach."""

    server: int

    def label(self) -> str:
        return f"fail-server={self.server}"

    def describe(self) -> str:
        return f"server {self.server} failed"


@dataclass(frozen=True)
class DegradeLink:
    """Both directions of the link ``a`` - ``b`` run at ``bandwidth_factor`` x their rate
    with ``extra_latency_s`` more latency (a factor above 1 is an upgrade)."""

    a: str
    b: str
    bandwidth_factor: float = 1.0
    extra_latency_s: float = 0.0

    def label(self) -> str:
        return f"degrade-link={self.a},{self.b}:{self.bandwidth_factor:g}" + _lat(self.extra_latency_s)

    def describe(self) -> str:
        return f"link {self.a} <-> {self.b} at {self.bandwidth_factor:g} x rate" + _plus(self.extra_latency_s)


@dataclass(frozen=True)
class DegradeTier:
    """Every link of ``tier`` runs at ``bandwidth_factor`` x its rate, ``extra_latency_s`` later."""

    tier: str
    bandwidth_factor: float = 1.0
    extra_latency_s: float = 0.0

    def label(self) -> str:
        return f"degrade-tier={self.tier}:{self.bandwidth_factor:g}" + _lat(self.extra_latency_s)

    def describe(self) -> str:
        return f"every {self.tier} link at {self.bandwidth_factor:g} x rate" + _plus(self.extra_latency_s)


@dataclass(frozen=True)
class Straggler:
    """Rank ``rank`` computes ``compute_factor`` x slower (2: twice as long) and starts its
    work ``late_start_s`` late."""

    rank: int
    compute_factor: float = 1.0
    late_start_s: float = 0.0

    def label(self) -> str:
        return f"straggler={self.rank}:{self.compute_factor:g}" + (
            f":{_time_text(self.late_start_s)}" if self.late_start_s else "")

    def describe(self) -> str:
        parts = [f"{self.compute_factor:g} x slower compute"] if self.compute_factor != 1 else []
        if self.late_start_s:
            parts.append(f"starts {_time_text(self.late_start_s)} late")
        return f"rank {self.rank}: " + (", ".join(parts) or "unchanged")


@dataclass(frozen=True)
class BackgroundLoad:
    """Another job's inelastic traffic takes ``rate_Bps`` of the directed link ``a -> b``
    for the whole run (the link's capacity drops by that much)."""

    a: str
    b: str
    rate_Bps: float

    def label(self) -> str:
        return f"background-load={self.a},{self.b}:{self.rate_Bps / 1e9:g}GBps"

    def describe(self) -> str:
        return f"{self.rate_Bps / 1e9:g} GB/s of other traffic on {self.a} -> {self.b}"


@dataclass(frozen=True)
class BackgroundJob:
    """Another job runs ``repeat`` back-to-back ``collective`` calls of ``size_bytes`` on the
    global ranks ``ranks`` (their own stream), from time 0, sharing links and NPU endpoints
    max-min fairly with the job. The job's time is its own operations' end."""

    ranks: tuple
    collective: str = "allreduce"
    size_bytes: int = 64 << 20
    repeat: int = 1
    algorithm: str = "auto"

    def label(self) -> str:
        from .units import format_size

        return (f"background-job={_ranks_text(self.ranks)}:{self.collective}:{format_size(self.size_bytes)}"
                + (f":{self.repeat}" if self.repeat != 1 else ""))

    def describe(self) -> str:
        from .units import format_size

        return (f"another job: {self.repeat} x {self.collective} {format_size(self.size_bytes)} on ranks "
                f"{_ranks_text(self.ranks)}")


@dataclass(frozen=True)
class EcmpSeed:
    """ECMP hashes flows onto equal-cost paths with ``seed``."""

    seed: int

    def label(self) -> str:
        return f"ecmp-seed={self.seed}"

    def describe(self) -> str:
        return f"ECMP seed {self.seed}"


PERTURBATIONS = {"fail-link": FailLink, "fail-node": FailNode, "fail-server": FailServer,
                 "degrade-link": DegradeLink, "degrade-tier": DegradeTier, "straggler": Straggler,
                 "background-load": BackgroundLoad, "background-job": BackgroundJob, "ecmp-seed": EcmpSeed}
"""Text name of each perturbation (``-p NAME=...``; scenario files use ``NAME`` with ``_``)."""

_TOPOLOGY_KINDS = (FailLink, FailNode, FailServer, DegradeLink, DegradeTier, BackgroundLoad)
_CUTS = (FailLink, FailNode, FailServer)


# ---- reading them -------------------------------------------------------------------------------

def parse_perturbation(value, field: str = "perturbation"):
    """A perturbation from an object, text (``fail-link=a,b``) or a mapping (``{fail_link: [a, b]}``).

    Checks types and ranges; names (nodes, ranks, tiers) are checked against the topology
    when the perturbation is applied.

    Examples
    --------
    >>> parse_perturbation("degrade-link=leaf0,spine0:0.5:2us")
    DegradeLink(a='leaf0', b='spine0', bandwidth_factor=0.5, extra_latency_s=2e-06)
    >>> parse_perturbation({"straggler": 3, "compute_factor": 2})
    Straggler(rank=3, compute_factor=2.0, late_start_s=0.0)
    """
    if isinstance(value, tuple(PERTURBATIONS.values())):
        return _checked(value, field)
    if isinstance(value, str):
        return _checked(_from_text(value, field), field)
    if isinstance(value, dict):
        return _checked(_from_mapping(value, field), field)
    raise bad_value(field, value, "a perturbation: text such as fail-link=leaf0,spine0, a mapping such as "
                    "{fail_link: [leaf0, spine0]}, or an hcsim.whatif object")


def _allowed_text() -> str:
    return ("NAME=ARGS with NAME one of " + ", ".join(PERTURBATIONS)
            + " (fail-link=A,B; degrade-link=A,B:FACTOR[:LATENCY]; straggler=RANK:FACTOR[:LATE]; "
            "background-job=RANKS:COLLECTIVE:SIZE[:REPEAT]; docs/howto.md)")


def _from_text(text: str, field: str):
    from .topology.io import _did_you_mean

    name, sep, args = text.strip().partition("=")
    name = name.strip().replace("_", "-")
    if not sep or name not in PERTURBATIONS:
        raise bad_value(field, text, _allowed_text() + (_did_you_mean(name, PERTURBATIONS) if sep else ""))
    parts = args.split(":")

    def need(n_min, n_max, form):
        if not n_min <= len(parts) <= n_max or any(not p.strip() for p in parts):
            raise bad_value(field, text, f"{name}={form}")

    if name in ("fail-link", "background-load", "degrade-link"):
        forms = {"fail-link": "A,B (the link's two ends)", "background-load": "A,B:RATE (RATE such as 10GBps)",
                 "degrade-link": "A,B:FACTOR[:LATENCY] (LATENCY such as 2us)"}
        need(*{"fail-link": (1, 1), "background-load": (2, 2), "degrade-link": (2, 3)}[name], forms[name])
        ends = [e.strip() for e in parts[0].split(",")]
        if len(ends) != 2 or not all(ends):
            raise bad_value(field, text, f"{name}={forms[name]}")
        if name == "fail-link":
            return FailLink(*ends)
        if name == "background-load":
            return BackgroundLoad(*ends, _rate(field, parts[1]))
        return DegradeLink(*ends, _factor(field, parts[1]), _seconds(field, parts[2]) if len(parts) > 2 else 0.0)
    if name == "fail-node":
        need(1, 1, "NODE")
        return FailNode(parts[0].strip())
    if name == "fail-server":
        need(1, 1, "SERVER (its index)")
        return FailServer(_int_text(field, parts[0]))
    if name == "degrade-tier":
        need(2, 3, "TIER:FACTOR[:LATENCY]")
        return DegradeTier(parts[0].strip(), _factor(field, parts[1]),
                           _seconds(field, parts[2]) if len(parts) > 2 else 0.0)
    if name == "straggler":
        need(2, 3, "RANK:FACTOR[:LATE] (FACTOR 2: twice as slow; LATE such as 100us)")
        return Straggler(_int_text(field, parts[0]), _factor(field, parts[1]),
                         _seconds(field, parts[2]) if len(parts) > 2 else 0.0)
    if name == "background-job":
        need(3, 4, "RANKS:COLLECTIVE:SIZE[:REPEAT] (RANKS such as 0-7 or 0,2,4)")
        from .units import parse_size

        return BackgroundJob(_ranks_from_text(field, parts[0]), parts[1].strip(), parse_size(parts[2].strip(), field),
                             _int_text(field, parts[3]) if len(parts) > 3 else 1)
    need(1, 1, "SEED")
    return EcmpSeed(_int_text(field, parts[0], MAX_SEED))


def _from_mapping(doc: dict, field: str):
    from .topology.io import _did_you_mean, _label, _mapping, _number, _sequence

    keys = [k for k in doc if isinstance(k, str) and k.replace("_", "-") in PERTURBATIONS]
    if len(keys) != 1:
        raise bad_value(field, doc, "a mapping with exactly one of " + ", ".join(k.replace("-", "_") for k in PERTURBATIONS)
                        + (_did_you_mean(str(next(iter(doc), "")), [k.replace("-", "_") for k in PERTURBATIONS])
                           if not keys and doc else ""))
    key = keys[0]
    name = key.replace("_", "-")
    extra = {"degrade-link": {"bandwidth_factor", "extra_latency_us"}, "degrade-tier": {"bandwidth_factor",
             "extra_latency_us"}, "straggler": {"compute_factor", "late_start_us"}, "background-load": {"rate_GBps"},
             "background-job": {"collective", "size", "repeat", "algorithm"}}.get(name, set())
    _mapping(field, doc, {key} | extra)
    v = doc[key]
    f = f"{field}.{key}"

    def ends():
        pair = _sequence(f, v)
        if len(pair) != 2:
            raise bad_value(f, v, "the link's two ends, [A, B]")
        return _label(f"{f}[0]", pair[0]), _label(f"{f}[1]", pair[1])

    factor = _number(f"{field}.bandwidth_factor", doc.get("bandwidth_factor", 1.0), 1.0, 1e-6, 1e6, "(a rate factor)")
    extra_s = _number(f"{field}.extra_latency_us", doc.get("extra_latency_us", 0.0), 1e-6, 0.0, 1.0, "microseconds")
    if name == "fail-link":
        return FailLink(*ends())
    if name == "fail-node":
        return FailNode(_label(f, v))
    if name == "fail-server":
        return FailServer(_int(f, v))
    if name == "degrade-link":
        return DegradeLink(*ends(), factor, extra_s)
    if name == "degrade-tier":
        return DegradeTier(_label(f, v), factor, extra_s)
    if name == "straggler":
        return Straggler(_int(f, v), _number(f"{field}.compute_factor", doc.get("compute_factor", 1.0), 1.0, 1e-6,
                                             1e6, "(a slowdown factor)"),
                         _number(f"{field}.late_start_us", doc.get("late_start_us", 0.0), 1e-6, 0.0, 1e6,
                                 "microseconds"))
    if name == "background-load":
        if "rate_GBps" not in doc:
            raise ConfigError(f"{field}: missing key 'rate_GBps'")
        return BackgroundLoad(*ends(), _number(f"{field}.rate_GBps", doc["rate_GBps"], 1e9, 1.0, 1e18, "GB/s"))
    if name == "background-job":
        from .units import parse_size

        ranks = _sequence(f, v)
        if "size" not in doc:
            raise ConfigError(f"{field}: missing key 'size'")
        return BackgroundJob(tuple(_int(f"{f}[{i}]", r) for i, r in enumerate(ranks)),
                             doc.get("collective", "allreduce"), parse_size(doc["size"], f"{field}.size"),
                             _int(f"{field}.repeat", doc.get("repeat", 1)), doc.get("algorithm", "auto"))
    return EcmpSeed(_int(f, v, MAX_SEED))


def _checked(p, field: str):
    """Types and ranges of an object's fields (text and mappings arrive here as objects too).

    Returns a new object with the fields normalised (floats, a tuple of ranks); the one given
    is not changed."""
    fixed = {}

    def name(attr):
        v = getattr(p, attr)
        if not isinstance(v, str) or not v.strip():
            raise bad_value(f"{field}.{attr}", v, "a node name")

    def number(attr, lo, hi, what):
        v = getattr(p, attr)
        if not is_real(v) or not math.isfinite(v) or not lo <= v <= hi:
            raise bad_value(f"{field}.{attr}", v, what)
        fixed[attr] = float(v)

    if isinstance(p, (FailLink, DegradeLink, BackgroundLoad)):
        name("a")
        name("b")
    if isinstance(p, FailNode):
        name("node")
    if isinstance(p, DegradeTier):
        if not isinstance(p.tier, str) or not p.tier:
            raise bad_value(f"{field}.tier", p.tier, "a link tier name")
    if isinstance(p, (DegradeLink, DegradeTier)):
        number("bandwidth_factor", 1e-6, 1e6, "a rate factor from 1e-6 to 1e6 (0.5: half the rate)")
        number("extra_latency_s", 0.0, 1.0, "seconds from 0 to 1")
    if isinstance(p, Straggler):
        fixed["rank"] = _int(f"{field}.rank", p.rank)
        number("compute_factor", 1e-6, 1e6, "a slowdown factor from 1e-6 to 1e6 (2: twice as long)")
        number("late_start_s", 0.0, 1e6, "seconds from 0 to 1e6")
    if isinstance(p, FailServer):
        fixed["server"] = _int(f"{field}.server", p.server)
    if isinstance(p, BackgroundLoad):
        number("rate_Bps", 1.0, 1e18, "bytes per second > 0")
    if isinstance(p, EcmpSeed):
        fixed["seed"] = _int(f"{field}.seed", p.seed, MAX_SEED)
    if isinstance(p, BackgroundJob):
        if not isinstance(p.ranks, (tuple, list)) or len(p.ranks) < 2:
            raise bad_value(f"{field}.ranks", p.ranks, "at least 2 distinct global ranks")
        ranks = tuple(_int(f"{field}.ranks", r) for r in p.ranks)
        if len(set(ranks)) != len(ranks):
            raise bad_value(f"{field}.ranks", p.ranks, "distinct ranks")
        fixed["ranks"] = ranks
        from .algorithms.schedule import COLLECTIVES

        if not isinstance(p.collective, str) or p.collective not in COLLECTIVES or p.collective in ("alltoallv",
                                                                                                   "sendrecv"):
            raise bad_value(f"{field}.collective", p.collective, "one of " + ", ".join(
                c for c in COLLECTIVES if c not in ("alltoallv", "sendrecv")))
        if not is_int(p.size_bytes) or \
                not 1 <= p.size_bytes < 2**50:
            raise bad_value(f"{field}.size_bytes", p.size_bytes, "bytes from 1 to 2^50")
        if not is_int(p.repeat) or not 1 <= p.repeat <= 10_000:
            raise bad_value(f"{field}.repeat", p.repeat, "an integer from 1 to 10,000")
        fixed["size_bytes"], fixed["repeat"] = int(p.size_bytes), int(p.repeat)
        if not isinstance(p.algorithm, str):
            raise bad_value(f"{field}.algorithm", p.algorithm, "an algorithm name or auto")
    return dataclasses.replace(p, **fixed) if fixed else p


MAX_INDEX = 2**31 - 1
"""Largest rank, server index or repeat count a perturbation takes."""

MAX_SEED = 2**32 - 1
"""Largest ECMP seed (:func:`hcsim.workload.run` takes 0 to 2^32 - 1)."""


def _int(field: str, v, hi: int = MAX_INDEX) -> int:
    if not is_int(v) or not 0 <= v <= hi:
        raise bad_value(field, v, f"an integer from 0 to {hi:,}")
    return int(v)


def _int_text(field: str, text: str, hi: int = MAX_INDEX) -> int:
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or len(t) > 12:  # ASCII digits only: no '١', '1_0' or '+1'
        raise bad_value(field, text, f"an integer from 0 to {hi:,}")
    return _int(field, int(t), hi)


def _ranks_from_text(field: str, text: str) -> tuple:
    """Global ranks from ``0-3,8,10-11`` (a bad piece is quoted whole: ``'0-'``, not ``''``)."""
    out = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        ends = [lo, hi] if dash else [lo]
        if not all(e.strip().isascii() and e.strip().isdigit() and len(e.strip()) <= 10 for e in ends):
            raise bad_value(field, part.strip() if text.strip() else text, "ranks such as 0-7 or 0,2,4 (numbers "
                            f"from 0 to {MAX_INDEX:,}, ASCII digits)")
        a, b = (int(e) for e in (ends * 2)[:2])
        if b < a or b - a > 1_000_000 or b > MAX_INDEX:
            raise bad_value(field, part.strip(), "a rank range such as 0-7 (low to high, at most 1,000,001 ranks)")
        out += range(a, b + 1)
    return tuple(out)


def _ranks_text(ranks) -> str:
    ranks = list(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks))


_NUMBER = r"((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"  # [0-9], not \d: ASCII digits only
_TIME = re.compile(rf"^\s*{_NUMBER}\s*(s|ms|us|ns)\s*$")
_RATE = re.compile(rf"^\s*{_NUMBER}\s*(GBps|Gbps|MBps|Bps)?\s*$")
_FACTOR = re.compile(rf"^\s*{_NUMBER}\s*$")


def _seconds(field: str, text: str) -> float:
    m = _TIME.match(text)
    if not m:
        raise bad_value(field, text, "a time with its unit: s, ms, us or ns (such as 2us)")
    v = float(m.group(1)) * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[m.group(2)]
    if not math.isfinite(v) or v > 1e6:
        raise bad_value(field, text, "a time of at most 1e6 s")
    return v


def _rate(field: str, text: str) -> float:
    m = _RATE.match(text)
    if not m:
        raise bad_value(field, text, "a rate such as 10GBps, 100Gbps or 1e9 (bytes per second)")
    return float(m.group(1)) * {"GBps": 1e9, "Gbps": 1e9 / 8, "MBps": 1e6, "Bps": 1.0, None: 1.0}[m.group(2)]


def _factor(field: str, text: str) -> float:
    m = _FACTOR.match(text)
    if not m:
        raise bad_value(field, text, "a factor such as 0.5 (ASCII digits)")
    return float(m.group(1))


def _time_text(s: float) -> str:
    return f"{s * 1e6:g}us"


def _lat(s: float) -> str:
    return f":{_time_text(s)}" if s else ""


def _plus(s: float) -> str:
    return f", +{_time_text(s)} latency" if s else ""


# ---- applying them -------------------------------------------------------------------------------

def perturb(scenario, perturbations, *, servers: int | None = None, overrides: dict | None = None):
    """A new :class:`~hcsim.scenario.Scenario` with ``perturbations`` applied, in order.

    The topology is copied before it is changed, the workload is copied before background
    work is added, and the run options are a new mapping; the scenario passed in is unchanged.

    Parameters
    ----------
    scenario : Scenario, str, Path or dict
        As :func:`hcsim.scenario.load_scenario` takes it, with its ``servers`` and ``overrides``.
    perturbations : list
        Objects, text or mappings (:func:`parse_perturbation`).

    Raises
    ------
    HcsimError
        A name the topology does not have, or a cut that leaves two ranks that talk to each
        other without a path (naming the perturbations and the pair).

    Examples
    --------
    >>> from hcsim.scenario import load_scenario
    >>> s = load_scenario({"topology": "atlas800t-a2", "workload": {"ops": [
    ...     {"kind": "compute", "name": "c", "ranks": "all", "duration_us": 10}]}})
    >>> p = perturb(s, ["ecmp-seed=7", "straggler=1:2"])
    >>> p.options["ecmp_seed"], p.options["speed"]
    (7, {1: 0.5})
    """
    from .scenario import load_scenario

    s = load_scenario(scenario, servers=servers, overrides=overrides)
    given = _as_list(perturbations)
    fields = [f"perturbations[{i}]" for i in range(len(given))]
    return _perturbed(s, [parse_perturbation(p, f) for p, f in zip(given, fields, strict=True)], fields)


def _perturbed(s, items: list, fields: list):
    """:func:`perturb` on checked perturbations; ``fields`` name each one in errors."""
    seeds = [(p, f) for p, f in zip(items, fields, strict=True) if isinstance(p, EcmpSeed)]
    for p, f in seeds[1:]:
        if p.seed != seeds[0][0].seed:  # the last would win silently
            raise bad_value(f, p.label(), f"one ECMP seed per case ({seeds[0][1]} is {seeds[0][0].label()}): "
                            "each seed is another placement of flows, not a change to combine")
    topo = s.topology
    if any(isinstance(p, _TOPOLOGY_KINDS) for p in items):
        topo = topo.copy()
        # inelastic loads last: other traffic takes its rate from what a degraded link still
        # carries (f x B - L), whatever order the perturbations were listed in
        for p, where in sorted(zip(items, fields, strict=True), key=lambda pf: isinstance(pf[0], BackgroundLoad)):
            if isinstance(p, _TOPOLOGY_KINDS):
                _apply_to_topology(topo, s.topology, p, where)
    options = dict(s.options)
    workload = s.workload
    for i, (p, where) in enumerate(zip(items, fields, strict=True)):
        if isinstance(p, Straggler):
            _rank(where + ".rank", p.rank, topo.num_npus)
            if p.compute_factor != 1:
                speed = dict(options.get("speed") or {})
                speed[p.rank] = speed.get(p.rank, 1.0) / p.compute_factor
                options["speed"] = speed
            if p.late_start_s:
                starts = dict(options.get("start_s") or {})
                starts[p.rank] = starts.get(p.rank, 0.0) + p.late_start_s
                options["start_s"] = starts
        elif isinstance(p, EcmpSeed):
            options["ecmp_seed"] = p.seed
        elif isinstance(p, BackgroundJob):
            if workload is s.workload:
                workload = _copy_workload(workload)
            _add_background(workload, p, i, topo.num_npus, where)
    if any(isinstance(p, _CUTS) for p in items):
        _check_reachable(topo, workload, [p for p in items if isinstance(p, _CUTS)])
    label = ", ".join(p.label() for p in items)
    return dataclasses.replace(s, topology=topo, workload=workload, options=options,
                               description=(s.description + " | " if s.description else "") + f"what-if: {label}")


def _as_list(perturbations) -> list:
    if perturbations is None:
        return []
    if isinstance(perturbations, (str, dict)) or isinstance(perturbations, tuple(PERTURBATIONS.values())):
        return [perturbations]
    if not isinstance(perturbations, (list, tuple)):
        raise bad_value("perturbations", perturbations, "a list of perturbations")
    return list(perturbations)




def _node(topo, field: str, name: str) -> str:
    if name not in topo.graph:
        from .topology.io import _did_you_mean

        hint = _did_you_mean(name, list(topo.graph))
        if not hint:
            others = [n for n in topo.graph if topo.graph.nodes[n].get("kind") != "npu"][:6]
            hint = f" (such as {', '.join(map(str, others))})" if others else ""
        raise bad_value(field, name, f"a node of topology {topo.name!r}{hint}")
    return name


def _link(topo, field: str, a: str, b: str) -> list:
    _node(topo, field, a)
    _node(topo, field, b)
    pairs = [(u, v) for u, v in ((a, b), (b, a)) if topo.graph.has_edge(u, v)]
    if not pairs:
        raise bad_value(field, f"{a},{b}", f"a link of topology {topo.name!r} (no link joins {a} and {b}; "
                        f"{a}'s neighbours: {', '.join(sorted(topo.graph.successors(a))[:8])})")
    return pairs


def _apply_to_topology(topo, original, p, field: str) -> None:
    """Make ``p``'s change on ``topo`` (a copy). Names are checked against ``original``, the
    topology as given; the change is made to the links earlier perturbations of the same case
    left (failing, degrading or loading a link already failed changes nothing more)."""
    g, g0 = topo.graph, original.graph
    if isinstance(p, FailLink):
        g.remove_edges_from(_link(original, field, p.a, p.b))
    elif isinstance(p, FailNode):
        n = _node(original, field + ".node", p.node)
        g.remove_edges_from(list(g.in_edges(n)) + list(g.out_edges(n)))
    elif isinstance(p, FailServer):
        npus = [n for n in original.npus if original.npu_spec(n).server == p.server]
        if not npus:
            servers = sorted({original.npu_spec(n).server for n in original.npus})
            raise bad_value(field + ".server", p.server,
                            f"a server of topology {original.name!r} (0 to {servers[-1]})")
        members = set(npus)
        for n in npus:  # its NICs: non-NPU neighbours that serve no other server's NPUs
            for m in set(g0.successors(n)) | set(g0.predecessors(n)):
                if g0.nodes[m].get("kind") == "nic" and all(
                        x in members or g0.nodes[x].get("kind") != "npu"
                        for x in set(g0.successors(m)) | set(g0.predecessors(m))):
                    members.add(m)
        g.remove_edges_from([e for n in members for e in list(g.in_edges(n)) + list(g.out_edges(n))])
    elif isinstance(p, DegradeLink):
        for u, v in _link(original, field, p.a, p.b):
            if g.has_edge(u, v):
                g.edges[u, v]["spec"] = _degraded(g.edges[u, v]["spec"], p, field)
    elif isinstance(p, DegradeTier):
        if not any(spec.tier == p.tier for _, _, spec in g0.edges(data="spec")):
            tiers = sorted({spec.tier for _, _, spec in g0.edges(data="spec")})
            raise bad_value(field + ".tier", p.tier, f"a tier of topology {original.name!r}: {', '.join(tiers)}")
        for u, v in [(u, v) for u, v, spec in g.edges(data="spec") if spec.tier == p.tier]:
            g.edges[u, v]["spec"] = _degraded(g.edges[u, v]["spec"], p, field)
    elif isinstance(p, BackgroundLoad):
        _node(original, field, p.a)
        _node(original, field, p.b)
        if not g0.has_edge(p.a, p.b):
            raise bad_value(field, f"{p.a},{p.b}", f"a directed link of topology {original.name!r} (no link "
                            f"{p.a} -> {p.b})")
        if not g.has_edge(p.a, p.b):
            return
        spec = g.edges[p.a, p.b]["spec"]
        left = spec.bandwidth_Bps - p.rate_Bps
        if left < spec.bandwidth_Bps * 1e-6:
            raise bad_value(field + ".rate", f"{p.rate_Bps / 1e9:g} GB/s",
                            f"less than link {p.a} -> {p.b}'s {spec.bandwidth_Bps / 1e9:g} GB/s (some must be left)")
        g.edges[p.a, p.b]["spec"] = dataclasses.replace(spec, bandwidth_Bps=left)


def _degraded(spec, p, field: str):
    try:
        return dataclasses.replace(spec, bandwidth_Bps=spec.bandwidth_Bps * p.bandwidth_factor,
                                   latency_s=spec.latency_s + p.extra_latency_s)
    except HcsimError as exc:
        raise bad_value(field, p.label(), f"a change the link can take ({exc})") from None


def _rank(field: str, r: int, world: int) -> int:
    if not 0 <= r < world:
        raise bad_value(field, r, f"a rank of the job, 0 to {world - 1}")
    return r


def _copy_workload(w):
    from .workload import Workload

    return Workload(w.name, list(w.ops), dict(w.communicators), set(w._names))


def _add_background(w, p: BackgroundJob, k: int, world: int, field: str) -> None:
    for r in p.ranks:
        _rank(field + ".ranks", r, world)
    prefix = f"{BACKGROUND_PREFIX}{k}"
    comm = w.communicator(prefix, p.ranks)
    for i in range(p.repeat):
        try:
            w.collective(f"{prefix}.{i}", comm, p.collective, p.size_bytes, algorithm=p.algorithm, stream=prefix)
        except HcsimError as exc:
            raise ConfigError(f"{field}: {exc}") from None


def _check_reachable(topo, workload, cuts) -> None:
    """Every pair of ranks that talk to each other still has a path (else name the cut)."""
    import networkx as nx

    from .workload.graph import Collective, SendRecv

    component = {}
    for k, nodes in enumerate(nx.strongly_connected_components(topo.graph)):
        for n in nodes:
            component[n] = k
    npus = topo.npus
    comms = {op.comm.name: op.comm for op in workload.ops if isinstance(op, Collective)}
    groups = [(f"communicator {c.name!r}", c.ranks) for c in comms.values()]
    groups += [(f"send {op.name!r}", (op.src, op.dst)) for op in workload.ops if isinstance(op, SendRecv)]
    for what, ranks in groups:
        first = ranks[0]
        for r in ranks[1:]:
            if component[npus[r]] != component[npus[first]]:
                raise TopologyError(f"{', '.join(p.label() for p in cuts)}: no path left between {npus[first]} "
                                    f"(rank {first}) and {npus[r]} (rank {r}) of {what}; the topology has no "
                                    "other route around this cut")


# ---- running them -------------------------------------------------------------------------------

def whatif(scenario, perturbations, *, combined: bool = False, results: bool = False, progress=None,
           servers: int | None = None, overrides: dict | None = None):
    """The baseline and each perturbation, run side by side.

    Parameters
    ----------
    scenario : Scenario, str, Path or dict
        A job (:func:`hcsim.scenario.load_scenario`, with its ``servers`` and ``overrides``;
        run options such as ``routing`` belong in the scenario's ``options``). For one
        collective use :func:`whatif_collective`.
    perturbations : list
        Objects, text or mappings (:func:`parse_perturbation`); each is run on its own. An
        empty list runs the scenario file's own ``whatif:`` list.
    combined : bool
        Also run every perturbation together (a row ``combined``).
    results : bool
        Also return ``{case: JobResult}`` (for per-link or per-operation detail).
    progress : bool, optional
        A progress bar over the cases (None: only on a terminal or in a notebook).

    Returns
    -------
    pandas.DataFrame
        One row per case (:data:`COLUMNS`): ``case`` (``baseline``, then each perturbation's
        text form), ``perturbation`` (in words), ``status`` (``ok``; ``error``: a cut with no
        other path, a bad name; ``refused``: the cases before it took the scenario's work
        bound, which every case of the comparison shares), ``reason``, ``time_us`` (the
        job's step time: the end of its
        own operations, not a background job's), ``baseline_us``, ``delta_us``, ``delta_pct``,
        ``busiest_link`` and its ``busiest_utilization`` (bytes over capacity x time, over the
        whole run: a background job that outlasts the job counts to its own end).

    Raises
    ------
    HcsimError
        A perturbation that is malformed or repeated, or a baseline that cannot run (a
        perturbed case that cannot run is an ``error`` row instead).
    """
    from .progress import check_progress
    from .scenario import load_scenario
    from .topology.spec import flag

    combined, results = flag("combined", combined), flag("results", results)
    check_progress(progress)
    s = load_scenario(scenario, servers=servers, overrides=overrides)
    items, where = _as_list(perturbations), "perturbations"
    if not items:
        items, where = list(s.whatif), "whatif"
        if not items:
            raise bad_value("perturbations", perturbations, "at least one perturbation (or a scenario file with "
                            "a whatif: list)")
    fields = [f"{where}[{i}]" for i in range(len(items))]
    parsed = [parse_perturbation(p, f) for p, f in zip(items, fields, strict=True)]
    seen = {}
    for p, f in zip(parsed, fields, strict=True):
        if p in seen:  # two rows of one name (and a combined case that counts it twice)
            raise bad_value(f, p.label(), f"a perturbation not given before (it repeats {seen[p]})")
        seen[p] = f
    cases = [("baseline", "", [], [])] + [(p.label(), p.describe(), [p], [f]) for p, f in zip(parsed, fields,
                                                                                               strict=True)]
    if combined and len(parsed) > 1:
        cases.append(("combined", "; ".join(p.describe() for p in parsed), parsed, fields))
    with s.topology.unchanged():  # the cases on the baseline's topology check its graph once, not each
        return _compare(cases, lambda ps, fs: _perturbed(s, ps, fs) if ps else s, results, progress)


def whatif_collective(topology, collective: str, size, perturbations, *, algorithm="auto", ranks=None,
                      combined: bool = False, results: bool = False, progress=None, **options):
    """:func:`whatif` for one collective call on ``topology``, played as a one-operation job.

    ``ranks`` are global rank numbers (default: every NPU); ``options`` are
    :func:`hcsim.workload.run`'s (:data:`RUN_OPTIONS`: ``routing``, ``ecmp_seed``, ``hccl``, ...).

    Examples
    --------
    >>> from hcsim.topology import leaf_spine
    >>> t = leaf_spine(2, 2, 2, 100e9, oversubscription=2.0)
    >>> df = whatif_collective(t, "alltoall", "64M", ["fail-link=leaf0,spine0"], algorithm="pairwise",
    ...                        routing="spray")
    >>> bool(df["delta_us"].iloc[1] > 0)
    True
    """
    from .algorithms.schedule import COLLECTIVES
    from .scenario import Scenario
    from .topology.io import load_topology
    from .units import parse_size
    from .workload import Workload

    if not isinstance(collective, str) or collective not in COLLECTIVES:
        raise bad_value("collective", collective, "one of " + ", ".join(COLLECTIVES))
    unknown = sorted(set(options) - set(RUN_OPTIONS))
    if unknown:
        from .topology.io import _did_you_mean

        raise bad_value("options", unknown[0], "an option of hcsim.workload.run: " + ", ".join(RUN_OPTIONS)
                        + _did_you_mean(unknown[0], RUN_OPTIONS))
    topo = load_topology(topology)
    world = topo.num_npus
    members = list(range(world)) if ranks is None else ranks
    if not isinstance(members, (list, tuple)) or len(members) < 2:
        raise bad_value("ranks", ranks, "a list of at least 2 global rank numbers")
    for r in members:
        if not is_int(r):
            raise bad_value("ranks", ranks, "global rank numbers")
        _rank("ranks", r, world)
    w = Workload(f"{collective}")
    comm = w.communicator("ranks", tuple(int(r) for r in members))
    w.collective(collective, comm, collective, parse_size(size, "size"), algorithm=algorithm)
    base = Scenario(f"{collective}", "", "<call>", topo, w, options=dict(options))
    return whatif(base, perturbations, combined=combined, results=results, progress=progress)


def _compare(cases, make, keep: bool, progress):
    import numpy as np
    import pandas as pd

    from .api import WorkBudget
    from .limits import MAX_JOB_WORK, topology_work
    from .progress import progress_bar
    from .workload import run

    rows, kept, budget, base_topo = [], {}, None, None
    with progress_bar(len(cases), "what-if", progress) as bar:
        for case, words, ps, fs in cases:
            try:
                if budget is not None:
                    budget.left()  # nothing left: refused before its topology is even copied
                s = make(ps, fs)
                if budget is None:  # the cases share the baseline's work bound (hcsim.api.WorkBudget)
                    budget = WorkBudget(s.options["max_work"] if "max_work" in s.options else MAX_JOB_WORK)
                    base_topo = s.topology
                # a case pays for its topology first: its run's tables, and its building when the
                # scenario built it (a file's or a mapping's baseline) or it is a perturbed copy
                budget.spend(topology_work(s.topology, built=s.topology is not base_topo
                                           or (not ps and s.topology_built)))
                r = run(s.topology, s.workload, **{**s.options, "max_work": budget.left()}, progress=False)
                budget.spend(r.config["work"])
            except HcsimError as exc:
                if not ps:
                    raise
                status, reason = "error", str(exc)
                if isinstance(exc, WorkLimitError) and budget is not None:
                    reason = budget.spend_error(exc)
                    if reason.startswith("max_work = ") and budget.max_work is not None:
                        status, reason = "refused", (
                            f"max_work = {budget.max_work}: the cases took {budget.spent} units of engine work by "
                            "this one; run fewer perturbations or a smaller job, or raise options.max_work "
                            "(--set options.max_work=N; 0: no bound)")
                rows.append({"case": case, "perturbation": words, "status": status, "reason": reason,
                             "time_us": np.nan, "busiest_link": "", "busiest_utilization": np.nan})
                bar.update()
                continue
            own = r.ops[~r.ops["op"].str.startswith(BACKGROUND_PREFIX)]
            t = float(own["end_s"].max()) if len(own) else r.step_time_s
            busiest = r.links.sort_values("utilization", ascending=False, kind="stable").head(1)
            busiest = busiest[busiest["utilization"] > 0]  # no link is busiest when none carried a byte
            link = (f"{busiest['src'].iloc[0]}->{busiest['dst'].iloc[0]}" if len(busiest) else "")
            rows.append({"case": case, "perturbation": words, "status": "ok", "reason": "", "time_us": t * 1e6,
                         "busiest_link": link,
                         "busiest_utilization": float(busiest["utilization"].iloc[0]) if len(busiest) else 0.0})
            if keep:
                kept[case] = r
            bar.update()
    df = pd.DataFrame(rows)
    base = df["time_us"].iloc[0]
    df["baseline_us"] = base
    df["delta_us"] = df["time_us"] - base
    df["delta_pct"] = 100.0 * df["delta_us"] / base if base > 0 else np.nan
    df = df[list(COLUMNS)]
    return (df, kept) if keep else df


class _CallableModule(type(sys)):
    """``hcsim.whatif(...)`` calls :func:`whatif`; ``hcsim.whatif.FailLink`` etc. stay reachable."""

    def __call__(self, *args, **kwargs):
        return whatif(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
