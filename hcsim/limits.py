"""Documented limits on the work hcsim takes on before it starts.

Nothing a user types should run for hours or eat the machine's memory without being told
first. Each limit below is checked before the work it bounds begins, and the error names
the estimate and how to proceed (a smaller case, analytical mode, or an explicit
override). The numbers are set so that a case at the limit finishes in minutes on a
2-core machine with a few GiB of memory (docs/performance.md has the measurements).
"""

from __future__ import annotations

MAX_NPUS = 32_768
"""Most NPUs a topology builder makes (2^15: twice the 16,384-NPU clusters hcsim targets). Building
and compiling the largest takes seconds (a 4,096-server A2 pod, 32,768 NPUs: 2.3 s + 2.1 s of CPU
here, docs/performance.md); the 131,072 allowed before took about four times as long, before any
simulation."""

MAX_NODES = 131_072
"""Most nodes (NPUs, switches, NICs) a topology may hold (the 4,096-server A2 pod has 66,564)."""

MAX_LINKS = 1_000_000
"""Most directed links a topology may hold (a full mesh of 1,000 NPUs has 999,000; a 700-NPU one
already takes 350 MB compiled; the 2,048-server A2 pod has 184k)."""

MAX_SIZE_BYTES = 1 << 50
"""Largest message size (1 PiB): far above any real buffer, far below int64's 2^63, so
byte counts, chunk sizes and their sums stay exact in numpy's int64."""

MAX_DES_TRANSFERS = 64_000_000
"""Most transfers (summed over all steps of the distinct CCL-buffer pieces a call simulates)
a call takes on without ``max_transfers=`` raised explicitly: a 4,096-rank ring allreduce
(33.5M, lock-step and cheap) runs; an NB or NHR schedule near the bound holds its steps in
memory at about 80 bytes a transfer, a few GB."""

MAX_CALL_RANKS = 16_384
"""Most ranks one collective call takes on (the largest clusters hcsim targets). Schedules
are built before they are counted, and some hold p^2 chunks (alltoall) or p^2/2 transfers in
a step (NHR, NB): beyond this they outgrow memory before a bound could be checked."""

MAX_SCHEDULE_BYTES = 2 << 30
"""Most memory one call's schedule may hold (2 GiB), estimated before it is built for calls of
more than :data:`hcsim.api.PROBE_RANKS` ranks (:func:`hcsim.api.check_work`): a staged alltoall
on 4,096 ranks would hold 2.1M transfers in about 2.5 GiB, on 16,384 ranks 35M in 40 GiB."""

BYTES_PER_UNIT_BUILT = 256
"""A schedule built for a call of more than :data:`hcsim.api.PROBE_RANKS` ranks counts one work unit
per this many bytes of arrays it holds (extrapolated before it is built, :func:`hcsim.api.build_work`), charged
to the call's bound before its engine runs: building costs 2.5-2.75 ns a byte held (a Bruck
alltoall on 2,048 ranks holds about 0.9 GiB and takes 2.7 s to build, docs/robustness.md), so a
sweep point building two such CCL-buffer pieces took 8-9 s of CPU before its engine's bound acted."""

MAX_ALLTOALLV_RANKS = 2048
"""Most ranks of one alltoallv: its send matrix holds p x p byte counts (4.2M at 2,048 ranks; a
uniform one on 8,192 ranks took 2 s and gigabytes just to build), and its schedule's blocks as
many again; a staged alltoall that large is past :data:`MAX_SCHEDULE_BYTES` anyway."""

MAX_USER_STEPS = 200_000
"""Most steps a user's algorithm may return (its schedule is checked step by step before
anything else: a million steps took seconds just to check). hcsim's own schedules stay far
below it: a ring AllReduce on 16,384 ranks has 32,766."""

MAX_SWEEP_SIZES = 4096
"""Most sizes one sweep or selection study takes (a list, or a min/max/factor range)."""

WORK_PER_INSTANT = 50
"""Engine work units an event instant (or a step entry, a step of the contention-free pass, a rank
pair routed afresh) counts for, against one flow-rate update's 1: an instant costs about 50 us of
interpreter and numpy calls, a route search about as much, a flow-rate update about 1 us
(docs/performance.md, "The work bound")."""

