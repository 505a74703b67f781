"""Scenario files: a job (topology, layout, model, workload, options) in one YAML file.

:func:`load_scenario` reads and checks a file (or a mapping) as strictly as topology files
are checked (:mod:`hcsim.topology.io`): unknown keys (with a did-you-mean), wrong types and
out-of-range values are one-line errors naming the file and the field path
(``scenarios/x.yaml: workload.params.bucket_mb = -1: ...``); a file that is missing, too
large, not UTF-8, not YAML or not a mapping is refused the same way. :func:`run_scenario`
plays it (:func:`hcsim.workload.run`) and returns the :class:`~hcsim.workload.JobResult`.

The format (docs/scenarios.md has the whole reference)::

    name: acl-overlap                  # default: the file's name
    description: ...
    topology: atlas800t-a2             # a built-in name, a file relative to this one, or a mapping
    servers: 2                         # optional: the topology's server (node) count
    layout: {tp: 1, pp: 1, dp: 4, ep: 1, order: tp-ep-dp-pp}   # generator workloads
    model: llama2-7b                   # a preset name or a mapping (generator workloads)
    workload:                          # either a generator ...
      generator: data_parallel
      params: {bucket_mb: 25}
    workload:                          # ... or operations written out
      communicators: {world: all}
      repeat: 1
      ops:
        - {kind: compute, name: bwd, ranks: all, duration_us: 2000}
        - {kind: collective, name: ar, comm: world, collective: allreduce, size: 64M}
    options: {routing: ecmp, hccl: {buffsize: 200M}, speed: {3: 0.8}}
    report: [summary, ops]

Examples
--------
>>> s = load_scenario({"topology": "atlas800t-a2", "workload": {"communicators": {"w": [0, 1]},
...     "ops": [{"kind": "collective", "name": "ar", "comm": "w", "collective": "allreduce", "size": "1M"}]}})
>>> s.name, len(s.workload.ops), s.topology.num_npus
('scenario', 1, 8)
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError, HcsimError, WorkLimitError, bad_value, is_int, is_real, shown
from .limits import MAX_JOB_WORK, WORK_PER_RANK_OP
from .topology.io import (
    _bad,
    _bool,
    _did_you_mean,
    _integer,
    _label,
    _mapping,
    _number,
    _one_of,
    _parse,
    _read_text,
    _sequence,
    load_topology,
    topology_from_dict,
)
from .topology.model import Topology

MAX_SCENARIO_OPS = 200_000
"""Most operations an explicit workload may expand to (``ops`` x ``repeat``)."""

REPORT_TABLES = ("summary", "ops", "links")
"""Tables ``report:`` may ask the CLI to print."""

LAYOUT_AXES = ("tp", "pp", "dp", "ep")
"""Parallel dimensions of ``layout:``."""

OP_KINDS = ("compute", "collective", "send", "record", "wait")
"""What an explicit operation's ``kind`` may be."""

MODES = ("des",)
"""``options.mode``: jobs run event-driven (a job's overlap and contention have no closed form)."""

_TOP_KEYS = {"name", "description", "topology", "servers", "layout", "model", "workload", "options", "report",
             "plan", "whatif"}
_LAYOUT_KEYS = {*LAYOUT_AXES, "order"}
_CONTEXT = {"topology", "layout", "model", "name", "compute_time"}
"""Generator arguments a scenario fills itself (not ``params``)."""
_OPTION_KEYS = {"mode", "routing", "ecmp_seed", "hccl", "speed", "max_transfers", "max_flow_updates", "max_ops",
                "max_work"}
_HCCL_KEYS = {"buffsize", "deterministic", "qps_per_connection", "expansion_mode"}
_COMMON_OP_KEYS = {"kind", "name", "stream", "after"}
_OP_KEYS = {
    "compute": {"ranks", "duration_us", "flops", "bytes_moved", "dtype"},
    "collective": {"comm", "collective", "size", "algorithm", "root", "reduce_op", "dtype", "send_matrix"},
    "send": {"src", "dst", "size"},
    "record": {"ranks", "event"},
    "wait": {"ranks", "event"},
}
_EXPLICIT_KEYS = {"communicators", "ops", "repeat"}
_GENERATOR_KEYS = {"generator", "params"}


