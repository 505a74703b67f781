"""The Python API: :func:`simulate` and :func:`sweep`."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import itertools
import math
import numbers
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .algorithms.registry import (
    AlgorithmSpec,
    algorithms_for,
    check_collective,
    get_algorithm,
    make_args,
    run_builder,
)
from .algorithms.schedule import (
    BUSBW_FACTOR,
    COLLECTIVES,
    REDUCING,
    CollectiveArgs,
    Step,
    check_structure,
    min_size,
)
from .analytical import cached_path_parameters, path_parameters
from .dtypes import (
    REDUCING_COLLECTIVES,
    check_elements,
    check_supported,
    inline_reduce_supported,
    parse_dtype,
    parse_reduce_op,
    reduce_time_factor,
    size_from_count,
)
from .engine.des import EngineConfig, FlowSimulator, shares_in_network_switch
from .engine.result import Result, tables_from_engine
from .errors import ConfigError, WorkLimitError, bad_value, check_topology, is_int, is_real
from .hccl.algo_env import parse_hccl_algo
from .hccl.buffer import loop_buffer_bytes, loop_pieces, one_server_mesh, piece_bytes
from .hccl.selection import HcclConfig, candidates, select_algorithm
from .limits import (
    BYTES_PER_UNIT_BUILT,
    MAX_ALLTOALLV_RANKS,
    MAX_CALL_RANKS,
    MAX_DES_TRANSFERS,
    MAX_FLOW_UPDATES,
    MAX_SCHEDULE_BYTES,
    MAX_SIZE_BYTES,
    MAX_SWEEP_SIZES,
    MAX_WORK,
    RANKS_PER_UNIT,
    WORK_PER_INSTANT,
    WORK_PER_ROUTED_STEP,
    WORK_UNITS,
)
from .parallel import WORK_PER_LOCAL_WORKER, map_points, startup_work
from .progress import check_progress, progress_bar
from .topology.io import load_topology
from .topology.model import ROUTING_POLICIES
from .units import GB, parse_size, size_range
from .verify import verify as _verify_schedule

if TYPE_CHECKING:
    import pandas as pd

MODES = ("des", "analytical")

DEFAULT_ALGORITHM = {"allreduce": "ring", "allgather": "ring", "reducescatter": "ring",
                     "broadcast": "tree", "reduce": "tree", "scatter": "ring", "gather": "ring",
                     "alltoall": "pairwise", "alltoallv": "pairwise", "sendrecv": "ring"}
"""Algorithm used when none is named (every collective has one it is registered with)."""

RECORD_LIMIT = 1_000_000
"""``record="auto"`` keeps per-transfer times when ranks x steps is at most this."""

AUTO_VERIFY_STATE = 1 << 21
"""``verify="auto"`` checks built-in algorithms when the verifier's state is at most this
(p = 128 for ring allreduce); their structure does not change with p, and the tests
verify every one of them up to p = 64."""


def simulate(topology, collective: str, size=None, algorithm=None, *, ranks=None, root: int = 0,
             mode: str = "des", routing: str = "ecmp", ecmp_seed: int = 0,
             step_overhead_s: float | None = None, launch_overhead_s: float | None = None,
             record="auto", verify="auto", send_matrix=None, hccl_algo: str | None = None,
             hccl: HcclConfig | None = None, qps: int | None = None,
             max_transfers: int = MAX_DES_TRANSFERS, max_flow_updates: int = MAX_FLOW_UPDATES,
             count: int | None = None, dtype: str | None = None, reduce_op: str = "sum",
             progress=None, max_work: int | None = MAX_WORK) -> Result:
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
    max_transfers : int
        Work bound: a call whose schedule holds more transfers than this (all steps of all
        CCL-buffer loops together) is refused before it runs, with the estimate in the error
        (:data:`hcsim.limits.MAX_DES_TRANSFERS` by default; raise it to proceed anyway).
    max_flow_updates : int
        Work bound of the event-driven run: it stops with
        :class:`~hcsim.errors.WorkLimitError` after this many flow-rate recomputations
        (:data:`hcsim.limits.MAX_FLOW_UPDATES`, about a minute on a 2-core machine);
        deterministic, so the same call always stops at the same point.
    max_work : int or None
        Work bound of the event-driven run, all its CCL-buffer loops together, in engine units
        (:data:`hcsim.limits.WORK_UNITS`: :data:`hcsim.limits.WORK_PER_INSTANT` per event instant, step
        entry or contention-free step, more on many ranks and for each step routed, 1 per flow-rate
        update; about 1 us each on a 2-core machine): the run stops with a one-line
        :class:`~hcsim.errors.WorkLimitError` once past it (:data:`hcsim.limits.MAX_WORK`, a few
        seconds; deterministic). None: no bound but ``max_flow_updates``.
        ``Result.config["work"]`` is what the run took.
    count : int, optional
        Elements instead of ``size`` (needs ``dtype``): the size is count x element size,
        times the ranks for allgather, reducescatter, scatter, gather and alltoall
        (nccl-tests' and hccl_test's convention, docs/facts.md s5).
    dtype : str, optional
        Data type (``hcsim.dtypes.DTYPES``: ``fp16``, ``bf16``, ``fp32``, ``int8``...; hccl_test's
        ``bfp16`` and ``float16`` spellings too). With it, a size that is not a whole number of
        elements per rank is refused, and on an Ascend topology so is a (collective, dtype, op)
        HCCL does not run (:func:`hcsim.dtypes.check_supported`). None: bytes, as before.
    reduce_op : {"sum", "prod", "max", "min", "avg"}
        The reduction. On an Ascend topology a (dtype, op) the SDMA engine cannot reduce
        inline (int64, prod; on 910A anything but fp32 sum) is reduced on the vector core at
        the NPUs' ``reduce_Bps`` instead (:func:`hcsim.dtypes.inline_reduce_supported`); the
        vector core's time per byte is scaled by :func:`hcsim.dtypes.reduce_time_factor`.
    progress : None, True or False
        A progress bar on stderr over the event-driven run's steps (None: auto, on a terminal
        or in a notebook once the run has lasted a second; :mod:`hcsim.progress`).

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
    _check_call(collective, algorithm, root, mode, routing, ecmp_seed, step_overhead_s, launch_overhead_s,
                record, verify, hccl, qps, max_transfers, max_flow_updates, max_work)
    # Python ints from here on: a numpy integer's own arithmetic wraps or overflows (np.uint8(255) + 1)
    ecmp_seed, max_transfers, max_flow_updates = int(ecmp_seed), int(max_transfers), int(max_flow_updates)
    qps = None if qps is None else int(qps)
    max_work = None if max_work is None else int(max_work)
    check_progress(progress)
    topo = load_topology(topology)
    rank_nodes = topo.resolve_ranks(ranks)
    if not is_int(root) or not 0 <= root < len(rank_nodes):
        raise bad_value("root", root, f"a rank from 0 to {len(rank_nodes) - 1}")
    root = int(root)
    reduce_op = parse_reduce_op(reduce_op)
    if dtype is not None:
        dtype = parse_dtype(dtype)
        check_supported(collective, dtype, reduce_op, topo.product)
    if count is not None:
        if dtype is None:
            raise bad_value("count", count, "needs a dtype (the size is count x element size)")
        if size is not None:
            raise bad_value("size", size, "give either size (bytes) or count + dtype, not both")
        size = size_from_count(collective, count, dtype, len(rank_nodes))
    nbytes = 1 if (size is None and send_matrix is not None) else parse_size(size)
    if dtype is not None and not (size is None and send_matrix is not None):
        check_elements(collective, nbytes, dtype, len(rank_nodes))
    inline_ok = _reduces_inline(collective, topo.product, dtype, reduce_op)  # else HCCL uses the vector core
    parsed_algo = parse_hccl_algo(hccl_algo)
    if algorithm is None:
        algorithm = "auto" if hccl_algo is not None else DEFAULT_ALGORITHM[collective]
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
                  verify=verify, send_matrix=send_matrix, hccl=hccl, qps=qps,
                  max_transfers=max_transfers, max_flow_updates=max_flow_updates, dtype=dtype, reduce_op=reduce_op,
                  progress=progress)
        cands = candidates(collective, servers or (len(rank_nodes),), pods, topo.product,
                           shares_in_network_switch(topo, rank_nodes, dtype, reduce_op))
        if not cands:
            raise ConfigError(f"algorithm = 'best': no candidate algorithm for {collective} on this layout")
        results, budget = [], WorkBudget(max_work)  # one work bound for the whole race
        for c in cands:
            try:
                r = simulate(topo, collective, size, c, max_work=budget.left(), **kw)
            except WorkLimitError as exc:  # in terms of the call's bound, with what every candidate did
                raise _whole_call(exc, max_work, budget.spent) from None
            budget.spend(r.config.get("work", 0))
            results.append(r)
        best = min(results, key=lambda r: r.time_s)
        best.config["selected_by"] = f"fastest of {len(cands)} candidates by simulation ({mode})"
        best.config["candidates"] = {r.algorithm: r.time_s for r in results}
        if mode == "des":
            best.config["work"] = budget.spent
        return best
    if algorithm == "auto":
        check_collective(collective)
        # HCCL's rules read its settings; the call still runs through a CCL buffer only where
        # one is (an Ascend topology, or hccl= given), as the same algorithm named would
        algorithm, selected_by = select_algorithm(topo.product, collective, nbytes,
                                                  servers or (len(rank_nodes),), pods, parsed_algo,
                                                  hccl or HcclConfig())
    elif hccl_algo is not None:
        raise ConfigError(f"hccl_algo = {hccl_algo!r}: HCCL_ALGO picks the algorithm; pass algorithm='auto' "
                          f"or no algorithm, not {algorithm!r}")
    spec = get_algorithm(collective, algorithm)
    if spec.in_network:  # the switch reduces only some types and operations
        from .algorithms.nvls import check_reduction

        check_reduction(dtype, reduce_op)
    if spec.levels > 1 and not servers:
        raise ConfigError(f"ranks: algorithm {spec.name!r} needs the ranks of each server to be consecutive "
                          "(in the topology's rank order)")
    args = make_args(collective, len(rank_nodes), nbytes, root, servers, pods,
                     _send_matrix(send_matrix, len(rank_nodes), collective) if send_matrix is not None else None)
    nbytes = args.nbytes
    if nbytes < min_size(collective, args.p):
        raise bad_value("size", nbytes, _too_small(collective, args.p))
    defaults = topo.defaults.for_mode(hccl.expansion_mode if hccl is not None else None)
    if qps is None:
        qps = hccl.qps_per_connection if hccl is not None else 1
    cfg = EngineConfig(step_overhead_s=defaults.step_overhead_s if step_overhead_s is None else step_overhead_s,
                       launch_overhead_s=(defaults.launch_for(collective) if launch_overhead_s is None
                                          else launch_overhead_s),
                       routing=routing, ecmp_seed=ecmp_seed, record=False, qps=qps,
                       message_regimes=defaults.message_regimes, max_flow_updates=max_flow_updates,
                       reduce_time_factor=reduce_time_factor(dtype, reduce_op) if dtype is not None else 1.0,
                       inline_reduce=inline_ok)
    # the CCL buffer's loops as the executor HCCL runs sizes them (the 910B's one-server ones by the whole buffer)
    buffer_bytes = loop_buffer_bytes(args, hccl.buffer_bytes if hccl is not None else None, topo.product, spec.name,
                                     inline_ok)
    # the analytical mode of a large call is bounded by the extrapolated count and builds its
    # schedule only when the size-independent path parameters are not cached yet
    lazy = mode == "analytical" and args.p > PROBE_RANKS and args.send_matrix is None and not spec.user \
        and verify is not True
    built: dict = {}
    check_work(spec, args, buffer_bytes, max_transfers, exact=not lazy, built=built, max_work=max_work)
    # HCCL runs data larger than its CCL buffer as loops, each a whole collective on its piece;
    # hcsim holds every rank until all have finished loop i (hccl/buffer.py: HCCL's closing
    # handshakes are with the peers a rank exchanged with, which for the symmetric collectives comes
    # to the same), so a loop's time depends on its piece size alone: each distinct piece size is
    # simulated once and the loops add up, in both modes (equal to the looped schedule with
    # Schedule.barriers through the engine; tests/test_robust_api.py).
    loops = loop_pieces(args, buffer_bytes)
    pieces = [(dataclasses.replace(args, nbytes=n), count) for n, count in loops.items()]
    if lazy:  # built below only if its path parameters are not cached; never verified on this many ranks
        schedules, verified = None, False
    else:
        schedules = [(built.get(piece.nbytes) or run_builder(spec, piece), count) for piece, count in pieces]
        steps = sum(len(sch.steps) for sch, _ in schedules)
        if mode == "des" and max_work is not None and steps * WORK_PER_INSTANT > max_work:
            # each step is entered at least once (an empty one too, if more cheaply): refused before
            # it is verified or run (a user's schedule of a million steps verified for 39 s first)
            exc = WorkLimitError(f"max_work = {max_work}: {spec.name} {collective} holds {steps:,} steps "
                                 f"({WORK_PER_INSTANT} units each at least: {steps * WORK_PER_INSTANT:,}); use fewer "
                                 "ranks or steps, mode='analytical', or raise max_work (--max-work)")
            exc.work = 0  # refused before any work: a command's budget names its own bound (WorkBudget)
            raise exc
        verified = verify is True or (verify == "auto" and (spec.user or all(_small_enough(s) for s, _ in schedules)))
    for schedule, _ in schedules or ():
        if verified:
            _verify_once(spec, schedule, force=verify is True)
        elif mode == "des":
            check_structure(schedule)
    config = {"topology": topo.name, "routing": routing, "step_overhead_s": cfg.step_overhead_s,
              "launch_overhead_s": cfg.launch_overhead_s, "root": root,
              "buffer_loops": sum(loops.values()), "verified": bool(verified)}
    if selected_by:
        config["selected_by"] = selected_by
    if dtype is not None or reduce_op != "sum":  # calls in bytes with a sum keep their config as before
        config.update(dtype=dtype, count=None if dtype is None else check_elements(collective, nbytes, dtype, args.p),
                      reduce_op=reduce_op, reduce_time_factor=cfg.reduce_time_factor,
                      inline_reduce=inline_ok)
    if mode == "analytical":
        if spec.cost is None:
            raise ConfigError(f"algorithm = {spec.name!r}: mode 'analytical' needs a closed form; "
                              "user algorithms run in mode 'des'")
        if cfg.message_regimes is not None and not cfg.message_regimes.trivial:
            raise ConfigError(f"mode = 'analytical': topology {topo.name!r} has size-dependent or once-a-call message costs "
                              "(defaults.message_regimes), which the closed forms do not model; use mode 'des'")
        # the rank pairs do not depend on the size: cached per algorithm, ranks, layout and options
        key = (spec, collective, args.p, servers, pods, root,
               None if send_matrix is None else np.asarray(args.send_matrix, dtype=np.int64).tobytes())
        first = pieces[0][0]
        if spec.shape is not None:  # its rank pairs are the same at every size of one shape
            key = key + (spec.shape(first),)
        abg = _analytical_parameters(topo, rank_nodes, spec, key,
                                     (lambda: run_builder(spec, first)) if lazy else schedules[0][0], routing, ecmp_seed,
                                     cfg.step_overhead_s, qps, cfg.inline_reduce, cfg.reduce_time_factor,
                                     max_work=max_work)
        t = defaults.call_time(cfg.launch_overhead_s, sum(count * spec.cost(piece, abg) for piece, count in pieces))
        for lv, m in enumerate(abg if spec.levels > 1 else (abg,)):
            suffix = f"_level{lv}" if spec.levels > 1 else ""
            config.update({f"alpha_s{suffix}": m.alpha_s, f"beta_s_per_B{suffix}": m.beta_s_per_B,
                           f"gamma_s_per_B{suffix}": m.gamma_s_per_B})
        return Result(collective, spec.name, mode, args.p, nbytes, t, config=config)
    # the launch first, then every piece's device time; with launch_overlap the device time alone, and
    # the call costs the larger of it and the launch (added in this order: results as before, bit for bit)
    t = 0.0 if defaults.launch_overlap else cfg.launch_overhead_s
    tables = None
    instants = recomputes = updates = lone = entries = 0
    work = build_work(spec, args, buffer_bytes)  # its schedules' building, charged first (0 on few ranks)
    total = sum(len(s.steps) for s, _ in schedules) if progress is not False else 0
    with progress_bar(total, f"{collective} {spec.name}", progress) as steps_bar:
        for i, (schedule, count) in enumerate(schedules):
            keep = args.p * len(schedule.steps) <= RECORD_LIMIT if record == "auto" else record
            run_cfg = dataclasses.replace(cfg, record=bool(keep),
                                          launch_overhead_s=cfg.launch_overhead_s if i == 0 else 0.0,
                                          max_work=None if max_work is None else max_work - work)
            sim = FlowSimulator(topo, rank_nodes, schedule, run_cfg)
            if steps_bar.enabled:
                sim.on_progress = _StepsDone(steps_bar)
            try:
                elapsed = sim.run()
            except WorkLimitError as exc:  # what the call's earlier loops took counts too
                raise _whole_call(exc, max_work, work) from None
            if sim.on_progress is not None:
                sim.on_progress(len(schedule.steps))  # a rank-less last step is never retired
            if i == 0:
                tables = functools.partial(tables_from_engine, sim, elapsed)  # built when first read
                elapsed -= cfg.launch_overhead_s
            if sim.call_overhead_s:  # the protocol's cost once a call (MessageRegimes.call_overhead_s), per loop
                config["call_overhead_s"] = config.get("call_overhead_s", 0.0) + count * sim.call_overhead_s
            t += count * elapsed
            instants += sim.instants
            recomputes += sim.full_recomputes
            updates += sim.flow_updates
            lone += sim.lone_steps
            work += sim.fabric.work
            entries += sim.fabric.entries
    # contention_free_steps: steps run by the contention-free pass (FlowSimulator.run), no instants
    config.update(instants=instants, full_rate_recomputes=recomputes, flow_updates=updates,
                  contention_free_steps=lone, step_entries=entries, work=work)
    if len(schedules) > 1 or schedules[0][1] > 1:
        config["tables_cover"] = f"the first of {config['buffer_loops']} CCL-buffer loops"
    if defaults.launch_overlap:
        config["launch_overlap"] = True
    return Result(collective, spec.name, mode, args.p, nbytes,
                  max(cfg.launch_overhead_s, t) if defaults.launch_overlap else t, config, tables)


class _StepsDone:
    """:attr:`FlowSimulator.on_progress` for :func:`simulate`'s bar: moves it by the change in
    the run's finished steps (the bar counts the steps of every distinct buffer piece)."""

    def __init__(self, bar):
        self.bar, self.steps = bar, 0

    def __call__(self, steps: int) -> None:
        if steps != self.steps:
            self.bar.update(steps - self.steps)
            self.steps = steps


