"""Capacity planning: one job evaluated over a search space of clusters and layouts.

:func:`plan` takes a scenario (docs/scenarios.md) and a search space ``{axis: [values]}``,
runs the scenario at every point of the space's Cartesian product and returns one row per
point: step time, throughput, scaling efficiency, exposed communication, NPU-hours and cost
per step, whether the point meets a target and whether it is on the Pareto front of time
against cost. ``df.attrs["answer"]`` answers the question asked: the smallest cluster (fewest
NPUs, then the shortest step) whose step time (and collective time) meets the target.

The axes (docs/scenarios.md, "Capacity planning"):

=====================  ====================================================================
axis                   what it sets
=====================  ====================================================================
``servers``            the topology's server (node) count (``load_scenario(servers=)``)
``npus``               the same, given as NPUs: servers = npus / NPUs per server (a
                       non-multiple is an invalid point)
``tp``, ``pp``, ``ep`` ``layout.tp`` ... of a generator workload
``dp``                 ``layout.dp``, or ``auto``: world / (tp x pp). When the space varies
                       ``servers``, ``npus``, ``tp`` or ``pp`` and not ``dp``, dp is ``auto``
                       (the job fills the cluster it is given)
``global_batch``       samples per step, fixed: ``micro_batches = global_batch / (micro_batch
                       x dp)`` (``training_step``, ``pipeline``) or ``batch = global_batch /
                       dp`` (``data_parallel``); a non-multiple is an invalid point
``policy``             ``auto`` (HCCL's selection, what the runner does) or ``best``
                       (:func:`best_workload`)
generator parameters   ``micro_batches``, ``grad_dtype``, ``bucket_bytes``, ... of the
                       scenario's generator: ``workload.params.<name>``
topology parameters    any parameter of the scenario's topology builder
                       (``oversubscription``, ``roce_bandwidth_GBps``, ...), in file units:
                       the topology becomes its builder-form document with that parameter
                       changed
=====================  ====================================================================

A point whose scenario is refused (a layout that does not fit the cluster, TP larger than a
server or not dividing it, sizes that do not divide, a work limit) is a row with
``status="invalid"`` and the one-line reason; it is not simulated and the other points still
run. The whole plan spends one work bound (the scenario's ``options.max_work``, else
:data:`hcsim.limits.MAX_JOB_WORK`; :class:`hcsim.api.WorkBudget`): each point gets what the
points before it left, and points past it are rows with ``status="refused"`` and the reason
(on a Dask cluster, where points run in no fixed order, each point gets the whole bound). An
axis or value that is wrong whatever the point (an unknown axis, a topology without that
parameter, ``micro_batches = -1``) is a one-line :class:`~hcsim.errors.HcsimError` before
anything runs.

Examples
--------
1 ms of compute, then a 64 MiB allreduce between two NPUs of a 910B server, with the HCCS
links at 10 and at 20 GB/s: only the faster links keep the step within 5 ms.

>>> doc = {"topology": "atlas800t-a2", "workload": {"communicators": {"w": [0, 1]}, "ops": [
...     {"kind": "compute", "name": "fwd", "ranks": [0, 1], "duration_us": 1000},
...     {"kind": "collective", "name": "ar", "comm": "w", "collective": "allreduce", "size": "64M",
...      "after": ["fwd"]}]}}
>>> df = plan(doc, {"hccs_bandwidth_GBps": [10, 20]}, target_step_ms=5)
>>> df[["point", "hccs_bandwidth_GBps", "npus", "status", "meets_target"]].values.tolist()
[[0, 10, 8, 'ok', False], [1, 20, 8, 'ok', True]]
>>> df.attrs["answer"]["text"]
'smallest cluster with step time <= 5 ms: point 1, 1 server (8 NPUs), 4.396 ms'
"""

from __future__ import annotations

import copy
import itertools
import math
import numbers
import os
import sys
from pathlib import Path

from .errors import ConfigError, HcsimError, WorkLimitError, bad_value, is_int, is_real, shown

SIZE_AXES = ("servers", "npus")
"""Axes that set the cluster size (one of them at most)."""

LAYOUT_AXES = ("tp", "pp", "dp", "ep")
"""Axes that set the generator workload's layout."""

POLICIES = ("auto", "best")
"""Algorithm policies: HCCL's selection, or the fastest candidate of each distinct call."""

PLAN_KEYS = ("space", "target_step_ms", "target_collective_ms", "collective", "price_per_npu_hour", "policy")
"""Keys of a scenario file's ``plan:`` section (the defaults of :func:`plan`'s arguments)."""

COLUMNS = ("point", "servers", "npus", "status", "reason", "step_time_ms", "samples_per_step", "samples_per_s",
           "tokens_per_s", "scaling_efficiency", "compute_ms", "communication_ms", "exposed_comm_ms", "free_ms",
           "npu_hours_per_step", "cost_per_step", "meets_target", "pareto")
"""Columns of :func:`plan`'s frame (the axes' columns follow ``point``; ``collective_ms``
follows ``free_ms`` when a collective is asked about)."""

MAX_POINTS = 10_000
"""Most points one plan may hold (the product of the axes' value counts)."""

_BATCH_GENERATORS = {"training_step": "micro_batches", "pipeline": "micro_batches", "data_parallel": "batch"}
"""Generators ``global_batch`` applies to, and the parameter it sets."""


# ---- the metrics (pure functions) ---------------------------------------------------------------

def samples_per_step(generator: str | None, params: dict, dp: int) -> float:
    """Samples (sequences, images) one step processes, from the generator's parameters.

    ``training_step`` and ``pipeline``: micro_batches x micro_batch x dp; ``tensor_parallel``
    and ``expert_parallel`` (one micro-batch): micro_batch x dp; ``data_parallel``: batch x dp.
    Parameters not given take the generator's defaults. NaN for written-out operations
    (``generator`` None): they carry no sample count.

    Examples
    --------
    >>> samples_per_step("training_step", {"micro_batches": 4, "micro_batch": 2}, 8)
    64.0
    >>> samples_per_step("data_parallel", {}, 4)  # data_parallel's default batch is 32
    128.0
    """
    if generator is None:
        return math.nan
    full = {**_generator_defaults(generator), **params}
    if generator == "data_parallel":
        return float(full["batch"] * dp)
    micro_batches = full.get("micro_batches", 1) if generator in ("training_step", "pipeline") else 1
    return float(micro_batches * full["micro_batch"] * dp)


