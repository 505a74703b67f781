"""The Python API: :func:`simulate` and :func:`sweep`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from . import verify as _verify
from .algorithms.registry import (
    algorithms_for,
    check_collective,
    get_algorithm,
    make_args,
    run_builder,
)
from .algorithms.schedule import REDUCING, check_structure
from .analytical import path_parameters
from .engine.des import EngineConfig, FlowSimulator
from .engine.result import Result, tables_from_engine
from .errors import ConfigError, bad_value
from .hccl.algo_env import parse_hccl_algo
from .hccl.buffer import looped, piece_sizes
from .hccl.selection import HcclConfig, candidates, select_algorithm
from .topology.io import load_topology
from .units import parse_size, size_range

MODES = ("des", "analytical")

DEFAULT_ALGORITHM = {"allreduce": "ring", "allgather": "ring", "reducescatter": "ring",
                     "broadcast": "tree", "reduce": "tree", "alltoall": "pairwise", "sendrecv": "ring"}
"""Algorithm used when none is named."""

RECORD_LIMIT = 1_000_000
"""``record="auto"`` keeps per-transfer times when ranks x steps is at most this."""

AUTO_VERIFY_STATE = 1 << 21
"""``verify="auto"`` checks built-in algorithms when the verifier's state is at most this
(p = 128 for ring allreduce); their structure does not change with p, and the tests
verify every one of them up to p = 64."""
"""``record="auto"`` keeps per-transfer times when ranks x steps is at most this."""


def simulate(topology, collective: str, size, algorithm=None, *, ranks=None, root: int = 0,
             mode: str = "des", routing: str = "ecmp", ecmp_seed: int = 0,
             step_overhead_s: float | None = None, launch_overhead_s: float | None = None,
             record="auto", verify="auto", send_matrix=None, hccl_algo: str | None = None,
             hccl: HcclConfig | None = None, qps: int | None = None) -> Result:
    """Simulate one collective call.

    Parameters
    ----------
    topology : str, Path or Topology
        Built-in name, YAML file, or a Topology object.
    collective : str
        ``allreduce``, ``allgather``, ``reducescatter``, ``broadcast``, ``reduce``,
        ``alltoall`` or ``sendrecv``.
    size : int or str
        Message size in nccl-tests' convention, e.g. ``"64MiB"``.
    algorithm : str or callable, optional
        A registered name (``hcsim algos``) or ``build(args) -> Schedule``.
    ranks : None, int or list
        All NPUs, the first k, or the listed NPU names/indices.
    root : int
        Root rank for broadcast and reduce.
    mode : {"des", "analytical"}
        Event-driven (contention-aware) or closed form.
    routing : {"ecmp", "spray"}
    step_overhead_s, launch_overhead_s : float, optional
        Override the topology's defaults.
    record : "auto", bool
        Keep per-transfer times (transfer table, critical path).
    verify : "auto", bool
        Check the schedule with the semantic verifier first ("auto": when small enough,
        always for a user's algorithm).
    send_matrix : array-like, optional
        AlltoAllV: bytes from rank i to rank j (p x p); ``size`` may then be None.
    hccl_algo : str, optional
        An HCCL_ALGO string (``"level0:NA;level1:H-D_R"`` or the per-operator form); implies
        ``algorithm="auto"`` under that constraint.
    hccl : HcclConfig, optional
        HCCL settings (CCL buffer size, determinism, queue pairs, expansion mode). On an Ascend
        topology (one with a ``product``) HCCL's defaults apply when none is given, so data
        larger than the 200 MB buffer runs in buffer-sized loops.
    qps : int, optional
        Queue pairs per connection (default: ``hccl.qps_per_connection`` or 1).

    ``algorithm="auto"`` runs what HCCL would pick for the topology's product, the size and
    the server count (:func:`hcsim.hccl.selection.select_algorithm`); ``"best"`` simulates
    every candidate and keeps the fastest. ``Result.config["selected_by"]`` says why.

    Returns
    -------
    Result

    Examples
    --------
    >>> r = simulate("atlas800t-a2", "allreduce", "64MiB", algorithm="mesh")
    >>> round(r.busbw_GBps, 1) > 0
    True
    """
    if mode not in MODES:
        raise bad_value("mode", mode, "one of " + ", ".join(MODES))
    topo = load_topology(topology)
    rank_nodes = topo.resolve_ranks(ranks)
    nbytes = 1 if (size is None and send_matrix is not None) else parse_size(size)
    parsed_algo = parse_hccl_algo(hccl_algo)
    if algorithm is None:
        algorithm = "auto" if hccl_algo is not None else DEFAULT_ALGORITHM.get(collective, "ring")
    servers, pods = rank_layout(topo, rank_nodes)
    selected_by = None
    if hccl is None and topo.product is not None:
        hccl = HcclConfig()  # an Ascend machine moves data through HCCL's CCL buffer
    if algorithm == "best" and hccl_algo is not None:
        raise ConfigError(f"hccl_algo = {hccl_algo!r}: 'best' races every candidate; HCCL_ALGO goes with 'auto'")
    if algorithm == "best":
        check_collective(collective)
        kw = dict(ranks=ranks, root=root, mode=mode, routing=routing, ecmp_seed=ecmp_seed,
                  step_overhead_s=step_overhead_s, launch_overhead_s=launch_overhead_s, record=record,
                  verify=verify, send_matrix=send_matrix, hccl=hccl or HcclConfig(), qps=qps)
        cands = candidates(collective, servers or (len(rank_nodes),), pods, topo.product)
        if not cands:
            raise ConfigError(f"algorithm = 'best': no candidate algorithm for {collective} on this layout")
        results = [simulate(topo, collective, size, c, **kw) for c in cands]
        best = min(results, key=lambda r: r.time_s)
        best.config["selected_by"] = f"fastest of {len(cands)} candidates by simulation ({mode})"
        best.config["candidates"] = {r.algorithm: r.time_s for r in results}
        return best
    if algorithm == "auto":
        check_collective(collective)
        hccl = hccl or HcclConfig()
        algorithm, selected_by = select_algorithm(topo.product, collective, nbytes,
                                                  servers or (len(rank_nodes),), pods, parsed_algo, hccl)
    elif hccl_algo is not None:
        raise ConfigError(f"hccl_algo = {hccl_algo!r}: HCCL_ALGO picks the algorithm; pass algorithm='auto' "
                          f"or no algorithm, not {algorithm!r}")
    spec = get_algorithm(collective, algorithm)
    if spec.levels > 1 and not servers:
        raise ConfigError(f"ranks: algorithm {spec.name!r} needs the ranks of each server to be consecutive "
                          "(in the topology's rank order)")
    args = make_args(collective, len(rank_nodes), nbytes, root, servers, pods, send_matrix)
    nbytes = args.nbytes
    defaults = topo.defaults.for_mode(hccl.expansion_mode if hccl is not None else None)
    if qps is None:
        qps = hccl.qps_per_connection if hccl is not None else 1
    cfg = EngineConfig(step_overhead_s=defaults.step_overhead_s if step_overhead_s is None else step_overhead_s,
                       launch_overhead_s=(defaults.launch_for(collective) if launch_overhead_s is None
                                          else launch_overhead_s),
                       routing=routing, ecmp_seed=ecmp_seed, record=False, qps=qps,
                       message_regimes=defaults.message_regimes)
    if verify not in (False, "auto", True):
        raise bad_value("verify", verify, "'auto', True or False")
    schedule = looped(spec, args, hccl.buffer_bytes) if hccl is not None else run_builder(spec, args)
    verified = verify is True or (verify == "auto" and (spec.user or _small_enough(schedule)))
    if verified:
        _verify.verify(schedule)
    elif mode == "des":
        check_structure(schedule)
    config = {"topology": topo.name, "routing": routing, "step_overhead_s": cfg.step_overhead_s,
              "launch_overhead_s": cfg.launch_overhead_s, "root": root,
              "buffer_loops": schedule.notes.get("buffer_loops", 1), "verified": bool(verified)}
    if selected_by:
        config["selected_by"] = selected_by
    if mode == "analytical":
        if spec.cost is None:
            raise ConfigError(f"algorithm = {spec.name!r}: mode 'analytical' needs a closed form; "
                              "user algorithms run in mode 'des'")
        if cfg.message_regimes is not None and not cfg.message_regimes.trivial:
            raise ConfigError(f"mode = 'analytical': topology {topo.name!r} has size-dependent message costs "
                              "(defaults.message_regimes), which the closed forms do not model; use mode 'des'")
        abg = path_parameters(topo, rank_nodes, schedule, routing, ecmp_seed, cfg.step_overhead_s, spec.levels, qps)
        pieces = piece_sizes(args, hccl.buffer_bytes) if hccl is not None else [args.nbytes]
        t = cfg.launch_overhead_s + sum(spec.cost(dataclasses.replace(args, nbytes=n), abg) for n in pieces)
        for lv, m in enumerate(abg if spec.levels > 1 else (abg,)):
            suffix = f"_level{lv}" if spec.levels > 1 else ""
            config.update({f"alpha_s{suffix}": m.alpha_s, f"beta_s_per_B{suffix}": m.beta_s_per_B,
                           f"gamma_s_per_B{suffix}": m.gamma_s_per_B})
        return Result(collective, spec.name, mode, args.p, nbytes, t, config=config)
    if record == "auto":
        record = args.p * len(schedule.steps) <= RECORD_LIMIT
    elif record not in (True, False):
        raise bad_value("record", record, "'auto', True or False")
    cfg = dataclasses.replace(cfg, record=bool(record))
    sim = FlowSimulator(topo, rank_nodes, schedule, cfg)
    t = sim.run()
    steps, transfers, links, critical = tables_from_engine(sim, t)
    config.update(instants=sim.instants, full_rate_recomputes=sim.full_recomputes)
    return Result(collective, spec.name, mode, args.p, nbytes, t, steps, transfers, links, critical, config)


def rank_layout(topo, rank_nodes) -> tuple[tuple, tuple]:
    """Ranks per server and servers per pod, from the NPUs' coordinates; ``((), ())`` when the
    ranks of a server (or the servers of a pod) are not consecutive."""
    keys = [(topo.npu_spec(n).pod, topo.npu_spec(n).server) for n in rank_nodes]
    runs: list[list] = []
    for key in keys:
        if runs and runs[-1][0] == key:
            runs[-1][1] += 1
        else:
            runs.append([key, 1])
    if len({k for k, _ in runs}) != len(runs):
        return (), ()
    pod_runs: list[list] = []
    for (pod, _), _count in runs:
        if pod_runs and pod_runs[-1][0] == pod:
            pod_runs[-1][1] += 1
        else:
            pod_runs.append([pod, 1])
    if len({k for k, _ in pod_runs}) != len(pod_runs):
        return tuple(c for _, c in runs), ()
    return tuple(c for _, c in runs), tuple(c for _, c in pod_runs)


def _small_enough(schedule) -> bool:
    k = schedule.p if schedule.args.collective in REDUCING else 1
    return schedule.p * schedule.num_chunks * k <= AUTO_VERIFY_STATE


def resolve_sizes(sizes, factor: int = 2) -> list[int]:
    """``(min, max)`` tuple: a doubling range (x factor); a list: those sizes; a scalar: one size."""
    if isinstance(sizes, tuple) and len(sizes) == 2:
        return size_range(sizes[0], sizes[1], factor)
    if isinstance(sizes, (str, int)):
        return [parse_size(sizes)]
    if isinstance(sizes, Sequence):
        if not sizes:
            raise bad_value("sizes", sizes, "at least one size")
        return [parse_size(s) for s in sizes]
    raise bad_value("sizes", sizes, "a (min, max) tuple, a list of sizes, or one size")


def sweep(topology, collective: str, sizes=("8", "1GiB"), algorithms=None, *, factor: int = 2,
          **kwargs) -> pd.DataFrame:
    """Simulate ``collective`` over a range of sizes for several algorithms.

    Parameters
    ----------
    topology, collective
        As for :func:`simulate`.
    sizes : tuple, list or scalar
        ``(min, max)`` multiplies by ``factor`` from min up to max (as nccl-tests' -b/-e/-f);
        a list gives the sizes themselves.
    algorithms : list, optional
        Names or callables; default every algorithm registered for the collective.
    **kwargs
        Passed to :func:`simulate` (``ranks``, ``mode``, ``routing``, ...).

    Returns
    -------
    pandas.DataFrame
        One row per (size, algorithm): collective, algorithm (as requested), mode, ranks,
        size_bytes, time_us, algbw_GBps, busbw_GBps, selected (the algorithm that ran; for
        ``"auto"`` and ``"best"`` the one chosen at that size).

    Examples
    --------
    >>> df = sweep("atlas800t-a2", "allgather", sizes=("1K", "4K"), algorithms=["ring", "mesh"])
    >>> list(df["size_bytes"].unique())
    [1024, 2048, 4096]
    """
    topo = load_topology(topology)
    size_list = resolve_sizes(sizes, factor)
    if algorithms is None:
        algorithms = algorithms_for(collective)
    elif isinstance(algorithms, str):
        algorithms = [algorithms]
    rows = []
    for n in size_list:
        for algo in algorithms:
            r = simulate(topo, collective, n, algo, **kwargs)
            row = r.row()
            row["selected"] = r.algorithm  # what ran: differs from the request for "auto" and "best"
            if isinstance(algo, str):
                row["algorithm"] = algo
            rows.append(row)
    return pd.DataFrame(rows)
