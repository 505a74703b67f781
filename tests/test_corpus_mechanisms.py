"""The general mechanisms the corpus validation uses, each against a hand-worked time.

* Open MPI's own algorithm choice (coll_tuned's fixed decision rules) for the rows of an Open MPI
  system, with the neighbour-exchange allgather and the Bruck alltoall it runs;
* the rail-optimised leaf-spine (every NPU pinned to its own NIC and rail switch);
* the libraries' local block work in a Bruck alltoall (counted from their code, three cache lines a
  block at the rank's memory share).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hcsim
import hcsim.corpus
from hcsim.corpus import open_mpi_fixed_rule
from hcsim.topology import full_mesh, leaf_spine, single_switch


def test_open_mpi_rule_names_the_algorithms_coll_tuned_runs():
    # coll_tuned_decision_fixed.c: allreduce rd < 10,000 B else ring; allgather (total) rd below
    # 50,000 B on 2^k ranks, Bruck otherwise, then neighbour exchange (even) or ring (odd);
    # alltoall (per peer) Bruck < 200 B on > 12 ranks, linear < 3,000 B, else pairwise
    assert [open_mpi_fixed_rule("allreduce", n, 64) for n in (9999, 10000)] == ["rd", "ring"]
    assert [open_mpi_fixed_rule("allgather", n, 64) for n in (49999, 50000)] == ["hd", "ne"]
    assert [open_mpi_fixed_rule("allgather", n, 48) for n in (49999, 50000)] == ["nb", "ne"]
    assert open_mpi_fixed_rule("allgather", 50000, 63) == "ring"
    assert [open_mpi_fixed_rule("alltoall", 64 * k, 64) for k in (199, 200, 2999, 3000)] == \
        ["bruck", "mesh", "mesh", "pairwise"]
    assert open_mpi_fixed_rule("alltoall", 12 * 10, 12) == "mesh"  # Bruck only on more than 12 ranks
    assert open_mpi_fixed_rule("broadcast", 1024, 64) is None


@pytest.mark.parametrize("p", [2, 4, 8, 14])
def test_neighbour_exchange_takes_p_over_2_steps(p):
    # p/2 steps: a block to the first neighbour, then two blocks a step; on a full mesh every
    # rank's transfer has its own link: (p/2) a + (p - 1) (n/p) / B
    a, bw, n = 3e-6, 10e9, 4096 * p
    r = hcsim.simulate(full_mesh(p, bw), "allgather", n, "ne", verify=True, step_overhead_s=a)
    assert r.time_s == pytest.approx(p // 2 * a + (p - 1) * (n / p) / bw, rel=1e-12)
    ring = hcsim.simulate(full_mesh(p, bw), "allgather", n, "ring", step_overhead_s=a)
    assert ring.time_s - r.time_s == pytest.approx((p - 1 - p // 2) * a, rel=1e-9)


def test_neighbour_exchange_on_an_odd_count_is_the_ring():
    t = full_mesh(5, 1e9)
    ne = hcsim.simulate(t, "allgather", 5 << 10, "ne", verify=True, step_overhead_s=1e-6)
    ring = hcsim.simulate(t, "allgather", 5 << 10, "ring", step_overhead_s=1e-6)
    assert ne.time_s == pytest.approx(ring.time_s, rel=1e-12)


def test_bruck_alltoall_hand_worked_on_8_ranks():
    # bits 1, 2, 4: slots {1,3,5,7}, {2,3,6,7}, {4,5,6,7}, 4 blocks of n/p each time
    p, a, bw, n = 8, 2e-6, 1e9, 8 * 1024
    r = hcsim.simulate(full_mesh(p, bw), "alltoall", n, "bruck", verify=True, step_overhead_s=a)
    assert r.time_s == pytest.approx(3 * (a + 4 * 1024 / bw), rel=1e-12)
    # 6 ranks, bits 1, 2, 4: slots {1,3,5}, {2,3}, {4,5}
    p, n = 6, 6 * 1200
    r = hcsim.simulate(full_mesh(p, bw), "alltoall", n, "bruck", verify=True, step_overhead_s=a)
    assert r.time_s == pytest.approx(3 * a + (3 + 2 + 2) * 1200 / bw, rel=1e-12)


def test_bruck_beats_the_linear_exchange_only_on_small_blocks():
    # on one switch the linear (mesh) alltoall is 1 step with p-1 blocks through each port, Bruck
    # log2 p steps with about p/2 blocks each: fewer overheads, more bytes
    t = single_switch(64, 10e9)
    small = [hcsim.simulate(t, "alltoall", 64 * 8, a, step_overhead_s=2e-6).time_s for a in ("bruck", "pairwise")]
    large = [hcsim.simulate(t, "alltoall", 64 << 20, a, step_overhead_s=2e-6).time_s for a in ("bruck", "pairwise")]
    assert small[0] < small[1] and large[0] > large[1]


def _same_index_exchange(topo, n):
    """Every NPU j of leaf 0 sends n bytes to NPU j of leaf 1 and back, in one step."""
    p = topo.num_npus
    half = p // 2
    m = np.zeros((p, p), dtype=np.int64)
    for j in range(half):
        m[j, j + half] = m[j + half, j] = n
    return hcsim.simulate(topo, "alltoallv", 1, "mesh", send_matrix=m, verify=True)


def test_rails_pin_each_npu_to_its_own_nic():
    # 2 leaves x 4 NPUs, host links 100 GB/s, 4:1: each NIC (rails) or uplink (ECMP) is 25 GB/s.
    # With rails the 4 same-index flows each way have a NIC each: n / 25 GB/s exactly.
    n = 1 << 26
    rails = leaf_spine(2, 4, 4, 100e9, oversubscription=4, rails=True)
    assert rails.link_spec("npu6", "spine2").bandwidth_Bps == 25e9
    assert not rails.graph.has_edge("leaf0", "spine0") and not rails.graph.has_edge("npu6", "spine1")
    t = _same_index_exchange(rails, n).time_s
    assert t == pytest.approx(n / 25e9, rel=1e-9)
    # the hashed leaf-spine never does better, and the default is unchanged (no NIC links)
    ecmp = leaf_spine(2, 4, 4, 100e9, oversubscription=4)
    assert ecmp.graph.has_edge("leaf0", "spine0") and not ecmp.graph.has_edge("npu0", "spine0")
    assert _same_index_exchange(ecmp, n).time_s >= t * (1 - 1e-9)


def test_rails_cross_index_flow_goes_through_one_nic():
    # npu0 (leaf 0) to npu5 (leaf 1, index 1): 4 hops either way, over one 25 GB/s NIC and
    # one 100 GB/s server link: alone it takes n / 25 GB/s
    rails = leaf_spine(2, 4, 4, 100e9, oversubscription=4, rails=True)
    m = np.zeros((8, 8), dtype=np.int64)
    m[0, 5] = 1 << 20
    r = hcsim.simulate(rails, "alltoallv", 1, "mesh", send_matrix=m, verify=True)
    assert r.time_s == pytest.approx((1 << 20) / 25e9, rel=1e-9)


def test_rails_needs_one_rail_per_index():
    with pytest.raises(hcsim.ConfigError, match="rails"):
        leaf_spine(2, 4, 2, 100e9, rails=True)
    with pytest.raises(hcsim.ConfigError, match="rails"):
        leaf_spine(2, 4, 4, 100e9, rails="yes")


def test_open_mpi_systems_rows_run_open_mpis_choice():
    # the corpus default (algorithm="library"): an `openmpi` system's rows that name no algorithm
    # run coll_tuned's pick, others HCCL's choice
    from hcsim.corpus import library_algorithms, load_corpus

    csd3 = next(s for s in load_corpus() if s["system"].startswith("CSD3") and "InfiniBand" in s["system"])
    m = csd3["measured"]
    ran = library_algorithms(m, csd3["topology"], csd3["transport"])
    pick = dict(zip(zip(ran.collective, ran.size_bytes, strict=True), ran.algorithm, strict=True))
    assert pick[("allreduce", 8192)] == "rd" and pick[("allreduce", 16384)] == "ring"
    assert pick[("allgather", 32768)] == "hd" and pick[("allgather", 65536)] == "ne"
    assert pick[("alltoall", 8192)] == "bruck" and pick[("alltoall", 16384)] == "mesh"
    assert pick[("alltoall", 262144)] == "pairwise"
    # an `intel-mpi` system's rows run MPICH's defaults (the stand-in for Intel MPI's unpublished tuning)
    intel = next(s for s in load_corpus() if s["system"].endswith("InfiniBand, Intel MPI"))
    same = library_algorithms(intel["measured"], intel["topology"], intel["transport"])
    pick = dict(zip(zip(same.collective, same.size_bytes, strict=True), same.algorithm, strict=True))
    assert pick[("allreduce", 2048)] == "rd" and pick[("allreduce", 4096)] == "rabenseifner"
    assert pick[("allgather", 262144)] == "hd" and pick[("allgather", 524288)] == "ring"
    assert pick[("alltoall", 16384)] == "bruck" and pick[("alltoall", 32768)] == "mesh"
    assert pick[("alltoall", 4 << 20)] == "pairwise" and "ne" not in set(same.algorithm)
    # NCCL across nodes: its allreduce runs the two-level pipeline standing in for its tree (change 50), where HCCL's
    # choice is its mesh/ring phases one after another
    from hcsim.corpus import _selected, rccl_msccl_rule

    a3 = next(s for s in load_corpus() if "A3 Mega" in s["system"])
    assert set(library_algorithms(a3["measured"], a3["topology"], a3["transport"]).algorithm) == {"pipeline"}
    assert set(_selected(a3["measured"], a3["topology"]).algorithm) == {"mesh/ring"}
    # RCCL's rows run what RCCL runs (change 22: MSCCL's all-pairs, RCCL's own ring below 256 elements)
    mi = next(s for s in load_corpus() if "MI300X" in s["system"])
    ran = library_algorithms(mi["measured"], mi["topology"], mi["transport"])
    assert ran.algorithm.tolist() == [rccl_msccl_rule("allreduce", int(n), 8) for n in ran.size_bytes]
    assert ran.algorithm.tolist() != _selected(mi["measured"], mi["topology"]).algorithm.tolist()


@pytest.mark.slow
def test_one_clusters_two_networks_fit_one_rank_rate():
    """Change 10 on the corpus: AlaSKA's Open MPI 4.0.3 runs over EDR InfiniBand and over the
    25 Gb/s port, each calibrated on its own two allreduce points as the corpus calibrates them
    (the CPU ranks' links preferred, the transport's message regimes), give the same memory-link
    factor within 5%, and the 25 Gb/s NIC keeps its line rate; without the preference the fit
    slows the NIC to a fifth. (Through the corpus's own calibration: the test called
    ``calibrate`` without the transport's regimes, which the corpus has used since change 18,
    and went stale.)"""
    from hcsim.corpus import load_corpus, validate_system

    def fit(suffix, **kw):
        return validate_system(next(s for s in load_corpus() if s["system"].endswith(suffix)), **kw)[1]

    ib = fit("EDR InfiniBand, Open MPI 4.0.3")["link_scale"]
    roce = fit("25 Gb/s Ethernet (RoCE), Open MPI 4.0.3")["link_scale"]
    assert list(ib) == ["ib@4.8GBps"] and list(roce) == ["roce@4.8GBps"]
    assert roce["roce@4.8GBps"] == pytest.approx(ib["ib@4.8GBps"], rel=0.05)
    nic = fit("25 Gb/s Ethernet (RoCE), Open MPI 4.0.3", prefer_rank_links=False)["link_scale"]
    assert nic == {"roce@3.125GBps": pytest.approx(0.186, rel=0.02)}


def test_bruck_block_operations_counted_from_the_libraries_code():
    # Open MPI: pack, unpack and copy back each step's blocks (3 passes); MPICH: pack and unpack (2);
    # both then copy every block once in the final rotation. 8 ranks: bits 1, 2, 4 hold 4 slots each.
    from hcsim.algorithms.bruck import local_block_operations

    assert local_block_operations(8) == 3 * 12 + 8
    assert local_block_operations(8, "mpich") == 2 * 12 + 8
    assert (local_block_operations(64), local_block_operations(64, "mpich")) == (640, 448)
    with pytest.raises(hcsim.HcsimError):
        local_block_operations(64, "nccl")


def test_library_local_work_is_three_cache_lines_a_block_at_the_spec_memory_share():
    from hcsim.calibrate import block_operation_seconds
    from hcsim.corpus import _add_local_work, library_local_seconds

    assert block_operation_seconds(640, 8.8e9) == pytest.approx(640 * 192 / 8.8e9)
    assert library_local_seconds("openmpi", "alltoall", "bruck", 64, 8.8e9) == pytest.approx(640 * 192 / 8.8e9)
    assert library_local_seconds("intel-mpi", "alltoall", "bruck", 64, 4.8e9) == pytest.approx(448 * 192 / 4.8e9)
    for transport, coll, algo in (("openmpi", "alltoall", "mesh"), ("openmpi", "allgather", "bruck"),
                                  ("hccl", "alltoall", "bruck"), (None, "alltoall", "bruck")):
        assert library_local_seconds(transport, coll, algo, 64, 8.8e9) == 0.0
    rows = pd.DataFrame({"collective": ["alltoall", "alltoall"], "algorithm": ["bruck", "mesh"], "ranks": [64, 64],
                         "size_bytes": [64, 65536], "time_us": [20.0, 100.0], "predicted_us": [6.0, 90.0],
                         "error": [-0.7, -0.1]})
    system = {"transport": "openmpi", "topology": hcsim.corpus.PUBLISHED / "csd3_cclake_2nodes_hdr100_ib.yaml"}
    out = _add_local_work(rows, system)
    assert out["local_us"].tolist() == pytest.approx([640 * 192 / 8.8e9 * 1e6, 0.0])
    assert out["predicted_us"].tolist() == pytest.approx([6.0 + 640 * 192 / 8.8e3, 90.0])
    assert out["error"].tolist() == pytest.approx([(6.0 + 640 * 192 / 8.8e3) / 20.0 - 1, -0.1])
    assert "local_us" not in _add_local_work(rows, {**system, "transport": "nccl-net"}).columns
