"""reduce_bcast, HCCL's 910B small-count AllReduce (hcomm all_reduce_reduce_broadcast.cc), and
the selection rule that runs it (all_reduce_operator.cc; coll_all_reduce_mesh_small_count_executor.cc).

(The verifier and the closed-form oracle cover it with every registered algorithm:
tests/test_verifier.py, tests/test_oracle.py.)"""

import pytest
from helpers import mesh_topology

import hcsim
from hcsim.algorithms import build_schedule
from hcsim.hccl.selection import SMALL_COUNT_AR_BYTES, HcclConfig, select_algorithm
from hcsim.verify import verify


@pytest.mark.parametrize("p", [2, 3, 8])
def test_everyone_reduces_into_rank_0_then_reads_the_result_back(p):
    n = 1000
    s = build_schedule("allreduce", "reduce_bcast", p, n)
    assert len(s.steps) == 2
    red, bc = s.steps
    assert sorted(red.src.tolist()) == list(range(1, p)) and set(red.dst.tolist()) == {0}
    assert red.reduce.all() and (red.nbytes == n).all()
    assert set(bc.src.tolist()) == {0} and sorted(bc.dst.tolist()) == list(range(1, p))
    assert not bc.reduce.any() and (bc.nbytes == n).all()
    verify(s)


def test_hand_worked_time_on_a_full_mesh():
    # p = 8, 1 MB, 10 GB/s links, 1 us latency, 2 us step overhead, inline reduce: each step is
    # one whole-buffer transfer per link, 2 x (2 + 1 + 100) us
    topo = mesh_topology(8, 10e9, 1e-6, float("inf"))
    kw = dict(step_overhead_s=2e-6, launch_overhead_s=0.0)
    des = hcsim.simulate(topo, "allreduce", 1_000_000, "reduce_bcast", verify=True, **kw)
    ana = hcsim.simulate(topo, "allreduce", 1_000_000, "reduce_bcast", mode="analytical", **kw)
    assert des.time_s == pytest.approx(2 * (2e-6 + 1e-6 + 100e-6), rel=1e-9)
    assert ana.time_s == pytest.approx(des.time_s, rel=1e-9)
    # with a reduction rate at rank 0 it takes the 7 buffers one after another: + 7 n / rate
    slow = hcsim.simulate(mesh_topology(8, 10e9, 1e-6, 10e9), "allreduce", 1_000_000, "reduce_bcast",
                          verify=True, **kw)
    assert slow.time_s == pytest.approx(des.time_s + 7 * 100e-6, rel=1e-9)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_hccl_runs_it_for_small_allreduce_on_one_910b_server(p):
    assert SMALL_COUNT_AR_BYTES == 256 * 1024  # HCCL_SMALL_COUNT_256_KB, hcomm common.h
    assert select_algorithm("910B", "allreduce", 8, (p,))[0] == "reduce_bcast"
    assert select_algorithm("910B", "allreduce", 256 << 10, (p,))[0] == "reduce_bcast"  # <= 256 KB
    assert select_algorithm("910B", "allreduce", (256 << 10) + 1, (p,))[0] == "mesh"


def test_not_where_hccl_runs_something_else():
    # deterministic: other templates (doubling on 8 NPUs, local reduce-bcast), not modelled
    assert select_algorithm("910B", "allreduce", 64 << 10, (8,), config=HcclConfig(deterministic=True))[0] == "mesh"
    # across servers the single-mesh rule does not apply
    assert select_algorithm("910B", "allreduce", 64 << 10, (8, 8))[0] != "reduce_bcast"
    # other products and other collectives are unchanged
    assert select_algorithm("910A", "allreduce", 64 << 10, (8,))[0] == "hd"
    assert select_algorithm("910_93", "allreduce", 64 << 10, (8,))[0] == "mesh"
    assert select_algorithm(None, "allreduce", 64 << 10, (8,))[0] == "mesh"
    assert select_algorithm("910B", "reducescatter", 64 << 10, (8,))[0] == "mesh"


def test_auto_on_the_910b_server_runs_it():
    topo = hcsim.load_topology("atlas800t-a2")
    small = hcsim.simulate(topo, "allreduce", 64 << 10, "auto")
    assert small.algorithm == "reduce_bcast"
    assert "small-count" in small.config["selected_by"]
    assert hcsim.simulate(topo, "allreduce", 1 << 20, "auto").algorithm == "mesh"