RANKS_PER_UNIT = 256
"""An event instant or step entry counts one more unit per ``RANKS_PER_UNIT`` ranks of the
largest run on its network, and a step routed afresh two more: their numpy calls work on
arrays of one entry per rank (a ring gather on the A2 pod, measured on a 2-core machine: about
35 us an instant or entry on 1,024 ranks, 55 us on 4,096, 64 us on 8,192, about 120 us on
16,384 under the profiler; a flat ring reduce on 16,384 ranks, 16,383 one-transfer steps each
routed afresh, 7.6 s of CPU, about 460 us a step in all; docs/performance.md, "The work bound")."""

LONE_TRANSFERS_PER_UNIT = 32
"""A step of the contention-free pass counts one more unit per ``LONE_TRANSFERS_PER_UNIT`` of its
transfers (and :data:`RANKS_PER_UNIT`'s units): its arrays have one entry per transfer (a ring
allreduce on 4,096 NPUs, 4,096 transfers a step: about 240 us a step)."""

WORK_PER_ROUTED_STEP = 4 * WORK_PER_INSTANT
"""Engine work units a step counts when its transfers are routed afresh (no earlier step of the
fabric had the same rank pairs), besides 1 per transfer routed and :data:`WORK_PER_INSTANT` per
rank pair new to the fabric (and 2 per :data:`RANKS_PER_UNIT` ranks): finding, grouping and
indexing a step's routes costs numpy calls however few its transfers (about 170 us a step on
16,384 ranks, by its share of a profile of a flat ring reduce, which routes 16,383 one-transfer
steps) and about 0.4 us per transfer (the same, on a ring scatter on 8,192 ranks, which routes
33M transfers in 8,191 steps; docs/performance.md, "The work bound")."""

WORK_PER_MEASURED_ROW = 1000
"""Work units a validation counts per measured row besides its prediction's engine work: reading
the row, choosing its algorithm and setting up its call cost about 1 ms of CPU (600 rows of an
8-rank allreduce: 2.4 ms a row, of which the engine's 1,308 units about 1.3 ms)."""

FLOWS_PER_UNIT = 4
"""The event-driven engine counts one more unit per ``FLOWS_PER_UNIT`` flows it starts: starting,
draining and completing a flow costs about 0.3 us of numpy work whatever else the instant does,
which the per-instant units did not price where many flows start at each of many instants
(neighbour exchange on 8,192 NPUs of a leaf-spine: 22.5M flows in 23,323 instants, 8.6 s of CPU
for 5M units before; the ring and pairwise steps of a synchronised run start few flows an
instant, or none when the contention-free pass runs them)."""

WORK_UNITS = (f"{WORK_PER_INSTANT} per event instant, step entry, contention-free step or new rank pair, one "
              f"more per {RANKS_PER_UNIT} ranks; {WORK_PER_ROUTED_STEP} and 1 a transfer per step routed; 1 per "
              f"flow-rate update and per {FLOWS_PER_UNIT} flows started; about 1 us each")
"""What a work unit is, as the work bound's messages say it."""

FREE_HOPS = 16
WORK_PER_HOP = 5
"""A rank pair's route search costs about an event instant (:data:`WORK_PER_INSTANT`) while its
path is at most ``FREE_HOPS`` hops (resources) long, and ``WORK_PER_HOP`` units for each hop
beyond: on a ring of 4,096 NPUs a pair 2,048 hops apart takes 13 ms to route (2-6 us a hop).
Pods, leaf-spines and meshes stay well inside ``FREE_HOPS``."""


def hop_work(hops: int) -> int:
    """Work units a route search counts beyond its pair's :data:`WORK_PER_INSTANT` for a path of
    ``hops`` hops (:data:`FREE_HOPS`, :data:`WORK_PER_HOP`)."""
    return WORK_PER_HOP * max(0, hops - FREE_HOPS)


