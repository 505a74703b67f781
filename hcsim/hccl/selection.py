"""HCCL's default algorithm selection (``algorithm="auto"``), HCCL_ALGO, and the candidates
``algorithm="best"`` races.

Each rule cites where it comes from: FACTS.md s3 (hicann/hcomm
src/algorithm/impl/operator/*.cc) and hcomm's alg_configurator.cc / coll_alg_operator.cc as
summarised there. Rules hcsim does not model (AIV executors, the deterministic small-count
templates, the multi-server small-count executor, RDMA-Lite, graph mode) are listed in docs/algorithms.md; where they would apply the
op-by-op HOST-mode rule is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..algorithms.hierarchy import THREE_LEVEL, resolve
from ..algorithms.registry import REGISTRY
from ..errors import ConfigError, bad_value, is_int
from ..limits import MAX_SIZE_BYTES
from ..topology.model import EXPANSION_MODES
from .algo_env import HCSIM_NAME, HcclAlgo

SELECTION_ALPHA_s = 60e-6
"""HCCL's selection latency constant (coll_alg_operator.cc GetDefaultAlgoLevel1V2; FACTS s3)."""
RDMA_PLAN_Bps = {"910A": 12.5e9 * 0.8, "910B": 25.0e9 * 0.8, "910_93": 25.0e9 * 0.8}
"""Level-1 bandwidth per NPU HCCL plans with (device_capacity.cc; FACTS s4)."""
PIPELINE_MIN_BYTES = 2 << 20
"""Pipeline for RS/AG from 2 MB without RDMA-Lite (32 KB with it) (FACTS s3), compared with the
per-rank size: HCCL passes count x dtype size, its per-rank count, to the threshold (hcomm
all_gather_operator.cc / reduce_scatter_operator.cc SelectAlgfor910B -> AutoSelectAlgTypeLevel1 ->
coll_alg_operator.cc GetDefaultAlgoLevel1V2), not nccl-tests' total (count x ranks)."""
PIPELINE_AR_PER_RANK_BYTES = 1 << 20
"""AllReduce pipeline when size / (servers x NPUs per server) >= 1 MB (FACTS s3)."""
LEVEL1_STAND_IN = {
    ("broadcast", "hd"): ("nb", "H-D_R broadcast is scatter + allgather by halving/doubling; NB has that shape"),
    ("reduce", "hd"): ("tree", "a binomial reduce has H-D_R's log2 m steps of the whole buffer"),
    ("reduce", "nhr"): ("tree", "log2 m steps of the whole buffer"),
    ("reduce", "nb"): ("tree", "log2 m steps of the whole buffer"),
    ("gather", "nhr"): ("ring", "HCCL gathers with a ring template (coll_comm_executor.cc)"),
    ("gather", "nb"): ("ring", "HCCL gathers with a ring template (coll_comm_executor.cc)"),
    ("gather", "hd"): ("ring", "HCCL gathers with a ring template (coll_comm_executor.cc)"),
}
"""Level-1 algorithms HCCL may select that hcsim has no schedule for, and what runs instead."""
A3_RING_MAX_SERVERS = 8
"""HCCL_INTER_SERVER_RING_ALGO_MAX_SUPPORT_SERVER_NUM (hcomm common.h): from 8 servers the V1
default is H-D_R."""
SMALL_COUNT_AR_BYTES = 256 * 1024
"""HCCL_SMALL_COUNT_256_KB (hcomm src/algorithm/pub_inc/common.h): a 910B one-server op-by-op
AllReduce of count x dtype size up to this (inclusive) runs the small-count executor
(all_reduce_operator.cc NonDeterministicSelector / MeshTopoSelector). AllReduce's count is the
per-rank buffer, nccl-tests' size."""
PIPELINE_MAX_CONTEXTS = 65535
"""More pipeline contexts than this falls back to H-D_R (all_reduce_operator.cc; FACTS s3)."""