@dataclass(frozen=True)
class Scenario:
    """A checked scenario, ready to run.

    Attributes
    ----------
    name, description : str
    source : str
        The file it came from (``<dict>`` for a mapping).
    topology : Topology
        Built, with ``servers`` applied.
    workload : Workload
        The operations (generated or written out), checked against the topology's ranks.
    layout : dict
        ``tp, pp, dp, ep`` and ``order`` as given (generator workloads), else empty.
    model : str or dict or None
    generator : str or None
        The generator that made the workload, if any; ``params`` its parameters.
    params : dict
    options : dict
        Keyword arguments of :func:`hcsim.workload.run` (``routing``, ``ecmp_seed``, ``hccl``,
        ``speed``, work bounds).
    report : tuple of str
        Tables the CLI prints (:data:`REPORT_TABLES`).
    plan : dict
        The file's ``plan:`` section as written (a search space and questions), checked by
        :func:`hcsim.plan.plan` when it is used; empty when absent.
    whatif : tuple
        The file's ``whatif:`` perturbations as written (their form checked on loading, their
        node names and ranks by :func:`hcsim.whatif.perturb` when applied); empty when absent.
    topology_built : bool
        True when loading built the topology (from a name, a file or a mapping), False when it
        was given as a Topology object: :func:`run_scenario` charges its building to the run's
        work bound (:func:`hcsim.limits.topology_work`).
    """

    name: str
    description: str
    source: str
    topology: Topology
    workload: object
    layout: dict = field(default_factory=dict)
    model: object = None
    generator: str | None = None
    params: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    report: tuple = ("summary", "ops")
    plan: dict = field(default_factory=dict)
    whatif: tuple = ()
    topology_built: bool = False


def load_scenario(source, *, servers: int | None = None, overrides: dict | None = None) -> Scenario:
    """Read and check a scenario file (or a mapping in the same form, or pass a Scenario).

    Parameters
    ----------
    source : str, Path, dict or Scenario
    servers : int, optional
        The topology's server (node) count, replacing the file's ``servers``.
    overrides : dict, optional
        ``{"dotted.field.path": value}`` set in the document before it is checked (a smaller
        case of the same scenario: ``{"workload.params.micro_batches": 2}``).

    Raises
    ------
    HcsimError
        One line naming the file and the field path.
    """
    if isinstance(source, Scenario):
        if servers is not None or overrides is not None:
            raise bad_value("source", source.name, "a file or mapping when servers or overrides are given")
        return source
    if isinstance(source, dict):
        doc, where, base = source, "<dict>", Path(".")
    else:
        if isinstance(source, os.PathLike):
            source = os.fspath(source)
        if not isinstance(source, str) or not source.strip():
            raise bad_value("scenario", source, "a YAML file path, a mapping or a Scenario")
        path = Path(source)
        try:
            is_dir = path.is_dir()
            exists = path.is_file()
        except (OSError, ValueError):
            is_dir = exists = False
        if is_dir:
            raise bad_value("scenario", source, "a directory, not a YAML file")
        if not exists:
            raise bad_value("scenario", source, "no such file")
        where, base = str(path), path.parent
        doc = _parse(_read_text(path), where)
    try:
        if overrides is not None:  # not 'if overrides': an array has no truth value, [] or '' is no mapping
            doc = _overridden(doc, overrides)
        return _scenario(doc, where, base, servers)
    except HcsimError as exc:
        msg = str(exc)
        if not msg.startswith(f"{where}: "):
            msg = f"{where}: {msg}"
        raise type(exc)(msg) from None


def run_scenario(scenario, **kwargs):
    """Run a scenario (a :class:`Scenario`, a file or a mapping) and return its JobResult.

    ``kwargs`` are :func:`load_scenario`'s (``servers``, ``overrides``) and ``progress``.

    Examples
    --------
    >>> r = run_scenario({"topology": "atlas800t-a2", "workload": {"ops": [
    ...     {"kind": "compute", "name": "fwd", "ranks": [0, 1], "duration_us": 1000}]}})
    >>> round(r.step_time_s * 1e3, 6)
    1.0
    """
    unknown = sorted(set(kwargs) - {"servers", "overrides", "progress"})
    if unknown:
        raise bad_value("keyword argument", unknown[0], "servers, overrides (load_scenario's) or progress")
    progress = kwargs.pop("progress", None)
    return run_loaded(load_scenario(scenario, **kwargs), progress)


