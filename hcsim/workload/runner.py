"""Play a workload on one network: :func:`run`.

Every collective and send/recv becomes a :class:`~hcsim.engine.des.FlowSimulator` run on one
shared :class:`~hcsim.engine.des.Fabric`, so their flows take max-min fair shares of the
same links and NPU endpoints. Compute tasks run on the NPUs' compute units (processor
sharing: tasks on one NPU at the same time share it evenly). A small dependency tracker
starts each (operation, rank) when its stream predecessor, its ``after`` operations and its
awaited events are done on that rank (docs/architecture.md, "Jobs").
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import simpy

from ..algorithms.registry import get_algorithm, make_args, run_builder
from ..algorithms.schedule import CollectiveArgs, Schedule, check_structure, make_step, min_size
from ..api import (
    DEFAULT_ALGORITHM,
    _reduces_inline,
    _send_matrix,
    build_work,
    check_work,
    rank_layout,
)
from ..dtypes import check_elements, check_supported, reduce_time_factor
from ..engine.des import EngineConfig, Fabric, FlowSimulator, moved_bytes
from ..engine.result import link_table
from ..errors import ConfigError, WorkLimitError, bad_value, is_int
from ..hccl.buffer import loop_buffer_bytes, loop_pieces, looped
from ..hccl.selection import HcclConfig, select_algorithm
from ..limits import (
    MAX_FLOW_UPDATES,
    MAX_JOB_OPS,
    MAX_JOB_TRANSFERS,
    MAX_JOB_WORK,
    WORK_PER_LOOP_STEP,
    WORK_PER_RANK_OP,
)
from ..progress import check_progress, progress_bar
from ..topology.io import load_topology
from ..topology.model import ROUTING_POLICIES
from ..verify import verify as _verify_schedule
from .graph import Collective, Compute, RecordEvent, SendRecv, WaitEvent, Workload
from .result import JobResult

_KIND = {Compute: "compute", Collective: "collective", SendRecv: "sendrecv", RecordEvent: "recordevent",
         WaitEvent: "waitevent"}


def run(topology, workload: Workload, *, routing: str = "ecmp", ecmp_seed: int = 0,
        hccl: HcclConfig | None = None, speed=None, start_s=None, max_transfers: int = MAX_JOB_TRANSFERS,
        max_flow_updates: int = MAX_FLOW_UPDATES, progress=None, max_ops: int = MAX_JOB_OPS,
        max_work: int | None = MAX_JOB_WORK) -> JobResult:
    """Play ``workload`` (one training step, say) on ``topology``'s network.

    Parameters
    ----------
    topology : str, Path or Topology
    workload : Workload
    routing : {"ecmp", "spray"}
    ecmp_seed : int
    hccl : HcclConfig, optional
        HCCL settings for every collective (CCL buffer, queue pairs, expansion mode); on an
        Ascend topology HCCL's defaults apply when none is given.
    speed : dict, optional
        ``{rank: factor}``: a rank's compute runs ``factor`` times as fast (0.5: a slow NPU
        takes twice as long); 1 for ranks not listed.
    start_s : dict, optional
        ``{rank: seconds}``: a rank starts its work this late (a straggler that joins the step
        late); 0 for ranks not listed. Its peers wait for it inside the collectives it is in.
    max_transfers : int
        Work bound: the transfers of every collective together, their CCL-buffer loops included
        (:data:`hcsim.limits.MAX_JOB_TRANSFERS`; refused before each collective's schedule is
        built).
    max_flow_updates : int
        Work bound of the event-driven run (:class:`~hcsim.errors.WorkLimitError`).
    max_ops : int
        Work bound: the operations of the workload (refused before anything is planned).
    max_work : int or None
        Work bound of the whole job's event-driven run, in engine units
        (:data:`hcsim.limits.MAX_JOB_WORK`; as :func:`hcsim.simulate`'s ``max_work``; None: none).
        ``JobResult.config["work"]`` is what the run took.
    progress : bool, optional
        A progress bar over the operations finished (:func:`hcsim.progress.progress_bar`;
        None: only on a terminal or in a notebook).

    Returns
    -------
    JobResult

    Examples
    --------
    Two allreduces on disjoint pairs of a ring share no link; each takes what it takes alone:

    >>> from hcsim.topology import ring
    >>> from hcsim.workload import Workload
    >>> w = Workload("two")
    >>> a, b = w.communicator("a", [0, 1]), w.communicator("b", [2, 3])
    >>> _ = w.collective("ar_a", a, "allreduce", 2000, algorithm="ring")
    >>> _ = w.collective("ar_b", b, "allreduce", 2000, algorithm="ring")
    >>> round(run(ring(4, 1e9), w).step_time_s * 1e6, 9)
    2.0
    """
    if not isinstance(workload, Workload):
        raise bad_value("workload", workload, "an hcsim.workload.Workload")
    if not isinstance(routing, str) or routing not in ROUTING_POLICIES:
        raise bad_value("routing", routing, "one of " + ", ".join(ROUTING_POLICIES))
    if not is_int(ecmp_seed) or not 0 <= ecmp_seed < 2**32:
        raise bad_value("ecmp_seed", ecmp_seed, "an integer from 0 to 2^32 - 1")
    if hccl is not None and not isinstance(hccl, HcclConfig):
        raise bad_value("hccl", hccl, "an hcsim.hccl.selection.HcclConfig, or None")
    for name, v in (("max_transfers", max_transfers), ("max_flow_updates", max_flow_updates),
                    ("max_ops", max_ops)):
        if not is_int(v) or v < 1:
            raise bad_value(name, v, "a positive integer")
    max_transfers, max_flow_updates, max_ops = int(max_transfers), int(max_flow_updates), int(max_ops)
    if max_work is not None and (not is_int(max_work) or max_work < 1):  # as simulate's (a numpy integer too)
        raise bad_value("max_work", max_work, "a positive integer (engine work units), or None for no bound")
    max_work = None if max_work is None else int(max_work)
    topo = load_topology(topology)
    world = topo.num_npus
    workload.check(world)
    if not workload.ops:
        raise bad_value("workload", workload.name, "at least one operation")
    if len(workload.ops) > max_ops:
        raise WorkLimitError(f"max_ops = {max_ops}: workload {workload.name!r} has {len(workload.ops):,} operations; "
                             "use fewer (fewer micro-batches or layers, a generator's granularity='stage'), or "
                             "raise max_ops (options.max_ops in a scenario)")
    if hccl is None and topo.product is not None:
        hccl = HcclConfig()
    check_progress(progress)
    # the graph is checked once for the whole job, not at each collective's planning (2,080 checks
    # of a 2,048-server pod's 33,000 nodes took 36 s)
    with topo.unchanged():
        job = _Job(topo, workload, routing, int(ecmp_seed), hccl, _speeds(speed, world), max_transfers,
                   max_flow_updates, _starts(start_s, world), max_work)
        return _play(job, workload, progress)


def _play(job, workload: Workload, progress) -> JobResult:
    """``job.play()`` under its progress bar, a work bound's advice worded for a job."""
    with progress_bar(len(workload.ops), f"job {workload.name}", progress) as job.bar:
        try:
            return job.play()
        except WorkLimitError as exc:  # the engine's advice is a call's: a job raises its bound elsewhere
            if str(exc).endswith(_CALL_ADVICE):
                exc.args = (str(exc)[:-len(_CALL_ADVICE)] + _JOB_ADVICE,)
            raise


_CALL_ADVICE = "use mode='analytical', fewer ranks or sizes, or raise max_work (--max-work)"
_JOB_ADVICE = ("use fewer ranks, operations or sizes, or raise max_work (run's max_work=, a scenario's "
               "options.max_work or --set options.max_work=N; 0 there: no bound)")


def _speeds(speed, world: int) -> np.ndarray:
    out = np.ones(world)
    if speed is None:
        return out
    if not isinstance(speed, dict):
        raise bad_value("speed", speed, "a {rank: factor} mapping")
    for r, f in speed.items():
        if not is_int(r) or not 0 <= r < world:
            raise bad_value("speed", r, f"rank numbers from 0 to {world - 1}")
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or not 1e-6 <= f <= 1e6:
            raise bad_value(f"speed[{r}]", f, "a factor from 1e-6 to 1e6")
        out[int(r)] = float(f)
    return out


def _starts(start_s, world: int) -> np.ndarray:
    out = np.zeros(world)
    if start_s is None:
        return out
    if not isinstance(start_s, dict):
        raise bad_value("start_s", start_s, "a {rank: seconds} mapping")
    for r, t in start_s.items():
        if not is_int(r) or not 0 <= r < world:
            raise bad_value("start_s", r, f"rank numbers from 0 to {world - 1}")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not 0 <= t <= 1e6:
            raise bad_value(f"start_s[{r}]", t, "seconds from 0 to 1e6")
        out[int(r)] = float(t)
    return out


class _ComputeUnit:
    """One NPU's compute: the tasks running on it share it evenly (processor sharing)."""

    __slots__ = ("speed", "tasks", "last_s", "version")

    def __init__(self, speed: float):
        self.speed = speed
        self.tasks: dict = {}  # key -> seconds of work left (at full speed, alone)
        self.last_s = 0.0
        self.version = 0

    def advance(self, now: float) -> None:
        if self.tasks and now > self.last_s:
            done = (now - self.last_s) * self.speed / len(self.tasks)
            for key in self.tasks:
                self.tasks[key] -= done
        self.last_s = now


class _Job:
    """The dependency tracker and the runs of one workload on one fabric."""

    def __init__(self, topo, workload, routing, ecmp_seed, hccl, speeds, max_transfers, max_flow_updates, starts,
                 max_work=None):
        self.topo = topo
        self.w = workload
        self.ops = workload.ops
        self.npus = topo.npus
        self.routing, self.ecmp_seed, self.hccl = routing, ecmp_seed, hccl
        self.defaults = topo.defaults.for_mode(hccl.expansion_mode if hccl is not None else None)
        self.fabric = Fabric(topo.compiled(), max_flow_updates, max_work)
        self.units = [_ComputeUnit(s) for s in speeds]
        self.starts = starts  # per rank: when its streams start
        self.bar = None       # the progress bar run() opens
        self._frames = None   # while releasing: (ready operations, time) frames, innermost last
        self.max_transfers = max_transfers
        self.index = {op.name: i for i, op in enumerate(self.ops)}
        self.start_s: dict = {}  # (op, rank) -> start
        self.end_s: dict = {}    # (op, rank) -> end
        self.left: dict = {}     # op -> ranks not yet done
        self.algorithms: dict = {}
        self.runs: dict = {}     # op -> FlowSimulator
        self.work_s: dict = {}   # compute op -> seconds alone at full speed (one, or {rank: seconds})
        self.local_of: dict = {}  # op -> {global rank: its rank in the op's run}
        self.launch_s: dict = {}  # op -> launch overhead before a rank enters the run
        self._schedules: dict = {}
        self._transfers = 0
        self._due: dict = {}  # time -> [(rank, unit version)] of compute units expecting a task to end then
        self._layouts: dict = {}  # NPUs of a communicator -> (ranks per server, servers per pod)
        self._configs: dict = {}  # what sets an operation's EngineConfig -> the config (shared)
        self._roofs: dict = {}  # (NPU spec, flops, bytes, dtype) -> roofline seconds (ranks share specs)
        self._npu_specs = None  # per rank: its NpuSpec, looked up once when compute needs them

    # ---------------------------------------------------------------- dependencies
    def _graph(self):
        """Per (op, rank): how many conditions it waits for, and who waits on whom."""
        waiting: dict = {}
        on_rank = defaultdict(list)   # (op, rank) done -> [(op', rank)]
        on_whole = defaultdict(list)  # op done on every rank -> [(op', rank)]
        last_on_stream: dict = {}     # (rank, stream) -> op
        last_record: dict = {}        # (rank, event) -> op
        members = [frozenset(op.involved()) for op in self.ops]  # membership tests: once per op
        for i, op in enumerate(self.ops):
            involved = op.involved()
            self.left[i] = len(involved)
            after = [self.index[a] for a in op.after]
            for r in involved:
                n = 0
                prev = last_on_stream.get((r, op.stream))
                if prev is not None:
                    on_rank[(prev, r)].append((i, r))
                    n += 1
                for j in after:
                    if r in members[j]:
                        on_rank[(j, r)].append((i, r))
                    else:
                        on_whole[j].append((i, r))
                    n += 1
                if isinstance(op, WaitEvent):
                    on_rank[(last_record[(r, op.event)], r)].append((i, r))
                    n += 1
                waiting[(i, r)] = n
                last_on_stream[(r, op.stream)] = i
                if isinstance(op, RecordEvent):
                    last_record[(r, op.event)] = i
        return waiting, on_rank, on_whole

    def play(self) -> JobResult:
        # planning and the dependency graph cost per operation and rank too: counted (and bounded)
        # before either is done, so a job too large even to plan is refused before it starts
        op_ranks = sum(len(op.involved()) for op in self.ops)
        self.fabric.job_work += WORK_PER_RANK_OP * op_ranks
        if self.fabric.max_work is not None:
            self.fabric.check_work(None, f"before planning its {len(self.ops):,} operations ({op_ranks:,} operation "
                                         f"ranks, {WORK_PER_RANK_OP} units each to plan)")
        for i, op in enumerate(self.ops):  # plan (and bound) every operation before anything runs
            if isinstance(op, (Collective, SendRecv)):
                self._plan(i, op)
            elif isinstance(op, Compute):
                if op.duration_s is None and self._npu_specs is None:
                    self._npu_specs = [self.topo.npu_spec(n) for n in self.npus]
                self.work_s[i] = (op.duration_s if op.duration_s is not None else
                                  {r: self._roofline(op, r) for r in op.ranks})
        self.waiting, self.on_rank, self.on_whole = self._graph()
        env = simpy.Environment()
        self.fabric.start(0.0)
        ready = defaultdict(list)
        for (i, r), n in self.waiting.items():
            if n == 0:
                ready[i].append(r)
        for i in sorted(ready):
            now = [r for r in ready[i] if self.starts[r] == 0]
            if now:
                self._begin(i, now, 0.0)
            for r in ready[i]:  # a late rank reaches its first operations when it starts
                if self.starts[r] > 0:
                    self.fabric.call_at(float(self.starts[r]), lambda t, i=i, r=r: self._begin(i, [r], t))
        proc = env.process(self._drive(env))
        env.run(until=proc)
        missing = [(self.ops[i].name, r) for (i, r) in self.waiting if (i, r) not in self.end_s]
        if missing:
            name, r = missing[0]
            raise ConfigError(f"workload {self.w.name!r}: operation {name!r} never ran on rank {r} (it waits for "
                              f"work that never ends: check its stream order, 'after' and events)"
                              + (f"; {len(missing) - 1} more" if len(missing) > 1 else ""))
        return self._result()

    def _drive(self, env):
        self.fabric.instant(0.0)
        yield from self.fabric.process(env)

    def _done(self, i: int, ranks, now: float) -> None:
        """Operation ``i`` finished on ``ranks`` at ``now``: release what waited for it."""
        self._bookkeeping(len(ranks), now)
        ready = defaultdict(list)
        for r in ranks:
            r = int(r)
            self.end_s[(i, r)] = now
            for key in self.on_rank.get((i, r), ()):
                self.waiting[key] -= 1
                if self.waiting[key] == 0:
                    ready[key[0]].append(key[1])
        self.left[i] -= len(ranks)
        if self.left[i] == 0 and self.bar is not None:
            self.bar.update()
            for key in self.on_whole.get(i, ()):
                self.waiting[key] -= 1
                if self.waiting[key] == 0:
                    ready[key[0]].append(key[1])
        self._release([(j, ready[j]) for j in sorted(ready)], now)

    def _release(self, ready: list, now: float) -> None:
        """Begin the ``ready`` operations in order, each with all it releases at once (an
        operation that ends as it begins, a record or a wait, releases its successors before
        the next ready one begins): depth first, as nested calls would, but on an explicit
        stack, so a chain of thousands of such operations does not recurse."""
        if self._frames is not None:  # inside a release: the caller's loop takes this frame next
            self._frames.append((iter(ready), now))
            return
        self._frames = [(iter(ready), now)]
        try:
            while self._frames:
                items, at = self._frames[-1]
                item = next(items, None)
                if item is None:
                    self._frames.pop()
                    continue
                self._begin(item[0], item[1], at)
        finally:
            self._frames = None

    def _begin(self, i: int, ranks: list, now: float) -> None:
        """``ranks`` reached operation ``i`` at ``now`` with everything it waits for done."""
        self._bookkeeping(len(ranks), now)
        op = self.ops[i]
        for r in ranks:
            self.start_s[(i, r)] = now
        if isinstance(op, (RecordEvent, WaitEvent)):
            self._done(i, ranks, now)
        elif isinstance(op, Compute):
            work = self.work_s[i]
            for r in ranks:
                self._compute(i, r, work[r] if isinstance(work, dict) else work, now)
        else:
            run, local_of = self.runs[i], self.local_of[i]
            launch = self.launch_s[i] + run.call_overhead_s  # the launch, then the protocol's cost once a call
            local = np.array(sorted(local_of[r] for r in ranks), dtype=np.int64)
            if launch:
                self.fabric.call_at(now + launch, lambda t, run=run, local=local: run.enter(local, t))
            else:
                run.enter(local, now)

    def _bookkeeping(self, n: int, now: float) -> None:
        """Count a job's per-(operation, rank) work against the fabric's work bound."""
        fabric = self.fabric
        fabric.job_work += WORK_PER_RANK_OP * n
        if fabric.max_work is not None:
            fabric.check_work(now)

    # ---------------------------------------------------------------- compute
    def _roofline(self, op: Compute, r: int) -> float:
        """Seconds of ``op`` on rank ``r``'s NPU alone at full speed, from its roofline."""
        npu = self._npu_specs[r]  # looked up once, before the first roofline (play)
        key = (id(npu), op.flops, op.bytes_moved, op.dtype)
        t = self._roofs.get(key)
        if t is not None:
            return t
        spec = getattr(npu, "compute", None)
        if spec is None:
            raise ConfigError(f"op {op.name!r}: flops = {op.flops:g}: NPU {self.npus[r]!r} of topology "
                              f"{self.topo.name!r} has no compute figures (an NPU's 'compute' section); give "
                              "duration_s, or use a topology that has them")
        t = self._roofs[key] = float(spec.time_s(op.flops, op.bytes_moved, op.dtype))
        return t

    def _compute(self, i: int, r: int, work_s: float, now: float) -> None:
        if work_s <= 0:
            self._done(i, [r], now)
            return
        unit = self.units[r]
        unit.advance(now)
        unit.tasks[(i, r)] = work_s
        self._reschedule(r, now)

    def _reschedule(self, r: int, now: float) -> None:
        unit = self.units[r]
        unit.version += 1
        if not unit.tasks:
            return
        first = min(unit.tasks.values())
        at = now + max(first, 0.0) * len(unit.tasks) / unit.speed
        due = self._due.get(at)
        if due is None:  # one event per distinct time: ranks finishing together are handled together
            due = self._due[at] = []
            self.fabric.call_at(at, lambda t, at=at: self._compute_due(at, t))
        due.append((r, unit.version))

    def _compute_due(self, at: float, now: float) -> None:
        """The compute units that expected a task to end at ``at`` (reached at ``now``): end
        their finished tasks, then release what waited for them, one call per operation."""
        finished = []
        for r, version in self._due.pop(at):
            unit = self.units[r]
            if version != unit.version:
                continue  # the unit's load changed since this was scheduled
            unit.advance(now)
            first = min(unit.tasks.values())
            tol = 1e-12 * max(first, 0.0) + 1e-15 * max(abs(v) for v in unit.tasks.values()) + 1e-18
            ended = [key for key, left in unit.tasks.items() if left <= max(first, 0.0) + tol]
            for key in ended:
                del unit.tasks[key]
            self._reschedule(r, now)
            finished.extend(ended)
        by_op = defaultdict(list)
        for i, rank in sorted(finished):
            by_op[i].append(rank)
        for i, ranks in by_op.items():
            self._done(i, ranks, now)

    # ---------------------------------------------------------------- communication
    def _plan(self, i: int, op) -> None:
        """Build the schedule and the run of a collective or send/recv."""
        if isinstance(op, SendRecv):
            if op.src == op.dst:
                raise bad_value(f"op {op.name!r}: dst", op.dst, "a rank other than src")
            members = (op.src, op.dst)
            key = ("send", op.size_bytes)
            schedule = self._schedules.get(key)
            if schedule is None:
                n = op.size_bytes
                step = make_step(np.array([0]), np.array([1]), np.array([n]), False, 0, 1)
                schedule = self._schedules[key] = Schedule(CollectiveArgs("sendrecv", 2, max(n, 1)), 1, [step],
                                                           np.array([n], dtype=np.int64))
            name, launch = "p2p", self.defaults.launch_for("sendrecv")
            self._count(1, op)
        else:
            members = op.comm.ranks
            schedule, name = self._collective_schedule(op, [self.npus[r] for r in members])
            launch = self.defaults.launch_for(op.collective)
        self.algorithms[i] = name
        key = (op.dtype, op.reduce_op, op.collective) if isinstance(op, Collective) else None
        cfg = self._configs.get(key)
        if cfg is None:
            cfg = self._configs[key] = self._config(op)
        run = FlowSimulator(self.topo, [self.npus[r] for r in members], schedule, cfg, fabric=self.fabric,
                            on_finish=lambda local, now, i=i, members=members: self._done(
                                i, [members[int(x)] for x in local], now))
        self.local_of[i] = {r: k for k, r in enumerate(members)}
        self.launch_s[i] = launch
        self.runs[i] = run

    def _config(self, op) -> EngineConfig:
        """How the engine runs operation ``op`` (ops of one data type, reduce op and collective share it)."""
        return EngineConfig(step_overhead_s=self.defaults.step_overhead_s, launch_overhead_s=0.0,
                            routing=self.routing, ecmp_seed=self.ecmp_seed, record=False,
                            qps=self.hccl.qps_per_connection if self.hccl is not None else 1,
                            message_regimes=self.defaults.message_regimes,
                            max_flow_updates=self.fabric.max_flow_updates, max_work=self.fabric.max_work,
                            reduce_time_factor=(reduce_time_factor(op.dtype, op.reduce_op)
                                                if isinstance(op, Collective) and op.dtype is not None else 1.0),
                            inline_reduce=(_reduces_inline(op.collective, self.topo.product, op.dtype, op.reduce_op)
                                           if isinstance(op, Collective) else True))

    def _collective_schedule(self, op: Collective, rank_nodes):
        p = len(rank_nodes)
        layout = self._layouts.get(tuple(rank_nodes))
        if layout is None:  # communicators repeat: each one's layout is read once
            layout = self._layouts[tuple(rank_nodes)] = rank_layout(self.topo, rank_nodes)
        servers, pods = layout
        algorithm = op.algorithm if op.algorithm is not None else DEFAULT_ALGORITHM.get(op.collective)
        if not 0 <= op.root < p:
            raise bad_value(f"op {op.name!r}: root", op.root, f"a rank of its communicator, 0 to {p - 1}")
        matrix = _send_matrix(op.send_matrix, p, op.collective) if op.send_matrix is not None else None
        nbytes = op.size_bytes if matrix is None else 1  # alltoallv: the matrix sets the size
        if algorithm == "auto":
            algorithm, _ = select_algorithm(self.topo.product, op.collective, nbytes, servers or (p,), pods,
                                            None, self.hccl or HcclConfig())
        spec = get_algorithm(op.collective, algorithm)
        if spec.levels > 1 and not servers:
            raise ConfigError(f"op {op.name!r}: algorithm {spec.name!r} needs the ranks of each server to be "
                              "consecutive in its communicator")
        args = make_args(op.collective, p, nbytes, op.root, servers, pods, matrix)
        if op.dtype is not None:  # HCCL's rules for the data type: supported, whole elements per rank
            check_supported(op.collective, op.dtype, op.reduce_op, self.topo.product)
            if matrix is None:
                check_elements(op.collective, args.nbytes, op.dtype, p)
        if args.nbytes < min_size(op.collective, p):
            raise bad_value(f"op {op.name!r}: size_bytes", args.nbytes,
                            f"at least {min_size(op.collective, p)} bytes for {op.collective} on {p} ranks")
        buffer = loop_buffer_bytes(args, self.hccl.buffer_bytes if self.hccl is not None else None, self.topo.product,
                                   spec.name, _reduces_inline(op.collective, self.topo.product, op.dtype, op.reduce_op))
        key = (spec.name, args, buffer)
        schedule = self._schedules.get(key)
        if schedule is None:
            # a job runs every CCL-buffer loop (looped): count what they hold, and refuse, before
            # building them (one piece of each size is built and counted, bounded, first)
            building = build_work(spec, args, buffer, every_loop=True)  # charged before anything is built
            if building:
                self.fabric.job_work += building
                if self.fabric.max_work is not None:
                    self.fabric.check_work(None, f"before building op {op.name!r}'s schedules ({spec.name} "
                                                 f"{op.collective} on {p} ranks: about {building:,} units)")
            built: dict = {}
            check_work(spec, args, buffer, self.max_transfers, built=built, every_loop=True)
            pieces = loop_pieces(args, buffer)
            self._count(sum(count * (sum(len(st) for st in built[n].steps) if n in built else 0)
                            for n, count in pieces.items()), op, planned=True)
            if pieces == {args.nbytes: 1} and args.nbytes in built:  # one piece: the schedule just counted
                schedule = built[args.nbytes]
            else:
                # every loop after the first of its piece size is a copy of that piece's steps, built
                # one by one: charged before it is built (a 4 KiB buffer made 720,823 loops)
                copies = sum((count - 1) * len(built[n].steps) for n, count in pieces.items() if n in built)
                if copies:
                    self.fabric.job_work += copies * WORK_PER_LOOP_STEP
                    if self.fabric.max_work is not None:
                        self.fabric.check_work(None, f"before building op {op.name!r}'s {sum(pieces.values()):,} "
                                                     f"CCL-buffer loops ({copies:,} steps copied, "
                                                     f"{WORK_PER_LOOP_STEP} units each)")
                schedule = looped(spec, args, buffer, max_steps=None) if buffer is not None else run_builder(spec, args)
            if spec.user:
                _verify_schedule(schedule)
            check_structure(schedule)
            if spec.in_network:  # the switch reduces only some types and operations
                from ..algorithms.nvls import check_reduction

                try:
                    check_reduction(op.dtype, op.reduce_op)
                except ConfigError as exc:
                    raise ConfigError(f"op {op.name!r}: {exc}") from None
            self._schedules[key] = schedule
        self._count(sum(len(s) for s in schedule.steps), op)
        return schedule, spec.name

    def _count(self, n: int, op, planned: bool = False) -> None:
        """Count ``n`` transfers of ``op`` against ``max_transfers`` (``planned``: an estimate
        checked before its schedule is built, not kept)."""
        if planned:
            if self._transfers + n > self.max_transfers:
                raise WorkLimitError(f"max_transfers = {self.max_transfers}: the workload's collectives would hold "
                                     f"{self._transfers + n} transfers with operation {op.name!r} (its CCL-buffer "
                                     "loops included); use fewer or smaller operations, or raise max_transfers")
            return
        self._transfers += n
        if self._transfers > self.max_transfers:
            raise WorkLimitError(f"max_transfers = {self.max_transfers}: the workload's collectives hold over "
                                 f"{self._transfers} transfers by operation {op.name!r}; use fewer or smaller "
                                 "operations, or raise max_transfers")

    # ---------------------------------------------------------------- result
    def _result(self) -> JobResult:
        rows = {"op": [], "kind": [], "rank": [], "stream": [], "start_s": [], "end_s": [], "comm": [],
                "collective": [], "algorithm": [], "size_bytes": []}
        for (i, r), start in self.start_s.items():
            op = self.ops[i]
            rows["op"].append(op.name)
            rows["kind"].append(_KIND[type(op)])
            rows["rank"].append(r)
            rows["stream"].append(op.stream)
            rows["start_s"].append(start)
            rows["end_s"].append(self.end_s[(i, r)])
            rows["comm"].append(op.comm.name if isinstance(op, Collective) else "")
            rows["collective"].append(op.collective if isinstance(op, Collective) else
                                      ("sendrecv" if isinstance(op, SendRecv) else ""))
            rows["algorithm"].append(self.algorithms.get(i, ""))
            rows["size_bytes"].append(op.size_bytes if isinstance(op, (Collective, SendRecv)) else 0)
        ops = pd.DataFrame(rows).sort_values(["start_s", "rank"], kind="stable").reset_index(drop=True)
        step = float(ops["end_s"].max()) if len(ops) else 0.0
        return JobResult(self.w.name, step, ops, link_table(self.fabric.net, [moved_bytes(self.runs.values(), len(self.fabric.net.paths.latency_s))], step),
                         {"topology": self.topo.name, "routing": self.routing, "collectives": len(self.runs),
                          "instants": self.fabric.instants, "full_rate_recomputes": self.fabric.full_recomputes,
                          "work": self.fabric.work})