@dataclass(frozen=True)
class HcclConfig:
    """HCCL settings that change what runs.

    Attributes
    ----------
    buffer_bytes : int
        HCCL_BUFFSIZE, the CCL buffer: larger data is processed in loops of this size
        (default 200 MB, FACTS s2).
    deterministic : bool
        HCCL_DETERMINISTIC: disables the AllReduce / ReduceScatter pipeline.
    qps_per_connection : int
        HCCL_RDMA_QPS_PER_CONNECTION (1-8): each RDMA transfer is split over this many queue
        pairs, each ECMP-hashed on its own (HCCL_MULTI_QP_THRESHOLD's per-QP minimum of
        512 KB is not modelled: every transfer with several equal-cost paths is split).
    expansion_mode : str or None
        HCCL_OP_EXPANSION_MODE (HOST, AI_CPU, AIV, HOST_TS); None: the mode the topology's
        figures describe. Its launch and per-step costs come from the topology file
        (``defaults.modes``); a mode the file has no figures for is an error, not a guess.
    """

    buffer_bytes: int = 200 * 1024 * 1024
    deterministic: bool = False
    qps_per_connection: int = 1
    expansion_mode: str | None = None

    def __post_init__(self):
        # numpy integers and booleans are taken and stored as Python ones (the config is hashed
        # and printed); floats, strings and bools-for-numbers are not
        def whole(value):
            return is_int(value)  # not a bool, not a numpy timedelta

        b = self.buffer_bytes
        if not (whole(b) and 1 <= b <= MAX_SIZE_BYTES):
            raise bad_value("buffer_bytes", b, f"a whole byte count from 1 to {MAX_SIZE_BYTES} (1 PiB) (HCCL_BUFFSIZE)")
        q = self.qps_per_connection
        if not (whole(q) and 1 <= q <= 8):
            raise bad_value("qps_per_connection", q, "a whole number from 1 to 8 (HCCL_RDMA_QPS_PER_CONNECTION)")
        if not isinstance(self.deterministic, (bool, np.bool_)):
            raise bad_value("deterministic", self.deterministic, "True or False (HCCL_DETERMINISTIC)")
        mode = self.expansion_mode
        if mode is not None and (not isinstance(mode, str) or mode not in EXPANSION_MODES):
            raise bad_value("expansion_mode", mode, f"one of {', '.join(EXPANSION_MODES)} "
                            "(HCCL_OP_EXPANSION_MODE, case-sensitive), or None (the topology's)")
        object.__setattr__(self, "buffer_bytes", int(b))
        object.__setattr__(self, "qps_per_connection", int(q))
        object.__setattr__(self, "deterministic", bool(self.deterministic))


def level0_algorithm(product: str | None, npus_per_server: int) -> str:
    """What HCCL runs inside a server: it picks from the hardware (FACTS s1).

    910B and A3: full-mesh HCCS / UB -> mesh. 910A: an 8-NPU job rides the fixed 8P rings
    (topo_info_extractor.cc) -> ring; up to 4 NPUs stay in one HCCS group -> mesh.
    """
    if product == "910A" and npus_per_server > 4:
        return "ring"
    return "mesh"


def _level1_cost_choice(collective, nbytes, servers, npus_per_server, product, buffer_bytes):
    """GetDefaultAlgoLevel1V2's closed-form comparison (FACTS s3): Ring, NHR, HD with
    delta = 60 us, BW = planned level-1 bandwidth per NPU; ties prefer Ring, then NHR, then HD."""
    m = servers
    bw = RDMA_PLAN_Bps.get(product, RDMA_PLAN_Bps["910B"])
    x = min(nbytes, buffer_bytes)
    d = SELECTION_ALPHA_s
    if collective == "allreduce":
        x /= npus_per_server
    pow2 = m & (m - 1) == 0
    logc = math.ceil(math.log2(m))
    if collective in ("broadcast", "reduce"):  # Ring vs RHD only
        costs = {"ring": (m - 1) * d + (m - 1) / m * x / bw,
                 "hd": (1 + 2 * math.floor(math.log2(m))) * d + (1 + 2 * (m - 1) / m) * x / bw}
    else:
        costs = {"ring": (m - 1) * d + (m - 1) / m * x / bw,
                 "nhr": logc * d + (m - 1) / m * x / bw,
                 "hd": (int(math.log2(m)) * d + (m - 1) / m * x / bw) if pow2 else logc * d + (2 * m - 1) / m * x / bw}
        if collective == "allreduce":
            costs = {k: 2 * v for k, v in costs.items()}
    best = min(costs.values())
    for name in ("ring", "nhr", "hd"):  # tie order
        if name in costs and costs[name] <= best * (1 + 1e-12):
            return name, costs