def run_loaded(s: Scenario, progress=None):
    """Run a loaded scenario's job within its one work bound (``options["max_work"]``, else
    :data:`~hcsim.limits.MAX_JOB_WORK`), which building its topology is charged to first
    (:func:`hcsim.limits.topology_work`: building and compiling a 4,096-server A2 pod, 368,640
    links, takes about 3 s of CPU, as much as 3.3M units of a job's work).

    Examples
    --------
    >>> s = load_scenario({"topology": "atlas800t-a2", "workload": {"ops": [
    ...     {"kind": "compute", "name": "fwd", "ranks": [0, 1], "duration_us": 1000}]}})
    >>> round(run_loaded(s).step_time_s * 1e3, 6)
    1.0
    """
    from .limits import topology_work
    from .workload import run

    if not isinstance(s, Scenario) or not isinstance(s.topology, Topology) or not isinstance(s.options, dict):
        raise bad_value("scenario", s, "a Scenario (load_scenario) with a Topology and an options mapping")
    max_work = s.options.get("max_work", MAX_JOB_WORK)
    if max_work is not None and (not is_int(max_work) or max_work < 1):  # as run()'s, before it is spent
        raise bad_value("options.max_work", max_work, "a positive integer (engine work units), or None for no bound")
    max_work = None if max_work is None else int(max_work)
    spent = topology_work(s.topology, built=s.topology_built)
    if max_work is not None and spent >= max_work:
        what = "building and compiling the topology" if s.topology_built else "the per-link tables of the topology"
        raise WorkLimitError(f"max_work = {max_work}: {what} {s.topology.name!r} "
                             f"({s.topology.graph.number_of_edges():,} directed links) alone costs {spent:,} units "
                             "of work; use fewer servers, or raise options.max_work (--set options.max_work=N; 0: "
                             "no bound)")
    left = None if max_work is None else max_work - spent
    try:
        return run(s.topology, s.workload, **{**s.options, "max_work": left}, progress=progress)
    except WorkLimitError as exc:
        prefix = f"max_work = {left}:"
        if left is not None and str(exc).startswith(prefix):
            exc.args = (f"max_work = {max_work} ({spent:,} units of it for the topology's "
                        f"{s.topology.graph.number_of_edges():,} links):" + str(exc)[len(prefix):],)
        raise


# ---- the document ------------------------------------------------------------------------------

def _overridden(doc, overrides) -> dict:
    """A copy of ``doc`` with each dotted path set (mappings on the way are copied, not changed)."""
    import copy

    if not isinstance(overrides, dict):
        raise bad_value("overrides", overrides, "a {'dotted.path': value} mapping")
    if not isinstance(doc, dict):
        return doc
    out = copy.deepcopy(doc)
    for key, value in overrides.items():
        if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
            raise bad_value("overrides", key, "a dotted field path such as 'workload.params.micro_batches'")
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise bad_value("overrides", key, f"a path through mappings ({'.'.join(parts[:i + 1])} is not one)")
            node = nxt
        node[parts[-1]] = value
    return out


