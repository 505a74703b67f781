"""What-if perturbations against hand-worked timelines (hcsim.whatif, hcsim whatif)."""

import pytest

from hcsim.cli import main
from hcsim.errors import HcsimError, TopologyError
from hcsim.scenario import load_scenario
from hcsim.topology import leaf_spine, ring, single_switch
from hcsim.whatif import (
    BackgroundJob,
    DegradeLink,
    DegradeTier,
    EcmpSeed,
    FailLink,
    Straggler,
    parse_perturbation,
    perturb,
    whatif,
    whatif_collective,
)

MiB = 1 << 20


def _pairwise_alltoall_us(step_uplink_bytes, step_host_bytes, uplink_Bps, host_Bps):
    """A step ends when its slowest flow drains: the larger of uplink and host-link times."""
    return sum(max(u / uplink_Bps, h / host_Bps) for u, h in zip(step_uplink_bytes, step_host_bytes,
                                                                    strict=True)) * 1e6


def test_spine_link_failure_reroutes_and_doubles_the_bottleneck():
    """Pairwise alltoall of 64 MiB per rank on 2 leaves x 2 NPUs, 2 spines, 2:1 (uplinks 50 GB/s),
    spray routing. Each step every rank sends 16 MiB to rank r+k. Step 1 and 3: one flow per
    leaf crosses (16 MiB, split over 2 spines); step 2: both flows of a leaf cross (32 MiB).
    Healthy: a leaf's 2 uplinks share the crossing bytes; with leaf0-spine0 down, all of leaf0's
    crossing bytes take spine1 (and leaf1's come down through spine1 too)."""
    t = leaf_spine(2, 2, 2, 100e9, oversubscription=2.0)
    up, host = t.link_spec("leaf0", "spine0").bandwidth_Bps, 100e9
    assert up == 50e9
    block = 16 * MiB
    healthy = _pairwise_alltoall_us([block / 2, block, block / 2], [block] * 3, up, host)
    failed = _pairwise_alltoall_us([block, 2 * block, block], [block] * 3, up, host)
    df = whatif_collective(t, "alltoall", 64 * MiB, [FailLink("leaf0", "spine0")], algorithm="pairwise",
                           routing="spray")
    assert df["case"].tolist() == ["baseline", "fail-link=leaf0,spine0"]
    assert df["time_us"].iloc[0] == pytest.approx(healthy, rel=1e-9)
    assert df["time_us"].iloc[1] == pytest.approx(failed, rel=1e-9)
    assert df["delta_us"].iloc[1] == pytest.approx(failed - healthy, rel=1e-9)
    assert df["delta_pct"].iloc[1] == pytest.approx(100.0, rel=1e-9)


def test_failure_under_ecmp_moves_traffic_off_the_failed_link():
    t = leaf_spine(2, 4, 2, 100e9, oversubscription=2.0)
    df, runs = whatif_collective(t, "alltoall", 8 * MiB, ["fail-link=leaf1,spine1"], algorithm="pairwise",
                                 results=True)
    links = runs["fail-link=leaf1,spine1"].links
    assert not ((links["src"] == "leaf1") & (links["dst"] == "spine1")).any()
    crossed = links[links["dst"].astype(str).str.startswith("spine")]
    assert set(crossed[crossed["bytes"] > 0]["dst"]) == {"spine0"}  # leaf0 follows: spine1 cannot reach leaf1
    assert df["time_us"].iloc[1] > df["time_us"].iloc[0]
    # the original topology is untouched
    assert t.graph.has_edge("leaf1", "spine1") and t.graph.has_edge("spine1", "leaf1")


def test_a_cut_with_no_other_path_is_one_line():
    t = leaf_spine(2, 2, 2, 100e9)
    s = load_scenario({"topology": {"builder": "leaf_spine", "params": {"leaves": 2, "npus_per_leaf": 2, "spines": 2,
                                                                        "bandwidth_GBps": 100}},
                       "workload": {"communicators": {"all": "all"}, "ops": [
                           {"kind": "collective", "name": "ar", "comm": "all", "collective": "allreduce",
                            "size": "1M", "algorithm": "ring"}]}})
    with pytest.raises(TopologyError) as exc:
        perturb(s, ["fail-link=npu2,leaf1"])
    msg = str(exc.value)
    assert "\n" not in msg and "fail-link=npu2,leaf1" in msg and "npu2 (rank 2)" in msg
    df = whatif_collective(t, "allreduce", "1M", ["fail-node=leaf1"], algorithm="ring")
    assert df["status"].tolist() == ["ok", "error"] and "no path left" in df["reason"].iloc[1]