def select_algorithm(product: str | None, collective: str, nbytes: int, servers: tuple, pods: tuple = (),
                     hccl_algo: HcclAlgo | None = None, config: HcclConfig | None = None) -> tuple[str, str]:
    """The algorithm HCCL would run, as an hcsim name, and why.

    Parameters
    ----------
    product : {"910A", "910B", "910_93", None}
    collective : str
    nbytes : int
        Size in nccl-tests' convention.
    servers : tuple of int
        Ranks per server.
    pods : tuple of int
        Servers per pod.
    hccl_algo : HcclAlgo, optional
        A parsed HCCL_ALGO; setting it disables adaptive selection at level 1.
    config : HcclConfig, optional

    Returns
    -------
    (str, str)
        The algorithm name (flat, ``level0/level1[/level2]`` or ``pipeline``) and the rule.

    Examples
    --------
    >>> select_algorithm("910B", "allreduce", 64 << 20, (8,))[0]
    'mesh'
    >>> select_algorithm("910B", "allgather", 8 << 10, (8,) * 16)
    ('mesh/nhr', 'cost comparison (coll_alg_operator.cc GetDefaultAlgoLevel1V2): nhr')
    """
    config = config or HcclConfig()
    n_servers = len(servers)
    local = servers[0] if servers else 1
    equal = len(set(servers)) == 1
    level0 = level0_algorithm(product, local)
    rooted = collective in ("broadcast", "reduce", "scatter", "gather")
    if collective == "sendrecv":
        return "ring", "point to point"
    if n_servers == 1:
        if (product == "910B" and collective == "allreduce" and nbytes <= SMALL_COUNT_AR_BYTES
                and not config.deterministic and config.expansion_mode != "AIV"):
            # hcomm all_reduce_operator.cc: SelectAlgfor910B -> NonDeterministicSelector (more than
            # 2 NPUs) or MeshTopoSelector (2), both under SingleMeshInlineReduce (910B mesh, one
            # server, SDMA inline reduce: fp32/fp16/bf16/int8/int16/int32 sum/max/min) pick
            # AllReduceMeshSmallCountExecutor for count x dtype size <= 256 KB op by op; its
            # KernelRun (coll_all_reduce_mesh_small_count_executor.cc) runs
            # TEMPLATE_ALL_REDUCE_REDUCE_BCAST when HCCL_DETERMINISTIC is off
            return "reduce_bcast", ("910B one server, AllReduce <= 256 KB, non-deterministic: small-count "
                                    "executor, reduce-bcast template (all_reduce_operator.cc "
                                    "NonDeterministicSelector; coll_all_reduce_mesh_small_count_executor.cc)")
        if product == "910A" and collective == "allreduce" and local in (4, 8) and nbytes <= 1 << 20:
            return "hd", "910A single server, 4 or 8 ranks, <= 1 MB: HD (all_reduce_operator.cc; FACTS s3)"
        flat = "star" if (rooted and level0 == "mesh") else level0
        if flat not in REGISTRY[collective]:
            flat = "mesh" if "mesh" in REGISTRY[collective] else "ring"
        return flat, f"one server: level 0 only, {flat} from the hardware (FACTS s1)"
    if not equal:  # AHC for AllReduce; AHC_BROKE elsewhere, approximated by flat NHR (AHCAlgSelect)
        if collective == "allreduce":
            return "ahc", "servers of unequal size: AHC (coll_alg_operator.cc AHCAlgSelect)"
        flat = next(a for a in ("nhr", "ring", "pairwise") if a in REGISTRY[collective])
        return flat, f"servers of unequal size: AHC_BROKE, approximated by flat {flat}"
    levels = hccl_algo.levels_for(collective) if hccl_algo is not None else None
    level1 = levels.get("level1") if levels else None
    level2 = levels.get("level2") if levels else None
    reason_src = "HCCL_ALGO"
    if level1 in ("null", "NA", None):
        level1 = None
    if level1 is not None:
        name = HCSIM_NAME[level1]
        if name == "ahc":
            if collective == "allreduce":
                return "ahc", f"HCCL_ALGO level1 {level1}"
            level1 = None  # HCCL falls back to its default for AHC outside AG/RS/AR (alg_configurator.cc)
            reason_src = "HCCL_ALGO AHC not applicable to this operator here; default"
        elif name in ("mesh", "pairwise") and collective not in ("alltoall", "alltoallv"):
            level1 = None  # HCCL warns and ignores fullmesh / pairwise at level 1 (alg_configurator.cc)
            reason_src = "HCCL_ALGO level1 fullmesh/pairwise ignored for this operator (alg_configurator.cc); default"
        elif name == "pipeline" and product not in ("910B", "910_93"):
            level1 = None
            reason_src = "HCCL_ALGO pipeline ignored outside 910B/910_93 (alg_configurator.cc); default"
        else:
            level1 = name
    if level1 == "pipeline":
        if collective in ("allreduce", "allgather", "reducescatter") and local > 1:
            return "pipeline", "HCCL_ALGO level1 pipeline"
        level1 = None
        reason_src = "HCCL_ALGO pipeline not available for this operator; default"
    if level1 is None:
        level1, why = _default_level1(product, collective, nbytes, n_servers, local, level0, config)
        reason = why if reason_src == "HCCL_ALGO" else f"{reason_src}: {why}"
        if level1 == "pipeline":
            return "pipeline", reason
    else:
        reason = f"HCCL_ALGO level1 {level1}"
    if collective in ("alltoall", "alltoallv"):
        l1 = level1 if level1 in ("pairwise", "mesh") else "pairwise"
        return f"mesh/{l1}", "AlltoAll: staged, inside servers then between (alltoall_operator.cc; FACTS s3)"
    if collective == "scatter" and level1 not in ("ring", "nhr", "nb"):
        level1 = "ring"  # scatter_operator.cc forces anything else to Ring
    if collective == "broadcast" and level1 not in ("ring", "nhr", "nb", "hd"):
        level1 = "hd"  # broadcast_operator.cc resets others to HD on A2
    sub = LEVEL1_STAND_IN.get((collective, level1))
    if sub is not None:  # HCCL has it, hcsim's catalogue does not: the nearest shape stands in
        reason += f"; hcsim has no {level1} {collective}: {sub[0]} stands in ({sub[1]})"
        level1 = sub[0]
    name = f"{level0}/{level1}"
    if len(pods) > 1 and collective in THREE_LEVEL:
        l2 = HCSIM_NAME.get(level2, "nhr") if level2 not in (None, "NA", "null") else "nhr"
        if l2 == "pipeline":
            l2 = "ring"
        name += f"/{l2}"
        reason += f"; level2 {l2} (default NHR, alg_configurator.cc)"
    return name, reason