def _scenario(doc, where: str, base: Path, servers) -> Scenario:
    if not isinstance(doc, dict):
        raise _bad("document", "None (an empty file)" if doc is None else doc,
                   "expected a mapping of scenario keys (" + ", ".join(sorted(_TOP_KEYS)) + ")")
    _mapping("document", doc, _TOP_KEYS)
    for key in ("topology", "workload"):
        if key not in doc:
            raise ConfigError(f"missing key {key!r}")
    name = _label("name", doc["name"]) if doc.get("name") is not None else \
        (Path(where).stem if where != "<dict>" else "scenario")
    description = doc.get("description")
    description = "" if description is None else description
    if not isinstance(description, str):
        raise _bad("description", description, "a string")
    if servers is None and doc.get("servers") is not None:
        servers = doc["servers"]
        field_name = "servers"
    else:
        field_name = "servers (the command's)"
    if servers is not None:
        from .limits import MAX_NPUS

        servers = _integer(field_name, servers, 1, MAX_NPUS)
    topo = _topology(doc["topology"], base, servers)
    layout = _layout(doc.get("layout"))
    model = _model(doc.get("model"))
    options = _options(doc.get("options"), topo.num_npus)
    report = _report(doc.get("report"))
    workload_doc = _mapping("workload", doc["workload"], _EXPLICIT_KEYS | _GENERATOR_KEYS, none_ok=False)
    if "generator" in workload_doc:
        extra = sorted(set(workload_doc) & _EXPLICIT_KEYS)
        if extra:
            raise ConfigError(f"workload: key {extra[0]!r} cannot be used with 'generator' (a generator makes "
                              "the operations)")
        workload, gen, params = _generated(workload_doc, name, topo, layout, model, options.get("max_ops"))
    else:
        if "ops" not in workload_doc:
            raise ConfigError("workload: missing key 'ops' (or 'generator')")
        for key in ("layout", "model"):
            if doc.get(key) is not None:
                raise ConfigError(f"{key}: only used by a generator workload (this one lists its ops)")
        workload, gen, params = _explicit(workload_doc, name, topo.num_npus, options.get("max_work", MAX_JOB_WORK)), None, {}
    plan = dict(_mapping("plan", doc.get("plan")))
    whatif = tuple(_sequence("whatif", doc["whatif"])) if doc.get("whatif") is not None else ()
    if whatif:
        from .whatif import parse_perturbation

        for i, item in enumerate(whatif):  # the form now; names against the topology when applied
            parse_perturbation(item, f"whatif[{i}]")
    return Scenario(name, description, where, topo, workload, layout, model, gen, params, options, report, plan,
                    whatif, not isinstance(doc["topology"], Topology))


def _topology(value, base: Path, servers):
    if isinstance(value, Topology):  # a mapping's topology, built already (a plan point's)
        if servers is not None:
            raise _bad("servers", servers, "no server count with a topology given as a Topology object")
        return value
    kw = {} if servers is None else {"servers": servers}
    if isinstance(value, dict):
        try:
            return topology_from_dict(value, "topology", **kw)
        except HcsimError as exc:
            raise type(exc)(str(exc).replace("topology: ", "topology.", 1)) from None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise _bad("topology", value, "a built-in topology name, a YAML file (relative to the scenario) or a "
                   "topology mapping")
    local = base / value
    try:
        source = str(local) if value.endswith((".yaml", ".yml")) and local.is_file() else value
    except (OSError, ValueError):
        source = value
    try:
        return load_topology(source, **kw)
    except HcsimError as exc:
        msg = str(exc)
        raise type(exc)(msg if msg.startswith("topology") or msg.startswith("servers") else f"topology: {msg}") \
            from None


def _layout(value) -> dict:
    """``layout:`` checked key by key; ``order`` as a tuple (the generator checks the rest)."""
    layout = _mapping("layout", value, _LAYOUT_KEYS)
    out = {}
    for axis in LAYOUT_AXES:
        if axis in layout:
            out[axis] = _integer(f"layout.{axis}", layout[axis], 1, 1 << 20)
    if "order" in layout:
        from .workload.layout import DIMENSIONS

        order = layout["order"]
        parts = order.replace("-", " ").replace(",", " ").split() if isinstance(order, str) else order
        names = [str(p) for p in parts] if isinstance(parts, (list, tuple)) else None
        if names is None or sorted(n for n in names if n != "ep") != sorted(DIMENSIONS) or names.count("ep") > 1:
            raise _bad("layout.order", order, "tp, pp and dp once each (and ep at most once), innermost first "
                       "(tp-pp-dp, Megatron-LM's order; tp-ep-dp-pp)")
        out["order"] = tuple(parts)
    return out


def _model(value):
    if value is None:
        return None
    if isinstance(value, str):
        return _label("model", value)
    return dict(_mapping("model", value))