def test_cli_cut_error_and_table(capsys):
    rc = main(["whatif", "--topology", "atlas900-a2-pod", "--servers", "2", "--op", "allreduce", "-b", "1M",
               "-p", "fail-server=1", "-p", "straggler=3:1:50us", "-p", "fail-link=npu0,nic0"])
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.splitlines()
    assert lines[1].startswith("case") and lines[2].startswith("baseline")
    assert "error: fail-server=1: no path left between npu0 (rank 0) and npu8 (rank 8)" in out
    # npu0's NIC down: its cross-server traffic goes over HCCS to a neighbour's NIC (the graph's
    # routing lets any node forward), so the run completes, not faster than before
    nic = [line for line in lines if line.startswith("fail-link=npu0,nic0")][0]
    assert "| +" in nic and "error" not in nic
    straggler = [line for line in lines if line.startswith("straggler=3:1:50us")][0]
    assert "+50.00 " in straggler
    rc = main(["whatif", "--topology", "atlas900-a2-pod", "--op", "allreduce", "-b", "1M", "-p", "fail-link=npu0"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "fail-link=A,B" in err


def _ring_job(compute_us=1000.0, size=4_000_000):
    return {"topology": {"builder": "ring", "params": {"n": 4, "bandwidth_GBps": 1, "latency_us": 1}},
            "workload": {"communicators": {"all": "all"}, "ops": [
                {"kind": "compute", "name": "c", "ranks": "all", "duration_us": compute_us},
                {"kind": "collective", "name": "ar", "comm": "all", "collective": "allreduce", "size": size,
                 "algorithm": "ring", "after": ["c"]}]}}


def test_a_2x_straggler_delays_the_ring_by_its_extra_compute():
    """Ring allreduce of 4 MB on 4 ranks at 1 GB/s, 1 us per hop: 2(p-1) = 6 steps of 1 MB,
    each 1 ms + 1 us, after 1 ms of compute. A rank computing 2x slower enters 1 ms late, and
    every step's chain runs through it, so the whole ring ends exactly 1 ms later."""
    step = 1e6 / 1e9 + 1e-6
    base = 1e-3 + 6 * step
    df = whatif(_ring_job(), [Straggler(2, compute_factor=2.0), Straggler(0, late_start_s=250e-6),
                              "straggler=1:2:250us"])
    assert df["time_us"].iloc[0] == pytest.approx(base * 1e6, rel=1e-12)
    assert df["delta_us"].tolist()[1:] == pytest.approx([1000.0, 250.0, 1250.0], rel=1e-9)


def test_degrade_and_background_load_are_hand_worked():
    """A 10 MB send over one switch at 1 GB/s: 10 ms. Half the rate on the sender's link: 20 ms;
    0.25 GB/s of other traffic on it leaves 0.75 GB/s: 13.33 ms; 5 us more latency: 10.005 ms."""
    job = {"topology": {"builder": "single_switch", "params": {"n": 4, "bandwidth_GBps": 1}},
           "workload": {"ops": [{"kind": "send", "name": "s", "src": 0, "dst": 1, "size": 10_000_000}]}}
    df = whatif(job, ["degrade-link=npu0,sw0:0.5", "background-load=npu0,sw0:0.25GBps",
                      "degrade-link=npu0,sw0:1:5us"])
    assert df["time_us"].tolist() == pytest.approx([10_000.0, 20_000.0, 10_000.0 / 0.75, 10_005.0], rel=1e-9)


def test_background_job_shares_only_the_links_it_uses():
    """Another job on ranks 2,3 of a switch shares no link with a send 0 -> 1 (no change); on
    ranks 0,2 it shares npu0's uplink with the send for as long as both run."""
    job = {"topology": {"builder": "single_switch", "params": {"n": 4, "bandwidth_GBps": 1}},
           "workload": {"ops": [{"kind": "send", "name": "s", "src": 0, "dst": 1, "size": 10_000_000}]}}
    df = whatif(job, [BackgroundJob((2, 3), "allreduce", 20_000_000, algorithm="ring"),
                      BackgroundJob((0, 2), "allreduce", 20_000_000, algorithm="ring")])
    assert df["delta_us"].iloc[1] == 0.0
    # rank 0 sends 10 MB of the 2-rank ring's reduce-scatter step beside the send: both at 0.5 GB/s
    assert df["time_us"].iloc[2] == pytest.approx(20_000.0, rel=1e-9)


def test_ecmp_seed_and_degrade_tier():
    t = leaf_spine(2, 4, 4, 100e9, oversubscription=1.0)
    df = whatif_collective(t, "alltoall", "8M", [EcmpSeed(5), "degrade-tier=roce:0.5"], algorithm="pairwise")
    assert df["status"].tolist() == ["ok"] * 3
    assert df["time_us"].iloc[2] > df["time_us"].iloc[0]


def test_scenario_file_whatif_list_and_perturb_leaves_the_original_alone(tmp_path):
    doc = dict(_ring_job(), whatif=[{"straggler": 1, "compute_factor": 2}, "ecmp-seed=3",
                                    {"fail_link": ["npu0", "npu1"]}])
    s = load_scenario(doc)
    edges = s.topology.graph.number_of_edges()
    df = whatif(s, [])
    assert df["case"].tolist() == ["baseline", "straggler=1:2", "ecmp-seed=3", "fail-link=npu0,npu1"]
    assert df["delta_us"].iloc[1] == pytest.approx(1000.0, rel=1e-9)
    # a bidirectional ring cut once still connects: 0 -> 1 goes the long way round, sharing links
    assert df["status"].iloc[3] == "ok" and df["delta_us"].iloc[3] > 0
    assert s.topology.graph.number_of_edges() == edges and s.options == {}
    p = perturb(s, ["straggler=1:2"])
    assert p.options["speed"] == {1: 0.5} and s.options == {}


@pytest.mark.parametrize("text, needle", [
    ("fail-lnk=a,b", "did you mean 'fail-link'"),
    ("fail-link=a", "fail-link=A,B"),
    ("degrade-link=a,b:x", "a factor such as 0.5"),
    ("degrade-link=a,b:0", "rate factor from 1e-6"),
    ("straggler=x:2", "an integer from 0 to 2,147,483,647"),
    ("straggler=1:2:5", "a time with its unit"),
    ("background-load=a,b:lots", "a rate such as 10GBps"),
    ("background-job=0-3:allreduse:1M", "one of"),
    ("ecmp-seed=-1", "an integer from 0 to 4,294,967,295"),
    ("degrade-link=a,b:\u0660.5", "ASCII digits"),  # float() reads Arabic-Indic digits
    ("degrade-link=a,b:1_0", "a factor such as 0.5"),  # and underscores
    ("straggler=1:\u0661", "a factor such as 0.5"),
    ("fail-server=99999999999", "an integer from 0 to 2,147,483,647"),
])
def test_bad_text_is_one_line(text, needle):
    with pytest.raises(HcsimError) as exc:
        parse_perturbation(text)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("p, needle", [
    ("fail-link=leaf0,spin0", "did you mean 'spine0'"),
    ("fail-link=npu0,spine0", "no link joins npu0 and spine0"),
    ("degrade-tier=hccs:0.5", "a tier of topology"),
    ("background-load=npu0,leaf0:200GBps", "some must be left"),
    ("straggler=9:2", "a rank of the job, 0 to 3"),
    ("fail-server=7", "a server of topology"),
])
def test_names_checked_against_the_topology(p, needle):
    t = leaf_spine(2, 2, 2, 100e9)
    df = whatif_collective(t, "allreduce", "1M", [p], algorithm="ring")
    assert df["status"].iloc[1] == "error" and needle in df["reason"].iloc[1]


def test_mapping_and_text_forms_agree():
    pairs = [({"fail_link": ["a", "b"]}, "fail-link=a,b"),
             ({"degrade_link": ["a", "b"], "bandwidth_factor": 0.5, "extra_latency_us": 2}, "degrade-link=a,b:0.5:2us"),
             ({"straggler": 3, "compute_factor": 2, "late_start_us": 100}, "straggler=3:2:100us"),
             ({"background_job": [0, 1, 2, 3], "collective": "allgather", "size": "1M", "repeat": 2},
              "background-job=0-3:allgather:1M:2"),
             ({"background_load": ["a", "b"], "rate_GBps": 10}, "background-load=a,b:10GBps"),
             ({"ecmp_seed": 4}, "ecmp-seed=4"), ({"fail_server": 1}, "fail-server=1")]
    for mapping, text in pairs:
        assert parse_perturbation(mapping) == parse_perturbation(text)
        assert parse_perturbation(parse_perturbation(text).label()) == parse_perturbation(text)
    assert parse_perturbation(DegradeLink("a", "b", 0.5)) == parse_perturbation("degrade-link=a,b:0.5")


def test_unused_ranks_may_be_cut():
    """A cut that isolates an NPU the job never uses is fine."""
    t = single_switch(4, 1e9)
    df = whatif_collective(t, "allreduce", "1M", ["fail-node=npu3"], ranks=[0, 1, 2], algorithm="ring")
    assert df["status"].tolist() == ["ok", "ok"] and df["delta_us"].iloc[1] == 0.0
    assert ring(4, 1e9).num_npus == 4


def test_shipped_whatif_scenario():
    """scenarios/whatif_dp_pod.yaml: its whatif list runs; with spray routing a lost spine uplink
    or a lost spine is lost capacity on the crossing gradients, and halving every RoCE link
    slows the step too."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scenarios" / "whatif_dp_pod.yaml"
    df = whatif(path, [])
    assert (df["status"] == "ok").all() and len(df) == 6
    delta = dict(zip(df["case"], df["delta_us"], strict=True))
    assert delta["fail-link=leaf0_1,spine0"] > 0 and delta["fail-node=spine1"] > 0
    assert delta["degrade-tier=roce:0.5"] > 0 and delta["straggler=5:1.25"] > 0


def test_job_progress_bar_goes_to_stderr_only(capsys):
    """A forced bar counts the job's operations on stderr; auto is off under capture."""
    pytest.importorskip("tqdm")
    from hcsim.scenario import run_scenario

    job = _ring_job()
    s = load_scenario(job)
    from hcsim.workload import run

    a = run(s.topology, s.workload, progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "job scenario" in err and "/2 " in err  # two operations in all
    b = run_scenario(job)
    out, err = capsys.readouterr()
    assert out == "" and err == "" and a.step_time_s == b.step_time_s
    with pytest.raises(HcsimError, match="progress = 'yes'"):
        run(s.topology, s.workload, progress="yes")


def test_the_ecmp_seed_range_is_the_same_in_every_form():
    """hcsim.workload.run takes seeds 0 to 2^32 - 1; text, mappings and objects all do."""
    top = 2**32 - 1
    assert parse_perturbation(f"ecmp-seed={top}") == parse_perturbation({"ecmp_seed": top}) == EcmpSeed(top)
    for bad in (f"ecmp-seed={top + 1}", {"ecmp_seed": top + 1}, EcmpSeed(top + 1)):
        with pytest.raises(HcsimError, match="an integer from 0 to 4,294,967,295"):
            parse_perturbation(bad)


def test_parsing_an_object_leaves_it_as_it_was():
    p = BackgroundJob([0, 1], "allreduce", 1024)
    q = DegradeLink("a", "b", 1)
    assert parse_perturbation(p).ranks == (0, 1) and p.ranks == [0, 1]
    assert isinstance(parse_perturbation(q).bandwidth_factor, float) and isinstance(q.bandwidth_factor, int)


def test_one_collective_refuses_an_unknown_collective_or_option_in_one_line(capsys):
    t = single_switch(4, 1e9)
    with pytest.raises(HcsimError, match=r"^collective = 'nope': one of allreduce"):
        whatif_collective(t, "nope", "1M", ["ecmp-seed=1"])
    with pytest.raises(HcsimError, match=r"^options = 'rooting': an option of hcsim.workload.run: .*did you mean "
                       r"'routing'"):
        whatif_collective(t, "allreduce", "1M", ["ecmp-seed=1"], rooting="spray")
    assert main(["whatif", "--topology", "atlas800t-a2", "--op", "nope", "-b", "1M", "-p", "ecmp-seed=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hcsim: error: collective = 'nope'") and err.count("\n") == 1


def test_combined_changes_to_a_link_already_failed_are_no_error():
    """A whole spine down, and one of its links down (or degraded, or loaded) too: the link is
    down either way, so the combined case is the spine failure alone, not a 'no such link'."""
    t = leaf_spine(2, 2, 2, 100e9)
    df = whatif_collective(t, "alltoall", "1M", ["fail-node=spine1", "fail-link=leaf0,spine1",
                                                  "degrade-link=leaf0,spine1:0.5",
                                                  "background-load=leaf0,spine1:1GBps"],
                           algorithm="pairwise", combined=True)
    assert df["status"].tolist() == ["ok"] * 6
    assert df["time_us"].iloc[5] == df["time_us"].iloc[1]
    # a name the topology never had is still refused
    df = whatif_collective(t, "alltoall", "1M", ["fail-node=spine1", "fail-link=leaf0,spine9"], combined=True)
    assert df["status"].tolist() == ["ok", "ok", "error", "error"]
    assert df["reason"].iloc[3].startswith("perturbations[1] = 'spine9': a node of topology")


def test_two_seeds_in_one_case_and_repeated_perturbations_are_refused():
    t = single_switch(4, 1e9)
    df = whatif_collective(t, "allreduce", "1M", ["ecmp-seed=1", "ecmp-seed=2"], combined=True)
    assert df["status"].tolist() == ["ok", "ok", "ok", "error"]
    assert df["reason"].iloc[3] == ("perturbations[1] = 'ecmp-seed=2': one ECMP seed per case (perturbations[0] "
                                    "is ecmp-seed=1): each seed is another placement of flows, not a change to "
                                    "combine")
    with pytest.raises(HcsimError, match=r"^perturbations\[2\] = 'straggler=1:1:10us': a perturbation not given "
                       r"before \(it repeats perturbations\[0\]\)"):
        whatif_collective(t, "allreduce", "1M", ["straggler=1:1:10us", "ecmp-seed=1", {"straggler": 1,
                                                                                      "late_start_us": 10}])


def test_errors_name_the_perturbation_as_given():
    """A case's error names that perturbation's place in the list (or in the file's whatif:)."""
    t = single_switch(4, 1e9)
    df = whatif_collective(t, "allreduce", "1M", ["ecmp-seed=1", "straggler=9:2"])
    assert df["reason"].iloc[2] == "perturbations[1].rank = 9: a rank of the job, 0 to 3"
    df = whatif(dict(_ring_job(), whatif=["ecmp-seed=1", {"straggler": 7}]), [])
    assert df["reason"].iloc[2] == "whatif[1].rank = 7: a rank of the job, 0 to 3"


def test_flags_are_checked():
    t = single_switch(4, 1e9)
    for kw in ({"combined": "yes"}, {"results": 1}, {"progress": "no"}):
        with pytest.raises(HcsimError, match=rf"^{next(iter(kw))} = "):
            whatif_collective(t, "allreduce", "1M", ["ecmp-seed=1"], **kw)


def test_a_cut_is_found_on_a_communicator_with_a_quote_in_its_name():
    """The reachability check reads communicators from the operations (by object, not by
    parsing their quoted names back out of a message)."""
    from hcsim.workload import Workload

    t = single_switch(4, 1e9)
    w = Workload("quote")
    w.collective("ar", w.communicator("it's", (0, 1, 2)), "allreduce", 1 << 20, algorithm="ring")
    from hcsim.scenario import Scenario

    s = Scenario("quote", "", "<call>", t, w)
    with pytest.raises(TopologyError, match=r"no path left between npu0 \(rank 0\) and npu2 \(rank 2\) of "
                       r"communicator \"it's\""):
        perturb(s, ["fail-node=npu2"])


def test_a_late_start_off_the_critical_path_costs_nothing():
    """A 10 MB send 0 -> 1 at 1 GB/s (10 ms) beside 1 ms of compute on rank 2. Rank 2 starting
    100 us late still ends at 1.1 ms (no delay); 9.5 ms late it ends at 10.5 ms (+0.5 ms, the
    step is the latest end); rank 0 or 1 late delays the send by exactly that much."""
    job = {"topology": {"builder": "single_switch", "params": {"n": 4, "bandwidth_GBps": 1}},
           "workload": {"ops": [{"kind": "compute", "name": "c", "ranks": [2], "duration_us": 1000},
                                {"kind": "send", "name": "s", "src": 0, "dst": 1, "size": 10_000_000}]}}
    df = whatif(job, ["straggler=2:1:100us", "straggler=2:1:9500us", "straggler=0:1:100us", "straggler=1:1:100us",
                      "straggler=3:1:1s"])
    assert df["time_us"].iloc[0] == pytest.approx(10_000.0, rel=1e-12)
    assert df["delta_us"].tolist()[1:] == pytest.approx([0.0, 500.0, 100.0, 100.0, 0.0], abs=1e-6)


def test_a_failed_link_takes_the_two_hop_path():
    """A full mesh of 3 NPUs at 1 GB/s, 1 us per link: a 1 MB send 0 -> 1 takes 1 ms + 1 us; with
    link npu0 - npu1 down it goes through npu2: 1 ms + 2 us, both of its links carrying it."""
    job = {"topology": {"builder": "full_mesh", "params": {"n": 3, "bandwidth_GBps": 1, "latency_us": 1}},
           "workload": {"ops": [{"kind": "send", "name": "s", "src": 0, "dst": 1, "size": 1_000_000}]}}
    s = load_scenario(job)
    df, runs = whatif(s, ["fail-link=npu0,npu1", "degrade-tier=generic:0.5"], results=True)
    assert df["time_us"].tolist() == pytest.approx([1001.0, 1002.0, 2001.0], rel=1e-12)
    used = runs["fail-link=npu0,npu1"].links
    used = used[used["bytes"] > 0]
    assert sorted(zip(used["src"], used["dst"], strict=True)) == [("npu0", "npu2"), ("npu2", "npu1")]
    assert s.topology.graph.has_edge("npu0", "npu1")


def test_an_inelastic_load_leaves_exactly_the_rest_in_its_direction_only():
    """0.4 GB/s of other traffic on npu0 -> sw0 (1 GB/s) leaves 0.6 GB/s: a 6 MB send 0 -> 1
    takes 10 ms; the same load on sw0 -> npu0 (the other direction) changes nothing."""
    job = {"topology": {"builder": "single_switch", "params": {"n": 2, "bandwidth_GBps": 1}},
           "workload": {"ops": [{"kind": "send", "name": "s", "src": 0, "dst": 1, "size": 6_000_000}]}}
    df = whatif(job, ["background-load=npu0,sw0:0.4GBps", "background-load=sw0,npu0:0.4GBps"])
    assert df["time_us"].tolist() == pytest.approx([6000.0, 10_000.0, 6000.0], rel=1e-12)


def test_perturb_changes_nothing_it_was_given():
    """The topology's graph and compiled routes, the workload's operations and the options are
    the same objects with the same contents after every kind of perturbation."""
    s = load_scenario(dict(_ring_job(), options={"routing": "spray", "speed": {0: 1.0}}))
    compiled = s.topology.compiled()
    edges = {(u, v): spec for u, v, spec in s.topology.graph.edges(data="spec")}
    ops, comms, options = list(s.workload.ops), dict(s.workload.communicators), dict(s.options)
    p = perturb(s, ["fail-link=npu0,npu1", "degrade-tier=" + next(iter(edges.values())).tier + ":0.5",
                    "degrade-link=npu1,npu2:0.5:1us", "background-load=npu2,npu3:0.1GBps", "straggler=0:2:5us",
                    "background-job=2,3:allgather:1M:2", "ecmp-seed=9"])
    assert p.topology is not s.topology and p.workload is not s.workload and p.options is not s.options
    assert {(u, v): spec for u, v, spec in s.topology.graph.edges(data="spec")} == edges
    assert s.topology.compiled() is compiled
    assert s.workload.ops == ops and s.workload.communicators == comms and s.options == options
    assert p.options["speed"] == {0: 0.5} and p.options["start_s"] == pytest.approx({0: 5e-6}) and p.options["ecmp_seed"] == 9


@pytest.mark.parametrize("ranks, shown", [("0-", "'0-'"), ("", "''"), ("0,,1", "''"), ("3-0", "'3-0'"),
                                          ("0-\u0663", "'0-\u0663'"), ("a", "'a'")])
def test_bad_rank_text_quotes_the_piece_at_fault(ranks, shown, capsys):
    assert main(["whatif", "--topology", "atlas800t-a2", "--op", "allreduce", "-b", "1M", "-p", "ecmp-seed=1",
                 "--ranks", ranks]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hcsim: error: --ranks = {shown}: ") and err.count("\n") == 1


def test_rank_text_forms():
    from hcsim.whatif import _ranks_from_text

    assert _ranks_from_text("r", " 0-2, 5 ,7-7") == (0, 1, 2, 5, 7)
    assert parse_perturbation("background-job=0-2,5:allreduce:1M").ranks == (0, 1, 2, 5)


def test_numbers_as_float_wrote_them_but_ascii():
    assert parse_perturbation("straggler=1:2.") == parse_perturbation("straggler=1:2")
    assert parse_perturbation("degrade-tier=roce:.5:1.us") == DegradeTier("roce", 0.5, 1e-6)


def test_a_load_on_a_degraded_link_takes_from_the_degraded_rate_in_any_order():
    """1 GB/s at half rate carries 0.5 GB/s; 0.4 GB/s of other traffic leaves 0.1 GB/s: a 6 MB send
    takes 60 ms, listed either way round (not (1 - 0.4) x 0.5 = 0.3 GB/s, 20 ms)."""
    job = {"topology": {"builder": "single_switch", "params": {"n": 2, "bandwidth_GBps": 1}},
           "workload": {"ops": [{"kind": "send", "name": "s", "src": 0, "dst": 1, "size": 6_000_000}]}}
    for order in (["background-load=npu0,sw0:0.4GBps", "degrade-link=npu0,sw0:0.5"],
                  ["degrade-link=npu0,sw0:0.5", "background-load=npu0,sw0:0.4GBps"]):
        df = whatif(job, order, combined=True)
        assert df["time_us"].iloc[3] == pytest.approx(60_000.0, rel=1e-9)


def test_a_job_that_moves_no_bytes_has_no_busiest_link_and_no_percentage(tmp_path, capsys):
    path = tmp_path / "idle.yaml"
    path.write_text("topology: {builder: single_switch, params: {n: 4, bandwidth_GBps: 1}}\n"
                    "workload: {ops: [{kind: compute, name: c, ranks: [2], duration_us: 0}]}\n")
    df = whatif(path, ["straggler=2:1:5us"])
    assert df["busiest_link"].tolist() == ["", ""] and df["busiest_utilization"].tolist() == [0.0, 0.0]
    assert main(["whatif", str(path), "-p", "straggler=2:1:5us"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out and "npu0->sw0 0%" not in out
    assert "| 5.00    | +5.00    | -     | -            |" in out


def test_whatif_names_its_own_keywords():
    """servers and overrides are whatif's (they were **kwargs passed on, so routing= failed
    inside load_scenario); run options belong in the scenario."""
    with pytest.raises(TypeError, match=r"^whatif\(\) got an unexpected keyword argument 'routing'"):
        whatif(_ring_job(), ["ecmp-seed=1"], routing="spray")
    with pytest.raises(TypeError, match=r"^perturb\(\) got an unexpected keyword argument 'routing'"):
        perturb(_ring_job(), ["ecmp-seed=1"], routing="spray")
    df = whatif(_ring_job(), ["ecmp-seed=1"], overrides={"options.routing": "spray"})
    assert df["status"].tolist() == ["ok", "ok"]