def throughput(samples: float, step_time_s: float) -> float:
    """Samples (or tokens) per second: ``samples / step_time_s``; NaN without a step time.

    >>> throughput(64, 0.5)
    128.0
    """
    if not step_time_s or not math.isfinite(step_time_s) or step_time_s <= 0:
        return math.nan
    return samples / step_time_s


def npu_hours(npus: int, step_time_s: float) -> float:
    """NPU-hours one step occupies: ``npus x step_time_s / 3600``.

    >>> npu_hours(128, 0.9)
    0.032
    """
    return npus * step_time_s / 3600.0


def scaling_efficiency(rate, npus, step_time_s, ok) -> list:
    """Throughput per NPU relative to the smallest valid point's (1.0 there; NaN when invalid).

    ``rate`` is each point's throughput (samples per second; where NaN, steps per second
    ``1 / step_time_s`` stands for it). The smallest point has the fewest NPUs, ties broken by
    the shorter step, then the earlier point.

    Examples
    --------
    Twice the NPUs at 1.6 x the throughput is 80% efficient:

    >>> scaling_efficiency([100.0, 160.0], [8, 16], [1.0, 1.0], [True, True])
    [1.0, 0.8]
    """
    per = []
    for r, n, t, good in zip(rate, npus, step_time_s, ok, strict=True):
        if not good:
            per.append(math.nan)
            continue
        x = r if r == r else throughput(1.0, t)  # NaN -> steps per second
        per.append(x / n)
    ref = smallest(npus, step_time_s, ok)
    if ref is None:
        return [math.nan] * len(per)
    return [p / per[ref] if p == p else math.nan for p in per]


def smallest(npus, step_time_s, mask):
    """Index of the smallest cluster among the points where ``mask`` holds: the fewest NPUs,
    ties broken by the shorter step, then the earlier point; None when none holds.

    >>> smallest([16, 8, 8], [1.0, 3.0, 2.0], [True, True, True])
    2
    """
    best = None
    for i, (n, t, m) in enumerate(zip(npus, step_time_s, mask, strict=True)):
        if m and (best is None or (n, t) < best[0]):
            best = ((n, t), i)
    return None if best is None else best[1]


def pareto_front(time, cost, ok) -> list:
    """Points no other valid point beats: none is at least as fast and as cheap and better in
    one of the two. Points equal in both are all on the front; invalid points are never.

    Examples
    --------
    >>> pareto_front([1.0, 2.0, 2.0, 3.0], [3.0, 1.0, 2.0, 1.0], [True, True, True, True])
    [True, True, False, False]
    """
    pts = [(t, c) for t, c, good in zip(time, cost, ok, strict=True) if good]
    pts.sort()
    front, best_cost = set(), math.inf
    # sorted by time then cost: a point is on the front iff its cost is below every cheaper-
    # or-equal-time point's, or it equals a front point exactly
    i = 0
    while i < len(pts):
        j = i
        while j < len(pts) and pts[j][0] == pts[i][0]:
            j += 1
        c = pts[i][1]  # the cheapest at this time
        if c < best_cost:
            front.add(pts[i])
            best_cost = c
        i = j
    return [bool(good) and (t, c) in front for t, c, good in zip(time, cost, ok, strict=True)]


# ---- policy "best" ---------------------------------------------------------------------------

def best_workload(topology, workload, *, budget=None, **options):
    """The workload with each ``auto`` collective set to the fastest of HCCL's candidates.

    Each distinct call (collective, size, root, reduce op, data type, send matrix and its
    communicator's shape: ranks per server and servers per pod) is simulated alone on the
    first communicator that makes it, once per candidate
    (:func:`hcsim.hccl.selection.candidates`, plus HCCL's own choice), with the job's run
    options; the fastest alone is taken for every operation of that call. HCCL's choice is
    kept unless a candidate is strictly faster, so a one-collective job is never slower
    than under ``auto``. Operations that name an algorithm (or None) keep it. Returns
    ``(workload, choices)``: a new :class:`~hcsim.workload.Workload` (the given one is not
    changed) and one dict per distinct call (``collective, size_bytes, ranks, auto, best,
    auto_us, best_us, refused``: the candidates the work bound, ``max_work``, stopped, which
    were left out of the race). With ``budget`` (a :class:`~hcsim.api.WorkBudget`, a plan's)
    the races spend it instead of taking ``max_work`` each.

    Examples
    --------
    >>> from hcsim.workload import Workload
    >>> w = Workload("one")
    >>> _ = w.collective("ar", w.communicator("c", range(8)), "allreduce", 64 << 20)
    >>> w2, choices = best_workload("atlas800t-a2", w)
    >>> choices[0]["best_us"] <= choices[0]["auto_us"]
    True
    """
    import dataclasses

    from .api import WorkBudget, rank_layout
    from .engine.des import shares_in_network_switch
    from .errors import bad_value
    from .hccl.selection import candidates
    from .topology.io import load_topology
    from .workload import Collective, Workload, run

    topo = load_topology(topology)
    if not isinstance(workload, Workload):
        raise bad_value("workload", workload, "an hcsim.workload.Workload")
    if budget is not None and not isinstance(budget, WorkBudget):
        raise bad_value("budget", budget, "an hcsim.api.WorkBudget (one work bound for the job), or None")
    race_opts = {k: v for k, v in options.items() if k not in ("speed", "start_s")}  # compute only
    chosen: dict = {}
    choices = []
    ops = []
    npus, layouts = topo.npus, {}  # (the NPU list is built on each read; a job repeats communicators)
    for op in workload.ops:
        if not isinstance(op, Collective) or op.algorithm != "auto":
            ops.append(op)
            continue
        nodes = [npus[r] for r in op.comm.ranks]
        layout = layouts.get(op.comm.ranks)
        if layout is None:
            layout = layouts[op.comm.ranks] = rank_layout(topo, nodes)
        servers, pods = layout
        key = (op.collective, op.size_bytes, op.root, op.reduce_op, op.dtype, op.send_matrix, servers, pods,
               len(nodes))
        if key not in chosen:
            names = candidates(op.collective, servers or (len(nodes),), pods, topo.product,
                               shares_in_network_switch(topo, nodes, op.dtype, op.reduce_op))
            times = {}
            auto_name = None
            refused = []  # candidates the job's work bound stopped: left out of the race, and said so
            for cand in ["auto", *names]:
                alone = Workload("best")
                comm = alone.communicator("c", op.comm.ranks)
                alone.collective("x", comm, op.collective, op.size_bytes, algorithm=cand, root=op.root,
                                 reduce_op=op.reduce_op, dtype=op.dtype, send_matrix=op.send_matrix)
                try:
                    if budget is not None:
                        race_opts["max_work"] = budget.left()
                    r = run(topo, alone, **race_opts)
                except WorkLimitError as exc:
                    if budget is not None:
                        budget.spend_error(exc)
                    refused.append(cand)
                    continue
                except HcsimError:  # a candidate without a schedule for this call
                    continue
                if budget is not None:
                    budget.spend(r.config["work"])
                name = str(r.ops["algorithm"].iloc[0])
                if cand == "auto":
                    auto_name = name
                times.setdefault(name, r.step_time_s)
            if auto_name is None:  # HCCL's own choice fails alone: the job will say why
                chosen[key] = "auto"
                continue
            best = min(times, key=lambda a: (times[a], a != auto_name))
            chosen[key] = "auto" if best == auto_name else best
            choices.append({"collective": op.collective, "size_bytes": op.size_bytes, "ranks": len(nodes),
                            "auto": auto_name, "best": best, "auto_us": times[auto_name] * 1e6,
                            "best_us": times[best] * 1e6, "refused": refused})
        algo = chosen[key]
        ops.append(op if algo == "auto" else dataclasses.replace(op, algorithm=algo))
    out = Workload(workload.name, ops, dict(workload.communicators), set(workload._names))
    return out, choices