_VERIFIED: dict = {}
"""Structures of built-in schedules already verified (:func:`_verify_once`), oldest first."""


def _verify_once(spec, schedule, force: bool = False) -> None:
    """Verify ``schedule``, once per structure for a built-in algorithm.

    A built-in algorithm's transfers (rank pairs, chunk ranges, reduce flags, steps) do not
    depend on the size (tests/test_analytical_fast.py checks every family), and its bytes are
    its chunks' bytes by construction; so a size-by-size study verifies each (algorithm,
    layout) once, keyed also by the size modulo the ranks (the uneven-split class) and, for
    alltoallv, by which entries of its send matrix are not zero. A user's
    algorithm, or ``verify=True``, is verified every time.
    """
    if spec.user or force:
        _verify_schedule(schedule)
        return
    a = schedule.args
    # an alltoallv's blocks are its matrix's entries by construction too: which pairs send
    # anything is its structure, not how much (a sweep's uniform matrices differ only in bytes)
    matrix = (None if a.send_matrix is None else
              (a.p, np.packbits(np.asarray(a.send_matrix, dtype=np.int64) != 0).tobytes()))
    key = (spec.name, a.collective, a.p, a.servers, a.pods, a.root, matrix, a.nbytes % a.p,
           schedule.num_chunks)
    if key in _VERIFIED:
        return
    _verify_schedule(schedule)
    if len(_VERIFIED) >= 4096:
        del _VERIFIED[next(iter(_VERIFIED))]
    _VERIFIED[key] = True