def _default_level1(product, collective, nbytes, n_servers, local, level0, config):
    if product == "910A":
        if n_servers & (n_servers - 1):
            return "ring", "910A: server count not a power of two -> ring (FACTS s3)"
        return "hd", "910A: server count a power of two -> H-D_R (FACTS s3)"
    if product == "910_93":
        # A3 never takes GetDefaultAlgoLevel1V2 (no level-1 pipeline, no cost comparison): hcomm
        # alg_configurator.cc marks the level-1 default adaptive for 910B only and gives A3
        # GetDefaultAlgoLevel1V1 (H-D_R from 8 servers or a power of two, else ring; H-D_R -> NHR on
        # 910_93); SelectAlgfor91093 (all_gather/reduce_scatter/all_reduce_operator.cc) has no
        # level-1 pipeline executor
        if n_servers >= A3_RING_MAX_SERVERS or n_servers & (n_servers - 1) == 0:
            return "nhr", "A3 default level 1: >= 8 servers or a power of two: H-D_R, run as NHR on 910_93 " \
                          "(alg_configurator.cc GetDefaultAlgoLevel1V1)"
        return "ring", "A3 default level 1: < 8 servers, not a power of two: ring (alg_configurator.cc " \
                       "GetDefaultAlgoLevel1V1)"
    # hcsim's estimate of the pipeline's task contexts: 5(L-1)+8 per step (CalcContextNumForPipeline,
    # read through a mirror of hcomm), one step per server
    contexts = (5 * (local - 1) + 8) * n_servers
    pipeline_ok = product == "910B" and local > 1 and level0 == "mesh"
    wants = None
    # nbytes is nccl-tests' total for AG/RS (count x ranks); HCCL's threshold takes the per-rank
    # count x dtype size (all_gather_operator.cc / reduce_scatter_operator.cc SelectAlgfor910B)
    per_rank = nbytes / (n_servers * local)
    if pipeline_ok and collective == "allgather" and per_rank >= PIPELINE_MIN_BYTES:
        wants = "AllGather >= 2 MB per rank, mesh level 0, > 1 NPU per server: pipeline (FACTS s3)"
    if (pipeline_ok and collective == "reducescatter" and per_rank >= PIPELINE_MIN_BYTES
            and not config.deterministic):
        wants = "ReduceScatter >= 2 MB per rank, mesh level 0, non-deterministic: pipeline (FACTS s3)"
    if (pipeline_ok and collective == "allreduce" and not config.deterministic
            and nbytes / (n_servers * local) >= PIPELINE_AR_PER_RANK_BYTES):
        wants = "AllReduce size/(servers x NPUs) >= 1 MB: pipeline (FACTS s3)"
    if wants and contexts > PIPELINE_MAX_CONTEXTS:
        return "hd", f"{wants[:-len(' (FACTS s3)')]}, but > 65535 contexts: H-D_R (FACTS s3)"
    if wants:
        return "pipeline", wants
    name, _ = _level1_cost_choice(collective, nbytes, n_servers, local, product, config.buffer_bytes)
    return name, f"cost comparison (coll_alg_operator.cc GetDefaultAlgoLevel1V2): {name}"