# ---- one point (runs on a worker: plain data in, plain data out) ----------------------------------

def _evaluate(task: dict, budget=None) -> dict:
    """Load, check and run one point, spending ``budget`` (a :class:`~hcsim.api.WorkBudget`, the
    plan's work bound; None: the scenario's own); return its figures (or why it is invalid, or
    refused by the bound)."""
    out = {"status": "invalid", "reason": "", "servers": task.get("servers"), "npus": task.get("npus"),
           "step_time_s": math.nan, "samples_per_step": math.nan, "seq_len": math.nan, "compute_us": math.nan,
           "communication_us": math.nan, "exposed_us": math.nan, "free_us": math.nan, "collective_ms": math.nan,
           "algorithms": ""}
    try:
        if budget is not None:
            budget.left()  # nothing left: refused before its scenario is even built
        _run_point(task, out, budget)
        out["status"] = "ok"
    except WorkLimitError as exc:
        out["status"] = "refused"
        out["reason"] = _refusal(exc, budget)
    except HcsimError as exc:
        out["reason"] = str(exc).removeprefix("<dict>: ")
    return out


def _refusal(exc: WorkLimitError, budget) -> str:
    """Why a work bound stopped a point; the plan's own bound named as the plan's."""
    if budget is None:
        return str(exc).removeprefix("<dict>: ")
    reason = budget.spend_error(exc).removeprefix("<dict>: ")
    if budget.max_work is None or budget.per_point or not reason.startswith("max_work = "):
        return reason  # another bound (max_ops, max_transfers), or each point's own: its own words
    return (f"max_work = {budget.max_work}: the plan's points took {budget.spent} units of engine work by this "
            "one; plan fewer or smaller points, or raise options.max_work (--set options.max_work=N; 0: no bound)")