def _reduces_inline(collective, product, dtype, reduce_op) -> bool:
    """Whether the links may reduce inline for this call: always for a topology without a
    product, a non-reducing collective, or a call in bytes with a sum (as before dtypes);
    else HCCL's rule (:func:`hcsim.dtypes.inline_reduce_supported`; a call in bytes is judged
    by its op alone)."""
    if product is None or collective not in REDUCING_COLLECTIVES or (dtype is None and reduce_op == "sum"):
        return True
    if dtype is None:
        return inline_reduce_supported(product, "fp32", reduce_op)
    return inline_reduce_supported(product, dtype, reduce_op)


@functools.lru_cache(maxsize=64)
def _simulate_options(exclude: tuple) -> list:
    """:func:`simulate`'s keyword-only parameters but ``exclude`` (read once per exclusion)."""
    return [n for n, prm in inspect.signature(simulate).parameters.items()
            if prm.kind is inspect.Parameter.KEYWORD_ONLY and n not in exclude]


def check_options(options: dict, exclude=(), where: str = "sweep") -> None:
    """One line for a keyword :func:`simulate` does not take (or that ``where`` sets itself)."""
    allowed = _simulate_options(tuple(exclude))
    for name in options:
        if name not in allowed:
            raise bad_value(f"{where}({name}=...)", options[name], "not an option here; options: " + ", ".join(allowed))


def check_collective_name(collective) -> str:
    """``collective`` if it names a collective hcsim simulates, else a one-line error."""
    if not isinstance(collective, str):
        raise bad_value("collective", collective, "a name: " + ", ".join(COLLECTIVES))
    return check_collective(collective)


def _check_call(collective, algorithm, root, mode, routing, ecmp_seed, step_overhead_s, launch_overhead_s,
                record, verify, hccl, qps, max_transfers, max_flow_updates, max_work=None) -> None:
    """Check the types and ranges of :func:`simulate`'s arguments before anything is built."""
    check_collective_name(collective)
    if not (algorithm is None or isinstance(algorithm, (str, AlgorithmSpec)) or callable(algorithm)):
        raise bad_value("algorithm", algorithm, "a name (hcsim algos), 'auto', 'best', or build(args) -> Schedule")
    if isinstance(algorithm, str) and not algorithm.strip():
        raise bad_value("algorithm", algorithm, "a name (hcsim algos), 'auto' or 'best'")
    if not is_int(root):
        raise bad_value("root", root, "a rank number (an integer)")
    if not isinstance(mode, str) or mode not in MODES:
        raise bad_value("mode", mode, "one of " + ", ".join(MODES))
    if not isinstance(routing, str) or routing not in ROUTING_POLICIES:
        raise bad_value("routing", routing, "one of " + ", ".join(ROUTING_POLICIES))
    if not is_int(ecmp_seed) or not 0 <= ecmp_seed < 2**32:
        raise bad_value("ecmp_seed", ecmp_seed, "an integer from 0 to 2^32 - 1")
    for name, v in (("step_overhead_s", step_overhead_s), ("launch_overhead_s", launch_overhead_s)):
        if v is not None and (not is_real(v) or not 0 <= v <= 1e20):
            raise bad_value(name, v, "a number (int or float) of seconds from 0 to 1e20 (or None: the topology's default)")
    for name, v in (("record", record), ("verify", verify)):  # identity and str first: an array has no truth value
        if not (v is True or v is False or (isinstance(v, str) and v == "auto")):
            raise bad_value(name, v, "'auto', True or False")
    if hccl is not None and not isinstance(hccl, HcclConfig):
        raise bad_value("hccl", hccl, "an hcsim.hccl.selection.HcclConfig, or None")
    if qps is not None and (not is_int(qps) or not 1 <= qps <= 8):
        raise bad_value("qps", qps, "queue pairs per connection, 1 to 8 (HCCL_RDMA_QPS_PER_CONNECTION)")
    for name, v in (("max_transfers", max_transfers), ("max_flow_updates", max_flow_updates)):
        if not is_int(v) or v < 1:
            raise bad_value(name, v, "a positive integer")
    if max_work is not None and (not is_int(max_work) or max_work < 1):
        raise bad_value("max_work", max_work, "a positive integer (engine work units), or None for no bound")