def candidates(collective: str, servers: tuple, pods: tuple = (), product: str | None = None,
               in_network: bool = False) -> list[str]:
    """Algorithms ``algorithm="best"`` races: in one server the flat ones; across servers,
    level 0 (from the hardware) with every level-1 algorithm HCCL offers, and the pipeline.
    ``in_network``: the ranks share a switch that reduces in the network, so an in-network
    algorithm (``nvls``) runs too; without it those are left out."""
    flat = [name for name, spec in REGISTRY[collective].items() if in_network or not spec.in_network]
    # an in-network algorithm runs through the switch the ranks share, whatever their servers (an NVL72 rack)
    switched = [name for name, spec in REGISTRY[collective].items() if in_network and spec.in_network]
    if collective == "sendrecv":
        return ["ring"]
    if len(servers) <= 1 or len(set(servers)) != 1:
        # those that need servers of equal size (pipeline, railring) are not raced here: on one server they are
        # another algorithm (railring the ring) or nothing
        return [a for a in flat if not REGISTRY[collective][a].equal_servers and (a != "ahc" or len(servers) > 1)]
    # Across servers HCCL always composes levels (flat algorithms would cross the slow tier at
    # every step), so the race is between its level-1 choices and the pipeline.
    level0 = level0_algorithm(product, servers[0])
    level1 = {"allreduce": ["ring", "hd", "nhr", "nb"], "allgather": ["ring", "hd", "nhr", "nb"],
              "reducescatter": ["ring", "hd", "nhr", "nb"], "broadcast": ["ring", "hd", "nhr", "nb", "tree"],
              "reduce": ["ring", "tree"], "scatter": ["ring", "nhr", "nb"], "gather": ["ring", "star"],
              "alltoall": ["pairwise", "mesh"], "alltoallv": ["pairwise", "mesh"]}.get(collective, [])
    suffix = "/nhr" if len(pods) > 1 and collective in THREE_LEVEL else ""
    out = []
    for b in level1:
        for a in dict.fromkeys((level0, "mesh")):  # level 0 as the hardware gives it, else mesh
            try:  # keep the compositions hcsim has schedules for
                resolve(collective, f"{a}/{b}{suffix}")
            except ConfigError:
                continue
            out.append(f"{a}/{b}{suffix}")
            break
    if "pipeline" in REGISTRY[collective] and servers[0] > 1 and product in ("910B", "910_93", None):
        out.append("pipeline")
    return out + switched