FREE_WALK = 256
WALK_PER_UNIT = 2
"""A route search that finds many long equal-cost paths costs for each link of them: a node pair
whose shortest paths (up to 64) hold more than ``FREE_WALK`` links in all counts one more unit per
``WALK_PER_UNIT`` links beyond. On a 64 x 64 torus a star gather's 4,095 searches took about 1.2 ms
each (5 s of CPU for the call); a far pair's up to 64 paths of 64 links hold 4,096 links, 1,920
units. A pod's or leaf-spine's pairs stay inside it (their benchmarks' work did not change)."""


def walk_work(links: int) -> int:
    """Work units a route search counts for shortest paths of ``links`` links in all
    (:data:`FREE_WALK`, :data:`WALK_PER_UNIT`)."""
    return max(0, links - FREE_WALK) // WALK_PER_UNIT


FREE_GROWN = 256
"""A route search by the Python breadth-first search (no compiled search: ``hcsim[fast]`` not
installed, or ``HCSIM_NO_NUMBA=1``) counts one more unit for each node its layers grow beyond this
many (:data:`hcsim.topology.routing.GROWN`; about 0.6-0.8 us a node): a 32 x 32 x 16 torus's NB
scatter grew 14.4M nodes in 11.6 s of CPU, its 1.4M units unaware of them. A pod's, a
leaf-spine's or a small torus's searches grow a few nodes each (their layers are kept between
searches), inside it."""


def grow_work(nodes: int) -> int:
    """Work units of a Python route search that grew ``nodes`` nodes (:data:`FREE_GROWN`)."""
    return max(0, nodes - FREE_GROWN)