class WorkBudget:
    """One command's :data:`~hcsim.limits.MAX_WORK`, spent by its simulations in turn.

    A sweep or a selection study gives each event-driven point what the points before it left
    (:meth:`left`) and then takes off what it used (:meth:`spend`, :meth:`spend_error`), so the
    whole command stays within one bound and a rerun stops at the same point. With
    ``per_point`` = N (N points on a Dask cluster, which run in no fixed order) every point gets
    an even share of the bound instead, ``max_work // N``, so the whole command still stays
    within it (``True``: one point, the whole bound). ``reserved`` units are taken off first:
    what starting a local cluster's workers costs (:func:`hcsim.parallel.startup_work`).

    Examples
    --------
    >>> b = WorkBudget(100)
    >>> b.spend(30); b.left()
    70
    >>> WorkBudget(100, per_point=4).left()
    25
    >>> WorkBudget(100, per_point=4, reserved=20).left()
    20
    """

    def __init__(self, max_work: int | None, per_point: bool = False, reserved: int = 0):
        if max_work is not None and (not is_int(max_work) or max_work < 1):
            raise bad_value("max_work", max_work, "a positive integer (engine work units), or None for no bound")
        self.max_work, self.per_point = None if max_work is None else int(max_work), per_point
        max_work = self.max_work
        self.reserved = reserved if max_work is not None else 0
        if self.reserved and self.reserved >= max_work:
            raise WorkLimitError(
                f"max_work = {max_work}: starting the local cluster's workers alone costs about {self.reserved:,} "
                f"units ({WORK_PER_LOCAL_WORKER:,} a worker process); use fewer --workers or none, or raise "
                "max_work (--max-work)")
        self.spent = self.reserved

    def left(self) -> int | None:
        """The bound for the next simulation (None: none); a one-line error when none is left."""
        if self.max_work is None:
            return None
        if self.per_point:
            return max(1, (self.max_work - self.reserved) // int(self.per_point))
        left = self.max_work - self.spent
        if left < 1:
            raise WorkLimitError(f"max_work = {self.max_work}: this command's earlier simulations took all of it "
                                 f"({self.spent} units of engine work); use mode='analytical', fewer sizes or "
                                 "algorithms, or raise max_work (--max-work)")
        return left

    def spend(self, work: int) -> None:
        self.spent += int(work)

    def spend_error(self, exc: WorkLimitError) -> str:
        """Take off what a simulation stopped by a bound had done (0 if refused before it ran);
        returns the reason, in terms of the command's bound."""
        work = getattr(exc, "work", None)
        if work is None:
            return str(exc)
        if not work:  # refused before it ran (an estimate): its own reason, against what was left
            if self.per_point or self.max_work is None or not self.spent:
                return str(exc)
            return re.sub(r"^max_work = \d+:", f"max_work = {self.max_work} ({self.max_work - self.spent:,} left of it "
                          "here):", str(exc))
        self.spent += int(work)
        if self.per_point or self.max_work is None or not str(exc).startswith("max_work = "):
            return str(exc)  # another bound (max_flow_updates) stopped it: its own reason
        return (f"max_work = {self.max_work}: this command's event-driven runs passed it here ({self.spent} units of "
                f"engine work: {WORK_UNITS}); use mode='analytical', fewer ranks, sizes or algorithms, or raise "
                "max_work (--max-work; 0: no bound)")


def _whole_call(exc: WorkLimitError, max_work, before: int) -> WorkLimitError:
    """``exc`` from one part of a call (a CCL-buffer loop, a candidate of ``best``) that ``before``
    units of the call's work preceded: carrying the call's work, and naming the call's bound
    rather than what the part was left of it."""
    if getattr(exc, "work", None) is None and not before:
        return exc
    exc.work = before + (getattr(exc, "work", None) or 0)
    if max_work is not None and before:  # the engine named what this part was left of the bound
        exc.args = (re.sub(r"^max_work = \d+: the run passed \d+ units",
                           f"max_work = {max_work}: the run passed {exc.work} units", str(exc)),)
    return exc


def _send_matrix(send_matrix, p: int, collective: str = "alltoallv"):
    """``send_matrix`` as a p x p integer array, or a one-line error (only an alltoallv takes one)."""
    if collective != "alltoallv":
        raise bad_value("send_matrix", "given", "only alltoallv takes a send matrix")
    if p > MAX_ALLTOALLV_RANKS:  # refused before its p x p cells are read (8,192 ranks: 67M of them)
        raise bad_value("ranks", p, f"at most {MAX_ALLTOALLV_RANKS} ranks for alltoallv (its send matrix holds "
                        "p x p byte counts: hcsim.limits.MAX_ALLTOALLV_RANKS)")
    allowed = f"a {p} x {p} matrix of whole byte counts >= 0 (row i: what rank i sends to each rank)"
    if isinstance(send_matrix, np.ndarray) and send_matrix.dtype.kind in "iu" and send_matrix.shape == (p, p):
        # an integer array: checked at once, not cell by cell (compared in its own dtype, so a uint64
        # above 2^63 is refused, not wrapped by the conversion)
        bad = (send_matrix < 0) | (send_matrix > MAX_SIZE_BYTES)
        if bad.any():
            raise bad_value("send_matrix", send_matrix[np.unravel_index(int(np.argmax(bad)), bad.shape)].item(),
                            allowed)
        return send_matrix.astype(np.int64)
    try:  # never more than one row or column past p (an endless iterator is not listed)
        rows = [list(itertools.islice(iter(row), p + 1)) for row in itertools.islice(iter(send_matrix), p + 1)]
    except TypeError:
        raise bad_value("send_matrix", send_matrix, allowed) from None
    except Exception:  # an object whose iteration fails
        raise bad_value("send_matrix", f"a {type(send_matrix).__name__} that does not read as rows", allowed) from None
    if len(rows) != p or any(len(row) != p for row in rows):
        raise bad_value("send_matrix", f"{len(rows)} rows of lengths {sorted({len(r) for r in rows})}", allowed)
    cells = [x for row in rows for x in row]
    if not all(is_int(x) or (isinstance(x, float) and x.is_integer()) for x in cells):
        raise bad_value("send_matrix", next(x for x in cells if not is_int(x)), allowed)
    if any(not 0 <= x <= MAX_SIZE_BYTES for x in cells):
        raise bad_value("send_matrix", next(x for x in cells if not 0 <= x <= MAX_SIZE_BYTES), allowed)
    return np.array([[int(x) for x in row] for row in rows], dtype=np.int64)


def check_work(spec, args, buffer_bytes, max_transfers: int = MAX_DES_TRANSFERS, *, exact: bool = True,
               built: dict | None = None, max_work: int | None = None, every_loop: bool = False) -> int:
    """Count the transfers a call's simulation takes on and refuse it beyond ``max_transfers``.

    Each distinct CCL-buffer piece is simulated once (:func:`simulate`), so the count is over
    the distinct pieces' schedules, each counted step by step and abandoned as soon as the
    total passes the bound. Above :data:`PROBE_RANKS` ranks the count is first extrapolated
    from the same algorithm on the call's first 1/8 and 1/4 of the servers (or ranks), so that
    a schedule too large to build is refused before it is built (an NB allreduce on 16,384
    ranks would hold 134M transfers in its first step). Returns the count.

    ``exact=False``: above ``PROBE_RANKS`` ranks the extrapolated count is the answer (nothing is
    built; the analytical mode, which builds a schedule once per shape). ``built``: a dict that
    receives each schedule built here, by piece size, for the caller to use rather than build again.
    ``every_loop``: the caller builds every CCL-buffer loop's schedule (a job, :func:`hcsim.hccl.buffer.looped`),
    so the extrapolated memory counts each piece once per loop, not once.
    """
    if args.p > MAX_CALL_RANKS:
        raise bad_value("ranks", args.p, f"at most {MAX_CALL_RANKS} ranks in one call (hcsim.limits.MAX_CALL_RANKS)")
    loops = loop_pieces(args, buffer_bytes)
    pieces = [dataclasses.replace(args, nbytes=n) for n in loops]
    if args.p > PROBE_RANKS and (args.send_matrix is None or args.collective == "alltoallv"):
        # an alltoallv is probed uniform: its blocks are p^2 whatever its matrix (ChunkSpace)
        estimate = sum(_extrapolated_transfers(spec, piece, max_work, loops[piece.nbytes] if every_loop else 1)
                       for piece in pieces)
        if estimate > max_transfers:
            raise _too_much(spec, args, f"about {estimate:.3g} (extrapolated from smaller layouts)", max_transfers)
        if not exact:
            return int(estimate)
        if max_work is not None and (building := build_work(spec, args, buffer_bytes, every_loop)) > max_work:
            exc = WorkLimitError(f"max_work = {max_work}: building {spec.name} {args.collective}'s schedule"
                                 f"{'s' if len(pieces) > 1 else ''} on {args.p} ranks ({len(pieces)} CCL-buffer piece"
                                 f"{'s' if len(pieces) > 1 else ''}) costs about {building:,} units "
                                 f"({BYTES_PER_UNIT_BUILT} bytes held each, extrapolated); use fewer ranks, a smaller "
                                 "size or another algorithm, or raise max_work (--max-work)")
            exc.work = 0  # refused before any work (see simulate's step refusal)
            raise exc
    count = 0
    for piece in pieces:
        schedule = run_builder(spec, piece)
        for step in schedule.steps:
            count += len(step)
            if count > max_transfers:
                raise _too_much(spec, args, f"over {count}", max_transfers)
        if built is not None:
            built[piece.nbytes] = schedule
    return count


PROBE_RANKS = 1024
"""Above this many ranks :func:`check_work` extrapolates before it builds."""


def build_work(spec, args, buffer_bytes, every_loop: bool = False) -> int:
    """Work units building a call's schedules costs: one per
    :data:`~hcsim.limits.BYTES_PER_UNIT_BUILT` bytes each distinct CCL-buffer piece holds
    (each loop's, ``every_loop``): the bytes of the numpy arrays the probes' schedules hold
    (:func:`_array_bytes`, the same in every process), extrapolated as :func:`check_work` extrapolates
    their memory; 0 on at most
    :data:`PROBE_RANKS` ranks (not probed: their schedules are small next to the engine's work on
    them) and for a send matrix other than an alltoallv's."""
    if args.p <= PROBE_RANKS or not (args.send_matrix is None or args.collective == "alltoallv"):
        return 0
    loops = loop_pieces(args, buffer_bytes)
    total = 0.0
    for n, count in loops.items():
        piece = dataclasses.replace(args, nbytes=n)
        _extrapolated_transfers(spec, piece)  # probed once per call shape
        total += _PROBES[_probe_key(spec, piece)][5] * (count if every_loop else 1)
    return int(total // BYTES_PER_UNIT_BUILT)


def _probe_key(spec, args) -> tuple:
    return (spec, args.collective, args.p, args.server_sizes, args.pods, args.root,
            None if spec.shape is None else spec.shape(args))


def _extrapolated_transfers(spec, args, max_work: int | None = None, copies: int = 1) -> float:
    """Transfers of ``spec`` on ``args``, from the same call on two truncated layouts of about
    ``PROBE_RANKS / 2`` and ``PROBE_RANKS`` ranks (quick to build whatever the call's size).

    Raises :class:`WorkLimitError` when the schedule would hold more than
    :data:`~hcsim.limits.MAX_SCHEDULE_BYTES`, its memory per transfer measured while the larger
    layout is built (a staged alltoall keeps each message's chunks, about 700 bytes a
    transfer, where a ring keeps under 100), before anything that size is built; and when
    routing its distinct rank pairs, extrapolated the same way, would alone pass ``max_work``.
    Both are kept per call shape (they do not depend on the size), so a sweep probes once."""
    key = _probe_key(spec, args)
    hit = _PROBES.get(key)
    if hit is None:
        hit = _PROBES[key] = _probe(spec, args)
        if len(_PROBES) > 1024:
            _PROBES.pop(next(iter(_PROBES)))
    estimate, held, (p0, p1), pairs, routed, _ = hit
    if held * copies > MAX_SCHEDULE_BYTES:  # (copies: CCL-buffer loops of this piece, each built)
        loops = f" x {copies} CCL-buffer loops" if copies > 1 else ""
        raise WorkLimitError(f"size = {args.nbytes}: {spec.name} {args.collective} on {args.p} ranks would hold about "
                             f"{estimate:.3g} transfers{loops} in {held * copies / 2**30:.3g} GiB (extrapolated from "
                             f"{p0} and {p1} ranks), more than MAX_SCHEDULE_BYTES = {MAX_SCHEDULE_BYTES / 2**30:g} GiB; "
                             "use fewer ranks, a smaller size or another algorithm")
    if max_work is not None and pairs * WORK_PER_INSTANT + routed > max_work:  # routing alone passes it
        exc = WorkLimitError(f"max_work = {max_work}: {spec.name} {args.collective} on {args.p} ranks routes about "
                             f"{pairs:,.0f} distinct rank pairs ({WORK_PER_INSTANT} units each) in steps of about "
                             f"{routed:,.0f} units (extrapolated from {p0} and {p1} ranks) before anything moves; use "
                             "fewer ranks or another algorithm, or raise max_work (--max-work)")
        exc.work = 0  # refused before any work (see simulate's step refusal)
        raise exc
    return estimate


_PROBES: dict = {}
"""Call shape -> (transfers, bytes, probe ranks, distinct rank pairs, routing work of its distinct
steps) of :func:`_extrapolated_transfers`."""


def _probe(spec, args):
    """Build ``spec`` on truncated layouts of about PROBE_RANKS / 2 and PROBE_RANKS ranks and
    extrapolate to ``args``: (transfers, bytes held, the probes' ranks, distinct rank pairs, and the
    work of routing its steps: :data:`~hcsim.limits.WORK_PER_ROUTED_STEP` and one unit a transfer
    for each step whose rank pairs no earlier step had, as the engine counts them)."""
    import tracemalloc

    sizes = args.server_sizes
    counts, helds, arrays = [], [], []
    for target in (PROBE_RANKS // 2, PROBE_RANKS):
        m = min(len(sizes), max(2, len(sizes) * target // args.p)) if len(sizes) > 1 else 0
        servers = sizes[:m] if m else ()
        p = sum(servers) if m else max(2, min(target, args.p // 2))
        pods = _truncated(args.pods, m) if m and args.pods else ()
        nbytes = max(args.nbytes, p) if args.collective == "alltoallv" else args.nbytes  # uniform, no empty block
        small = make_args(args.collective, p, nbytes, min(args.root, p - 1), servers, pods)
        own = not tracemalloc.is_tracing()  # the memory each probe's schedule holds
        if own:
            tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            sched = run_builder(spec, small)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            if own:
                tracemalloc.stop()
        width = getattr(sched, "endpoints", p)  # the ranks, and an in-network schedule's switch
        pairs = np.unique(np.concatenate([st.src.astype(np.int64) * width + st.dst for st in sched.steps if len(st)]
                                         or [np.zeros(0, dtype=np.int64)])).size
        counts.append((p, sum(len(st) for st in sched.steps), pairs, *_routed_steps(sched.steps)))
        helds.append(held)
        arrays.append(_array_bytes(sched))
        del sched
    (p0, t0, q0, d0, r0), (p1, t1, q1, d1, r1) = counts
    estimate, pairs = _grown(t0, t1, p0, p1, args.p), _grown(q0, q1, p0, p1, args.p)
    routed = (_grown(d0, d1, p0, p1, args.p) * (WORK_PER_ROUTED_STEP + 2 * (args.p // RANKS_PER_UNIT))
              + _grown(r0, r1, p0, p1, args.p))
    # memory grows by its own law, not the transfers': a Bruck alltoall's messages each hold p / 2
    # blocks, so its memory grows as p^2 log p where its transfers grow as p log p
    held = max(estimate * helds[1] / max(t1, 1), _grown(helds[0], helds[1], p0, p1, args.p))
    array_bytes = max(estimate * arrays[1] / max(t1, 1), _grown(arrays[0], arrays[1], p0, p1, args.p))
    return estimate, held, (p0, p1), pairs, routed, int(array_bytes)


def _array_bytes(schedule) -> int:
    """Bytes of the numpy arrays a built schedule holds (its steps' arrays, each once, and what
    its message steps' ``expand`` closures keep), found by walking the objects, so the same
    schedule gives the same count in any process (tracemalloc's reading varies by up to about 1%
    with the interpreter's free lists): :func:`build_work` prices building by it. Lazily made
    steps are not held, so a :class:`~hcsim.algorithms.schedule.LazySteps` counts nothing."""
    seen: set = set()
    total = 0
    stack = [schedule.chunk_bytes]
    steps = schedule.steps
    if isinstance(steps, (list, tuple)):
        stack.extend(steps)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            if obj.base is None:
                total += obj.nbytes
            else:
                stack.append(obj.base)  # a view or a broadcast: what holds its data, once
        elif isinstance(obj, Step):
            stack.extend((obj.src, obj.dst, obj.nbytes, obj.reduce, obj.chunk_lo, obj.chunk_hi, obj.expand))
        elif isinstance(obj, functools.partial):
            stack.extend((obj.func, *obj.args, *obj.keywords.values()))
        elif inspect.isfunction(obj):
            stack.extend(c.cell_contents for c in obj.__closure__ or () if _filled(c))
            stack.extend((obj.__defaults__, *(obj.__kwdefaults__ or {}).values()))  # lambda parts=parts: ...
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif type(obj).__module__.startswith("hcsim.") and hasattr(obj, "__dict__"):
            stack.extend(vars(obj).values())  # hcsim's own helpers a closure keeps (message parts, chunk spaces)
    return total


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def _routed_steps(steps) -> tuple[int, int]:
    """The steps the engine routes afresh among ``steps`` (each whose rank pairs, in order, no
    earlier step had; a lazily built ring's thousands of equal steps count once) and their
    transfers: it counts :data:`~hcsim.limits.WORK_PER_ROUTED_STEP` (and more on many ranks)
    for each, and one unit a transfer."""
    seen, n_steps, n_transfers, last = set(), 0, 0, None
    for st in steps:
        if last is not None and st.src is last[0] and st.dst is last[1]:
            continue
        last = (st.src, st.dst)
        key = hashlib.blake2b(st.src.astype(np.int64).tobytes() + b"|" + st.dst.astype(np.int64).tobytes(),
                              digest_size=16).digest()
        if key not in seen:
            seen.add(key)
            n_steps += 1
            n_transfers += len(st)
    return n_steps, n_transfers


def _grown(n0: float, n1: float, p0: int, p1: int, p: int) -> float:
    """A count seen as ``n0`` on ``p0`` ranks and ``n1`` on ``p1``, extrapolated to ``p`` ranks
    (a power law with an exponent from 1 to 3)."""
    if p1 <= p0 or n0 <= 0 or n1 <= 0:
        return float(n1)
    exponent = min(3.0, max(1.0, math.log(n1 / n0) / math.log(p1 / p0)))
    return n1 * (p / p1) ** exponent


def _truncated(pods, servers: int) -> tuple:
    """The first ``servers`` servers' pods (the last one cut short)."""
    out, left = [], servers
    for n in pods:
        if left <= 0:
            break
        out.append(min(n, left))
        left -= out[-1]
    return tuple(out)


def _too_small(collective: str, p: int) -> str:
    return (f"at least {min_size(collective, p)} bytes: {collective}'s size is count x ranks, at least one byte "
            f"for each of the {p} ranks")


def _too_much(spec, args, estimate: str, max_transfers: int) -> WorkLimitError:
    return WorkLimitError(f"size = {args.nbytes}: {spec.name} {args.collective} on {args.p} ranks holds {estimate} "
                       f"transfers, more than max_transfers = {max_transfers}; use fewer ranks, a smaller size or "
                       "another algorithm, or raise max_transfers (--max-transfers) to run it anyway")


def rank_layout(topo, rank_nodes) -> tuple[tuple, tuple]:
    """Ranks per server and servers per pod, from the NPUs' coordinates; ``((), ())`` when the
    ranks of a server (or the servers of a pod) are not consecutive."""
    check_topology(topo)
    if not isinstance(rank_nodes, (list, tuple)):
        raise bad_value("rank_nodes", rank_nodes, "a list of the topology's NPU names, one per rank")
    specs = topo._npus_and_specs()[1]
    try:
        keys = [(specs[n].pod, specs[n].server) for n in rank_nodes]
    except (KeyError, TypeError):  # not an NPU of the topology: npu_spec says which
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
    if isinstance(sizes, (str, numbers.Integral)):
        return [parse_size(sizes)]
    if isinstance(sizes, Sequence):
        if not sizes or len(sizes) > MAX_SWEEP_SIZES:
            raise bad_value("sizes", sizes, f"1 to {MAX_SWEEP_SIZES} sizes")
        return [parse_size(s) for s in sizes]
    raise bad_value("sizes", sizes, "a (min, max) tuple, a list of sizes, or one size")


def sweep(topology, collective: str, sizes=("8", "1GiB"), algorithms=None, *, factor: int = 2,
          client=None, progress=None, **kwargs) -> pd.DataFrame:
    """Simulate ``collective`` over a range of sizes for several algorithms.

    Parameters
    ----------
    topology, collective
        As for :func:`simulate`.
    sizes : tuple, list or scalar
        ``(min, max)`` multiplies by ``factor`` from min up to max (as nccl-tests' -b/-e/-f);
        a list gives the sizes themselves.
    algorithms : list, optional
        Names or callables; default every algorithm registered for the collective that the
        ranks can run (an in-network one, NVLS, only where they share a switch that reduces
        ``dtype`` with ``reduce_op`` in the network; one that needs servers of equal size,
        :attr:`~hcsim.algorithms.registry.AlgorithmSpec.equal_servers`, only where the ranks make them so).
    client : dask.distributed.Client, optional
        Run the points on a Dask cluster (:func:`hcsim.parallel.dask_client`), one task per
        (size, algorithm); the table is the same as without one. Algorithms are sent by name
        (the workers' registries must know them: built-ins, or registered on import) or as
        picklable callables.
    progress : None, True or False
        A bar over the points on stderr (:mod:`hcsim.progress`; None: auto).
    **kwargs
        Passed to :func:`simulate` (``ranks``, ``mode``, ``routing``, ...).

    Returns
    -------
    pandas.DataFrame
        One row per (size, algorithm): collective, algorithm (as requested), mode, ranks,
        size_bytes, time_us, algbw_GBps, busbw_GBps, selected (the algorithm that ran; for
        ``"auto"`` and ``"best"`` the one chosen at that size). A point refused by a work
        bound (:class:`~hcsim.errors.WorkLimitError`), or below one byte per rank where the
        size is count x ranks, has NaN times and the reason in a ``refused`` column.

    Examples
    --------
    >>> df = sweep("atlas800t-a2", "allgather", sizes=("1K", "4K"), algorithms=["ring", "mesh"])
    >>> list(df["size_bytes"].unique())
    [1024, 2048, 4096]
    """
    check_collective_name(collective)
    check_options(kwargs, exclude=("algorithm", "count", "progress"), where="sweep")
    check_progress(progress)
    topo = load_topology(topology)
    with topo.unchanged():  # the graph is checked once, not at every point
        size_list = resolve_sizes(sizes, factor)
        if algorithms is None:  # every registered one the ranks can run: in-network ones only beside their switch
            dtype, nodes = kwargs.get("dtype"), topo.resolve_ranks(kwargs.get("ranks"))
            switch = shares_in_network_switch(topo, nodes, None if dtype is None else parse_dtype(dtype),
                                              parse_reduce_op(kwargs.get("reduce_op", "sum")))
            algorithms = [a for a in algorithms_for(collective) if switch or not get_algorithm(collective, a).in_network]
            servers, _ = rank_layout(topo, nodes)
            if len(set(servers)) > 1:  # servers of unequal size: not the algorithms that need them equal
                algorithms = [a for a in algorithms if not get_algorithm(collective, a).equal_servers]
        elif isinstance(algorithms, str) or callable(algorithms):
            algorithms = [algorithms]
        elif not isinstance(algorithms, (list, tuple)) or not algorithms:
            raise bad_value("algorithms", algorithms, "a non-empty list of algorithm names or callables, or None (all)")
        p = len(topo.resolve_ranks(kwargs.get("ranks")))
        if kwargs.get("dtype") is not None:
            parse_dtype(kwargs["dtype"])  # a bad name is an error, not a table of refusals
        mode = kwargs.get("mode", "des")
        if not isinstance(mode, str) or mode not in MODES:  # (an array has no truth value: checked first)
            raise bad_value("mode", mode, "one of " + ", ".join(MODES))
        table = _Table(collective, mode, p)
        reasons = []  # per size: why every algorithm is refused there, or None
        for n in size_list:
            reason = None
            if n < min_size(collective, p):  # a range that starts below one byte per rank
                reason = f"size = {n}: {_too_small(collective, p)}"
            elif kwargs.get("dtype") is not None:  # a range point that is not whole elements per rank
                try:
                    check_elements(collective, n, kwargs["dtype"], p)
                except ConfigError as exc:
                    reason = str(exc)
            reasons.append(reason)
        fast = [[None] * len(size_list)] * len(algorithms)
        if mode == "analytical":  # the closed form, with what does not depend on the size done once
            engine = _FastAnalytical(topo, collective, kwargs)
            fast = [engine.column(algo, size_list) for algo in algorithms]
        # the points simulate() answers, in the table's order (size by size, algorithm by algorithm)
        todo = [(n, algo) for i, n in enumerate(size_list) for algo, col in zip(algorithms, fast, strict=True)
                if reasons[i] is None and col[i] is None]
        budget = WorkBudget(kwargs.pop("max_work", MAX_WORK), per_point=client is not None and max(1, len(todo)),
                            reserved=startup_work(client))
        answers = iter(map_points(_sweep_point, todo, client=client, progress=progress,
                                  shared=(topo, collective, kwargs, budget), desc=f"sweep {collective}"))
        for i, n in enumerate(size_list):
            for algo, col in zip(algorithms, fast, strict=True):
                if reasons[i] is not None:
                    table.refuse(algo, n, reasons[i])
                elif col[i] is not None:
                    t, ran, ranks, size_bytes, _ = col[i]
                    table.add(algo, ran, ranks, size_bytes, t)
                else:
                    r = next(answers)
                    if isinstance(r, str):  # one point over the work bound does not sink the sweep
                        table.refuse(algo, n, r)
                    else:
                        table.add(algo, *r)
    df = table.frame()
    if "refused" in df:
        if (df["refused"] != "").all():  # nothing ran: that is an error, not a table of refusals
            raise WorkLimitError(f"every point refused, e.g. {df['refused'].iloc[0]}")
    return df


def _sweep_point(point, shared):
    """One :func:`sweep` point: ``(algorithm, ranks, size_bytes, time_s, mode)`` of simulate()'s
    Result, or the reason a work bound refused it. Module-level, and returning plain data, so
    that it runs on a Dask worker (:func:`hcsim.parallel.map_points`)."""
    n, algo = point
    topo, collective, kwargs, budget = shared
    try:
        r = simulate(topo, collective, n, algo, progress=False, max_work=budget.left(), **kwargs)  # own bar
    except WorkLimitError as exc:
        return budget.spend_error(exc)
    budget.spend(r.config.get("work", 0))
    return r.algorithm, r.ranks, r.size_bytes, r.time_s, r.mode


# --- The analytical fast path -----------------------------------------------------------------
# A closed form needs, per size, only the size's CCL-buffer pieces and the cost function; what
# simulate() builds around it (the schedule, its verification, its transfer count, the path
# parameters) depends on the algorithm, the ranks, the layout and the options, not on the size
# (tests/test_analytical_fast.py checks that every algorithm's rank pairs, chunk flows and
# transfer count are the same at every size). sweep() and select() therefore prepare each
# (algorithm, options) once (_SpecPlan) and price every size with the closed form alone; any
# point the preparation cannot vouch for (a user algorithm, a refusal, an option it does not
# model) is left to simulate() itself, so the answers are simulate()'s, value for value.

_KEYWORDS = {n: prm.default for n, prm in inspect.signature(simulate).parameters.items()
             if prm.kind is inspect.Parameter.KEYWORD_ONLY}

_STRUCTURES: dict = {}
"""(algorithm, collective, p, servers, pods, root, send matrix) -> what :class:`_SpecPlan` knows
of its schedule at any size: transfers, extrapolated transfers, whether verified, small enough."""


class _Delegate(Exception):
    """The fast path leaves this point (or algorithm) to :func:`simulate`."""


def _own(spec: AlgorithmSpec) -> bool:
    """Whether ``spec`` is hcsim's own (registered or composed by name): its schedules' structure
    is the same at every size, or at every size of one ``shape`` (tests/test_analytical_fast.py)."""
    try:
        return not spec.user and get_algorithm(spec.collective, spec.name) is spec
    except Exception:
        return False


def _options(kwargs: dict, **override) -> dict:
    out = dict(_KEYWORDS)
    out.update(kwargs)
    out.update(override)
    return out


class _Context:
    """simulate()'s preamble that depends neither on the size nor on the algorithm, for one
    (topology, collective, options); raises (anything) where simulate() would, or _Delegate."""

    def __init__(self, topo, collective: str, o: dict, net, layout):
        if o["mode"] != "analytical" or o["count"] is not None:
            raise _Delegate
        rank_nodes, servers, pods = layout
        root, p = o["root"], len(rank_nodes)
        if not is_int(root) or not 0 <= root < p:
            raise _Delegate
        reduce_op, dtype = parse_reduce_op(o["reduce_op"]), o["dtype"]
        if dtype is not None:
            dtype = parse_dtype(dtype)
            check_supported(collective, dtype, reduce_op, topo.product)
        self.parsed_algo = parse_hccl_algo(o["hccl_algo"])
        hccl = o["hccl"]
        if hccl is None and topo.product is not None:
            hccl = HcclConfig()
        if hccl is not None and not isinstance(hccl, HcclConfig):
            raise _Delegate
        defaults = topo.defaults.for_mode(hccl.expansion_mode if hccl is not None else None)
        if defaults.message_regimes is not None and not defaults.message_regimes.trivial:
            raise _Delegate
        self.topo, self.net, self.collective, self.o = topo, net, collective, o
        self.rank_nodes, self.p, self.root, self.servers, self.pods = rank_nodes, p, root, servers, pods
        self.dtype, self.reduce_op, self.hccl = dtype, reduce_op, hccl
        self.inline_ok = _reduces_inline(collective, topo.product, dtype, reduce_op)
        self.qps = o["qps"] if o["qps"] is not None else (hccl.qps_per_connection if hccl is not None else 1)
        self.matrix = _send_matrix(o["send_matrix"], p, collective) if o["send_matrix"] is not None else None
        self.matrix_key = None if self.matrix is None else self.matrix.tobytes()
        self.step_s = defaults.step_overhead_s if o["step_overhead_s"] is None else o["step_overhead_s"]
        self.launch_s = defaults.launch_for(collective) if o["launch_overhead_s"] is None else o["launch_overhead_s"]
        self.call_time = defaults.call_time
        self.factor = reduce_time_factor(dtype, reduce_op) if dtype is not None else 1.0
        self.buffer_bytes = hccl.buffer_bytes if hccl is not None else None


class _SpecPlan:
    """``simulate(topo, collective, n, algorithm, mode="analytical", **options)`` for every n,
    with what does not depend on n done once; :meth:`times` leaves to simulate() (None) any
    point it does not answer exactly as simulate() would."""

    def __init__(self, ctx: _Context, algorithm):
        o = ctx.o
        if not isinstance(algorithm, (str, AlgorithmSpec)) or algorithm in ("auto", "best") \
                or o["hccl_algo"] is not None:
            raise _Delegate
        _check_call(ctx.collective, algorithm, o["root"], o["mode"], o["routing"], o["ecmp_seed"],
                    o["step_overhead_s"], o["launch_overhead_s"], o["record"], o["verify"], o["hccl"], o["qps"],
                    o["max_transfers"], o["max_flow_updates"])
        spec = get_algorithm(ctx.collective, algorithm)
        if not _own(spec) or spec.cost is None or (spec.levels > 1 and not ctx.servers) or ctx.p > MAX_CALL_RANKS:
            raise _Delegate
        if spec.in_network:  # the switch reduces only some types and operations: simulate() says which
            from .algorithms.nvls import check_reduction

            try:
                check_reduction(ctx.dtype, ctx.reduce_op)
            except ConfigError:
                raise _Delegate from None
        self.ctx, self.spec = ctx, spec
        self.first = make_args(ctx.collective, ctx.p, min_size(ctx.collective, ctx.p), ctx.root, ctx.servers, ctx.pods,
                               ctx.matrix)  # the call's own checks, once
        self.work = None  # None: not prepared; False: preparing failed (simulate() answers)
        self.abg = None
        self.shapes: dict = {}  # an algorithm with a shape: shape -> (work, abg), or False where preparing failed

    def _shaped(self, piece):
        """(work, path parameters) of the structure ``piece`` has, for an algorithm with a shape
        (its structure is the same at every size of one shape), prepared once per shape; None where
        preparing it failed (simulate() answers, and raises what it raises)."""
        shape = self.spec.shape(piece)
        got = self.shapes.get(shape)
        if got is None:
            try:
                got = self._prepare(piece, shape)
            except Exception:
                got = False
            self.shapes[shape] = got
        return got or None

    def _prepare(self, first, shape=None) -> tuple:
        """(work, path parameters): transfers, verification and path parameters, from one schedule,
        built only when the caches do not hold them (they do not depend on the size, or, for an
        algorithm with a shape, on the size within one shape: tests/test_analytical_fast.py); the
        path parameters are None where every size is refused before it is built."""
        ctx, spec, o = self.ctx, self.spec, self.ctx.o
        key = (spec, ctx.collective, ctx.p, ctx.servers, ctx.pods, ctx.root, ctx.matrix_key)
        if spec.shape is not None:
            key = key + (shape,)
        built = []

        def schedule():
            if not built:
                built.append(run_builder(spec, first))
            return built[0]

        st = _STRUCTURES.get(key)
        if st is None:
            estimate = (_extrapolated_transfers(spec, first, o["max_work"])
                        if ctx.p > PROBE_RANKS and (first.send_matrix is None or ctx.collective == "alltoallv")
                        else 0.0)
            if estimate > o["max_transfers"]:  # every size is refused before it is built
                return {"transfers": 0, "estimate": estimate}, None
            sched = schedule()
            st = {"transfers": sum(len(step) for step in sched.steps), "estimate": estimate,
                  "small": _small_enough(sched), "verified": False}
            if len(_STRUCTURES) >= 4096:
                _STRUCTURES.clear()
            _STRUCTURES[key] = st
        if (o["verify"] is True or (o["verify"] == "auto" and st["small"])) and not st["verified"]:
            from .verify import verify as check_schedule

            check_schedule(schedule())
            st["verified"] = True
        return st, _analytical_parameters(ctx.topo, ctx.rank_nodes, spec, key, schedule, o["routing"],
                                          o["ecmp_seed"], ctx.step_s, ctx.qps, ctx.inline_ok, ctx.factor,
                                          net=ctx.net, max_work=o["max_work"])

    def times(self, sizes) -> list:
        """Per size: (time_s, size_bytes) as simulate() computes them, or None (simulate() answers)."""
        ctx = self.ctx
        coll, p, o = ctx.collective, ctx.p, ctx.o
        out = [None] * len(sizes)
        smallest = min_size(coll, p)
        todo = [(i, n) for i, n in enumerate(sizes) if is_int(n) and n >= smallest]
        if ctx.dtype is not None:
            def whole(n):
                try:
                    check_elements(coll, n, ctx.dtype, p)
                    return True
                except ConfigError:
                    return False
            todo = [(i, n) for i, n in todo if whole(n)]
        if not todo or self.work is False:
            return out
        if coll == "alltoallv":  # one pass, its args carry a matrix that may follow the size
            argsets = [(i, make_args(coll, p, n, ctx.root, ctx.servers, ctx.pods, ctx.matrix)) for i, n in todo]
            loops = [(i, a, loop_pieces(a, ctx.buffer_bytes)) for i, a in argsets]
        else:
            loops = [(i, CollectiveArgs(coll, p, int(n), ctx.root, ctx.servers, ctx.pods), None) for i, n in todo]
            buffer = loop_buffer_bytes(self.first, ctx.buffer_bytes, ctx.topo.product, self.spec.name, ctx.inline_ok)
            piece = piece_bytes(self.first, buffer) if buffer is not None else None
            # the 910B's one-server AlltoAll: one pass up to the buffer, the full mesh's blocks above it
            by_size = coll == "alltoall" and buffer is not None and one_server_mesh(ctx.topo.product, self.spec.name,
                                                                                     ctx.servers)
            for k, (i, a, _) in enumerate(loops):
                if by_size:
                    piece = piece_bytes(a, loop_buffer_bytes(a, ctx.buffer_bytes, ctx.topo.product, self.spec.name,
                                                             ctx.inline_ok))
                if piece is None:
                    loops[k] = (i, a, {a.nbytes: 1})
                else:  # loop_pieces, without a dict comprehension per size
                    full, rest = divmod(a.nbytes, piece)
                    loops[k] = (i, a, {x: c for x, c in ((piece, full), (rest, 1)) if c and x})
        if self.spec.shape is not None:
            return self._shaped_times(loops, out)
        if self.work is None:
            i, a, pieces = loops[0]
            try:
                self.work, self.abg = self._prepare(dataclasses.replace(a, nbytes=next(iter(pieces))))
            except Exception:  # simulate() raises it, with its own message, at this point
                self.work = False
                return out
        limit, work, cost, abg, launch = o["max_transfers"], self.work, self.spec.cost, self.abg, ctx.launch_s
        memo: dict = {}
        for i, a, pieces in loops:
            k = len(pieces)
            if k * work["estimate"] > limit or k * work["transfers"] > limit:
                continue  # refused: simulate() says by how much
            total = 0
            for nb, count in pieces.items():
                c = memo.get(nb) if a.send_matrix is None else None
                if c is None:
                    c = cost(a if nb == a.nbytes else dataclasses.replace(a, nbytes=nb), abg)
                    if a.send_matrix is None:
                        memo[nb] = c
                total += count * c
            out[i] = (ctx.call_time(launch, total), a.nbytes)
        return out

    def _shaped_times(self, loops, out) -> list:
        """:meth:`times` for an algorithm whose structure follows the size through its shape (the
        pipelined chain's segment count): as simulate() prices it, every distinct piece's schedule
        counted against the transfer bound and the first piece's path parameters for all, each
        shape's prepared once."""
        ctx, o, cost = self.ctx, self.ctx.o, self.spec.cost
        limit, launch = o["max_transfers"], ctx.launch_s
        for i, a, pieces in loops:
            args = [a if nb == a.nbytes else dataclasses.replace(a, nbytes=nb) for nb in pieces]
            prepared = [self._shaped(x) for x in args]
            if any(x is None for x in prepared):
                continue  # simulate() answers (and raises what it raises)
            if sum(w["estimate"] for w, _ in prepared) > limit or sum(w["transfers"] for w, _ in prepared) > limit:
                continue  # refused: simulate() says by how much
            abg = prepared[0][1]
            total = sum(count * cost(x, abg) for x, count in zip(args, pieces.values(), strict=True))
            out[i] = (ctx.call_time(launch, total), a.nbytes)
        return out


def _analytical_parameters(topo, rank_nodes, spec, key, schedule, routing, seed, step_s, qps, inline_ok, factor,
                           net=None, max_work=None):
    """Path parameters of ``spec``'s schedule, cached (:func:`hcsim.analytical.cached_path_parameters`)
    for hcsim's own algorithms, read off ``schedule`` (a Schedule or a builder) otherwise."""
    if _own(spec):  # (an algorithm with a shape has it in ``key``)
        return cached_path_parameters(topo, rank_nodes, key, schedule, routing, seed, step_s, spec.levels, qps,
                                      inline_reduce=inline_ok, reduce_time_factor=factor, net=net, max_work=max_work)
    return path_parameters(topo, rank_nodes, schedule() if callable(schedule) else schedule, routing, seed, step_s,
                           spec.levels, qps, inline_reduce=inline_ok, reduce_time_factor=factor, max_work=max_work)


class _FastAnalytical:
    """Analytical points of one (topology, collective, options), for :func:`sweep` and
    :func:`hcsim.study.select`. :meth:`column` answers one algorithm at every size at once:
    per size (time_s, algorithm that ran, ranks, size_bytes, selected_by), or None where
    simulate() is to answer."""

    def __init__(self, topo, collective: str, kwargs: dict):
        self.topo, self.collective, self.kwargs = topo, collective, kwargs
        self.net = topo.compiled()
        self.layout = None  # (rank nodes, servers, pods): the same for every context
        self.contexts: dict = {}
        self.plans: dict = {}

    def _context(self, override: tuple):
        ctx = self.contexts.get(override)
        if ctx is None:
            try:
                if self.layout is None:
                    nodes = self.topo.resolve_ranks(self.kwargs.get("ranks"))
                    self.layout = (nodes, *rank_layout(self.topo, nodes))
                ctx = _Context(self.topo, self.collective, _options(self.kwargs, **dict(override)), self.net,
                               self.layout)
            except Exception:
                ctx = False
            self.contexts[override] = ctx
        return ctx

    def _plan(self, algorithm, override: tuple = ()):
        key = (algorithm if isinstance(algorithm, (str, AlgorithmSpec)) else id(algorithm), override)
        plan = self.plans.get(key)
        if plan is None:
            ctx = self._context(override)
            try:
                plan = _SpecPlan(ctx, algorithm) if ctx else False
            except Exception:
                plan = False
            self.plans[key] = plan
        return plan

    def column(self, algorithm, sizes) -> list:
        if algorithm is None:
            algorithm = "auto" if self.kwargs.get("hccl_algo") is not None else DEFAULT_ALGORITHM[self.collective]
        out = [None] * len(sizes)
        if isinstance(algorithm, str) and algorithm in ("auto", "best"):
            ctx = self._context(())
            if not ctx:
                return out
            layout = ctx.servers or (ctx.p,)
            hccl = ctx.hccl  # a CCL buffer only where simulate() has one (not added by auto/best)
            if algorithm == "best":
                if self.kwargs.get("hccl_algo") is not None:
                    return out
                cands = candidates(self.collective, layout, ctx.pods, self.topo.product,
                                   shares_in_network_switch(self.topo, ctx.rank_nodes, ctx.dtype, ctx.reduce_op))
                override = (("dtype", ctx.dtype), ("hccl", hccl), ("reduce_op", ctx.reduce_op))
                cols = []
                for c in cands:
                    plan = self._plan(c, override)
                    if not plan:
                        return out
                    cols.append((plan.spec.name, plan.times(sizes)))
                why = f"fastest of {len(cands)} candidates by simulation (analytical)"
                for i in range(len(sizes) if cands else 0):
                    if all(col[i] is not None for _, col in cols):
                        name, (t, size_bytes) = min(((nm, col[i]) for nm, col in cols), key=lambda x: x[1][0])
                        out[i] = (t, name, ctx.p, size_bytes, why)
                return out
            override = (("hccl", hccl), ("hccl_algo", None))
            chosen = {}
            for i, n in enumerate(sizes):
                try:
                    pick = select_algorithm(self.topo.product, self.collective, n, layout, ctx.pods, ctx.parsed_algo,
                                            hccl or HcclConfig())
                except Exception:  # simulate() raises it at this point
                    continue
                chosen.setdefault(pick, []).append(i)
            for (name, why), idx in chosen.items():
                plan = self._plan(name, override)
                if plan:
                    for i, r in zip(idx, plan.times([sizes[i] for i in idx]), strict=True):
                        if r is not None:
                            out[i] = (r[0], plan.spec.name, ctx.p, r[1], why)
            return out
        plan = self._plan(algorithm)
        if plan:
            for i, r in enumerate(plan.times(sizes)):
                if r is not None:
                    out[i] = (r[0], plan.spec.name, plan.ctx.p, r[1], None)
        return out


class _Table:
    """:func:`sweep`'s rows, kept column by column: the frame the per-row dicts made before
    (same columns in the same order, same values), built in one go."""

    def __init__(self, collective: str, mode: str, p: int):
        self.collective, self.mode, self.p = collective, mode, p
        self.algorithm, self.modes, self.ranks, self.size, self.time_s = [], [], [], [], []
        self.selected, self.refused = [], []
        self.order = []  # "selected" and "refused" in the order they first appear

    def add(self, algo, ran: str, ranks: int, size_bytes: int, time_s: float, mode: str | None = None):
        if "selected" not in self.order:
            self.order.append("selected")
        self.algorithm.append(algo if isinstance(algo, str) else ran)
        self.modes.append(self.mode if mode is None else mode)
        self.ranks.append(ranks)
        self.size.append(size_bytes)
        self.time_s.append(time_s)
        self.selected.append(ran)
        self.refused.append(None)

    def refuse(self, algo, n: int, reason: str):
        if "refused" not in self.order:
            self.order.append("refused")
        self.algorithm.append(getattr(algo, "__name__", algo))
        self.modes.append(self.mode)
        self.ranks.append(self.p)
        self.size.append(n)
        self.time_s.append(math.nan)
        self.selected.append(None)
        self.refused.append(reason)

    def frame(self) -> pd.DataFrame:
        n = len(self.size)
        t = np.array(self.time_s, dtype=float)
        ok = ~np.isnan(t)
        size = np.array(self.size, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            algbw = np.where(t > 0, size / t / GB, np.inf)
        algbw[~ok] = math.nan
        ranks = np.array(self.ranks, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
        busbw = BUSBW_FACTOR[self.collective]
        factor = {r: busbw(r) for r in set(self.ranks)}  # one per rank count, not per row
        text = lambda values: np.array(values, dtype=object)  # noqa: E731 (no per-column type inference)
        cols = {"collective": np.full(n, self.collective, dtype=object), "algorithm": text(self.algorithm),
                "mode": text(self.modes), "ranks": ranks, "size_bytes": size, "time_us": t * 1e6,
                "algbw_GBps": algbw,
                "busbw_GBps": algbw * np.array([factor[r] for r in self.ranks], dtype=float)}
        for name in self.order:
            if name == "selected":
                cols["selected"] = text([math.nan if x is None else x for x in self.selected])
            else:
                cols["refused"] = text(["" if x is None else x for x in self.refused])
        import pandas as pd

        return pd.DataFrame(cols, copy=False)