def _run_point(task: dict, out: dict, budget=None) -> None:
    from .limits import MAX_NPUS, topology_work
    from .scenario import load_scenario
    from .topology.io import topology_from_dict
    from .workload import run

    doc = copy.deepcopy(task["doc"])
    tdoc = doc["topology"]
    servers = task["servers"]
    npus = task["npus"]
    if npus is not None and task["scalable"]:
        per = topology_from_dict(tdoc, "topology", servers=1).num_npus
        if npus % per:
            raise bad_value("npus", npus, f"a multiple of the {per} NPUs of one server")
        servers = out["servers"] = npus // per
    if servers is None:
        servers = doc.get("servers")
    if (task["scalable"] and task["generator"] is not None and task["dp_auto"] and type(servers) is int
            and 1 <= servers <= MAX_NPUS):  # (anything else: the build below says what is wrong)
        # an NPU count that no tp x pp divides is invalid before the (large) topology is built
        per = topology_from_dict(tdoc, "topology", servers=1).num_npus
        out["servers"], out["npus"] = servers, per * servers
        layout = doc.get("layout") or {}
        _check_tp(layout.get("tp", 1), per)
        _filled_dp(per * servers, layout.get("tp", 1), layout.get("pp", 1))
    topo = topology_from_dict(tdoc, "topology", **({} if servers is None else {"servers": servers}))
    if budget is not None:  # the point's own topology, built and (when it runs) compiled: paid first
        budget.spend(topology_work(topo, built=True))
    specs = [topo.npu_spec(n) for n in topo.npus]
    counts: dict = {}
    for s in specs:
        counts[(s.pod, s.server)] = counts.get((s.pod, s.server), 0) + 1
    world = topo.num_npus
    out["servers"], out["npus"] = len(counts), world
    if npus is not None and world != npus:
        raise bad_value("npus", npus, f"topology {topo.name!r} has a fixed {world} NPUs (no server count to change)")
    gen = task["generator"]
    if gen is not None:
        layout = doc["layout"] = dict(doc.get("layout") or {})
        tp, pp = layout.get("tp", 1), layout.get("pp", 1)
        _check_tp(tp, max(counts.values()))
        if task["dp_auto"]:
            layout["dp"] = _filled_dp(world, tp, pp)
        gb = task["global_batch"]
        if gb is not None:
            dp = layout["dp"] if "dp" in layout else _filled_dp(world, tp, pp)
            params = doc["workload"]["params"] = dict(doc["workload"].get("params") or {})
            if gen == "data_parallel":
                if not dp or gb % dp:
                    raise bad_value("global_batch", gb, f"a multiple of dp = {dp}")
                params["batch"] = gb // dp
            else:
                mb = params.get("micro_batch", _generator_defaults(gen)["micro_batch"])
                if not dp or not isinstance(mb, int) or gb % (mb * dp):
                    raise bad_value("global_batch", gb, f"a multiple of micro_batch x dp = {mb} x {dp}")
                params["micro_batches"] = gb // (mb * dp)
    doc["topology"] = topo  # built above: not built again
    doc.pop("servers", None)
    s = load_scenario(doc)
    workload = s.workload
    options = dict(s.options)
    refused = []
    if task["policy"] == "best":
        workload, choices = best_workload(s.topology, workload, budget=budget, **options)
        refused = sorted({f"{c['collective']} {a}" for c in choices for a in c["refused"]})
    if budget is not None:
        options["max_work"] = budget.left()
    r = run(s.topology, workload, **options)
    if budget is not None:
        budget.spend(r.config["work"])
    from .workload.metrics import totals

    mean = totals(r.ranks).loc["mean"]
    out.update(step_time_s=r.step_time_s, compute_us=float(mean["computation_us"]),
               communication_us=float(mean["communication_us"]),
               exposed_us=float(mean["communicationNotOverlapComputation_us"]), free_us=float(mean["free_us"]))
    if gen is not None:
        lay = s.layout
        tp, pp = lay.get("tp", 1), lay.get("pp", 1)
        dp = lay.get("dp", world // (tp * pp))
        out["samples_per_step"] = samples_per_step(gen, s.params, dp)
        out["seq_len"] = _seq_len(s.model, gen)
    times = r.op_times()
    coll = times[times["kind"] == "collective"]
    pairs = sorted({f"{c}={a}" for c, a in zip(coll["collective"], coll["algorithm"], strict=True)})
    out["algorithms"] = ", ".join(pairs) + (
        f" (policy best: the work bound refused {', '.join(refused)}; raise options.max_work)" if refused else "")
    if task["collective"] is not None:
        out["collective_ms"] = collective_ms(times, task["collective"])


def _check_tp(tp, per: int) -> None:
    """A TP group stays inside a server: ``tp`` must divide its ``per`` NPUs."""
    if tp > per or per % tp:
        raise bad_value("tp", tp, f"a divisor of the {per} NPUs of one server (a TP group stays inside a "
                        "server, on HCCS)")


def _filled_dp(world: int, tp: int, pp: int) -> int:
    """dp of a job that fills the cluster (``world / (tp x pp)``), or why there is none."""
    if world % (tp * pp):
        raise bad_value("dp", "auto", f"tp x pp = {tp * pp} does not divide the {world} NPUs")
    return world // (tp * pp)


def collective_ms(op_times, collective: str) -> float:
    """The longest duration (ms, first start to last end over its ranks) of the operations
    that are ``collective`` (a collective name such as ``allreduce``, or ``sendrecv``) or
    whose name starts with it; NaN when none matches.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"op": ["ar.0", "ar.1", "fwd"], "collective": ["allreduce", "allreduce", ""],
    ...                   "duration_s": [1e-3, 3e-3, 9e-3]})
    >>> collective_ms(t, "allreduce"), collective_ms(t, "ar.0")
    (3.0, 1.0)
    """
    hit = (op_times["collective"] == collective) | op_times["op"].str.startswith(collective)
    hit &= op_times["collective"] != ""
    if not hit.any():
        return math.nan
    return float(op_times.loc[hit, "duration_s"].max() * 1e3)


def _generator_defaults(gen: str) -> dict:
    import inspect

    from .workload.generators import GENERATORS

    sig = inspect.signature(GENERATORS[gen])
    return {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def _seq_len(model, gen: str) -> float:
    """Tokens per sample: the transformer's sequence length (NaN for a layer table)."""
    from .workload.models import Transformer, load_model

    m = load_model(model if model is not None else _generator_defaults(gen)["model"])
    return float(m.seq_len) if isinstance(m, Transformer) else math.nan


# ---- the plan -----------------------------------------------------------------------------------

def plan(scenario, space=None, *, target_step_ms=None, target_collective_ms=None, collective=None,
         price_per_npu_hour=None, policy=None, overrides=None, client=None, progress=None):
    """Run a scenario at every point of a search space and answer a sizing question.

    Parameters
    ----------
    scenario : str, Path, dict or Scenario
        A scenario file or mapping (a :class:`~hcsim.scenario.Scenario` is read again from
        its file).
        Its ``plan:`` section (``space``, ``target_step_ms``, ``target_collective_ms``,
        ``collective``, ``price_per_npu_hour``, ``policy``) gives the defaults of the
        arguments below, checked as strictly.
    space : dict, optional
        ``{axis: [values]}`` (a list, tuple, range or one-dimensional array; a single value is
        a one-value list); replaces the file's space as a whole. Points are the Cartesian product in the order the axes are given, the
        last axis varying fastest (``itertools.product``); ``point`` numbers them from 0.
        Axes: module docstring (:mod:`hcsim.plan`).
    target_step_ms : float, optional
        The question: the smallest cluster whose step time is at most this.
    target_collective_ms : float, optional
        Also (or only) ask that ``collective``'s longest operation take at most this.
    collective : str, optional
        A collective name (``allreduce``) or the start of operation names (``grad.dp``):
        adds the ``collective_ms`` column (:func:`collective_ms`).
    price_per_npu_hour : float, optional
        Adds ``cost_per_step`` = NPU-hours per step x price; the Pareto front is then time
        against cost (else time against NPU-hours).
    policy : {"auto", "best"}, optional
        Algorithm policy of every point (default: the file's, else ``auto``; an axis
        ``policy`` varies it): ``auto`` is HCCL's selection (what the runner does); ``best``
        gives each distinct collective call the fastest candidate simulated alone
        (:func:`best_workload`).
    overrides : dict, optional
        ``{"dotted.path": value}`` set in the scenario before anything else, as
        :func:`hcsim.scenario.load_scenario`'s (the CLI's ``--set``).
    client : dask.distributed.Client, optional
        Evaluate the points on a Dask cluster (:func:`hcsim.parallel.map_points`); the frame
        is identical to the serial run's, in the same order.
    progress : bool, optional
        A progress bar over the points (None: only on a terminal or in a notebook).

    Returns
    -------
    pandas.DataFrame
        One row per point: ``point``, a column per axis (values as given), then
        :data:`COLUMNS` (``collective_ms`` after ``free_ms`` when a collective is asked
        about). Times are ms and means over ranks of the Ascend profiler summary
        (``compute_ms`` = computation, ``communication_ms``, ``exposed_comm_ms`` =
        communicationNotOverlapComputation, ``free_ms``); ``samples_per_step`` comes from the
        generator's parameters (:func:`samples_per_step`: NaN for written-out operations, so
        their throughput columns are NaN and their efficiency compares steps per second);
        ``tokens_per_s`` = samples x the transformer's ``seq_len`` per second (NaN for other
        models); ``scaling_efficiency`` (:func:`scaling_efficiency`); ``npu_hours_per_step``
        = NPUs x step / 3600 s over the whole cluster; ``cost_per_step`` (NaN without a
        price); ``meets_target`` (nullable boolean, NA without a target; False when
        invalid); ``pareto`` (:func:`pareto_front`). ``servers`` and ``npus`` are integers,
        floats with NaN where an invalid point's topology could not be built (an axis
        ``servers`` or ``npus`` is that column, as given). ``attrs["answer"]`` is
        ``{"question", "point", "text"}`` (without a target the question is the fastest
        point); ``attrs["algorithms"]`` per point the ``collective=algorithm`` pairs that
        ran; ``attrs["axes"]`` the axes in order; ``attrs["scenario"]``, ``attrs["policy"]``.

    Raises
    ------
    HcsimError
        One line naming the axis (or argument), the value and what is allowed.

    Examples
    --------
    An 8 MiB allreduce over one and over two servers of the A2 pod, without a target (the
    answer is then the fastest point):

    >>> doc = {"topology": "atlas900-a2-pod", "workload": {"communicators": {"w": "all"}, "ops": [
    ...     {"kind": "collective", "name": "ar", "comm": "w", "collective": "allreduce", "size": "8M"}]}}
    >>> df = plan(doc, {"servers": [1, 2]}, progress=False)
    >>> df[["point", "servers", "npus", "status"]].values.tolist()
    [[0, 1, 8, 'ok'], [1, 2, 16, 'ok']]
    >>> df.attrs["answer"]["text"].startswith("fastest point: point 0, 1 server (8 NPUs)")
    True
    """
    import pandas as pd

    from .parallel import map_points, startup_work
    from .scenario import load_scenario

    source = _source(scenario)
    base = load_scenario(source, overrides=overrides)  # the file's own one-line refusals first
    doc, where, base_dir = _document(source)
    if overrides:
        from .scenario import _overridden

        doc = _overridden(doc, overrides)
    # the topology inline (builder form when it has one): points change its parameters, and a
    # document that names no file relative to the scenario runs the same on any worker
    doc["topology"], tname = _topology_document(doc["topology"], base_dir)
    given = {"space": space, "target_step_ms": target_step_ms, "target_collective_ms": target_collective_ms,
             "collective": collective, "price_per_npu_hour": price_per_npu_hour, "policy": policy}
    try:
        section = _section(base.plan)
    except HcsimError as exc:
        raise type(exc)(f"{where}: {exc}" if where != "<dict>" else str(exc)) from None
    # an argument left out takes the file's plan: value, and an error then names the file's field
    field = {k: k if v is not None or k not in section else f"plan.{k}" for k, v in given.items()}
    value = {k: v if v is not None else section.get(k) for k, v in given.items()}
    try:
        # a file's value an argument replaces is still the file's: checked as strictly
        for k in [k for k, v in given.items() if v is not None and section.get(k) is not None]:
            if k == "space":
                _axes(section[k], doc, tname, base, "plan.space")
            elif k == "policy":
                _policy("plan.policy", section[k])
            elif k == "collective":
                _check_collective("plan.collective", section[k], base.workload, settled=base.generator is None)
            else:
                _positive(f"plan.{k}", section[k])
        target_step_ms = _positive(field["target_step_ms"], value["target_step_ms"])
        target_collective_ms = _positive(field["target_collective_ms"], value["target_collective_ms"])
        price = _positive(field["price_per_npu_hour"], value["price_per_npu_hour"])
        collective, policy = value["collective"], _policy(field["policy"], value["policy"])
        if target_collective_ms is not None and collective is None:
            raise bad_value(field["target_collective_ms"], target_collective_ms, "needs collective (a collective "
                            "name such as allreduce, or the start of operation names)")
        found = collective is None or _check_collective(field["collective"], collective, base.workload,
                                                          settled=base.generator is None)
        axes = _axes(value["space"], doc, tname, base, field["space"])
    except HcsimError as exc:
        if where != "<dict>" and str(exc).startswith("plan."):
            raise type(exc)(f"{where}: {exc}") from None
        raise
    tasks = _tasks(axes, doc, base, policy, collective)
    from .api import WorkBudget
    from .limits import MAX_JOB_WORK

    budget = WorkBudget(base.options["max_work"] if "max_work" in base.options else MAX_JOB_WORK,
                        per_point=client is not None and max(1, len(tasks)), reserved=startup_work(client))
    results = map_points(_evaluate, tasks, client=client, progress=progress, desc="plan", shared=budget)
    ran = [res for res in results if res["status"] == "ok"]
    if not found and ran and all(math.isnan(res["collective_ms"]) for res in ran):
        exc = _no_such_collective(field["collective"], collective, base.workload, len(ran))
        raise type(exc)(f"{where}: {exc}" if where != "<dict>" and field["collective"].startswith("plan.")
                        else str(exc))

    names = [a for a, _ in axes]
    rows = []
    for i, (values, res) in enumerate(zip(itertools.product(*(v for _, v in axes)), results, strict=True)):
        row = _row(res, price, collective)
        row.update({"point": i, **dict(zip(names, values, strict=True))})  # servers / npus as given
        rows.append(row)
    df = pd.DataFrame(rows, columns=["point", *names, *(c for c in _columns(collective) if c not in names)])
    _derive(df, price, target_step_ms, target_collective_ms, collective)
    df.attrs["answer"] = _answer(df, target_step_ms, target_collective_ms, collective)
    df.attrs["scenario"] = where
    df.attrs["policy"] = policy
    df.attrs["axes"] = names
    df.attrs["algorithms"] = [res["algorithms"] for res in results]
    return df


def _columns(collective) -> list:
    cols = list(COLUMNS[1:])
    if collective is not None:
        cols.insert(cols.index("free_ms") + 1, "collective_ms")
    return cols


def _row(res: dict, price, collective) -> dict:
    step_s = res["step_time_s"]
    ok = res["status"] == "ok"
    samples = res["samples_per_step"]
    row = {"servers": res["servers"], "npus": res["npus"], "status": res["status"], "reason": res["reason"],
           "step_time_ms": step_s * 1e3, "samples_per_step": samples,
           "samples_per_s": throughput(samples, step_s), "tokens_per_s": throughput(samples * res["seq_len"], step_s),
           "compute_ms": res["compute_us"] / 1e3, "communication_ms": res["communication_us"] / 1e3,
           "exposed_comm_ms": res["exposed_us"] / 1e3, "free_ms": res["free_us"] / 1e3,
           "npu_hours_per_step": npu_hours(res["npus"], step_s) if ok else math.nan}
    row["cost_per_step"] = row["npu_hours_per_step"] * price if price is not None and ok else math.nan
    if collective is not None:
        row["collective_ms"] = res["collective_ms"]
    return row


def _derive(df, price, target_step_ms, target_collective_ms, collective) -> None:
    """Efficiency, targets and the Pareto front: across points, from the rows."""
    import pandas as pd

    ok = (df["status"] == "ok").tolist()
    step = df["step_time_ms"].tolist()
    for col in ("servers", "npus"):
        if df[col].notna().all():
            df[col] = df[col].astype("int64")
        else:
            df[col] = df[col].astype("float64")
    df["scaling_efficiency"] = scaling_efficiency(df["samples_per_s"].tolist(), df["npus"].tolist(),
                                                  [s / 1e3 for s in step], ok)
    if target_step_ms is None and target_collective_ms is None:
        df["meets_target"] = pd.array([pd.NA] * len(df), dtype="boolean")
    else:
        meets = []
        for i, good in enumerate(ok):
            m = good
            if target_step_ms is not None:
                m = m and step[i] <= target_step_ms
            if target_collective_ms is not None:
                c = df["collective_ms"].iloc[i]
                m = m and c == c and c <= target_collective_ms
            meets.append(bool(m))
        df["meets_target"] = pd.array(meets, dtype="boolean")
    cost = df["cost_per_step" if price is not None else "npu_hours_per_step"].tolist()
    df["pareto"] = pareto_front(step, cost, ok)


def ms_text(ms: float) -> str:
    """Milliseconds as the plan prints them: to 0.1 ms from 100 ms up, else to 4 significant
    figures (a small job's 3.393 ms, not 3.4); ``-`` when not finite.

    >>> ms_text(136.63), ms_text(4.39321), ms_text(0.0861712), ms_text(float("nan"))
    ('136.6', '4.393', '0.08617', '-')
    """
    if ms is None or not math.isfinite(ms):
        return "-"
    return f"{ms:,.1f}" if abs(ms) >= 100 else f"{ms:.4g}"


def _question(target_step_ms, target_collective_ms, collective) -> str:
    parts = []
    if target_step_ms is not None:
        parts.append(f"step time <= {target_step_ms:g} ms")
    if target_collective_ms is not None:
        parts.append(f"{collective} <= {target_collective_ms:g} ms")
    return "smallest cluster with " + " and ".join(parts)


def _answer(df, target_step_ms, target_collective_ms, collective) -> dict:
    ok = (df["status"] == "ok").tolist()
    npus, step = df["npus"].tolist(), df["step_time_ms"].tolist()
    if target_step_ms is None and target_collective_ms is None:
        question = "fastest point"
        cands = [i for i, good in enumerate(ok) if good]
        i = min(cands, key=lambda k: (step[k], npus[k], k)) if cands else None
    else:
        question = _question(target_step_ms, target_collective_ms, collective)
        i = smallest(npus, step, [bool(x) for x in df["meets_target"].tolist()])
    refused = int((df["status"] == "refused").sum())
    unsure = (f"; {refused} point{'s' if refused > 1 else ''} refused by the work bound, not known"
              if refused else "")
    if not any(ok):
        return {"question": question, "point": None, "text": f"{question}: no valid point (all {len(df)} "
                + ("invalid or refused" if refused else "invalid") + ")"}
    if i is None:
        return {"question": question, "point": None,
                "text": f"{question}: no point meets it (fastest valid: "
                        f"{ms_text(min(s for s, g in zip(step, ok, strict=True) if g))} ms){unsure}"}
    row = df.iloc[i]
    text = (f"{question}: point {i}, {int(row['servers'])} server{'s' if row['servers'] != 1 else ''} "
            f"({int(row['npus'])} NPUs), {ms_text(row['step_time_ms'])} ms")
    if collective is not None and target_collective_ms is not None:
        text += f", {collective} {ms_text(row['collective_ms'])} ms"
    text += unsure  # a refused point might have been the answer
    return {"question": question, "point": int(i), "text": text}


# ---- reading the arguments ------------------------------------------------------------------------

def _source(scenario):
    """What :func:`plan` reads: a :class:`~hcsim.scenario.Scenario` stands for its file."""
    from .scenario import Scenario

    if isinstance(scenario, Scenario):
        if scenario.source == "<dict>" or not Path(scenario.source).is_file():
            raise bad_value("scenario", scenario.name, "a file or mapping (a Scenario built from a mapping "
                            "cannot be re-read: pass the mapping)")
        return scenario.source
    return scenario


def _document(scenario):
    """``(document, where, base folder)`` of the scenario (a file or mapping; its YAML, parsed)."""
    from .topology.io import _parse, _read_text

    if isinstance(scenario, dict):
        return copy.deepcopy(scenario), "<dict>", Path(".")
    if isinstance(scenario, os.PathLike):
        scenario = os.fspath(scenario)
    path = Path(scenario)  # load_scenario has read it already: a file
    return _parse(_read_text(path), str(path)), str(path), path.parent


def _section(value) -> dict:
    from .topology.io import _mapping

    return dict(_mapping("plan", value, set(PLAN_KEYS)))


def _positive(name: str, value):
    from .topology.io import _yaml_float_hint

    if value is None:
        return None
    try:  # an int too large for a float (10**400) is refused, not an OverflowError
        x = float(value) if is_real(value) else math.nan
    except OverflowError:
        x = math.inf
    if not math.isfinite(x) or x <= 0:
        raise bad_value(name, value, "a number > 0" + _yaml_float_hint(value))
    return x


def _policy(name: str, value) -> str:
    """The algorithm policy (``auto`` when left out), or a one-line refusal."""
    policy = "auto" if value is None else value
    if not isinstance(policy, str) or policy not in POLICIES:
        raise bad_value(name, policy, "one of " + ", ".join(POLICIES))
    return policy


def _check_collective(name: str, collective, workload, settled: bool) -> bool:
    """Whether ``workload`` has ``collective`` (a collective's name, or the start of a
    collective's or send's operation name). A generator's workload changes with the point (a
    ``pp`` axis adds send/recvs, more servers add DP groups), so a miss there is not
    ``settled`` and is decided after the run (:func:`plan`); written-out operations are the
    same at every point, so a miss is refused now."""
    if not isinstance(collective, str) or not collective:
        raise bad_value(name, collective, "a collective name (allreduce, ...) or the start of operation names")
    kinds, names = _collectives_of(workload)
    if collective in kinds or any(n.startswith(collective) for n in names):
        return True
    if settled:
        raise _no_such_collective(name, collective, workload)
    return False


def _collectives_of(workload) -> tuple[set, list]:
    """The collectives (``sendrecv`` for sends) and their operations' names in ``workload``."""
    from .workload import Collective, SendRecv

    ops = [op for op in workload.ops if isinstance(op, (Collective, SendRecv))]
    return {op.collective if isinstance(op, Collective) else "sendrecv" for op in ops}, [op.name for op in ops]


def _no_such_collective(name: str, collective, workload, ran: int | None = None) -> HcsimError:
    """The refusal of a ``collective`` no operation is (``ran``: after that many valid points)."""
    kinds, names = _collectives_of(workload)
    has = (f"({', '.join(sorted(kinds)) or 'none'}) or the start of one's operation name ({', '.join(names[:3])}"
           + ("...)" if len(names) > 3 else ")"))
    if ran is None:
        return bad_value(name, collective, f"a collective of the workload {has}")
    return bad_value(name, collective, f"a collective of the workload at some point (none of the {ran} valid "
                     f"point{'s' if ran > 1 else ''} runs it; the scenario as written has a collective {has})")


def _topology_document(value, base_dir: Path) -> tuple[dict, str]:
    """The scenario's topology as a document (read from its file or built-in name)."""
    from .topology.io import read_topology_file

    if isinstance(value, dict):
        return copy.deepcopy(value), str(value.get("name", "topology"))
    local = base_dir / value
    source = str(local) if value.endswith((".yaml", ".yml")) and local.is_file() else value
    tdoc, path = read_topology_file(source)
    return tdoc, Path(path).stem


def _axes(space, doc: dict, tname: str, base, label: str = "space") -> list:
    """``[(axis, [values])]`` checked; every problem a one-line error naming the axis."""
    from .topology.io import BUILDERS, SCALE_PARAMETERS, _builder_params, _file_name, _mapping

    space = _mapping(label, space)
    if not space:
        raise bad_value(label, space, "at least one axis {axis: [values]} (servers, npus, tp, pp, dp, ep, "
                        "global_batch, policy, generator or topology parameters): the space argument, the "
                        "command line's --vary AXIS=V1,V2, or the scenario file's plan: space")
    gen = base.generator
    settable = _generator_params(gen) if gen is not None else set()
    tdoc = doc["topology"]
    bname = tdoc.get("builder")
    tparams = {}
    if isinstance(bname, str) and bname in BUILDERS:
        tparams = {_file_name(p): p for p in _builder_params(BUILDERS[bname])[0]}
        tparams.pop(_file_name(SCALE_PARAMETERS.get(bname, "servers")), None)
        tparams.pop("servers", None)
    every_builder = {_file_name(p) for fn in BUILDERS.values() for p in _builder_params(fn)[0]}
    if sum(a in space for a in SIZE_AXES) > 1:
        raise bad_value(label, sorted(space), "servers or npus, not both (both set the cluster size)")
    out = []
    points = 1
    for axis, values in space.items():
        values = _values(f"{label}.{axis}", values)
        if not values:
            raise bad_value(f"{label}.{axis}", values, "at least one value")
        try:
            distinct = len(set(map(_same, values)))
        except (TypeError, ValueError):  # a value that cannot be compared (a signalling NaN, a numpy timedelta)
            raise bad_value(f"{label}.{axis}", values, "numbers, names or true/false, each once") from None
        if distinct != len(values):
            raise bad_value(f"{label}.{axis}", values, "distinct values (one appears twice)")
        points *= len(values)
        if points > MAX_POINTS:
            raise WorkLimitError(f"{label} = {points:,}+ points: at most {MAX_POINTS:,} (hcsim.plan.MAX_POINTS)")
        for v in values:
            _check_value(f"{label}.{axis}", axis, v, values, gen, settable, tparams, tname, bname, every_builder, doc)
        out.append((axis, values))
    if "global_batch" in space:
        other = _BATCH_GENERATORS.get(gen)
        if other in space:
            raise bad_value(f"{label}.global_batch", space["global_batch"], f"not with {other} (it sets {other})")
    return out


def _values(where: str, values) -> list:
    """An axis's values as a list: a list, tuple, range or one-dimensional array (numpy,
    pandas) in its order, or a single value; an unordered or one-shot collection is refused
    (the points are numbered in the values' order)."""
    import collections.abc as abc

    if isinstance(values, (list, tuple, range)):
        return list(values)
    if getattr(values, "ndim", None) == 1 and callable(getattr(values, "tolist", None)):
        return list(values.tolist())  # numpy's int64 becomes int
    if isinstance(values, (abc.Set, abc.Mapping, abc.Iterator)):
        raise bad_value(where, values, "a value or a list of values (in order: the points are numbered by it)")
    return [values]


def _same(value):
    """What makes two values of an axis the same point: equal numbers (``10`` and ``10.0``,
    ``numpy.int64(8)`` and ``8``; a bool is not a number here), else the same text."""
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return ("number", value)
    return (type(value) is bool, repr(value))


def _generator_params(gen: str) -> set:
    import inspect

    from .scenario import _CONTEXT
    from .workload.generators import GENERATORS

    sig = inspect.signature(GENERATORS[gen])
    return {k for k, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - _CONTEXT


def _check_value(where, axis, v, values, gen, settable, tparams, tname, bname, every_builder, doc) -> None:
    """One value of one axis (an axis that cannot be is named with all its values)."""
    from .scenario import load_scenario
    from .topology.io import topology_from_dict

    whole = "an integer from 1 to 1048576"
    if axis in SIZE_AXES:
        from .limits import MAX_NPUS

        if not is_int(v) or not 1 <= v <= MAX_NPUS:
            raise bad_value(where, v, f"an integer from 1 to {MAX_NPUS:,}")
    elif axis in LAYOUT_AXES or axis == "global_batch":
        if gen is None:
            raise bad_value(where, values, "only for a generator workload (this scenario lists its operations)")
        if axis == "global_batch" and gen not in _BATCH_GENERATORS:
            raise bad_value(where, values, f"only for generators {', '.join(_BATCH_GENERATORS)} (this one is {gen})")
        if axis == "dp" and isinstance(v, str) and v == "auto":
            return
        if not is_int(v) or not 1 <= v <= 1 << 20:
            raise bad_value(where, v, whole + (" or auto (world / (tp x pp))" if axis == "dp" else ""))
    elif axis == "policy":
        if not isinstance(v, str) or v not in POLICIES:
            raise bad_value(where, v, "one of " + ", ".join(POLICIES))
    elif axis in settable:
        try:  # the value alone, on the scenario as it is: a refusal naming the parameter is the value's
            load_scenario(doc, overrides={f"workload.params.{axis}": v})
        except HcsimError as exc:
            msg = str(exc)
            field = f"workload.params.{axis} = "
            if field in msg:
                rest = msg.split(field, 1)[1]
                raise ConfigError(f"{where} = {rest}") from None
    elif axis in tparams:
        trial = copy.deepcopy(doc["topology"])
        trial["params"] = {**(trial.get("params") or {}), axis: v}
        try:
            from .topology.io import SCALE_PARAMETERS

            topology_from_dict(trial, "topology", **({"servers": 1} if bname in SCALE_PARAMETERS else {}))
        except HcsimError as exc:
            msg = str(exc)
            field = f"params.{axis} = "
            if field in msg:
                raise ConfigError(f"{where} = {msg.split(field, 1)[1]}") from None
            raise ConfigError(f"{where} = {shown(v)}: {msg}") from None
    elif axis in every_builder or axis in ("servers_per_leaf", "nodes"):
        known = ", ".join(sorted(tparams)) or "none (it is not a builder-form topology)"
        raise bad_value(where, values, f"not a parameter of topology {tname!r}"
                        + (f" (builder {bname})" if bname else "") + f"; its parameters: {known}"
                        + ("; the size is the servers axis" if axis == "nodes" else ""))
    else:
        allowed = ["servers", "npus", "policy"]
        if gen is not None:
            allowed += ["tp", "pp", "dp", "ep"] + (["global_batch"] if gen in _BATCH_GENERATORS else [])
            allowed += [f"{gen} parameters ({', '.join(sorted(settable))})"]
        allowed.append(f"topology {tname!r} parameters ({', '.join(sorted(tparams)) or 'none'})")
        from .topology.io import _did_you_mean

        raise bad_value(where, values, "not an axis" + _did_you_mean(axis, [*SIZE_AXES, *LAYOUT_AXES, "policy",
                                                                        "global_batch", *settable, *tparams])
                        + "; allowed: " + ", ".join(allowed))


def _tasks(axes, doc: dict, base, policy: str, collective) -> list:
    """One plain-data task per point (:func:`_evaluate` runs it, on a worker or here)."""
    from .topology.io import SCALE_PARAMETERS

    names = [a for a, _ in axes]
    bname = doc["topology"].get("builder")
    template = copy.deepcopy(doc)
    template.pop("plan", None)
    template.pop("whatif", None)
    size_varies = any(a in names for a in ("servers", "npus", "tp", "pp"))
    tasks = []
    for values in itertools.product(*(v for _, v in axes)):
        point = dict(zip(names, values, strict=True))
        # the template's mappings stay shared: a point sets new ones (layout, topology params) and
        # _run_point copies its document before it uses it (ten thousand deep copies took 2 s)
        d = {**template, "topology": dict(template["topology"])}
        overrides = {}
        for axis, v in point.items():
            if axis in LAYOUT_AXES:
                if axis == "dp" and isinstance(v, str) and v == "auto":
                    continue
                d["layout"] = {**(d.get("layout") or {}), axis: v}
            elif axis in SIZE_AXES or axis in ("policy", "global_batch"):
                continue
            elif base.generator is not None and axis in _generator_params(base.generator):
                overrides[f"workload.params.{axis}"] = v
            else:
                d["topology"]["params"] = {**(d["topology"].get("params") or {}), axis: v}
        if overrides:
            from .scenario import _overridden

            d = _overridden(d, overrides)
        dp_auto = base.generator is not None and (point.get("dp") == "auto" or ("dp" not in point and size_varies))
        if dp_auto and d.get("layout"):
            d["layout"] = {k: v for k, v in d["layout"].items() if k != "dp"}
        tasks.append({"doc": d, "servers": point.get("servers"), "npus": point.get("npus"),
                      "scalable": bname in SCALE_PARAMETERS, "generator": base.generator, "dp_auto": dp_auto,
                      "global_batch": point.get("global_batch"), "policy": point.get("policy", policy),
                      "collective": collective})
    return tasks


class _CallableModule(type(sys)):
    """``hcsim.plan`` is both this module and the function: importing the module (which sets
    the package's attribute to it) must not take ``hcsim.plan(...)`` away."""

    def __call__(self, *args, **kwargs):
        return plan(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["COLUMNS", "LAYOUT_AXES", "MAX_POINTS", "PLAN_KEYS", "POLICIES", "SIZE_AXES", "best_workload",
           "collective_ms", "ms_text", "npu_hours", "pareto_front", "plan", "samples_per_step", "scaling_efficiency",
           "smallest", "throughput"]