def search_work(hops, walked) -> int:
    """:func:`hop_work` plus :func:`walk_work` summed over many searches at once (int arrays of
    each one's path length in hops and links walked): the same integers, so the same total.

    >>> import numpy as np
    >>> search_work(np.array([16, 2048]), np.array([100, 4096])) == hop_work(2048) + walk_work(4096)
    True
    """
    import numpy as np

    hops, walked = np.asarray(hops, dtype=np.int64), np.asarray(walked, dtype=np.int64)
    return int((WORK_PER_HOP * np.maximum(0, hops - FREE_HOPS)).sum()
               + (np.maximum(0, walked - FREE_WALK) // WALK_PER_UNIT).sum())


WORK_PER_RANK_OP = 20
"""Work units a job (:func:`hcsim.workload.run`) counts per operation and rank as it is planned
(before anything is planned), as it starts and as it ends (its planning and dependency
bookkeeping, about 10 us each on a 2-core machine: docs/performance.md, "The work bound"),
besides its engine's."""

MAX_WORK = 5_000_000
"""Most engine work (units of :data:`WORK_PER_INSTANT` per event instant, step entry, contention-free step
or rank pair routed, more on many ranks (:data:`RANKS_PER_UNIT`), :data:`WORK_PER_ROUTED_STEP` and 1
a transfer per step routed afresh, and 1 per flow-rate update, about 1 us each on a 2-core machine) one command's event-driven
simulations take on: one :func:`~hcsim.simulate` call (all its CCL-buffer loops), one sweep or
selection study (all its points), one job run. Seconds, not minutes: a run that would pass it stops
with a one-line :class:`~hcsim.errors.WorkLimitError` naming the work done and how to proceed
(``max_work=`` / ``--max-work`` raises it; ``None`` / ``0`` removes it); a sweep's points beyond it
are refused one by one. The 128-server A2 pod's 64 MiB allreduce takes 2.6M. Calls on more than
:data:`hcsim.api.PROBE_RANKS` ranks whose routing alone (extrapolated from two smaller layouts)
would pass it are refused before their schedule is built."""

MAX_FLOW_UPDATES = 200_000_000
"""Most flow-rate recomputations one event-driven run makes (the engine's work when contention
spreads the finish times of many concurrent flows) before it stops with a one-line error."""

MAX_JOB_TRANSFERS = 8_000_000
"""Most transfers one job's collectives hold together, CCL-buffer loops included (the LLM pod
step on 256 NPUs holds 1.2M; one 1 TiB allgather on 2,048 ranks would hold billions, and a job
builds every loop of its collectives before it runs): refused before a schedule is built."""

MAX_JOB_OPS = 200_000
"""Most operations one job (a :class:`~hcsim.workload.Workload`) plays without ``max_ops=``
raised: the bound an explicit scenario already has (``MAX_SCENARIO_OPS``), now on generated
workloads and API-built ones too (GPT-3 175B on 1,024 NPUs is 34,180; a tiny model with 65,536
micro-batches generated 1.3M and played for minutes before this bound)."""

MAX_MEASURED_BYTES = 16 << 20
"""Largest measured file read (16 MiB, read in a few seconds; a whole nccl-tests sweep is a few KiB)."""

MAX_EVALS = 10_000
"""Most evaluations of the whole measured set a calibration fit may ask for (each is one
simulation per row); a measured set holds at most :data:`MAX_SWEEP_SIZES` rows."""

MAX_CALIBRATION_SIMULATIONS = 1_200
"""Most simulated points a calibration fit takes on (evaluations x measured points): a few
seconds on an 8-NPU server; ``calibrate(max_simulations=...)`` raises it."""

MAX_CALIBRATION_WORK = 5_000_000
"""Work bound of one calibration, in the engine units of :data:`MAX_WORK` (each simulation's
``Result.config["work"]``: events, flow-rate updates and the rank pairs it routes, which a fit's
candidates, each a new topology, route afresh), summed over every simulation of the fit (the
first prediction's work times the predictions the fit makes). Several seconds on a 2-core
machine; a fit that would need more runs fewer evaluations (its report's
``evaluation_limit_by``), and one that cannot afford its first simplex is refused. The corpus
validation grants its fits :data:`hcsim.corpus.CORPUS_CALIBRATION_WORK` instead."""

MAX_JOB_WORK = MAX_WORK
"""Work bound of one job's event-driven run (:func:`hcsim.workload.run`), in the units of
:data:`MAX_WORK`: a training step interleaves compute with many collectives on one network."""

WORK_PER_LINK_BUILT = 8
"""Work units a directed link costs when a study builds a topology of its own for one of its
cases (a plan point's, a what-if case's perturbed copy), compiled for routing. Measured on the
2-core machine: a 2,048-server A2 PoD's 184,320 links built in 0.83 s and compiled in 0.58 s
(7.7 us a link); a what-if case degrading one of its links, 1.45 s. A study charges it to its
one bound before the case runs (:func:`topology_work`)."""

WORK_PER_LINK_RUN = 1
"""Work units a directed link costs each case of a study that runs a job on the topology,
however small the job: the run's per-NPU and per-link tables. Measured: a 2-rank 1 KiB
what-if case on the 2,048-server PoD, 0.17 s (0.9 us a link)."""


def topology_work(topo, built: bool = False) -> int:
    """Work units a study's case costs for its topology alone: :data:`WORK_PER_LINK_RUN` a
    directed link, and :data:`WORK_PER_LINK_BUILT` more when the case built it (``built``).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> t = single_switch(4, 1e9)  # 4 NPUs, 8 directed links
    >>> topology_work(t), topology_work(t, built=True)
    (8, 72)
    """
    return topo.graph.number_of_edges() * (WORK_PER_LINK_RUN + (WORK_PER_LINK_BUILT if built else 0))


WORK_PER_LOOP_STEP = 50
"""Work units each step of a CCL-buffer loop costs a job to build beyond the first loop of its
piece size (:func:`hcsim.hccl.buffer.looped` copies the piece's steps once a loop). Measured on
the 2-core machine: 4,324,938 steps of a 720,823-loop double-ring allreduce (2.95 GB through a
4 KiB buffer on 4 NPUs) built in 164 s, 38 us a step (the process peaked at 9.3 GB with a
contention-free pass run on them), about what an engine step entry costs (:data:`WORK_PER_INSTANT`). The eleventh session's judge found a job building them unbounded."""

MAX_LOOPED_STEPS = 250_000
"""Most steps :func:`hcsim.hccl.buffer.looped` builds when it is called on its own (about 10 s
at 38 us a step, :data:`WORK_PER_LOOP_STEP`); a job's runner bounds its loops by its work bound
instead and lifts this one."""
