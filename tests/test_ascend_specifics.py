"""Four Ascend specifics settled from HCCL's own code and documents (docs/algorithms.md,
"Ascend specifics settled from HCCL's sources")."""

import pytest

import hcsim
from hcsim.errors import ConfigError
from hcsim.hccl.selection import HcclConfig, select_algorithm

A2_64 = (8,) * 64  # 512 ranks


@pytest.mark.parametrize("coll", ["allgather", "reducescatter"])
def test_pipeline_threshold_is_per_rank(coll):
    # HCCL compares count x dtype size, the per-rank count, with 2 MB (all_gather_operator.cc /
    # reduce_scatter_operator.cc SelectAlgfor910B -> GetDefaultAlgoLevel1V2); hcsim's size is
    # nccl-tests' total, count x ranks
    assert select_algorithm("910B", coll, 2 << 20, A2_64)[0] == "mesh/nhr"  # 4 KiB per rank
    assert select_algorithm("910B", coll, (2 << 20) * 512, A2_64)[0] == "pipeline"
    assert select_algorithm("910B", coll, (2 << 20) * 512 - 512, A2_64)[0] == "mesh/nhr"


def test_allgather_512_ranks_2mib_is_no_longer_the_pipeline():
    pod = hcsim.load_topology("atlas900-a2-pod", servers=64)
    auto = hcsim.simulate(pod, "allgather", 2 << 20, "auto", mode="analytical")
    nhr = hcsim.simulate(pod, "allgather", 2 << 20, "mesh/nhr", mode="analytical")
    assert auto.algorithm == "mesh/nhr" and auto.time_s == nhr.time_s


@pytest.mark.parametrize("topology", ["atlas800t-a2", "atlas900-a2-pod"])
def test_alltoallv_launches_like_alltoall(topology):
    # one operator, one executor choice for AlltoAll, AlltoAllV and AlltoAllVC (hcomm
    # alltoall_operator.cc SelectAlgforAlltoAll, REGISTER_OP); AlltoAllV also gathers every
    # rank's counts, so its launch is at least AlltoAll's
    topo = hcsim.load_topology(topology, servers=2) if topology.endswith("pod") else hcsim.load_topology(topology)
    d = topo.defaults
    assert d.launch_for("alltoallv") == d.launch_for("alltoall")
    a = hcsim.simulate(topo, "alltoall", "8K", "auto")
    v = hcsim.simulate(topo, "alltoallv", "8K", "auto")
    assert v.time_s == pytest.approx(a.time_s, rel=1e-6)


def test_a3_figures_are_for_its_default_mode_ai_cpu():
    # HCCL_OP_EXPANSION_MODE.md (hicann/hccl docs): AI_CPU is the A3 default; HOST is an A2 mode
    a3 = hcsim.load_topology("atlas900-a3-superpod")
    assert a3.defaults.expansion_mode == "AI_CPU"
    r = hcsim.simulate(a3, "allreduce", "8K", "auto", ranks=32, hccl=HcclConfig(expansion_mode="AI_CPU"))
    assert r.time_s > 0
    with pytest.raises(ConfigError, match="figures for AI_CPU only"):
        hcsim.simulate(a3, "allreduce", "8K", "auto", ranks=32, hccl=HcclConfig(expansion_mode="HOST"))


def test_oversubscription_matters_once_traffic_crosses_spines():
    # 16 servers share one leaf group (servers_per_leaf 32): same-index traffic stays on its rail
    # leaf and the ratio changes nothing; 64 servers span two groups and H-D_R's distance-32 step
    # sends every server's level-1 data through the spines
    def t(servers, ratio, algo):
        pod = hcsim.load_topology("atlas900-a2-pod", servers=servers, oversubscription=ratio)
        return hcsim.simulate(pod, "allgather", 64 << 20, algo).time_s

    assert t(16, 1.0, "mesh/hd") == t(16, 4.0, "mesh/hd")
    one, four = t(64, 1.0, "mesh/hd"), t(64, 4.0, "mesh/hd")
    assert four > 1.5 * one


@pytest.mark.parametrize("coll", ["allgather", "reducescatter", "allreduce"])
@pytest.mark.parametrize("nodes,expected", [(2, "mesh/nhr"), (3, "mesh/ring"), (4, "mesh/nhr"), (6, "mesh/ring"),
                                            (12, "mesh/nhr")])
def test_a3_level1_default_is_v1_without_pipeline(coll, nodes, expected):
    # alg_configurator.cc: the adaptive level-1 default (GetDefaultAlgoLevel1V2: pipeline, cost
    # comparison) is for 910B only; A3 gets GetDefaultAlgoLevel1V1 (H-D_R from 8 servers or a power
    # of two, else ring), H-D_R run as NHR on 910_93
    assert select_algorithm("910_93", coll, 1 << 30, (16,) * nodes)[0] == expected