def _options(value, world: int) -> dict:
    opts = _mapping("options", value, _OPTION_KEYS)
    out = {}
    if "mode" in opts:
        _one_of("options.mode", opts["mode"], MODES)
    if "routing" in opts:
        from .topology.model import ROUTING_POLICIES

        out["routing"] = _one_of("options.routing", opts["routing"], ROUTING_POLICIES)
    if "ecmp_seed" in opts:
        out["ecmp_seed"] = _integer("options.ecmp_seed", opts["ecmp_seed"], 0, 2**32 - 1)
    for key in ("max_transfers", "max_flow_updates", "max_ops"):
        if key in opts:
            out[key] = _integer(f"options.{key}", opts[key], 1, 10**12)
    if "max_work" in opts:  # engine work units (hcsim.limits.MAX_JOB_WORK); 0: no bound
        out["max_work"] = _integer("options.max_work", opts["max_work"], 0, 10**15) or None
    if opts.get("hccl") is not None:
        from .hccl.selection import HcclConfig
        from .units import parse_size

        h = _mapping("options.hccl", opts["hccl"], _HCCL_KEYS)
        kw = {}
        if "buffsize" in h:
            kw["buffer_bytes"] = parse_size(h["buffsize"], "options.hccl.buffsize")
        if "deterministic" in h:
            kw["deterministic"] = _bool("options.hccl.deterministic", h["deterministic"])
        if "qps_per_connection" in h:
            kw["qps_per_connection"] = _integer("options.hccl.qps_per_connection", h["qps_per_connection"], 1, 8)
        if h.get("expansion_mode") is not None:
            from .topology.model import EXPANSION_MODES

            kw["expansion_mode"] = _one_of("options.hccl.expansion_mode", h["expansion_mode"], EXPANSION_MODES)
        out["hccl"] = HcclConfig(**kw)
    if opts.get("speed") is not None:
        speed = {}
        given = opts["speed"]
        if not isinstance(given, dict):
            raise _bad("options.speed", given, "a mapping {rank: compute speed factor} (0.5: half as fast)")
        for r, f in given.items():
            if isinstance(r, str) and r.isascii() and r.isdigit() and len(r) < 10:
                r = int(r)  # a key written "3" (JSON) means rank 3
            rank = _integer("options.speed", r, 0, world - 1)
            speed[rank] = _number(f"options.speed.{rank}", f, 1.0, 1e-6, 1e6, "(a speed factor)")
        out["speed"] = speed
    return out


def _report(value) -> tuple:
    if value is None:
        return ("summary", "ops")
    items = _sequence("report", value)
    for i, t in enumerate(items):
        if not isinstance(t, str) or t not in REPORT_TABLES:
            raise _bad(f"report[{i}]", t, "one of " + ", ".join(REPORT_TABLES)
                       + (_did_you_mean(t, REPORT_TABLES) if isinstance(t, str) else ""))
    return tuple(dict.fromkeys(items))


# ---- explicit operations -----------------------------------------------------------------------

def _ranks(field_name: str, value, world: int) -> list[int]:
    """``all``, a rank number or a list of distinct rank numbers below ``world``."""
    if value == "all":
        return list(range(world))
    if is_int(value):
        value = [value]
    if not isinstance(value, list) or not value:
        raise _bad(field_name, value, "'all', a rank number or a non-empty list of rank numbers")
    out = [_integer(f"{field_name}[{i}]", r, 0, world - 1) for i, r in enumerate(value)]
    if len(set(out)) != len(out):
        raise _bad(field_name, value, "distinct ranks (one appears twice)")
    return out


def _name_field(field_name: str, value) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise _bad(field_name, value, "a non-empty name of at most 200 characters")
    return value


