"""Scenario files (hcsim/scenario.py, scenarios/*.yaml, ``hcsim run``): every shipped scenario
loads and runs and gives a valid Chrome trace; the loader refuses each class of bad input in
one line naming the file and the field path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_metrics_trace import check_chrome_trace

from hcsim.cli import main
from hcsim.errors import HcsimError, WorkLimitError
from hcsim.scenario import Scenario, load_scenario, run_scenario
from hcsim.workload.trace import chrome_trace

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))

SMALL = {
    # scenario file stem -> (servers, overrides) making the same job small enough for make test
    "llm_910b_pod": (4, {"layout.dp": 1, "workload.params.micro_batches": 4, "model": "gpt3-1.3b"}),
    "moe_a3_superpod": (2, {"layout.dp": 4, "layout.ep": 4, "workload.params.micro_batches": 1,
                            "model.layers": 2}),
}
"""Scenarios too large for make test at their own size: what the test shrinks (the full size
runs from the CLI; docs/scenarios.md records its numbers)."""


def test_scenarios_exist():
    assert len(SCENARIOS) >= 3


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_scenario_loads_runs_and_traces(path):
    servers, overrides = SMALL.get(path.stem, (None, None))
    sc = load_scenario(path, servers=servers, overrides=overrides)
    assert isinstance(sc, Scenario) and sc.name and sc.description
    r = run_scenario(sc)
    assert r.step_time_s > 0
    assert set(r.ops["op"]) == {op.name for op in sc.workload.ops}
    s = r.ranks
    assert ((s["computation_us"] + s["communicationNotOverlapComputation_us"] + s["free_us"]
             - s["stepTime_us"]).abs() < 1e-6).all()
    doc = json.loads(json.dumps(chrome_trace(r, "npu"), allow_nan=False))
    check_chrome_trace(doc, r.step_time_s)
    check_chrome_trace(chrome_trace(r, "server", sc.topology), r.step_time_s)


# ---- hand-checked behaviour of the shipped explicit scenarios ----------------------------------

def test_acl_overlap_hides_the_allreduce_under_backward():
    r = run_scenario(REPO / "scenarios/acl_overlap_allreduce.yaml")
    t = r.op_times().set_index("op")
    ar = t.loc["allreduce_grad_buffer"]
    # the AllReduce starts when the last layers' gradients are recorded, beside the first layers' backward
    assert ar.start_s == pytest.approx(1.5e-3)
    assert t.loc["backward_first_layers"].start_s == pytest.approx(1.5e-3)
    # the optimizer waits for the AllReduce (the event), not just for the compute stream
    assert t.loc["optimizer_step"].start_s == pytest.approx(ar.end_s)
    s = r.ranks.loc[0]
    assert s.communicationNotOverlapComputation_us == pytest.approx(ar.duration_s * 1e6 - 1000.0)


def test_repeat_suffixes_names_and_events():
    sc = load_scenario(REPO / "scenarios/hcomm_primitives_dp_loop.yaml")
    names = [op.name for op in sc.workload.ops]
    assert "forward_backward#0" in names and "all_reduce_grads_sum#2" in names
    r = run_scenario(sc)
    t = r.op_times().set_index("op")
    # iteration 1's forward waits for iteration 0's last AllReduce (an event on the comm stream)
    assert t.loc["forward_backward#1"].start_s == pytest.approx(t.loc["all_reduce_grads_sum#0"].end_s)
    ops = {op.name: op for op in sc.workload.ops}
    assert {ops[f"all_reduce_{n}#0"].reduce_op for n in ("loss_sum", "overflow_max", "lr_min", "scale_prod")} == \
        {"sum", "max", "min", "prod"}
    assert ops["reduce_scatter_grads_avg#1"].reduce_op == "avg"


def test_alltoallv_size_from_the_send_matrix():
    sc = load_scenario(REPO / "scenarios/moe_alltoallv_910b.yaml")
    op = sc.workload.ops[1]
    assert op.send_matrix == ((32 << 20, 32 << 20), (32 << 20, 32 << 20))
    assert op.size_bytes == 64 << 20  # the mean per-rank send buffer


def _explicit(**extra):
    doc = {"name": "t", "description": "d", "topology": "atlas800t-a2",
           "workload": {"communicators": {"w": [0, 1, 2, 3]},
                        "ops": [{"kind": "compute", "name": "c", "ranks": "all", "duration_us": 10},
                                {"kind": "collective", "name": "ar", "comm": "w", "collective": "allreduce",
                                 "size": "1M"}]}}
    doc.update(extra)
    return doc


def test_mapping_options_and_overrides():
    sc = load_scenario(_explicit(options={"routing": "spray", "ecmp_seed": 3, "speed": {1: 0.5},
                                          "hccl": {"buffsize": "1M", "qps_per_connection": 2}}))
    assert sc.options["routing"] == "spray" and sc.options["speed"] == {1: 0.5}
    assert sc.options["hccl"].buffer_bytes == 1 << 20
    r = run_scenario(sc)
    c = r.ops[r.ops["op"] == "c"].set_index("rank")
    assert c.loc[1].end_s == pytest.approx(2 * c.loc[0].end_s)  # half as fast
    small = load_scenario(_explicit(), overrides={"workload.ops": [{"kind": "compute", "name": "x", "ranks": 0,
                                                                     "duration_us": 1}]})
    assert [op.name for op in small.workload.ops] == ["x"]
    assert load_scenario(sc) is sc


def test_topology_forms(tmp_path):
    (tmp_path / "topo").mkdir()
    (tmp_path / "topo" / "pair.yaml").write_text("builder: full_mesh\nparams: {n: 2, bandwidth_GBps: 10}\n")
    doc = {"topology": "topo/pair.yaml", "workload": {"ops": [{"kind": "send", "name": "s", "src": 0, "dst": 1,
                                                               "size": "1M"}]}}
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(doc))
    assert load_scenario(f).topology.num_npus == 2  # relative to the scenario, not the working folder
    inline = {**doc, "topology": {"builder": "full_mesh", "params": {"n": 3, "bandwidth_GBps": 10}}}
    assert load_scenario(inline).topology.num_npus == 3
    assert load_scenario({**doc, "topology": "atlas900-a2-pod", "servers": 2}).topology.num_npus == 16
    assert load_scenario({**doc, "topology": "atlas900-a2-pod"}, servers=3).topology.num_npus == 24
    assert f.stem == load_scenario(f).name


# ---- refusals: one per class of bad input ---------------------------------------------------------

def _refused(tmp_path, text, match, error=HcsimError, name="bad.yaml"):
    f = tmp_path / name
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(error) as info:
        load_scenario(f)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{f}: "), msg
    assert match in msg, msg
    return msg


def _yaml(doc) -> str:
    return yaml.safe_dump(doc)


def test_refuses_files_that_are_not_scenarios(tmp_path, monkeypatch):
    with pytest.raises(HcsimError, match="no such file"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(HcsimError, match="directory"):
        load_scenario(tmp_path)
    with pytest.raises(HcsimError, match="scenario"):
        load_scenario(42)
    _refused(tmp_path, b"name: \xff\xfe\n", "not UTF-8")
    _refused(tmp_path, "name: [unclosed\n", "not valid YAML")
    _refused(tmp_path, "", "an empty file")
    _refused(tmp_path, "- a\n- b\n", "expected a mapping")
    _refused(tmp_path, "a: &a [1, 2]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n"
             "d: &d [*c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d]\n"
             "f: &f [*e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
             "h: [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n",
             "aliases expand", WorkLimitError)
    import hcsim.topology.io as io

    monkeypatch.setattr(io, "MAX_FILE_BYTES", 64)
    _refused(tmp_path, "description: " + "x" * 100 + "\n", "larger than", WorkLimitError)


def test_refuses_unknown_keys_with_a_suggestion(tmp_path):
    msg = _refused(tmp_path, _yaml(_explicit(worklaod={})), "unknown key 'worklaod'")
    assert "did you mean 'workload'" in msg
    doc = _explicit()
    doc["workload"]["ops"][0]["duration_su"] = 3
    msg = _refused(tmp_path, _yaml(doc), "workload.ops[0]: unknown key 'duration_su'")
    assert "did you mean 'duration_us'" in msg
    _refused(tmp_path, _yaml(_explicit(options={"hccl": {"bufsize": "1M"}})), "did you mean 'buffsize'")
    _refused(tmp_path, _yaml(_explicit(report=["sumary"])), "did you mean 'summary'")


def test_refuses_missing_keys(tmp_path):
    _refused(tmp_path, _yaml({"topology": "atlas800t-a2"}), "missing key 'workload'")
    doc = _explicit()
    del doc["workload"]["ops"][1]["comm"]
    _refused(tmp_path, _yaml(doc), "workload.ops[1]: missing key 'comm'")
    doc = _explicit()
    doc["workload"]["ops"][0] = {"name": "x"}
    _refused(tmp_path, _yaml(doc), "missing key 'kind'")


@pytest.mark.parametrize("path, value, match", [
    ("ops.0.duration_us", "ten", "workload.ops[0].duration_us = 'ten'"),
    ("ops.0.duration_us", -1, "workload.ops[0].duration_us = -1"),
    ("ops.0.ranks", [0, 99], "workload.ops[0].ranks[1] = 99"),
    ("ops.0.ranks", [1, 1], "distinct ranks"),
    ("ops.1.size", -1, "workload.ops[1].size = -1"),
    ("ops.1.size", "1X", "workload.ops[1].size = '1X'"),
    ("ops.1.collective", "allreduse", "did you mean 'allreduce'"),
    ("ops.1.algorithm", "warp", "workload.ops[1].algorithm for allreduce = 'warp'"),
    ("ops.1.dtype", "fp99", "workload.ops[1].dtype = 'fp99'"),
    ("ops.1.reduce_op", "mean", "workload.ops[1].reduce_op = 'mean'"),
    ("ops.1.comm", "wrold", "did you mean 'world'"),
    ("ops.1.root", 9, "workload.ops[1].root = 9"),
    ("ops.1.after", ["later"], "workload.ops[1].after = 'later'"),
    ("ops.0.kind", "computer", "did you mean 'compute'"),
    ("repeat", 0, "workload.repeat = 0"),
    ("ops", [], "at least one operation"),
])
def test_refuses_bad_values_naming_the_field(tmp_path, path, value, match):
    doc = _explicit()
    doc["workload"]["communicators"] = {"world": [0, 1, 2, 3]}
    doc["workload"]["ops"][1]["comm"] = "world"
    node, parts = doc["workload"], path.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node[p]
    node[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    _refused(tmp_path, _yaml(doc), match)


@pytest.mark.parametrize("extra, match", [
    ({"options": {"speed": {8: 0.5}}}, "options.speed = 8"),
    ({"options": {"speed": {1: 0}}}, "options.speed.1 = 0"),
    ({"options": {"mode": "analytical"}}, "options.mode = 'analytical'"),
    ({"options": {"routing": "random"}}, "options.routing = 'random'"),
    ({"options": {"hccl": {"qps_per_connection": 9}}}, "options.hccl.qps_per_connection = 9"),
    ({"options": []}, "options = []"),
    ({"report": "summary"}, "report = 'summary'"),
    ({"servers": 0}, "servers = 0"),
    ({"topology": "atlas800t-a3"}, "topology = 'atlas800t-a3'"),
    ({"topology": {"builder": "ring", "params": {"n": 1, "bandwidth_GBps": 1}}}, "topology.params.n = 1"),
    ({"topology": 5}, "topology = 5"),
    ({"name": ""}, "name = ''"),
    ({"description": 3}, "description = 3"),
    ({"layout": {"tp": 2}}, "layout: only used by a generator workload"),
])
def test_refuses_bad_top_level_values(tmp_path, extra, match):
    _refused(tmp_path, _yaml(_explicit(**extra)), match)


def test_refuses_inconsistent_operations(tmp_path):
    doc = _explicit()
    doc["workload"]["ops"].append({"kind": "wait", "name": "w", "ranks": [0], "event": "never", "stream": "comm"})
    _refused(tmp_path, _yaml(doc), "before any record")
    doc = _explicit()
    doc["workload"]["ops"][1]["name"] = "c"
    _refused(tmp_path, _yaml(doc), "workload.ops[1].name = 'c': a name not used")
    doc = _explicit()
    doc["workload"]["ops"][1].update(collective="alltoallv", send_matrix=[[1, 2], [3, 4]])
    _refused(tmp_path, _yaml(doc), "workload.ops[1].send_matrix")
    doc["workload"]["ops"][1].update(collective="allreduce")
    _refused(tmp_path, _yaml(doc), "only taken by alltoallv")
    doc = _explicit()
    doc["workload"]["ops"].append({"kind": "send", "name": "s", "src": 1, "dst": 1, "size": 8})
    _refused(tmp_path, _yaml(doc), "workload.ops[2].dst = 1")
    doc = _explicit()
    doc["workload"]["repeat"] = 200_000
    _refused(tmp_path, _yaml(doc), "at most 200,000 operations", WorkLimitError)


def test_refuses_bad_generators(tmp_path):
    _refused(tmp_path, _yaml({"topology": "atlas800t-a2", "workload": {"generator": "warp_drive"}}),
             "workload.generator = 'warp_drive'")
    _refused(tmp_path, _yaml({"topology": "atlas800t-a2", "workload": {"generator": "x", "ops": []}}),
             "cannot be used with 'generator'")


def test_generator_scenarios(tmp_path):
    doc = {"topology": "atlas800t-a2", "layout": {"dp": 4}, "model": "resnet50",
           "workload": {"generator": "data_parallel", "params": {"batch": 32, "grad_dtype": "fp16"}}}
    sc = load_scenario(doc)
    assert sc.generator == "data_parallel" and sc.params == {"batch": 32, "grad_dtype": "fp16"}
    assert run_scenario(sc).step_time_s > 0
    bad = {**doc, "workload": {"generator": "data_parallel", "params": {"bacth": 32}}}
    _refused(tmp_path, yaml.safe_dump(bad), "workload.params.bacth = 32: not a parameter of generator "
             "'data_parallel' (did you mean 'batch'?)")
    bad = {**doc, "workload": {"generator": "data_parallel", "params": {"batch": 0}}}
    _refused(tmp_path, yaml.safe_dump(bad), "workload.params.batch = 0")
    bad = {**doc, "workload": {"generator": "data_parallel", "params": {"layout": {"dp": 2}}}}
    _refused(tmp_path, yaml.safe_dump(bad), "set it as the scenario's layout:")
    _refused(tmp_path, yaml.safe_dump({**doc, "layout": {"dp": 4, "order": "tp-ep"}}), "layout.order")
    _refused(tmp_path, yaml.safe_dump({**doc, "layout": {"dp": 0}}), "layout.dp = 0")
    _refused(tmp_path, yaml.safe_dump({**doc, "layout": {"dp": 16}}), "layout")
    _refused(tmp_path, yaml.safe_dump({**doc, "model": "resnet51"}), "model")


def test_refuses_bad_overrides():
    with pytest.raises(HcsimError, match="overrides"):
        load_scenario(_explicit(), overrides={"": 1})
    with pytest.raises(HcsimError, match="overrides"):
        load_scenario(_explicit(), overrides={"name.x": 1})


# ---- the command ------------------------------------------------------------------------------------

def test_cli_run(tmp_path, capsys):
    trace, plot, csv = tmp_path / "t.json", tmp_path / "t.png", tmp_path / "t.csv"
    assert main(["run", str(REPO / "scenarios/acl_overlap_allreduce.yaml"), "--trace", str(trace), "--plot",
                 str(plot), "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "step time: " in out and "allreduce_grad_buffer" in out and "commNotOverlapComp" in out
    check_chrome_trace(json.loads(trace.read_text()), float(out.split("step time: ")[1].split()[0]) * 1e-6)
    assert plot.stat().st_size > 1000 and csv.read_text().startswith("op,kind,rank,stream,start_s,end_s")


def test_cli_run_refuses_in_one_line(tmp_path, capsys):
    good = str(REPO / "scenarios/acl_overlap_allreduce.yaml")
    for argv, match in [([good, "--trace", str(tmp_path / "no" / "t.json")], "--trace"),
                        ([good, "--plot", str(tmp_path / "t.gif")], "--plot"),
                        ([good, "--trace-group", "rack"], "--trace-group"),
                        ([str(tmp_path / "none.yaml")], "no such file")]:
        assert main(["run", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("hcsim: error: ") and err.count("\n") == 1 and match in err, err


def test_hcsim_run_is_the_scenario_runner():
    import hcsim

    r = hcsim.run(REPO / "scenarios/moe_alltoallv_910b.yaml")
    assert r.step_time_s > 0 and r.name == "moe-alltoallv-910b"


def test_compute_by_flops_and_cli_set(capsys):
    doc = {"topology": "atlas800t-a2", "workload": {"ops": [
        {"kind": "compute", "name": "gemm", "ranks": [0], "flops": 1.0e+12, "dtype": "fp16"}]}}
    t = run_scenario(doc).step_time_s
    assert t == pytest.approx(2 * run_scenario(doc, overrides={"workload.ops": [
        {"kind": "compute", "name": "gemm", "ranks": [0], "flops": 5.0e+11, "dtype": "fp16"}]}).step_time_s)
    bad = {"topology": "atlas800t-a2", "workload": {"ops": [
        {"kind": "compute", "name": "gemm", "ranks": [0], "flops": 1, "duration_us": 3}]}}
    with pytest.raises(HcsimError, match="cannot be used with 'duration_us'"):
        load_scenario(bad)
    good = str(REPO / "scenarios/acl_overlap_allreduce.yaml")
    assert main(["run", good, "--set", "options.speed={0: 0.5}", "--max-rows", "0"]) == 0
    assert "step time: 5400.00 us" in capsys.readouterr().out  # rank 0's 2.7 ms of compute at half speed
    assert main(["run", good, "--set", "novalue"]) == 2
    assert main(["run", good, "--set", "options.speed={0: 0}"]) == 2
    assert "options.speed.0 = 0" in capsys.readouterr().err


def test_an_explicit_workload_too_large_to_plan_is_refused_before_it_is_expanded(tmp_path):
    # 1 x 2,000 repeats on 128 ranks: 256,000 operation ranks, 20 units each to plan, past the
    # job's bound (5M); the same file with 30 repeats loads them all
    doc = {"topology": "atlas900-a2-pod", "servers": 16,
           "workload": {"ops": [{"kind": "compute", "name": "c", "ranks": "all", "duration_us": 1}], "repeat": 2000}}
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(WorkLimitError, match=r"256,000 operation ranks, 20 units each to plan"):
        load_scenario(path)
    doc["workload"]["repeat"] = 30
    path.write_text(yaml.safe_dump(doc))
    assert len(load_scenario(path).workload.ops) == 30


def test_run_refuses_odd_arguments_in_one_line():
    import hcsim
    from hcsim.errors import ConfigError

    path = REPO / "scenarios" / "acl_overlap_allreduce.yaml"
    with pytest.raises(ConfigError, match=r"^keyword argument = 'foo': servers, overrides"):
        hcsim.run(path, foo=1)
    with pytest.raises(ConfigError, match=r"^scenario = 5: a YAML file path, a mapping or a Scenario"):
        hcsim.run(5)


def test_run_loaded_checks_a_given_scenarios_bound_and_a_whatif_charges_building_once(monkeypatch):
    import hcsim.limits
    import hcsim.whatif
    from hcsim.errors import ConfigError
    from hcsim.scenario import run_loaded
    from hcsim.topology import single_switch
    from hcsim.workload import Workload

    w = Workload("n")
    w.compute("c", [0, 1], duration_s=1e-3)
    for bad in ("x", [1], 0, -3, 1.5, True, np.float64(1e6)):
        with pytest.raises(ConfigError, match=r"^options.max_work = "):
            run_loaded(Scenario("n", "", "<x>", single_switch(4, 1e9), w, options={"max_work": bad}))
    built = []
    real = hcsim.limits.topology_work
    monkeypatch.setattr(hcsim.limits, "topology_work", lambda t, built_=False, **kw: (
        built.append(kw.get("built", built_)), real(t, kw.get("built", built_)))[1])
    doc = {"topology": "atlas800t-a2", "workload": {"ops": [
        {"kind": "compute", "name": "fwd", "ranks": [0, 1], "duration_us": 1000}]}}
    hcsim.whatif.whatif(doc, ["ecmp-seed=7", "straggler=1:2"])
    assert built == [True, False, False]  # the baseline built it; cases on the same topology do not
