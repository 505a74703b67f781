"""In-network AllReduce through an NVLink SHARP switch (hcsim/algorithms/nvls.py): the schedule's
switch endpoint in the verifier, the engine and the analytical mode; its closed form; NCCL's choice of
it (hcsim.corpus.nccl_nvls_from_bytes); and the topology field that enables it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hcsim
from hcsim.algorithms import build_schedule
from hcsim.algorithms.cost import AlphaBetaGamma
from hcsim.algorithms.nvls import (
    MAX_SEGMENTS,
    MIN_SEGMENT_BYTES,
    cost_allreduce,
    nccl_chunk_bytes,
    segments,
)
from hcsim.algorithms.schedule import CollectiveArgs
from hcsim.analytical import path_parameters
from hcsim.corpus import library_algorithms, nccl_nvls_from_bytes
from hcsim.engine.des import EngineConfig, FlowSimulator, shares_in_network_switch
from hcsim.errors import HcsimError
from hcsim.topology import full_mesh, single_switch
from hcsim.topology.io import load_topology, save_topology
from hcsim.verify import verify

KIB = 1 << 10


@pytest.mark.parametrize("p", [2, 3, 5, 8])
@pytest.mark.parametrize("n", [1, 7, 100_000, 5 * (1 << 20) + 3])
def test_nvls_schedule_verifies(p, n):
    s = build_schedule("allreduce", "nvls", p, n)
    assert s.in_network and s.endpoints == p + 1 and s.streamed
    verify(s)


def test_a_schedule_whose_switch_keeps_a_piece_from_a_rank_fails_verification():
    s = build_schedule("allreduce", "nvls", 4, 1000)
    steps = list(s.steps)
    steps[3] = steps[3].__class__(*(a[: len(a) - 1] if a is not None else None for a in
                                    (steps[3].src, steps[3].dst, steps[3].nbytes, steps[3].reduce,
                                     steps[3].chunk_lo, steps[3].chunk_hi)))  # the last multicast dropped
    import dataclasses

    with pytest.raises(HcsimError, match="after the last step rank 3"):
        verify(dataclasses.replace(s, steps=steps))


@pytest.mark.parametrize("p", [2, 3, 8, 16])
@pytest.mark.parametrize("n", [8, 1000, 200_000, 5_000_000])
@pytest.mark.parametrize("step_s, lat_s", [(0.0, 0.0), (2e-6, 0.0), (0.0, 1e-6), (1.5e-6, 0.5e-6)])
def test_engine_equals_the_closed_form(p, n, step_s, lat_s):
    eff = 0.8
    t = single_switch(p, 100e9, lat_s, in_network_efficiency=eff)
    got = FlowSimulator(t, t.npus, build_schedule("allreduce", "nvls", p, n), EngineConfig(step_overhead_s=step_s)).run()
    want = cost_allreduce(CollectiveArgs("allreduce", p, n), AlphaBetaGamma(step_s + lat_s, 1 / (eff * 100e9), 0.0))
    assert got == pytest.approx(want, rel=1e-12)


def test_hand_worked_timeline_two_ranks_four_segments():
    """p = 2, 256 KiB: 4 segments of 64 KiB (pieces of 32 KiB), links of 1 GB/s at efficiency 0.5 (0.5 GB/s).
    Step by step (up: a rank's link into the switch; down: out of it), in us at 0.5 GB/s:
    t0 up 64K: 131.072 | t1 up 64K, down 32K: 131.072 | t2 up 64K+32K: 196.608 | t3 up 64K+32K, down 32K+64K:
    196.608 | t4 up 32K, down 32K+64K: 196.608 | t5 up 32K, down 64K: 131.072 | t6 down 64K: 131.072.
    Sum: 4 x 131.072 + 3 x 196.608 = 1114.112 us; and NCCL cuts so small a call into 16 KiB chunks (2 ranks: 32
    concurrent operations, 256 KiB < 2 x 32 x 32 KiB), each costing h = 9534 bytes more: every byte x (1 + h/16K) /
    (1 + h/128K) = 1.474675."""
    t = single_switch(2, 1e9, in_network_efficiency=0.5)
    r = hcsim.simulate(t, "allreduce", 256 * KIB, "nvls")
    assert r.time_s * 1e6 == pytest.approx(1114.112 * (1 + 9534 / 16384) / (1 + 9534 / 131072), rel=1e-12)
    assert segments(256 * KIB) == 4 and nccl_chunk_bytes(256 * KIB, 2) == 16 * KIB


def test_each_link_carries_n_one_plus_one_over_p_each_way():
    p, n = 8, 64 << 20
    t = single_switch(p, 100e9, in_network_efficiency=0.85)
    sim = FlowSimulator(t, t.npus, build_schedule("allreduce", "nvls", p, n), EngineConfig())
    sim.run()
    moved = {}
    for st in sim.done_states:
        for src, dst, b in zip(st.src, st.dst, st.nbytes, strict=True):
            moved[(int(src), int(dst))] = moved.get((int(src), int(dst)), 0) + b
    for r in range(p):
        assert moved[(r, p)] == pytest.approx(n * (1 + 1 / p), abs=p)  # up: a byte of rounding per piece at most
        assert moved[(p, r)] == pytest.approx(n * (1 + 1 / p), abs=p)


def test_many_segments_approach_the_in_network_rate_and_beat_the_ring():
    p, n = 8, 1 << 30
    t = single_switch(p, 450e9, in_network_efficiency=0.85)
    nvls = hcsim.simulate(t, "allreduce", n, "nvls").time_s
    ring = hcsim.simulate(t, "allreduce", n, "ring").time_s
    ideal = n * (1 + 1 / p) / (0.85 * 450e9)
    assert ideal < nvls < ideal * (1 + 3 / MAX_SEGMENTS + 1e-9)
    assert ring / nvls == pytest.approx(0.85 * 2 * (p - 1) / p / (1 + 1 / p), rel=0.02)  # 1.32 on 8 ranks


def test_analytical_mode_and_sweep_equal_the_engine():
    t = single_switch(8, 450e9, 1e-6, in_network_efficiency=0.85)
    for n in (MIN_SEGMENT_BYTES, 3 << 20, 1 << 30):
        des = hcsim.simulate(t, "allreduce", n, "nvls").time_s
        assert hcsim.simulate(t, "allreduce", n, "nvls", mode="analytical").time_s == pytest.approx(des, rel=1e-12)
    df = hcsim.sweep(t, "allreduce", [1 << 20, 1 << 30], algorithms=["nvls"])
    assert df["time_us"].iloc[1] == pytest.approx(hcsim.simulate(t, "allreduce", 1 << 30, "nvls").time_s * 1e6)


def test_without_an_in_network_switch_nvls_is_a_one_line_error_and_best_leaves_it_out():
    plain = single_switch(8, 450e9, npus_per_server=8)
    with pytest.raises(HcsimError, match=r"^algorithm nvls: the ranks \(8, on npu0...\) share no switch that reduces"):
        hcsim.simulate(plain, "allreduce", 1 << 30, "nvls")
    with pytest.raises(HcsimError, match="share no switch"):
        hcsim.simulate(full_mesh(4, 1e9), "allreduce", 1 << 20, "nvls", mode="analytical")
    assert not shares_in_network_switch(plain, plain.npus)
    best = hcsim.simulate(plain, "allreduce", 1 << 30, "best")
    assert "nvls" not in best.config["candidates"]
    sharp = single_switch(8, 450e9, npus_per_server=8, in_network_efficiency=0.85)
    best = hcsim.simulate(sharp, "allreduce", 1 << 30, "best")
    assert best.algorithm == "nvls" and "ring" in best.config["candidates"]


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan"), "high", True])
def test_in_network_efficiency_is_checked(bad):
    with pytest.raises(HcsimError, match="in_network_efficiency"):
        single_switch(4, 1e9, in_network_efficiency=bad)


def test_in_network_efficiency_survives_yaml(tmp_path):
    t = single_switch(4, 100e9, in_network_efficiency=0.74)
    save_topology(t, tmp_path / "t.yaml")
    back = load_topology(tmp_path / "t.yaml")
    assert back.graph.nodes["sw0"]["in_network_efficiency"] == 0.74
    assert hcsim.simulate(back, "allreduce", 1 << 24, "nvls").time_s == hcsim.simulate(t, "allreduce", 1 << 24,
                                                                                         "nvls").time_s
    (tmp_path / "b.yaml").write_text("name: b\nbuilder: single_switch\nparams: {n: 4, bandwidth_GBps: 100, "
                                     "in_network_efficiency: 0.74}\n")
    assert shares_in_network_switch(load_topology(tmp_path / "b.yaml"), back.npus)
    (tmp_path / "c.yaml").write_text("name: c\nbuilder: single_switch\nparams: {n: 4, bandwidth_GBps: 100, "
                                     "in_network_efficiency: 2}\n")
    with pytest.raises(HcsimError, match=r"in_network_efficiency = 2"):
        load_topology(tmp_path / "c.yaml")


def test_a_job_with_an_nvls_allreduce_through_a_ccl_buffer_equals_simulate():
    from helpers import job_through_ccl_buffer

    job, alone, sched = job_through_ccl_buffer(single_switch(4, 100e9, in_network_efficiency=0.85), "allreduce", "nvls",
                                               8 << 20, 4 << 20)
    assert job == pytest.approx(alone, rel=1e-9)
    assert sched.in_network and sched.barriers
    verify(sched)
    # uneven pieces (4 MiB and 1 MiB) chunk differently: one factor per step, each piece its own
    job, alone, sched = job_through_ccl_buffer(single_switch(4, 100e9, in_network_efficiency=0.85), "allreduce", "nvls",
                                               5 << 20, 4 << 20)
    assert job == pytest.approx(alone, rel=1e-9)
    assert len(set(sched.in_network_factor)) == 2 and len(sched.in_network_factor) == len(sched.steps)


def test_nccl_prefers_nvls_from_its_own_crossover():
    # H100 (450 GB/s each way, Hopper's 0.85, LL capped at 141 GB/s): NVLS from about 1 MiB
    start = nccl_nvls_from_bytes(8, 450e9, 0.85, 141e9)
    assert 0.9 * (1 << 20) < start < 1.2 * (1 << 20)
    # an efficiency too low for NVLS to out-run the ring's Simple protocol: never
    assert nccl_nvls_from_bytes(8, 450e9, 0.4) == float("inf")
    # a tighter LL cap makes the ring slower, so NVLS starts earlier
    assert nccl_nvls_from_bytes(8, 450e9, 0.85, 50e9) < start


def test_library_rule_names_nvls_where_the_switch_has_it():
    df = pd.DataFrame({"collective": ["allreduce", "allreduce", "allgather", "allreduce"],
                       "algorithm": ["nccl", "nccl", "nccl", "ring"], "ranks": 8,
                       "size_bytes": [1 << 10, 1 << 30, 1 << 30, 1 << 30], "time_us": 50.0})
    sharp = single_switch(8, 450e9, npus_per_server=8, in_network_efficiency=0.85)
    got = library_algorithms(df, sharp, "nccl-nvlink", 141e9).algorithm.tolist()
    assert got == ["ring", "nvls", "ring", "ring"]  # small: the ring (LL); a forced ring stays one
    plain = single_switch(8, 450e9, npus_per_server=8)
    assert library_algorithms(df, plain, "nccl-nvlink").algorithm.tolist() == ["ring", "ring", "ring", "ring"]
    assert np.isfinite(nccl_nvls_from_bytes(8, 450e9, 0.85))


def test_best_races_nvls_across_servers_on_one_switch_and_only_for_what_the_switch_reduces():
    # an NVL72-like rack: servers of 8 on one switch (review finding: the multi-server branch left nvls out)
    rack = single_switch(16, 450e9, npus_per_server=8, in_network_efficiency=0.85)
    best = hcsim.simulate(rack, "allreduce", 1 << 30, "best")
    assert best.algorithm == "nvls" and "mesh/ring" in best.config["candidates"]
    # NCCL's ncclNvlsSupported: fp32 sums only; bf16 max too
    with pytest.raises(HcsimError, match=r"^reduce_op = 'prod': nvls reduces fp32 with sum only"):
        hcsim.simulate(rack, "allreduce", 1 << 20, "nvls", dtype="fp32", reduce_op="prod")
    with pytest.raises(HcsimError, match=r"^dtype = 'int8': one the switch reduces"):
        hcsim.simulate(rack, "allreduce", 1 << 20, "nvls", dtype="int8")
    assert hcsim.simulate(rack, "allreduce", 1 << 20, "nvls", dtype="bf16", reduce_op="max").time_s > 0
    prod = hcsim.simulate(rack, "allreduce", 1 << 30, "best", dtype="fp32", reduce_op="prod")
    assert "nvls" not in prod.config["candidates"]


def test_a_job_op_the_switch_cannot_reduce_is_a_one_line_error():
    from hcsim.workload import Workload, run

    topo = single_switch(4, 100e9, in_network_efficiency=0.85)
    w = Workload("j")
    w.collective("a", w.communicator("c", [0, 1, 2, 3]), "allreduce", 1 << 20, algorithm="nvls", reduce_op="prod",
                 dtype="fp32")
    with pytest.raises(HcsimError, match=r"^op 'a': reduce_op = 'prod': nvls reduces fp32 with sum only"):
        run(topo, w)


def test_cli_validate_takes_nccls_ll_cap_for_the_nvls_crossover(capsys):
    from pathlib import Path

    from hcsim.cli import main

    published = Path(__file__).resolve().parents[1] / "docs" / "data" / "published"
    args = ["validate", "--measured", str(published / "h100_8gpu_nccl_all_reduce_nvls.txt"), "--topology",
            str(published / "h100_8gpu_nvswitch.yaml")]
    assert main(args + ["--nccl-ll-max-gbps", "141"]) == 0
    row = [x for x in capsys.readouterr().out.splitlines() if x.split()[:3] == ["allreduce", "8", "1048576"]][0]
    assert row.split()[3] == "nvls"  # with the cap NCCL's tuner moves to NVLS below 1 MiB (0.94 MiB)
    assert main(args) == 0
    row = [x for x in capsys.readouterr().out.splitlines() if x.split()[:3] == ["allreduce", "8", "1048576"]][0]
    assert row.split()[3] == "ring"  # without it, LL at half the link: from 1.74 MiB
    assert main(args + ["--nccl-ll-max-gbps", "141", "--transport", "none"]) != 0
    assert "only with --transport nccl" in capsys.readouterr().err


def test_several_reducing_switch_planes_are_refused_not_run_at_one_planes_rate():
    # review finding: two planes of half the rate each gave NVLS half its rate, silently
    from hcsim.topology import Topology
    from hcsim.topology.spec import LinkSpec

    t = Topology("planes", "4 GPUs on two NVSwitch planes")
    for i in range(4):
        t.add_npu(f"npu{i}")
    for sw in ("sw0", "sw1"):
        t.add_node(sw, "switch", in_network_efficiency=0.85)
        for i in range(4):
            t.add_link(f"npu{i}", sw, LinkSpec(225e9, 0.0, "nvlink"))
    with pytest.raises(HcsimError, match=r"^algorithm nvls: the ranks share 2 switches that reduce in the network "
                                         r"\(sw0, sw1\); hcsim runs it through one"):
        hcsim.simulate(t, "allreduce", 1 << 30, "nvls")
    assert not shares_in_network_switch(t, t.npus)  # and best leaves it out
    assert hcsim.simulate(t, "allreduce", 1 << 30, "best").algorithm != "nvls"


@pytest.mark.parametrize("bad", [0.5, float("nan"), "2", True, np.float32(0.9)])
def test_a_bad_in_network_factor_is_a_one_line_error(bad):
    import dataclasses

    t = single_switch(4, 100e9, in_network_efficiency=0.85)
    s = dataclasses.replace(build_schedule("allreduce", "nvls", 4, 1 << 20), in_network_factor=bad)
    with pytest.raises(HcsimError, match=r"^schedule.in_network_factor = .*: a finite number >= 1, or one per step"):
        FlowSimulator(t, t.npus, s, EngineConfig())
    with pytest.raises(HcsimError, match=r"^schedule.in_network_factor = "):  # the analytical mode checks it too
        path_parameters(t, t.npus, s)


def test_in_network_factors_of_the_wrong_length_are_counted_not_printed():
    import dataclasses

    t = single_switch(4, 100e9, in_network_efficiency=0.85)
    s = build_schedule("allreduce", "nvls", 4, 1 << 20)
    bad = dataclasses.replace(s, in_network_factor=(1.0,) * (len(s.steps) + 1))
    with pytest.raises(HcsimError) as e:
        FlowSimulator(t, t.npus, bad, EngineConfig())
    assert str(e.value) == (f"schedule.in_network_factor: {len(s.steps) + 1} factors for {len(s.steps)} steps "
                            "(one per step, or one number)")


def test_numpy_and_list_factors_price_as_floats_do():
    """np.float32 / a list of one per step are the same factor as a float / a tuple (the engine's time)."""
    import dataclasses

    t = single_switch(4, 100e9, in_network_efficiency=0.85)
    s = build_schedule("allreduce", "nvls", 4, 1 << 20)
    times = [FlowSimulator(t, t.npus, dataclasses.replace(s, in_network_factor=f), EngineConfig()).run()
             for f in (1.5, np.float32(1.5), [1.5] * len(s.steps), (1.5,) * len(s.steps))]
    assert times[0] > FlowSimulator(t, t.npus, s, EngineConfig()).run()  # the factor costs time
    assert times == [times[0]] * 4


def test_the_chunk_cost_follows_nccls_chunk_sizes():
    """NCCL's chunk halves below 64, 8 and 2 chunks per concurrent operation (16 channels x p heads): the
    in-network bytes cost (1 + h/chunk) / (1 + h/128K), 1 at 128 KiB chunks."""
    from hcsim.algorithms.nvls import CHUNK_OVERHEAD_BYTES, chunk_factor

    h = CHUNK_OVERHEAD_BYTES
    for n, chunk in ((8 << 30, 128), (512 << 20, 64), (32 << 20, 32), (4 << 20, 16)):
        assert nccl_chunk_bytes(n, 8) == chunk * KIB
        assert chunk_factor(n, 8) == pytest.approx((1 + h / (chunk * KIB)) / (1 + h / (128 * KIB)))
    # the rate ratios it was measured and checked on (docs/validation.md change 46)
    assert 1 / chunk_factor(512 << 20, 8) == pytest.approx(256.9 / 274.3, abs=0.002)
    assert 1 / chunk_factor(32 << 20, 8) * 274.3 == pytest.approx(228, abs=1)


def test_a_sweep_of_every_algorithm_races_nvls_only_beside_its_switch():
    """sweep()'s default list (every registered algorithm) left NVLS in on topologies without an
    in-network switch, so a sweep of every allreduce algorithm on an Ascend server raised."""
    import hcsim
    from hcsim.topology.builders import single_switch

    for mode in ("analytical", "des"):
        plain = hcsim.sweep("atlas800t-a2", "allreduce", sizes=("1K", "4K"), mode=mode)
        assert "nvls" not in set(plain["algorithm"]) and plain["time_us"].notna().all()
        sharp = hcsim.sweep(single_switch(8, 450e9, in_network_efficiency=0.85), "allreduce", sizes=("1M", "2M"),
                            mode=mode)
        assert "nvls" in set(sharp["algorithm"])
    # a type the switch does not reduce: not raced there either
    df = hcsim.sweep(single_switch(8, 450e9, in_network_efficiency=0.85), "allreduce", sizes=("1M", "2M"),
                     mode="analytical", dtype="int8")
    assert "nvls" not in set(df["algorithm"])


def test_sweep_refuses_nvls_where_simulate_does_and_reads_type_spellings():
    """Review: the analytical fast path priced NVLS for a type the switch does not reduce (simulate() refuses it),
    and the default list compared the type's spelling literally."""
    import hcsim
    from hcsim.errors import ConfigError
    from hcsim.topology.builders import single_switch

    t = single_switch(8, 450e9, in_network_efficiency=0.85)
    for kw in (dict(dtype="int8"), dict(reduce_op="prod"), dict(dtype="fp32", reduce_op="max")):
        with pytest.raises(ConfigError):
            hcsim.simulate(t, "allreduce", 1 << 20, "nvls", mode="analytical", **kw)
        with pytest.raises(ConfigError):
            hcsim.sweep(t, "allreduce", ["1M", "2M"], algorithms=["nvls"], mode="analytical", **kw)
    for kw in (dict(dtype="float16"), dict(dtype="FP16"), dict(reduce_op="SUM"), dict(dtype="bfloat16", reduce_op="Max")):
        assert "nvls" in set(hcsim.sweep(t, "allreduce", ("1M", "2M"), mode="analytical", **kw)["algorithm"]), kw