def _explicit(w: dict, name: str, world: int, max_work: int | None = None):
    """The workload an explicit ``workload:`` lists (``ops`` x ``repeat``), refused before it is
    expanded when planning its operations' ranks alone would pass the job's ``max_work`` (the
    runner's own first count, :data:`~hcsim.limits.WORK_PER_RANK_OP` per operation and rank)."""
    from .workload import Workload

    comms = _mapping("workload.communicators", w.get("communicators"))
    repeat = _integer("workload.repeat", w.get("repeat", 1), 1, MAX_SCENARIO_OPS)
    ops = _sequence("workload.ops", w["ops"])
    if not ops:
        raise _bad("workload.ops", ops, "at least one operation")
    if len(ops) * repeat > MAX_SCENARIO_OPS:
        raise WorkLimitError(f"workload.ops = {len(ops)} operations x repeat {repeat}: at most "
                             f"{MAX_SCENARIO_OPS:,} operations (hcsim.scenario.MAX_SCENARIO_OPS)")
    checked = [_op(f"workload.ops[{i}]", op, world) for i, op in enumerate(ops)]
    names = [c["name"] for c in checked]
    seen = set()
    for i, n in enumerate(names):
        if n in seen:
            raise _bad(f"workload.ops[{i}].name", n, "a name not used by an earlier operation")
        seen.add(n)
    workload = Workload(name=name)
    for cname, ranks in comms.items():
        _at(f"workload.communicators.{cname}", workload.communicator, cname,
            tuple(_ranks(f"workload.communicators.{cname}", ranks, world)))
    for i, c in enumerate(checked):
        if c["kind"] == "collective":
            comm = c["comm"]
            if comm not in workload.communicators:
                raise _bad(f"workload.ops[{i}].comm", comm, "a communicator of workload.communicators"
                           + _did_you_mean(comm, workload.communicators) + "; defined: "
                           + (", ".join(workload.communicators) or "none"))
            _collective_checks(f"workload.ops[{i}]", c, workload.communicators[comm].size)
        for a in c["after"]:
            if a not in names[:i]:
                raise _bad(f"workload.ops[{i}].after", a, "the name of an earlier operation"
                           + _did_you_mean(a, names[:i]))
    op_ranks = repeat * sum(_op_ranks(c, workload.communicators) for c in checked)
    if max_work is not None and WORK_PER_RANK_OP * op_ranks > max_work:
        raise WorkLimitError(f"max_work = {max_work}: workload.ops = {len(ops)} operations x repeat {repeat} take "
                             f"{op_ranks:,} operation ranks, {WORK_PER_RANK_OP} units each to plan, before anything "
                             "runs; use fewer operations, ranks or repeats, or raise options.max_work")
    for it in range(repeat):
        suffix = "" if repeat == 1 else f"#{it}"
        for i, c in enumerate(checked):
            _at(f"workload.ops[{i}]", _add, workload, c, suffix)
    _at("workload", workload.check, world)
    return workload


def _op_ranks(c: dict, communicators: dict) -> int:
    """Ranks one checked operation involves (what the job runner plans it on)."""
    if c["kind"] == "collective":
        return communicators[c["comm"]].size
    if c["kind"] == "send":
        return 2
    return len(c["ranks"])


def _at(w: str, fn, *args):
    try:
        return fn(*args)
    except HcsimError as exc:
        raise type(exc)(f"{w}: {exc}") from None


