"""Accuracy on the public corpus: calibrate each published system on at most two points of its
sweep and predict the rest.

The corpus is ``docs/data/published/corpus.yaml``: one entry per measured file, with how to load
it and the topology built for it from spec figures only. Entries that share a ``system`` are one
system (the AlaSKA and CSD3 clusters have three files each). For every system with a topology,
:func:`validate_corpus`

1. picks the calibration points by one fixed rule, the same for every system and blind to the
   errors (:func:`calibration_points`): the collective, algorithm and rank count of the first row
   of the system's first file, and of that sweep its smallest and its largest size (one
   latency-dominated and one bandwidth-dominated point wherever the sweep reaches small sizes);
2. calibrates the topology on those two points with :func:`hcsim.calibrate.calibrate`,
   ``fit="bottleneck"``: two parameters for two points, the per-step overhead (on HCCL the
   launch overhead, :data:`LAUNCH_FIT_TRANSPORTS`) and the rate of one class of links (the one
   that explains the points best), every other link as built, except that where the system's
   source publishes a two-node point-to-point bandwidth (``p2p_bw_MBps``) the links between its
   servers carry that rate instead of their line rate (:func:`with_network_rate`);
3. predicts every other row with the algorithm that ran where the file says
   (:func:`hcsim.validate.row_algorithm`), else the library's own choice where its rule is known
   (Open MPI's fixed decision rules, :func:`open_mpi_fixed_rule`; for Intel MPI, whose rules are
   not published, its parent MPICH's defaults, :func:`mpich_default_rule`; for RCCL on one 8-GPU
   MI300X node, its MSCCL all-pairs programs and its own rings, :func:`rccl_msccl_rule`), else HCCL's choice as
   ``hcsim validate`` does, run without HCCL's CCL-buffer loops on a system that is not an
   Ascend one; a row whose library does local work the schedule does not carry (the MPI
   libraries' Bruck alltoall, :func:`library_local_seconds`) has that work added;
4. reports per system the median and 90th percentile of |error| over the predicted rows, over
   all sizes and over sizes of at least 1 MiB (hcsim's size: the whole buffer, nccl-tests'
   convention), and the fastest-algorithm agreement where a file compares algorithms at a size
   (only pairs whose measured times differ by more than 10%).

Nothing here reads outside the repository; the published files are read where the corpus lives.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import bad_value, check_frame, is_int, is_real, unknown_name

MIB = 1 << 20
AGREEMENT_MARGIN = 0.10
"""Fastest-algorithm agreement counts the (collective, size) cases where the measured fastest
beats the runner-up by more than this."""

PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "data" / "published"
"""Where the corpus lives in a clone of the repository."""

COLUMNS = ["system", "rows", "calibration", "predicted", "median_all", "p90_all", "points_1mib",
           "median_1mib", "p90_1mib", "fastest"]


def load_corpus(root: Path | str = PUBLISHED) -> list[dict]:
    """The corpus entries, grouped by system, in file order: ``[{"system", "topology", "entries",
    "measured"}]`` for every system whose entries name a topology (the 200-node file has none)."""
    import yaml

    from .backends import load_measured
    from .backends.readers import MeasuredAlgorithmWarning

    if not isinstance(root, (str, Path)):
        raise bad_value("root", root, "the corpus folder (a str or Path holding corpus.yaml)")
    root = Path(root)
    try:
        found = (root / "corpus.yaml").is_file()
    except (OSError, ValueError):  # a name too long, a NUL in it
        found = False
    if not found:
        raise bad_value("root", str(root), "a folder holding corpus.yaml")
    systems: dict[str, dict] = {}
    for e in yaml.safe_load((root / "corpus.yaml").read_text()):
        if not e.get("topology"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MeasuredAlgorithmWarning)
            df = load_measured(root / e["file"], **e.get("load", {}))
        df = df.assign(file=e["file"])
        if e.get("algorithm") is not None:  # what the run forced (NCCL_ALGO=RING), for a file that names none per row
            from .validate import row_algorithm

            named = any(row_algorithm(r, "auto") != "auto" for _, r in df.iterrows())  # rows say only "nccl"
            if not isinstance(e["algorithm"], str) or named:
                raise bad_value(f"{e['file']}: algorithm", e["algorithm"],
                                "the name of the algorithm that ran, for a file whose rows name none")
            df = df.assign(algorithm=e["algorithm"])
        s = systems.setdefault(e["system"], {"system": e["system"], "topology": root / e["topology"],
                                             "transport": e.get("transport"), "entries": [], "frames": []})
        if e.get("nccl_ll_max_GBps") is not None:
            from .calibrate import _positive

            s["nccl_ll_max_GBps"] = _positive("nccl_ll_max_GBps", e["nccl_ll_max_GBps"])
        for key, upper in (("pingpong_us", 1e6), ("p2p_bw_MBps", 1e9)):  # one published figure per system
            if e.get(key) is not None:
                from .calibrate import _positive
                from .errors import ConfigError

                v = _positive(key, e[key], upper)
                if s.get(key, v) != v:
                    raise ConfigError(f"{e['file']}: {key} = {v} where another file of {e['system']!r} gives "
                                      f"{s[key]}: one figure per system")
                s[key] = v
        s["entries"].append(e)
        s["frames"].append(df)
    out = []
    for s in systems.values():
        s["measured"] = pd.concat(s.pop("frames"), ignore_index=True)
        out.append(s)
    return out


def calibration_points(measured: pd.DataFrame) -> list[int]:
    """Row labels of the (at most) two calibration points of a system's measured rows.

    The rule, fixed for every system: take the sweep of the first row (same collective, same
    ``algorithm`` as recorded, same rank count) and its smallest and its largest size.

    Examples
    --------
    >>> df = pd.DataFrame({"collective": ["allreduce"] * 3 + ["allgather"],
    ...                    "size_bytes": [8, 1024, 1 << 30, 8], "time_us": [1.0, 2.0, 3.0, 4.0]})
    >>> calibration_points(df)
    [0, 2]
    """
    labels = calibration_sweep(measured)  # checks the frame first
    sweep = measured.loc[labels]
    lo = sweep["size_bytes"].idxmin()
    hi = sweep["size_bytes"].idxmax()
    return [lo] if lo == hi else [lo, hi]


def calibration_sweep(measured: pd.DataFrame) -> list:
    """Row labels of a system's first sweep: the rows of the first row's collective, recorded
    algorithm and rank count (:func:`calibration_points` takes its smallest and largest size;
    ``validate_system(sweep_bands=...)`` calibrates on all of it).

    Examples
    --------
    >>> df = pd.DataFrame({"collective": ["allreduce"] * 3 + ["allgather"],
    ...                    "size_bytes": [8, 1024, 1 << 30, 8], "time_us": [1.0, 2.0, 3.0, 4.0]})
    >>> calibration_sweep(df)
    [0, 1, 2]
    """
    check_frame(measured, "hcsim.backends.load_measured", ("collective", "size_bytes"), ("size_bytes",),
                field="measured")
    first = measured.iloc[0]
    same = measured["collective"] == first["collective"]
    for col in ("algorithm", "ranks"):
        if col in measured.columns and not pd.isna(first[col]):
            same &= measured[col] == first[col]
    return measured.index[same].tolist()


def _summary(err: pd.Series) -> tuple[float, float]:
    a = err.abs()
    if not len(a):
        return float("nan"), float("nan")
    return float(a.median()), float(a.quantile(0.9))


def _check_rule_call(collective, size_bytes, ranks) -> None:
    from .algorithms.registry import check_collective

    check_collective(collective)
    if not is_int(size_bytes) or size_bytes < 0:
        raise bad_value("size_bytes", size_bytes, "a whole number of bytes >= 0")
    if not is_int(ranks) or ranks < 1:
        raise bad_value("ranks", ranks, "a whole number of ranks >= 1")


def open_mpi_fixed_rule(collective: str, size_bytes: int, ranks: int) -> str | None:
    """The hcsim schedule for what Open MPI's coll_tuned fixed decision function runs
    (``ompi_coll_tuned_*_intra_dec_fixed``, ompi/mca/coll/tuned/coll_tuned_decision_fixed.c, read
    at open-mpi/ompi commit 010080ec and at the tags v3.1.6 and v4.0.3, which have these rules for
    the three collectives; 4.0.3's linear_sync alltoall is off by default, and 4.1 rewrote the
    rules), or None for a collective it does not cover here. Allreduce: recursive doubling below
    10,000 bytes, else a ring (segmented above ranks x 1 MiB: the same transfers). Allgather: recursive doubling below 50,000 bytes on a power-of-two rank count (Bruck
    otherwise), else neighbour exchange on an even count (:mod:`hcsim.algorithms.neighbor`), the
    ring on an odd one. Alltoall: Bruck below 200 bytes a peer on more than 12 ranks
    (:mod:`hcsim.algorithms.bruck`), linear below 3,000 bytes a peer, else pairwise.

    Examples
    --------
    >>> [open_mpi_fixed_rule("allreduce", n, 64) for n in (8192, 16384)]
    ['rd', 'ring']
    >>> [open_mpi_fixed_rule("allgather", 1 << 20, p) for p in (64, 63)]
    ['ne', 'ring']
    >>> [open_mpi_fixed_rule("alltoall", 64 * n, 64) for n in (100, 2048, 4096)]
    ['bruck', 'mesh', 'pairwise']
    >>> open_mpi_fixed_rule("alltoall", 8 * 100, 8)
    'mesh'
    """
    _check_rule_call(collective, size_bytes, ranks)
    if collective == "allreduce":
        return "rd" if size_bytes < 10000 else "ring"
    if collective == "allgather":
        if size_bytes < 50000:
            return "hd" if ranks & (ranks - 1) == 0 else "nb"
        return "ring" if ranks % 2 else "ne"
    if collective == "alltoall":
        peer = size_bytes // ranks
        if peer < 200 and ranks > 12:
            return "bruck"
        return "mesh" if peer < 3000 else "pairwise"
    return None


def mpich_default_rule(collective: str, size_bytes: int, ranks: int) -> str | None:
    """The hcsim schedule for what MPICH's default selection runs (its ``MPIR_CVAR_*_MSG_SIZE``
    defaults and the choices of ``MPIR_Allreduce_intra_auto``, ``MPIR_Allgather_intra_auto`` and
    ``MPIR_Alltoall_intra_auto``, as read in MPICH's source; Thakur, Rabenseifner and Gropp 2005),
    or None for a collective it does not cover here. Allreduce: recursive doubling up to 2,048
    bytes, else reduce-scatter then allgather (:mod:`hcsim.algorithms.rabenseifner`). Allgather:
    recursive doubling below 524,288 bytes in all on a power-of-two rank count, else Bruck below
    81,920 bytes, else the ring. Alltoall: Bruck up to 256 bytes a peer on 8 ranks or more,
    isend/irecv to every peer up to 32,768 bytes a peer, else pairwise. MPICH's SMP-aware
    allreduce (on by default) is not modelled.

    The corpus uses it as the stand-in for Intel MPI, which picks its algorithms from tuning
    tables that are not published: Intel MPI derives from MPICH (it is ABI-compatible with it,
    a member of the MPICH ABI Compatibility Initiative, mpich.org, 2013), so MPICH's defaults
    are its parent's choice, not Intel MPI's own.

    Examples
    --------
    >>> [mpich_default_rule("allreduce", n, 64) for n in (2048, 4096)]
    ['rd', 'rabenseifner']
    >>> [mpich_default_rule("allgather", n, 64) for n in (1 << 18, 1 << 20)]
    ['hd', 'ring']
    >>> [mpich_default_rule("alltoall", 64 * n, 64) for n in (256, 32768, 65536)]
    ['bruck', 'mesh', 'pairwise']
    """
    _check_rule_call(collective, size_bytes, ranks)
    if collective == "allreduce":
        return "rd" if size_bytes <= 2048 else "rabenseifner"
    if collective == "allgather":
        if size_bytes < 524288 and ranks & (ranks - 1) == 0:
            return "hd"
        return "nb" if size_bytes < 81920 else "ring"
    if collective == "alltoall":
        peer = size_bytes // ranks
        if peer <= 256 and ranks >= 8:
            return "bruck"
        return "mesh" if peer <= 32768 else "pairwise"
    return None


def rccl_msccl_rule(collective: str, size_bytes: int, ranks: int, element_bytes: int = 4) -> str | None:
    """The hcsim schedule for what RCCL runs for an allreduce on one 8-GPU MI300X node, or None for
    another collective or rank count (then HCCL's choice, as before).

    RCCL runs an MSCCL program where one fits the call (RCCL src/misc/msccl/msccl_lifecycle.cc,
    ``mscclInternalSchedulerSelectAlgo``: the rank count, the size within the program's ``minBytes``
    to ``maxBytes``, the element count a multiple of its ``nchunksperloop``); for 8 GPUs its
    all-pairs allreduce programs (tools/msccl-algorithms, :data:`hcsim.calibrate.MSCCL_ALLPAIRS_SIMPLE_FROM`)
    cover 0 to 16 MiB out of place and need a multiple of 256 elements. The all-pairs program sends
    each peer its 1/8, reduces and sends each peer the reduced 1/8: hcsim's ``mesh``. Below 256
    elements RCCL's own kernels run, whose tuner picks a ring for 8 GPUs of one node (its ring LL
    latency, 12 + 14 x 0.8 us, under its tree's, 12 + 2 x 7 x 0.9 us: ``baseLat`` and
    ``tuning_model_5`` in src/graph/tuning.cc): hcsim's ``ring``, 14 steps. Above 16 MiB RCCL's own
    kernels run rings too, but on as many channels as the node's 7 links per GPU carry
    (``rome_model_79``'s 28 ring orders); one hcsim ring would use one link per GPU, so the
    ``mesh``, which moves the same bytes over every link, stands in for them (its two steps
    undercount the ring's fourteen step latencies there).

    Examples
    --------
    >>> [rccl_msccl_rule("allreduce", n, 8) for n in (512, 1024, 16 << 20, 32 << 20)]
    ['ring', 'mesh', 'mesh', 'mesh']
    >>> rccl_msccl_rule("allreduce", 1024, 16) is None
    True
    """
    _check_rule_call(collective, size_bytes, ranks)
    from .calibrate import MSCCL_ALLPAIRS_CHUNKS

    if collective != "allreduce" or ranks != 8:
        return None
    count = size_bytes // element_bytes
    return "mesh" if count >= MSCCL_ALLPAIRS_CHUNKS and count % MSCCL_ALLPAIRS_CHUNKS == 0 else "ring"


def nccl_ring_rule(collective: str, size_bytes: int, ranks: int) -> str | None:
    """The hcsim schedule for what NCCL runs inside one NVLink domain, or None (then HCCL's choice).

    NCCL's algorithms for an allreduce are Ring, Tree, CollNet, NVLS and NVLS-Tree, for an
    allgather or a reducescatter Ring, PAT (one GPU per node only), CollNet and NVLS, for a
    broadcast or a reduce Ring alone (``ncclTopoTuneModel``, NVIDIA/nccl src/graph/tuning.cc, read
    at 5067397c). Inside one NVLink domain, without NVLink SHARP (NVLS: :func:`library_algorithms` names hcsim's
    ``nvls`` for an allreduce where the switch has it and NCCL's tuner prefers it), that leaves the ring: hcsim's ``ring``, not HCCL's one-step ``mesh`` that a switch would get,
    which moves the same bytes but pays one step where the ring pays p - 1 (or 2(p - 1)); and for a
    broadcast or a reduce, whose ring forwards each chunk along the ring as it arrives
    (``runRing``, src/device/broadcast.h and reduce.h), hcsim's pipelined ``chain``, not HCCL's star
    (whose root sends the buffer p - 1 times over its one link). Other collectives: None.

    Examples
    --------
    >>> [nccl_ring_rule(c, 1 << 20, 8) for c in ("allreduce", "allgather", "broadcast", "alltoall")]
    ['ring', 'ring', 'chain', None]
    """
    _check_rule_call(collective, size_bytes, ranks)
    if collective in ("broadcast", "reduce"):
        return "chain"
    return "ring" if collective in ("allreduce", "allgather", "reducescatter") else None


def nccl_net_rule(collective: str, size_bytes: int, ranks: int) -> str | None:
    """The hcsim schedule for what NCCL runs where its ring crosses a network, or None (then HCCL's choice).

    A broadcast or a reduce has one algorithm in NCCL, Ring, on any number of nodes (``ncclTopoTuneModel``,
    NVIDIA/nccl src/graph/tuning.cc, read at 5067397c), which forwards each chunk along the ring as it
    arrives: hcsim's pipelined ``chain`` (:func:`nccl_ring_rule`). An allreduce across nodes runs Ring, Tree or,
    on Hopper and later, NVLS-Tree by size; the large ones Tree or NVLS-Tree, a reduction inside each node
    streamed into an exchange between nodes, each node sending and receiving the buffer once: hcsim's
    ``pipeline`` (HCCL's two-level pipeline, its intra-server and inter-server steps overlapped) stands in for
    them at every size (change 50, docs/validation.md: on the three two-node NCCL systems it brings the fitted
    network rates to 0.97-1.46 times the spec, from 2.3-63 times under HCCL's phases one after another).
    Other collectives: None.

    Examples
    --------
    >>> [nccl_net_rule(c, 1 << 20, 16) for c in ("broadcast", "reduce", "allreduce", "allgather")]
    ['chain', 'chain', 'pipeline', None]
    """
    _check_rule_call(collective, size_bytes, ranks)
    if collective == "allreduce":
        return "pipeline"
    return "chain" if collective in ("broadcast", "reduce") else None


NCCL_NVLINK_TUNER = {
    # ncclTunerConstantsDefaults in NVIDIA/nccl src/graph/tuning.cc (read at 5067397c): per protocol
    # (LL, LL128, Simple) the ring's base latency and its per-step NVLink latency, in us; NVLS runs Simple
    # alone, with no base latency and 25 us over NVLink
    # (ring_base_us is hcsim.calibrate.NCCL_RING_BASE_LATENCY_S in us, written out: this module leaves calibrate
    # to first use)
    "ring_base_us": (6.6, 14.0, 8.4), "ring_hop_us": (0.6, 1.9, 3.4), "nvls_us": 25.0,
    # bus bandwidth as a share of the GPU's (ncclTopoTuneModel): LL half of it (and at most llMaxBw),
    # LL128 0.92, Simple all; NVLS nvlsEfficiency x 2 ("AllReduce pipelines two operations")
    "ring_share": (0.5, 0.92, 1.0),
}
"""NCCL's own tuner constants for an allreduce inside one NVLink domain (:func:`nccl_nvls_from_bytes`)."""


def nccl_nvls_from_bytes(p: int, link_Bps: float, efficiency: float, ll_max_Bps: float | None = None) -> float:
    """Smallest allreduce (bytes) for which NCCL's tuner prefers NVLS to its ring, on ``p`` GPUs of one
    NVLink domain whose links carry ``link_Bps`` each way, with NVLS at ``efficiency``.

    NCCL picks the algorithm and protocol of least modelled time, latency + size / algorithm bandwidth
    (``ncclTopoTuneModel`` and ``topoGetAlgoInfo``, NVIDIA/nccl src/graph/tuning.cc and enqueue.cc):
    the ring's latency is its base plus 2(p-1) NVLink steps, NVLS's 25 us; the ring's bus bandwidth is the
    GPU's times the protocol's share (:data:`NCCL_NVLINK_TUNER`; LL also capped at ``ll_max_Bps``,
    NCCL's ``llMaxBws``), NVLS's 2 x efficiency x the GPU's; both over the allreduce's 2(p-1)/p.
    NVLS has the largest bandwidth, so it wins from the largest of its crossovers with the ring's three
    protocols (0 where NVLS's latency is the smaller). Channel counts (NCCL's (nCh-1)/nCh) are left out.

    Examples
    --------
    >>> round(nccl_nvls_from_bytes(8, 450e9, 0.85, 141e9) / 2**20, 2)   # H100: from about 1 MiB
    0.94
    """
    tuner = NCCL_NVLINK_TUNER
    ratio = p / (2 * (p - 1))  # algorithm over bus bandwidth of an allreduce
    nvls = 2 * efficiency * link_Bps * ratio
    start = 0.0
    for base, hop, share in zip(tuner["ring_base_us"], tuner["ring_hop_us"], tuner["ring_share"], strict=True):
        bus = share * link_Bps
        if share == 0.5 and ll_max_Bps is not None:
            bus = min(bus, ll_max_Bps)
        ring = bus * ratio
        lat_s = (base + 2 * (p - 1) * hop) * 1e-6
        if nvls <= ring:
            return float("inf")
        if tuner["nvls_us"] * 1e-6 > lat_s:
            start = max(start, (tuner["nvls_us"] * 1e-6 - lat_s) / (1 / ring - 1 / nvls))
    return start


def _nvls_rows(measured: pd.DataFrame, names: list, topology, ll_max_Bps: float | None) -> list:
    """``names`` with NCCL's ring allreduces that NCCL's tuner would run as NVLS (:func:`nccl_nvls_from_bytes`)
    renamed ``nvls``, where the ranks share a switch that reduces in the network; else unchanged."""
    from .engine.des import in_network_switch
    from .errors import ConfigError
    from .topology.io import load_topology
    from .validate import measured_ranks

    topo = load_topology(topology)
    out = list(names)
    for i, ((_, r), name) in enumerate(zip(measured.iterrows(), names, strict=True)):
        p = measured_ranks(r) or topo.num_npus
        if name != "ring" or r["collective"] != "allreduce" or p > topo.num_npus:
            continue
        try:
            switch, efficiency = in_network_switch(topo, topo.npus[:p])
        except ConfigError:
            return out  # no NVLink SHARP here: NCCL's ring stands
        link = topo.link_spec(topo.npus[0], switch).bandwidth_Bps
        if r["size_bytes"] >= nccl_nvls_from_bytes(p, link, efficiency, ll_max_Bps):
            out[i] = "nvls"
    return out


LIBRARY_RULES = {"openmpi": open_mpi_fixed_rule, "intel-mpi": mpich_default_rule, "rccl": rccl_msccl_rule,
                 "nccl-nvlink": nccl_ring_rule, "nccl-net": nccl_net_rule}
"""The selection rule the corpus predicts a ``transport``'s rows with where they name no
algorithm: Open MPI's own fixed rules; for Intel MPI, whose own are not published, MPICH's
defaults (:func:`mpich_default_rule`); for RCCL, what it runs for an allreduce on one 8-GPU node
(:func:`rccl_msccl_rule`); for NCCL inside one NVLink domain, its ring (:func:`nccl_ring_rule`), and across a
network its pipelined ring for a broadcast or a reduce and a two-level pipeline standing in for its tree for an
allreduce (:func:`nccl_net_rule`). Other transports: HCCL's choice."""


LIBRARY_LOCAL_WORK = {"openmpi": {("alltoall", "bruck"): "openmpi"},
                      "intel-mpi": {("alltoall", "bruck"): "mpich"}}
"""Per transport, the (collective, algorithm) pairs whose library does block-at-a-time local work
the schedule does not carry, and whose code counts it (:data:`hcsim.algorithms.bruck.BLOCK_PASSES`):
Open MPI's Bruck alltoall; for Intel MPI, MPICH's (the stand-in of :func:`mpich_default_rule`)."""


def library_local_seconds(transport: str | None, collective: str, algorithm: str, ranks: int,
                          rank_Bps: float) -> float:
    """Seconds of local work a CPU rank's library does in one call besides what the schedule
    sends: for a Bruck alltoall, its block-at-a-time datatype passes and final rotation
    (:func:`hcsim.algorithms.bruck.local_block_operations`) at :data:`hcsim.calibrate.BLOCK_OPERATION_LINES`
    cache lines each over ``rank_Bps``, the rank's share of its node's memory bandwidth as the
    topology is built (:func:`hcsim.calibrate.block_operation_seconds`); 0 for anything else.
    Every rank does the same work in the same steps, so it adds to the call's time.

    Examples
    --------
    >>> round(library_local_seconds("openmpi", "alltoall", "bruck", 64, 8.8e9) * 1e6, 2)
    13.96
    >>> round(library_local_seconds("intel-mpi", "alltoall", "bruck", 64, 4.8e9) * 1e6, 2)
    17.92
    >>> library_local_seconds("openmpi", "alltoall", "mesh", 64, 8.8e9)
    0.0
    """
    from .algorithms.bruck import local_block_operations
    from .calibrate import block_operation_seconds

    key = (transport or "").split()[0] if transport else None
    library = LIBRARY_LOCAL_WORK.get(key, {}).get((collective, algorithm))
    if library is None:
        return 0.0
    return block_operation_seconds(local_block_operations(int(ranks), library), rank_Bps)


def _rank_rate(topology) -> float:
    """The slowest of the ranks' own links as the topology is built (a CPU rank's memory share)."""
    from .calibrate import rank_link_classes
    from .topology.io import load_topology

    return min(rate for _, rate in rank_link_classes(load_topology(topology)))


def _add_local_work(rows: pd.DataFrame, system: dict) -> pd.DataFrame:
    """``rows`` with ``local_us`` (:func:`library_local_seconds`) added to ``predicted_us`` and the
    error recomputed; unchanged (no column) where the transport has no such work."""
    key = (system.get("transport") or "").split()[:1]
    if not key or key[0] not in LIBRARY_LOCAL_WORK:
        return rows
    rate = _rank_rate(system["topology"])
    local = np.array([1e6 * library_local_seconds(system["transport"], r.collective, r.algorithm, int(r.ranks), rate)
                      for r in rows.itertuples()])
    out = rows.assign(local_us=local, predicted_us=rows["predicted_us"] + local)
    out["error"] = out["predicted_us"] / out["time_us"] - 1
    out.attrs.update(rows.attrs)
    return out


def _between_servers(topo):
    """``(paths, deeper)``: a shortest path from the first NPU of the first server to the first NPU
    of every other server (none on one server), and whether a link lies deeper in the network
    than the ranks' own (no NPU at either end)."""
    import networkx as nx

    g = topo.graph
    first = {}
    for n, d in g.nodes(data=True):
        if d.get("kind") == "npu":
            first.setdefault(topo.npu_spec(n).server, n)
    src, *others = first.values() if first else [None]

    def deeper(u, v):
        return g.nodes[u].get("kind") != "npu" and g.nodes[v].get("kind") != "npu"

    return [nx.shortest_path(g, src, dst) for dst in others], deeper


def with_network_latency(topology, one_way_s: float):
    """A copy of ``topology`` whose links deeper in the network than the ranks' own (no NPU at
    either end: a node's NIC to its switch, the switches' own) carry latency, ``one_way_s`` in
    all along a path between two ranks on different servers, split evenly over that path's deeper
    links; the ranks' own links (a CPU rank's share of its node's memory, a GPU's NVLink) keep
    theirs, so a message inside a server pays none of it.

    For the corpus's MPI systems, whose ``corpus.yaml`` entries give ``pingpong_us``: the MPI
    point-to-point latency their sources publish for two ranks on two nodes (``osu_latency``, a
    benchmark apart from the corpus's sweeps), docs/validation.md change 30. The builders' one
    ``latency_s`` would put it on the ranks' own links too, hence this.

    Parameters
    ----------
    topology : str, Path or Topology
    one_way_s : float
        Seconds from one server to another over the network, >= 0.

    Raises
    ------
    ConfigError
        If paths between servers cross different numbers of deeper links (the even split would
        then give them different latencies).

    Examples
    --------
    >>> from hcsim.topology import leaf_spine
    >>> t = with_network_latency(leaf_spine(2, 4, 1, 10e9, oversubscription=4.0, npus_per_server=4), 2e-6)
    >>> t.link_spec("leaf0", "spine0").latency_s, t.link_spec("npu0", "leaf0").latency_s
    (1e-06, 0.0)
    """

    from .calibrate import _positive
    from .errors import ConfigError, bad_value
    from .topology.io import load_topology
    from .topology.spec import LinkSpec

    if not is_real(one_way_s) or not (one_way_s == 0 or _positive("one_way_s", one_way_s, 1.0)):
        raise bad_value("one_way_s", one_way_s, "seconds, from 0 to 1")
    out = load_topology(topology).copy()
    paths, deeper = _between_servers(out)
    if not paths:
        return out
    hops = {sum(deeper(u, v) for u, v in zip(p[:-1], p[1:], strict=True)) for p in paths}
    if len(hops) != 1 or 0 in hops:
        raise ConfigError(f"{out.name!r}: paths between servers cross {sorted(hops)} links deeper than the ranks' "
                          "own; with_network_latency needs one number of them, at least 1")
    each = float(one_way_s) / hops.pop()
    for u, v, d in out.graph.edges(data=True):
        if deeper(u, v):
            s = d["spec"]
            d["spec"] = LinkSpec(s.bandwidth_Bps, each, s.tier, s.inline_reduce)
    return out


def with_network_rate(topology, rate_Bps: float):
    """A copy of ``topology`` whose links deeper in the network than the ranks' own (no NPU at
    either end, as :func:`with_network_latency` takes them) are slowed by one factor, so that the
    slowest of them on a path between two servers carries ``rate_Bps``; a topology whose paths
    already carry at most that, or that has one server, is returned as a copy, unchanged (a
    published rate never speeds a link past its spec).

    For the corpus's MPI systems, whose ``corpus.yaml`` entries give ``p2p_bw_MBps``: the MPI
    point-to-point bandwidth their sources publish for two ranks on two nodes (``osu_bw``, a
    benchmark apart from the corpus's sweeps), which sits below the port's line rate by the
    wire's framing and the library's own ceiling (docs/validation.md, change 33).

    Parameters
    ----------
    topology : str, Path or Topology
    rate_Bps : float
        Bytes per second one pair of ranks on two servers gets over the network, > 0.

    Raises
    ------
    ConfigError
        If a path between two servers crosses no deeper link, or paths between servers have
        different bottlenecks among their deeper links (one factor would then not give each the
        rate).

    Examples
    --------
    >>> from hcsim.topology import leaf_spine
    >>> base = leaf_spine(2, 4, 1, 10e9, oversubscription=4.0, npus_per_server=4)
    >>> base.link_spec("leaf0", "spine0").bandwidth_Bps
    10000000000.0
    >>> t = with_network_rate(base, 9.25e9)
    >>> t.link_spec("leaf0", "spine0").bandwidth_Bps, t.link_spec("npu0", "leaf0").bandwidth_Bps
    (9250000000.0, 10000000000.0)
    """
    import dataclasses

    from .calibrate import _positive
    from .errors import ConfigError
    from .topology.io import load_topology

    rate = _positive("rate_Bps", rate_Bps)
    out = load_topology(topology).copy()
    paths, deeper = _between_servers(out)
    if not paths:
        return out
    slowest = set()
    for p in paths:
        hops = [out.link_spec(u, v).bandwidth_Bps for u, v in zip(p[:-1], p[1:], strict=True) if deeper(u, v)]
        slowest.add(min(hops) if hops else None)
    if None in slowest:
        raise ConfigError(f"{out.name!r}: a path between two servers crosses no link deeper than the ranks' own; "
                          "with_network_rate needs the network's links on every such path")
    if len(slowest) != 1:
        raise ConfigError(f"{out.name!r}: paths between servers have bottlenecks {sorted(slowest)} B/s among "
                          "their links deeper than the ranks' own; with_network_rate needs one")
    bottleneck = slowest.pop()
    if rate >= bottleneck:
        return out
    for u, v, d in out.graph.edges(data=True):
        if deeper(u, v):  # the bottleneck link gets the rate exactly: its bandwidth / bottleneck is 1.0
            d["spec"] = dataclasses.replace(d["spec"], bandwidth_Bps=d["spec"].bandwidth_Bps / bottleneck * rate)
    return out


def library_algorithms(measured: pd.DataFrame, topology, transport: str | None,
                       ll_max_Bps: float | None = None) -> pd.DataFrame:
    """``measured`` with every row's ``algorithm`` named: a row that names one keeps it; one that names
    none (or no hcsim algorithm: hccl_test and nccl-tests rows record their library,
    :func:`hcsim.validate.row_algorithm`) gets what ``transport``'s library runs where its rule is
    known (:data:`LIBRARY_RULES`), else HCCL's choice on ``topology`` (:func:`_selected`); on ``nccl-nvlink`` an
    allreduce the ring rule names is ``nvls`` where the ranks' switch reduces in the network and NCCL's tuner
    prefers it at that size (:func:`nccl_nvls_from_bytes`, with ``ll_max_Bps``, NCCL's LL cap). What the
    corpus, and ``hcsim calibrate`` / ``hcsim validate --transport``, fit and predict the rows with.

    Examples
    --------
    >>> df = pd.DataFrame({"collective": ["allgather", "alltoall"], "algorithm": "nccl", "ranks": 8,
    ...                    "size_bytes": 1 << 20, "time_us": 50.0})
    >>> from hcsim.topology import single_switch
    >>> library_algorithms(df, single_switch(8, 450e9, npus_per_server=8), "nccl-nvlink").algorithm.tolist()
    ['ring', 'mesh']
    """
    from .validate import measured_ranks, row_algorithm

    sel = _selected(measured, topology)
    rule_of = LIBRARY_RULES.get((transport or "").split()[0] if transport else None)
    if rule_of is None:
        return sel
    from .topology.io import load_topology

    topo = load_topology(topology)  # once, not a file read per row
    names = []
    for (_, r), chosen in zip(measured.iterrows(), sel["algorithm"], strict=True):
        rule = rule_of(r["collective"], int(r["size_bytes"]), measured_ranks(r) or 0)
        if rule is not None and not _runs_on(topo, r["collective"], rule, measured_ranks(r)):
            rule = None  # a two-level rule on ranks not laid out server by server: HCCL's choice
        names.append(chosen if row_algorithm(r, "auto") != "auto" or rule is None else rule)
    if rule_of is nccl_ring_rule:  # an allreduce the ring rule named runs NVLS where the switch has NVLink SHARP
        forced = [row_algorithm(r, "auto") != "auto" for _, r in measured.iterrows()]
        nvls = _nvls_rows(measured, names, topology, ll_max_Bps)
        names = [n if f else v for n, v, f in zip(names, nvls, forced, strict=True)]
    return measured.assign(algorithm=names)


def _runs_on(topo, collective: str, algorithm: str, ranks) -> bool:
    """Whether ``algorithm`` can run ``collective`` on the first ``ranks`` NPUs of ``topo`` (a Topology): a
    two-level one needs them server by server on at least two servers (:func:`hcsim.api.rank_layout`)."""
    from .algorithms.registry import get_algorithm
    from .api import rank_layout

    if get_algorithm(collective, algorithm).levels < 2:
        return True
    servers, _ = rank_layout(topo, topo.npus[:int(ranks)] if ranks else topo.npus)
    return len(servers) >= 2


def _selected(measured: pd.DataFrame, topology) -> pd.DataFrame:
    from .api import simulate
    from .topology.io import load_topology
    from .validate import measured_ranks, row_algorithm

    topo = load_topology(topology)
    if topo.defaults.message_regimes is not None:
        # a calibrated topology: HCCL's choice is by its rules, not by the costs, and the closed form takes no regimes
        import dataclasses

        topo = topo.copy()
        topo.defaults = dataclasses.replace(topo.defaults, message_regimes=None)
    names = []
    for _, r in measured.iterrows():
        own = row_algorithm(r, "auto")
        names.append(own if own != "auto" else simulate(topo, r["collective"], int(r["size_bytes"]), "auto",
                                                         ranks=measured_ranks(r), mode="analytical").algorithm)
    return measured.assign(algorithm=names)


TRANSPORT_REGIMES = {"nccl-net": ("net",), "nccl-nvlink": ("nvlink",)}
"""Transports whose message regimes are known facts: NCCL's LL, LL128 (over NVLink) and Simple protocols
(:func:`hcsim.calibrate.nccl_protocol_regimes`, by the hop the ring steps cross); and ``openmpi``
(every Open MPI run of the corpus uses its pml ucx): UCX's eager and rendezvous protocols, eager
messages starting when their sender is ready and going out one after another
(:func:`hcsim.calibrate.ucx_rendezvous_regimes`); ``intel-mpi``: every message eager, likewise
(:func:`hcsim.calibrate.eager_send_regimes`; no eager limit is cited), and so ``openmpi-tcp`` (Open MPI
over its TCP transport, not UCX: eager below its cited 64 KiB limit,
:data:`hcsim.calibrate.OPENMPI_TCP_EAGER_LIMIT`, a rendezvous from it); ``rccl``: RCCL's LL and Simple protocols
as its MSCCL all-pairs programs and its own rings use them on an 8-GPU node, with RCCL's latency
constants (:func:`hcsim.calibrate.rccl_msccl_regimes`). HCCL is fitted without regimes."""


CORPUS_CALIBRATION_WORK = 20_000_000
"""Work bound of each corpus fit (``calibrate(max_work=)``): the validation is a batch study of
fifteen fits, and its bottleneck fits on the 64-rank CPU systems take up to 300 evaluations of
about 41,000 units each (12M); a user's ``calibrate`` keeps :data:`hcsim.limits.MAX_CALIBRATION_WORK`."""

CORPUS_VALIDATION_WORK = 20_000_000
"""Work bound of each system's predictions (``validate_measured(max_work=)``): 61 rows of 64-rank
collectives, some of them many-peer steps whose routed transfers the engine's work units now count
(more than :data:`hcsim.limits.MAX_WORK` on the MPI systems); a batch study, as
:data:`CORPUS_CALIBRATION_WORK`."""

CPU_RANK_TRANSPORTS = ("openmpi", "intel-mpi", "openmpi-tcp")
"""Transports whose ranks are CPU processes: their own links stand for each rank's share of its
node's memory (its copies and reductions), a rate no spec gives, while the node's NIC has a line
rate, so they are calibrated with ``prefer_rank_links`` (:func:`hcsim.calibrate.calibrate`), and their
reductions go through the same memory, at :data:`hcsim.calibrate.RANK_REDUCE_RATIO` times their transfer
rate (``rank_reduce_ratio``)."""


LAUNCH_FIT_TRANSPORTS = ("hccl", "nccl-nvlink")
"""Transports whose calibration fits the launch overhead, not the per-step overhead
(``calibrate(fixed_cost="launch")``): HCCL's per-step device costs are its own constants, which
the spec topology carries (notify record 1 us + wait 0.02 us a step, SDMA task 0.6 us on each
link: hcomm task_profiling.h), and what a small call takes above them is paid once per call (its
HOST-mode, op-by-op launch), as ``topologies/atlas800t-a2.yaml`` models it; fitted as a step
overhead, a 2-NPU point-to-point floor would be paid again in every step of a longer collective.
NCCL inside one NVLink domain likewise (change 37): its per-step cost is NCCL's own cited hop latency
(:data:`CITED_STEP_TRANSPORTS`), and a small call's floor far above it (35-37 us on an 8 x H100 server,
where NCCL's own model gives a ring allreduce 6.6 + 14 x 0.6 us) is the launch of the call's kernels,
once per call; fitted as a step overhead (18.7 us), it also set NCCL's LL-to-Simple crossover
(:func:`hcsim.calibrate.nccl_protocol_regimes`) 31 times too high, running LL (a quarter of the rate)
up to 64 MiB allgathers."""

CITED_STEP_TRANSPORTS = {"nccl-nvlink": "nvlink"}
"""Transports whose per-step overhead is a cited figure, set on the topology before the fit (by hop
kind, :data:`hcsim.calibrate.NCCL_LL_HOP_LATENCY_S`: NCCL's ring LL step, 0.6 us over NVLink); the
fit then takes the launch overhead (:data:`LAUNCH_FIT_TRANSPORTS`). Not ``nccl-net``: a step that
crosses a network costs that network's latency, which NCCL's one figure (2.7 us, InfiniBand-class)
does not give for every network (the A3 Mega's GPUDirect-TCPXO steps fit 33.9 us), so there the
step stays fitted."""


NETWORK_FIT_TRANSPORTS = CPU_RANK_TRANSPORTS
"""Transports whose calibration can fit the network's latency in place of the per-step overhead
(``calibrate(fixed_cost="network")``, ``validate_system(network_fit=True)``): the MPI ones, many ranks
a server, whose steps inside a server are shared-memory copies while only the messages between
servers cross the network (docs/validation.md, change 32)."""


def transport_regimes(transport: str | None, ll_efficiency: float | None = None, nccl_base_latency: bool = False):
    """The ``regimes`` argument of :func:`hcsim.calibrate.calibrate` for a corpus ``transport``, or None;
    ``ll_efficiency`` (:func:`nccl_ll_efficiency`) replaces NCCL's LL share where given, and
    ``nccl_base_latency`` gives NCCL's protocols their base latency once a call
    (:func:`hcsim.calibrate.nccl_protocol_regimes`' ``base_latency``)."""
    from .calibrate import (
        NCCL_LL_EFFICIENCY,
        OPENMPI_TCP_EAGER_LIMIT,
        eager_send_regimes,
        nccl_protocol_regimes,
        rccl_msccl_regimes,
        ucx_rendezvous_regimes,
    )

    key = (transport or "").split()[0] if transport else None
    if key == "openmpi":
        return ucx_rendezvous_regimes()
    if key == "intel-mpi":
        return eager_send_regimes()
    if key == "openmpi-tcp":
        return eager_send_regimes(eager_limit=OPENMPI_TCP_EAGER_LIMIT)
    if key == "rccl":
        return rccl_msccl_regimes()
    if key not in TRANSPORT_REGIMES:
        return None
    return nccl_protocol_regimes(*TRANSPORT_REGIMES[key], NCCL_LL_EFFICIENCY if ll_efficiency is None else ll_efficiency,
                                 base_latency=nccl_base_latency)


def nccl_ll_efficiency(ll_max_GBps: float, collective: str, ranks: int, size_bytes: int, time_us: float) -> float:
    """LL's share of Simple's rate on a system whose NCCL caps LL's bandwidth, from its largest
    calibration point.

    NCCL's tuner prices a ring under LL at bus bandwidth ``min(llMaxBw, busBw / 4)``
    (``ncclTopoTuneModel``, NVIDIA/nccl src/graph/tuning.cc; some later versions ``busBw / 2``):
    a quarter of Simple's rate (:data:`hcsim.calibrate.NCCL_LL_EFFICIENCY`) unless the absolute
    cap ``llMaxBw`` (``llMaxBws``: on one node by GPU generation, on 2 or more by the hosts' CPU
    vendor and node count: 39.0 GB/s for Intel hosts on 2 nodes) binds first. The regimes are
    shares of the calibrated rate, so the cap becomes a share too: NCCL's LL algorithm bandwidth
    (the cap over the ring's bus factor, nccl-tests' ``busbw / algbw``, the inverse of NCCL's
    ``nRanks / nsteps``) over the algorithm bandwidth of the largest calibration point, which
    runs Simple and which the fit reproduces. No parameter is fitted: the cap is NCCL's
    constant and the point is one the fit uses anyway.

    Parameters
    ----------
    ll_max_GBps : float
        NCCL's ``llMaxBw`` for the system (GB/s, bus bandwidth), as its corpus entry cites it.
    collective, ranks, size_bytes, time_us
        The largest calibration point.

    Returns
    -------
    float
        ``min(NCCL_LL_EFFICIENCY, (ll_max / bus_factor) / (size / time))``.

    Examples
    --------
    A3 Mega's 8 GiB allreduce on 16 GPUs (47535 us; 181 GB/s of algorithm bandwidth) against
    NCCL's 39 GB/s LL cap on 2 Intel nodes (20.8 GB/s of algorithm bandwidth):

    >>> round(nccl_ll_efficiency(39.0, "allreduce", 16, 8 << 30, 47535.0), 4)
    0.1151
    >>> nccl_ll_efficiency(282.0, "allreduce", 72, 8 << 30, 20299.0)  # GB200: the cap does not bind
    0.25
    """
    from .algorithms.schedule import BUSBW_FACTOR
    from .calibrate import NCCL_LL_EFFICIENCY, _positive
    from .errors import bad_value

    ll_max_GBps, time_us, size_bytes = (_positive(n, v) for n, v in (("nccl_ll_max_GBps", ll_max_GBps),
                                                                      ("time_us", time_us), ("size_bytes", size_bytes)))
    if collective not in BUSBW_FACTOR:
        raise bad_value("collective", collective, "one of " + ", ".join(sorted(BUSBW_FACTOR)))
    if not is_int(ranks) or ranks < 2:
        raise bad_value("ranks", ranks, "a whole number of ranks, at least 2")
    ll_algbw = ll_max_GBps * 1e9 / BUSBW_FACTOR[collective](ranks)
    algbw = size_bytes / (time_us * 1e-6)
    return float(min(NCCL_LL_EFFICIENCY, ll_algbw / algbw))


def nccl_transport_for(topology, ranks: int) -> str | None:
    """The NCCL transport (:data:`TRANSPORTS`) an nccl-tests run on the first ``ranks`` NPUs of ``topology``
    used, read from the topology, or None where it cannot say.

    ``nccl-nvlink`` where every link of those NPUs is of tier ``nvlink`` and they form one NVLink domain (one
    server, or all linked to one switch: an NVSwitch server, an NVL72 rack); ``nccl-net`` where the links are
    NVLink but the ranks span servers that share no switch (NCCL's ring steps then cross the network between
    them); None on any other tier (an AMD xGMI mesh, a PCIe box, a user's generic links: ``--transport`` says).

    Examples
    --------
    >>> from hcsim.topology import single_switch, leaf_spine
    >>> nccl_transport_for(single_switch(8, 450e9, tier="nvlink"), 8)
    'nccl-nvlink'
    >>> nccl_transport_for(leaf_spine(2, 8, 8, 25e9, tier="nvlink", npus_per_server=8, rails=True), 16)
    'nccl-net'
    >>> nccl_transport_for(single_switch(8, 450e9), 8) is None
    True
    """
    from .topology.io import load_topology

    topo = load_topology(topology)
    if not is_int(ranks) or not 2 <= ranks <= topo.num_npus:
        return None
    nodes = topo.npus[:ranks]
    g = topo.graph
    tiers = {g.edges[u, v]["spec"].tier for u in nodes for v in g.successors(u)}
    if tiers != {"nvlink"}:
        return None
    shared = set.intersection(*({v for v in g.successors(u) if g.nodes[v]["kind"] == "switch"} for u in nodes))
    servers = {(topo.npu_spec(u).pod, topo.npu_spec(u).server) for u in nodes}
    return "nccl-nvlink" if shared or len(servers) == 1 else "nccl-net"


TRANSPORTS = ("hccl", "nccl-nvlink", "nccl-net", "rccl", "openmpi", "openmpi-tcp", "intel-mpi")
"""The communication libraries (and, for NCCL, the hop its ring steps cross) whose calibration
:func:`transport_calibration` knows: corpus.yaml's ``transport`` and ``hcsim calibrate --transport``."""


def transport_calibration(transport: str | None, topology, *, fit: str = "bottleneck", regimes: bool = True,
                          ll_point=None, nccl_ll_max_GBps: float | None = None, nccl_base_latency: bool = False) -> tuple:
    """How a ``fit="bottleneck"`` calibration is set up for a library: ``(topology, defaults, forced)``, the
    topology to fit (a copy with the library's cited per-step overhead where it has one,
    :data:`CITED_STEP_TRANSPORTS`), and :func:`hcsim.calibrate.calibrate` keyword arguments, ``defaults``
    (a caller's own take precedence) and ``forced`` (they take precedence over a caller's).

    ``defaults``: for CPU ranks (:data:`CPU_RANK_TRANSPORTS`) the ranks' own links preferred and
    their reductions at :data:`hcsim.calibrate.RANK_REDUCE_RATIO` times their rate; where the
    per-step costs are the library's own (:data:`LAUNCH_FIT_TRANSPORTS`) the launch fitted in
    place of the step. ``forced``: with ``regimes``, the library's message regimes where its
    protocols are known facts (:func:`transport_regimes`: NCCL's LL, LL128 over NVLink and Simple, RCCL's, MPI's
    eager and rendezvous), NCCL's LL share lowered by its absolute cap ``nccl_ll_max_GBps`` as
    measured at ``ll_point`` (a measured row with ``collective``, ``ranks``, ``size_bytes`` and
    ``time_us``: the largest calibration point; :func:`nccl_ll_efficiency`), and with ``nccl_base_latency``
    NCCL's base latency once a call (:func:`transport_regimes`). Another ``fit``,
    or no ``transport``: the topology as given and nothing.

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> topo, defaults, forced = transport_calibration("nccl-nvlink", single_switch(8, 450e9))
    >>> topo.defaults.step_overhead_s, defaults, sorted(forced)
    (6e-07, {'fixed_cost': 'launch'}, ['regimes'])
    >>> transport_calibration("openmpi", "t.yaml", fit="tiers")
    ('t.yaml', {}, {})
    """
    from .calibrate import NCCL_LL_HOP_LATENCY_S, RANK_REDUCE_RATIO
    from .validate import measured_ranks

    key = transport.split()[0] if isinstance(transport, str) and transport.split() else transport
    if key is not None and key not in TRANSPORTS:
        raise unknown_name("transport", transport, TRANSPORTS)
    defaults, forced = {}, {}
    if key is None or fit != "bottleneck":
        return topology, defaults, forced
    if key in CITED_STEP_TRANSPORTS:
        topology = with_step_overhead(topology, NCCL_LL_HOP_LATENCY_S[CITED_STEP_TRANSPORTS[key]])
    if nccl_ll_max_GBps is not None and (not key.startswith("nccl") or ll_point is None
                                         or not measured_ranks(ll_point)):
        raise bad_value("nccl_ll_max_GBps", nccl_ll_max_GBps, "with an nccl-* transport and a measured point whose "
                        "rank count is known (--ranks where the file does not list its ranks)")
    if regimes and transport_regimes(key) is not None:
        ll = None
        if nccl_ll_max_GBps is not None:
            ll = nccl_ll_efficiency(nccl_ll_max_GBps, ll_point["collective"], measured_ranks(ll_point),
                                    int(ll_point["size_bytes"]), float(ll_point["time_us"]))
        forced["regimes"] = transport_regimes(key, ll, nccl_base_latency)
    if key in CPU_RANK_TRANSPORTS:
        defaults.update(prefer_rank_links=True, rank_reduce_ratio=RANK_REDUCE_RATIO)
    if key in LAUNCH_FIT_TRANSPORTS:
        defaults["fixed_cost"] = "launch"
    return topology, defaults, forced


LOOP_TRANSPORTS = ("hccl", "nccl-nvlink", "nccl-net")
"""Transports whose corpus files come from a benchmark that times a loop of asynchronous calls and divides
by the count: nccl-tests (``BenchTime`` in NVIDIA/nccl-tests src/common.cu, read at a0b82b22: ``iters``
calls started back to back, one ``completeColl`` after the last, the elapsed time divided by ``iters``) and
hccl_test (the average over back-to-back iterations, FACTS.md s5). There a call's launch may overlap the
device work of the call before it (:attr:`hcsim.topology.model.ExecutionDefaults.launch_overlap`;
``validate_system(launch_overlap=True)``, not the table's default: docs/validation.md, change 42). Not
``rccl``: its corpus launch is RCCL's cited base latency, a device cost; nor the MPI transports (OSU times
blocking calls, and their fits carry no launch)."""


def with_launch_overlap(topology):
    """A copy of ``topology`` (a Topology or a YAML path) whose calls overlap their launch with the call
    before (:attr:`~hcsim.topology.model.ExecutionDefaults.launch_overlap`; everything else as it is).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> with_launch_overlap(single_switch(8, 450e9)).defaults.launch_overlap
    True
    """
    return _with_defaults(topology, launch_overlap=True)


def with_step_overhead(topology, step_overhead_s: float):
    """A copy of ``topology`` (a Topology or a YAML path) whose per-step overhead is ``step_overhead_s``
    (its launch costs and everything else as they are).

    Examples
    --------
    >>> from hcsim.topology import single_switch
    >>> with_step_overhead(single_switch(8, 450e9), 0.6e-6).defaults.step_overhead_s
    6e-07
    """
    from .calibrate import _seconds

    return _with_defaults(topology, step_overhead_s=_seconds("step_overhead_s", step_overhead_s))


def _with_defaults(topology, **fields):
    """A copy of ``topology`` (a Topology or a YAML path) with these fields of its execution defaults changed."""
    import dataclasses

    from .topology.io import load_topology

    out = load_topology(topology).copy()
    out.defaults = dataclasses.replace(out.defaults, **fields)
    return out


def validate_system(system: dict, algorithm: str | None = "library", fit: str = "bottleneck",
                    regimes: bool = True, network_latency: bool = False, network_fit: bool = False,
                    network_rate: bool = True, sweep_bands: int | None = None, sweep_leave_one_out: bool = False,
                    *, launch_overlap: bool = False, nccl_base_latency: bool = False,
                    **calibrate_kwargs) -> tuple[pd.DataFrame, dict]:
    """Calibrate one system (an item of :func:`load_corpus`) on its :func:`calibration_points`
    and predict every row.

    ``algorithm="library"`` (default): rows that name no algorithm run what the system's
    library runs where its rule is known (:data:`LIBRARY_RULES` by the system's ``transport``:
    coll_tuned's fixed decision rules for Open MPI, :func:`open_mpi_fixed_rule`; MPICH's defaults
    as Intel MPI's stand-in, :func:`mpich_default_rule`), else HCCL's choice as ``"selected"`` gives it.
    ``"selected"``: every such row runs HCCL's choice (``auto``, as ``hcsim validate`` predicts
    them); on a topology without a ``product`` (NCCL, RCCL, MPI) that choice is resolved per
    row and run as named, without HCCL's CCL-buffer loops, which belong to HCCL alone. Any other
    value is passed to :func:`hcsim.validate.row_algorithm`.
    ``fit`` and ``calibrate_kwargs`` go to :func:`hcsim.calibrate.calibrate` (``"bottleneck"``:
    step overhead and the rate of the link class that explains the two points, the ranks' own
    links preferred where the ranks are CPU processes, :data:`CPU_RANK_TRANSPORTS`, whose
    reductions are charged at :data:`hcsim.calibrate.RANK_REDUCE_RATIO` times that rate; on HCCL
    the launch overhead in place of the per-step one, :data:`LAUNCH_FIT_TRANSPORTS`, and likewise
    on ``nccl-nvlink``, whose per-step overhead is set to NCCL's cited ring LL step first,
    :data:`CITED_STEP_TRANSPORTS`; all of it :func:`transport_calibration`); with
    ``regimes`` (default) a transport whose protocols are known facts (:data:`TRANSPORT_REGIMES`)
    is fitted with them, LL's share lowered where the system's corpus entry gives NCCL's absolute
    LL cap (``nccl_ll_max_GBps``, :func:`nccl_ll_efficiency`).

    Rows whose library does local work the schedule does not carry get it added to their
    prediction (``local_us``, :func:`library_local_seconds`, on the transports of
    :data:`LIBRARY_LOCAL_WORK`; the calibration points, allreduces, have none).

    ``network_latency=True``: a system whose corpus entry gives ``pingpong_us`` (its source's
    published two-node MPI latency) is calibrated and predicted with that latency on the links
    between its servers (:func:`with_network_latency`) and the same two-parameter fit; off by
    default, as it did not improve the table (docs/validation.md, change 30).

    ``network_rate=True`` (default, since change 33): a system whose corpus entry gives
    ``p2p_bw_MBps`` (its source's published two-node MPI bandwidth) has the links between its
    servers slowed to that rate (:func:`with_network_rate`) before the fit; the spec line rate
    with ``False``. The fit's two parameters are unchanged (no link class is fitted twice: where
    the fit picks the network's links it rescales them from the published rate).

    ``sweep_bands=K``: calibrate on the whole first sweep (:func:`calibration_sweep`), not on two of
    its points: :func:`hcsim.calibrate_sweep.calibrate_sweep`, its line on the sweep's smallest and
    largest points as the two-point rule fits them and an efficiency curve of ``K`` bands of
    message size on all of them; every row of the sweep is then a calibration row (a first sweep
    of two points, the 910B server's sendrecv, keeps the two-point fit). Not the
    issue's two-point rule: its own table (docs/validation.md, change 34). With
    ``sweep_leave_one_out`` the report also has the sweep's leave-one-out errors (a whole fit
    per point of the sweep).

    ``launch_overlap=True``: a system whose transport is in :data:`LOOP_TRANSPORTS` is calibrated and
    predicted with each call's launch overlapping the call before it (:func:`with_launch_overlap`: a
    call costs the larger of its launch and its device time); off by default (docs/validation.md,
    change 42). ``nccl_base_latency=True``: NCCL's protocols pay their base latency once a call
    (:func:`hcsim.calibrate.nccl_protocol_regimes`); off by default (docs/validation.md, change 47).

    ``network_fit=True``: a system whose transport is in :data:`NETWORK_FIT_TRANSPORTS` is fitted
    with ``fixed_cost="network"`` (the network links' latency in place of the per-step overhead,
    which stays as the topology builds it).

    Returns the rows (measured, predicted, ``error``, ``calibration``: whether the row was a
    calibration point) and the calibration report."""
    from .calibrate import calibrate
    from .topology.io import load_topology
    from .validate import validate_measured

    if sweep_bands is not None:
        from .calibrate_sweep import MAX_BANDS

        if not is_int(sweep_bands) or not 1 <= sweep_bands <= MAX_BANDS:
            raise bad_value("sweep_bands", sweep_bands, f"None or a whole number from 1 to {MAX_BANDS}")
    for name, flag in (("network_latency", network_latency), ("network_fit", network_fit),
                       ("network_rate", network_rate), ("sweep_leave_one_out", sweep_leave_one_out),
                       ("launch_overlap", launch_overlap), ("nccl_base_latency", nccl_base_latency)):
        if not isinstance(flag, (bool, np.bool_)):
            raise bad_value(name, flag, "True or False")
    if network_rate and system.get("p2p_bw_MBps") is not None:
        from .calibrate import _positive

        mbps = _positive("p2p_bw_MBps", system["p2p_bw_MBps"], 1e9)
        system = {**system, "p2p_bw_MBps": mbps, "topology": with_network_rate(system["topology"], mbps * 1e6)}
    if network_latency and system.get("pingpong_us") is not None:
        system = {**system, "topology": with_network_latency(system["topology"], system["pingpong_us"] * 1e-6)}
    library = (system.get("transport") or "").split()[:1]
    if launch_overlap and library and library[0] in LOOP_TRANSPORTS:
        system = {**system, "topology": with_launch_overlap(system["topology"])}
    measured = system["measured"]
    cal = calibration_points(measured)  # taken before the library's rule names the rows' algorithms
    sweep = calibration_sweep(measured)
    big = measured.loc[max(cal, key=lambda i: measured.loc[i, "size_bytes"])]
    topology, defaults, forced = transport_calibration(
        system.get("transport"), system["topology"], fit=fit, regimes=regimes, ll_point=big,
        nccl_ll_max_GBps=system.get("nccl_ll_max_GBps"), nccl_base_latency=bool(nccl_base_latency))
    system = {**system, "topology": topology}
    calibrate_kwargs = {**defaults, **calibrate_kwargs, **forced}
    algo = algorithm
    if algorithm in ("selected", "library"):
        algo = "auto"
        if load_topology(system["topology"]).product is None:
            measured = (_selected(measured, system["topology"]) if algorithm == "selected"
                        else library_algorithms(measured, system["topology"], system.get("transport"),
                                               None if system.get("nccl_ll_max_GBps") is None
                                               else system["nccl_ll_max_GBps"] * 1e9))
    if network_fit and fit == "bottleneck" and library and library[0] in NETWORK_FIT_TRANSPORTS:
        calibrate_kwargs = {"fixed_cost": "network", **calibrate_kwargs}
    if sweep_bands is None or len(sweep) < 3:  # a sweep of two points is the two-point fit
        fitted, report = calibrate(system["topology"], measured.loc[cal], source=system["system"], algorithm=algo,
                                   fit=fit, **{"max_work": CORPUS_CALIBRATION_WORK, **calibrate_kwargs})
    else:
        from .calibrate_sweep import calibrate_sweep

        if fit != "bottleneck":
            raise bad_value("fit", fit, "bottleneck with sweep_bands (the sweep's line is a bottleneck fit)")
        cal = sweep
        fitted, report = calibrate_sweep(system["topology"], measured.loc[cal], bands=sweep_bands,
                                         source=system["system"], algorithm=algo,
                                         leave_one_out=sweep_leave_one_out,
                                         **{"max_work": CORPUS_CALIBRATION_WORK, **calibrate_kwargs})
    rows = _add_local_work(validate_measured(measured, fitted, algorithm=algo, max_work=CORPUS_VALIDATION_WORK),
                           system)
    rows["calibration"] = rows.index.isin(cal)
    if network_rate and system.get("p2p_bw_MBps") is not None:
        report = {**report, "network_rate_GBps": system["p2p_bw_MBps"] / 1e3}
    return rows, report


def system_summary(system: str, rows: pd.DataFrame) -> dict:
    """One line of the corpus table from :func:`validate_system`'s rows."""
    from .validate import fastest_agreement

    pred = rows[~rows["calibration"]]
    big = pred[pred["size_bytes"] >= MIB]
    med, p90 = _summary(pred["error"])
    med1, p901 = _summary(big["error"])
    cal = rows[rows["calibration"]]
    fastest = ""
    if "algorithm_given" in rows.columns and rows.groupby(["collective", "size_bytes"]).size().max() > 1:
        agree = fastest_agreement(rows.assign(algorithm=rows["algorithm_given"]), margin=AGREEMENT_MARGIN)
        fastest = f"{int(agree.agree.sum())}/{len(agree)}"
    said = (", ".join(f"{c} {_size(n)}" for c, n in zip(cal["collective"], cal["size_bytes"], strict=True))
            if len(cal) <= 2 else  # a whole sweep (validate_system's sweep_bands)
            f"{cal['collective'].iloc[0]} sweep, {len(cal)} sizes {_size(int(cal['size_bytes'].min()))} - "
            f"{_size(int(cal['size_bytes'].max()))}")
    return {"system": system, "rows": len(rows), "calibration": said,
            "predicted": len(pred), "median_all": med, "p90_all": p90, "points_1mib": len(big),
            "median_1mib": med1, "p90_1mib": p901, "fastest": fastest}


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} B"


def validate_corpus(root: Path | str = PUBLISHED, systems=None, algorithm: str | None = "library",
                    fit: str = "bottleneck", regimes: bool = True, network_latency: bool = False,
                    network_fit: bool = False, network_rate: bool = True, sweep_bands: int | None = None,
                    sweep_leave_one_out: bool = False, *, launch_overlap: bool = False,
                    nccl_base_latency: bool = False, **calibrate_kwargs) -> pd.DataFrame:
    """The corpus accuracy table: one row per system with a topology.

    Parameters
    ----------
    root : path
        The corpus folder (``docs/data/published``).
    systems : list of str, optional
        Only the systems whose name contains one of these strings (default: all).
    algorithm, fit, regimes, network_latency, network_fit, network_rate, sweep_bands, sweep_leave_one_out, launch_overlap, nccl_base_latency, **calibrate_kwargs
        As :func:`validate_system` takes them.

    Returns
    -------
    DataFrame
        Columns :data:`COLUMNS`: rows measured, the calibration points, rows predicted, median
        and 90th percentile of |error| over the predicted rows (all sizes; and over those of at
        least 1 MiB, ``points_1mib`` of them), fastest-algorithm agreement ("agreed/clear", empty
        where no file compares algorithms). ``attrs["rows"]`` holds every system's rows and
        ``attrs["reports"]`` the calibration reports.
    """
    from .errors import ConfigError, bad_value

    if isinstance(systems, str):  # one name, not its characters (each of which matched nearly every system)
        systems = [systems]
    if systems is not None and (not isinstance(systems, (list, tuple, set, frozenset))
                                or not all(isinstance(k, str) and k for k in systems)):
        raise bad_value("systems", systems, "a list of non-empty strings (parts of system names), or None")
    corpus = load_corpus(root)
    if systems is not None and not any(k in s["system"] for s in corpus for k in systems):
        raise ConfigError(f"systems = {sorted(systems)!r}: no system of the corpus names any of them; its systems: "
                          + "; ".join(s["system"] for s in corpus))
    out, all_rows, reports = [], {}, {}
    for s in corpus:
        if systems is not None and not any(k in s["system"] for k in systems):
            continue
        rows, report = validate_system(s, algorithm, fit, regimes, network_latency, network_fit, network_rate,
                                       sweep_bands, sweep_leave_one_out, launch_overlap=launch_overlap,
                                       nccl_base_latency=nccl_base_latency, **calibrate_kwargs)
        out.append(system_summary(s["system"], rows))
        all_rows[s["system"]], reports[s["system"]] = rows, report
    df = pd.DataFrame(out, columns=COLUMNS)
    df.attrs.update(rows=all_rows, reports=reports)
    return df


def overall(df: pd.DataFrame) -> dict:
    """Median |error| pooled over every predicted row of every system, all sizes and >= 1 MiB."""
    rows = pd.concat([r[~r["calibration"]] for r in df.attrs["rows"].values()], ignore_index=True)
    med, p90 = _summary(rows["error"])
    med1, p901 = _summary(rows[rows["size_bytes"] >= MIB]["error"])
    return {"points": len(rows), "median_all": med, "p90_all": p90, "median_1mib": med1, "p90_1mib": p901}


def format_corpus_table(df: pd.DataFrame) -> str:
    """The table as Markdown (percentages with one decimal), as docs/validation.md keeps it."""

    def pct(x):
        return "-" if np.isnan(x) else f"{100 * x:.1f}%"

    lines = ["| system | rows | calibrated on | predicted | median all | p90 all | rows >= 1 MiB | median >= 1 MiB "
             "| p90 >= 1 MiB | fastest |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in df.itertuples():
        lines.append(f"| {r.system} | {r.rows} | {r.calibration} | {r.predicted} | {pct(r.median_all)} | "
                     f"{pct(r.p90_all)} | {r.points_1mib} | {pct(r.median_1mib)} | {pct(r.p90_1mib)} | "
                     f"{r.fastest or '-'} |")
    return "\n".join(lines)