def _op(w: str, op, world: int) -> dict:
    op = _mapping(w, op, None, none_ok=False)
    if "kind" not in op:
        raise ConfigError(f"{w}: missing key 'kind' (one of {', '.join(OP_KINDS)})")
    kind = op["kind"]
    if not isinstance(kind, str) or kind not in OP_KINDS:
        raise _bad(f"{w}.kind", kind, "one of " + ", ".join(OP_KINDS)
                   + (_did_you_mean(kind, OP_KINDS) if isinstance(kind, str) else ""))
    _mapping(w, op, _COMMON_OP_KEYS | _OP_KEYS[kind])
    if "name" not in op:
        raise ConfigError(f"{w}: missing key 'name'")
    out = {"kind": kind, "name": _name_field(f"{w}.name", op["name"])}
    default_stream = "compute" if kind == "compute" else "comm"
    if kind in ("record", "wait"):
        if "stream" not in op:
            raise ConfigError(f"{w}: missing key 'stream' (the stream that records or waits)")
        if "after" in op:
            raise ConfigError(f"{w}: key 'after' is not taken by {kind} (it is the stream's own position)")
    out["stream"] = _name_field(f"{w}.stream", op.get("stream", default_stream))
    after = op.get("after", [])
    if isinstance(after, str):
        after = [after]
    out["after"] = [_name_field(f"{w}.after[{i}]", a) for i, a in enumerate(_sequence(f"{w}.after", after))]
    if kind in ("compute", "record", "wait"):
        if "ranks" not in op:
            raise ConfigError(f"{w}: missing key 'ranks'")
        out["ranks"] = _ranks(f"{w}.ranks", op["ranks"], world)
    if kind == "compute":
        roofline = [k for k in ("flops", "bytes_moved", "dtype") if k in op]
        if "duration_us" in op and roofline:
            raise ConfigError(f"{w}: key {roofline[0]!r} cannot be used with 'duration_us' (a time, or the work "
                              "the NPU's roofline turns into one)")
        if "duration_us" not in op and not {"flops", "bytes_moved"} & set(op):
            raise ConfigError(f"{w}: missing key 'duration_us' (or flops and bytes_moved)")
        if "duration_us" in op:
            out["duration_s"] = _number(f"{w}.duration_us", op["duration_us"], 1e-6, 0.0, 1e9, "microseconds")
        else:
            from .dtypes import parse_dtype

            out["duration_s"] = None
            out["flops"] = _number(f"{w}.flops", op.get("flops", 0), 1.0, 0.0, 1e30, "floating-point operations")
            out["bytes_moved"] = _number(f"{w}.bytes_moved", op.get("bytes_moved", 0), 1.0, 0.0, 1e30,
                                         "bytes through HBM")
            out["dtype"] = parse_dtype(op.get("dtype", "fp16"), f"{w}.dtype")
    elif kind in ("record", "wait"):
        if "event" not in op:
            raise ConfigError(f"{w}: missing key 'event'")
        out["event"] = _name_field(f"{w}.event", op["event"])
    elif kind == "send":
        for k in ("src", "dst", "size"):
            if k not in op:
                raise ConfigError(f"{w}: missing key {k!r}")
        out["src"] = _integer(f"{w}.src", op["src"], 0, world - 1)
        out["dst"] = _integer(f"{w}.dst", op["dst"], 0, world - 1)
        if out["src"] == out["dst"]:
            raise _bad(f"{w}.dst", op["dst"], "a rank other than src")
        out["size"] = _size(f"{w}.size", op["size"])
    else:
        for k in ("comm", "collective"):
            if k not in op:
                raise ConfigError(f"{w}: missing key {k!r}")
        from .algorithms.schedule import COLLECTIVES

        out["comm"] = _name_field(f"{w}.comm", op["comm"])
        coll = op["collective"]
        if not isinstance(coll, str) or coll not in COLLECTIVES:
            raise _bad(f"{w}.collective", coll, "one of " + ", ".join(COLLECTIVES)
                       + (_did_you_mean(coll, COLLECTIVES) if isinstance(coll, str) else ""))
        out["collective"] = coll
        out["root"] = _integer(f"{w}.root", op.get("root", 0), 0, world - 1)
        from .dtypes import parse_dtype, parse_reduce_op

        out["reduce_op"] = parse_reduce_op(op.get("reduce_op", "sum"), f"{w}.reduce_op")
        out["dtype"] = None if op.get("dtype") is None else parse_dtype(op["dtype"], f"{w}.dtype")
        algo = op.get("algorithm", "auto")
        if algo is not None and algo != "auto":
            from .algorithms.registry import get_algorithm

            if not isinstance(algo, str):
                raise _bad(f"{w}.algorithm", algo, "an algorithm name (hcsim algos), auto, or null (hcsim's default)")
            try:
                get_algorithm(coll, algo)
            except HcsimError as exc:
                raise ConfigError(f"{w}.{exc}") from None
        out["algorithm"] = algo
        out["send_matrix"] = op.get("send_matrix")
        if "size" in op:
            out["size"] = _size(f"{w}.size", op["size"])
        elif out["send_matrix"] is None:
            raise ConfigError(f"{w}: missing key 'size'" + (" (or send_matrix)" if coll == "alltoallv" else ""))
    return out


def _size(field_name: str, value) -> int:
    from .units import parse_size

    return parse_size(value, field_name)


def _collective_checks(w: str, c: dict, p: int) -> None:
    """What needs the communicator's size: the root, alltoallv's send matrix."""
    if c["root"] >= p:
        raise _bad(f"{w}.root", c["root"], f"a rank of the communicator (0 to {p - 1})")
    m = c.get("send_matrix")
    if m is None:
        if c["collective"] == "alltoallv":
            raise ConfigError(f"{w}: missing key 'send_matrix' (alltoallv: bytes rank i sends rank j)")
        return
    if c["collective"] != "alltoallv":
        raise ConfigError(f"{w}: key 'send_matrix' is only taken by alltoallv")
    allowed = f"a {p} x {p} list of sizes (row i: what communicator rank i sends to each rank)"
    if not isinstance(m, list) or len(m) != p:
        raise _bad(f"{w}.send_matrix", m, allowed)
    rows = []
    for i, row in enumerate(m):
        if not isinstance(row, list) or len(row) != p:
            raise _bad(f"{w}.send_matrix[{i}]", row, allowed)
        rows.append(tuple(0 if is_real(x) and x == 0 else _size(f"{w}.send_matrix[{i}][{j}]", x)
                          for j, x in enumerate(row)))
    total = sum(map(sum, rows))
    if total == 0:
        raise _bad(f"{w}.send_matrix", m, "at least one byte sent")
    c["send_matrix"] = tuple(rows)
    c.setdefault("size", max(total // p, 1))


def _add(workload, c: dict, suffix: str) -> None:
    name = c["name"] + suffix
    after = [a + suffix for a in c["after"]]
    kind = c["kind"]
    if kind == "compute":
        if c["duration_s"] is None:
            workload.compute(name, c["ranks"], flops=c["flops"], bytes_moved=c["bytes_moved"], dtype=c["dtype"],
                             stream=c["stream"], after=after)
        else:
            workload.compute(name, c["ranks"], c["duration_s"], stream=c["stream"], after=after)
    elif kind == "collective":
        workload.collective(name, c["comm"], c["collective"], c["size"], algorithm=c["algorithm"], root=c["root"],
                            reduce_op=c["reduce_op"], dtype=c["dtype"], send_matrix=c["send_matrix"],
                            stream=c["stream"], after=after)
    elif kind == "send":
        workload.send(name, c["src"], c["dst"], c["size"], stream=c["stream"], after=after)
    elif kind == "record":
        workload.record(name, c["ranks"], c["event"] + suffix, stream=c["stream"])
    else:
        workload.wait(name, c["ranks"], c["event"] + suffix, stream=c["stream"])


# ---- generated workloads -------------------------------------------------------------------------

def _generated(w: dict, name: str, topo: Topology, layout: dict, model, max_ops: int | None = None):
    try:
        from .workload.generators import GENERATORS
    except ImportError:  # pragma: no cover - the generators arrive with issue 13's other items
        GENERATORS = {}
    gen = w["generator"]
    if not isinstance(gen, str) or gen not in GENERATORS:
        raise _bad("workload.generator", gen, (f"unknown{_did_you_mean(gen, GENERATORS)}" if isinstance(gen, str)
                                               else "a generator name") + "; known: "
                   + (", ".join(sorted(GENERATORS)) or "none"))
    fn = GENERATORS[gen]
    params = dict(_mapping("workload.params", w.get("params")))
    sig = inspect.signature(fn)
    known = {k for k, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    settable = known - _CONTEXT
    for k in params:
        if k not in settable:
            where = {"layout": "layout:", "model": "model:", "topology": "topology:"}.get(k)
            raise _bad(f"workload.params.{k}", params[k], f"not a parameter of generator {gen!r}"
                       + (f" (set it as the scenario's {where})" if where else _did_you_mean(k, settable))
                       + "; known: " + ", ".join(sorted(settable)))
    context = {"topology": topo, "layout": layout or None, "model": model, "name": name}
    kwargs = {k: v for k, v in context.items() if k in known and v is not None}
    from .limits import MAX_JOB_OPS
    from .workload.generators import op_limit

    try:
        with op_limit(max_ops or MAX_JOB_OPS):
            workload = fn(**kwargs, **params)
    except HcsimError as exc:
        msg = str(exc).removeprefix(f"{gen}: ")
        head = msg.split(" = ", 1)[0]
        if head in params:
            msg = f"workload.params.{msg}"
        elif head.startswith(("layout", "model")):
            pass  # already names the scenario's field
        else:
            msg = f"workload: generator {gen!r}: {msg}"
        raise type(exc)(msg) from None
    from .workload import Workload

    if not isinstance(workload, Workload):  # pragma: no cover - a generator's bug
        raise ConfigError(f"workload: generator {gen!r} returned {shown(type(workload).__name__)}, not a Workload")
    _at("workload", workload.check, topo.num_npus)
    return workload, gen, params
