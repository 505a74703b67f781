"""Capacity planning (hcsim.plan, hcsim plan): metrics against hand computation, invalid
points, strict axes, the CLI, Dask and the best policy."""

import itertools
import math
import random

import pandas as pd
import pytest

import hcsim
from hcsim.cli import main
from hcsim.errors import HcsimError
from hcsim.plan import (
    best_workload,
    npu_hours,
    pareto_front,
    plan,
    samples_per_step,
    scaling_efficiency,
    smallest,
    throughput,
)
from hcsim.scenario import load_scenario
from hcsim.workload import run
from hcsim.workload.metrics import totals

TINY_MODEL = {"name": "tiny", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000}

LLM = {
    "name": "tiny-llm",
    "topology": "atlas900-a2-pod",
    "servers": 1,
    "layout": {"tp": 2, "pp": 1},
    "model": TINY_MODEL,
    "workload": {"generator": "training_step",
                 "params": {"micro_batches": 2, "micro_batch": 2, "grad_dtype": "bf16", "optimizer": "adam"}},
}

EXPLICIT = {
    "name": "tiny-explicit",
    "topology": "atlas900-a2-pod",
    "servers": 1,
    "workload": {"communicators": {"world": "all"}, "ops": [
        {"kind": "compute", "name": "fwd", "ranks": "all", "duration_us": 500},
        {"kind": "collective", "name": "grad.ar", "comm": "world", "collective": "allreduce", "size": "4M",
         "after": ["fwd"]}]},
}


# ---- the metrics, by hand -----------------------------------------------------------------------

def test_metric_functions_by_hand():
    assert throughput(64, 0.5) == 128.0
    assert math.isnan(throughput(64, math.nan))
    assert npu_hours(128, 0.9) == pytest.approx(128 * 0.9 / 3600)
    assert samples_per_step("training_step", {"micro_batches": 4, "micro_batch": 2}, 8) == 64
    assert samples_per_step("training_step", {}, 2) == 8 * 1 * 2  # the generator's defaults: 8 x 1
    assert samples_per_step("data_parallel", {"batch": 16}, 4) == 64
    assert samples_per_step("tensor_parallel", {"micro_batch": 3}, 2) == 6
    assert math.isnan(samples_per_step(None, {}, 4))
    # smallest: fewest NPUs, then the shorter step, then the earlier point
    assert smallest([16, 8, 8, 8], [1.0, 3.0, 2.0, 2.0], [True, True, True, True]) == 2
    assert smallest([16, 8], [1.0, 3.0], [True, False]) == 0
    assert smallest([16, 8], [1.0, 3.0], [False, False]) is None
    # efficiency: per-NPU throughput over the smallest point's; NaN throughput -> steps per second
    assert scaling_efficiency([100.0, 160.0, math.nan], [8, 16, 32], [1.0, 1.0, 1.0], [True, True, False]) \
        [:2] == [1.0, 0.8]
    eff = scaling_efficiency([math.nan, math.nan], [8, 16], [2.0, 1.5], [True, True])
    assert eff == pytest.approx([1.0, (1 / 1.5 / 16) / (1 / 2.0 / 8)])


def _brute_pareto(time, cost, ok):
    out = []
    for i in range(len(time)):
        if not ok[i]:
            out.append(False)
            continue
        dominated = any(ok[j] and time[j] <= time[i] and cost[j] <= cost[i] and (time[j] < time[i] or cost[j] < cost[i])
                        for j in range(len(time)))
        out.append(not dominated)
    return out


def test_pareto_front_is_the_brute_force_front():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 12)
        time = [float(rng.randint(1, 6)) for _ in range(n)]  # small ranges: many ties
        cost = [float(rng.randint(1, 6)) for _ in range(n)]
        ok = [rng.random() < 0.8 for _ in range(n)]
        assert pareto_front(time, cost, ok) == _brute_pareto(time, cost, ok), (time, cost, ok)


# ---- a plan, checked row by row -----------------------------------------------------------------

@pytest.fixture(scope="module")
def llm_plan():
    calls = []

    def counting(*a, **k):
        calls.append(1)
        return run(*a, **k)

    mp = pytest.MonkeyPatch()
    mp.setattr(hcsim.workload, "run", counting)
    try:
        df = plan(LLM, {"servers": [1, 2], "tp": [2, 4, 16], "pp": [1, 3]}, target_step_ms=1e9,
                  price_per_npu_hour=2.5, progress=False)
    finally:
        mp.undo()
    return df, len(calls)


def test_plan_rows_match_hand_computation(llm_plan):
    df, runs = llm_plan
    assert df.columns[:5].tolist() == ["point", "servers", "tp", "pp", "npus"]
    assert df["point"].tolist() == list(range(12))
    # the Cartesian product in the order given, the last axis fastest
    assert list(zip(df["servers"], df["tp"], df["pp"], strict=True)) == list(
        itertools.product([1, 2], [2, 4, 16], [1, 3]))
    ok = df[df["status"] == "ok"]
    assert runs == len(ok) == 4  # pp 3 never divides 8 or 16 NPUs, tp 16 never fits a server
    for r in ok.itertuples():
        dp = r.npus // (r.tp * r.pp)
        s = load_scenario(LLM, servers=r.servers, overrides={"layout.tp": r.tp, "layout.pp": r.pp})
        direct = run(s.topology, s.workload, **s.options)
        assert r.step_time_ms == direct.step_time_s * 1e3
        mean = totals(direct.ranks).loc["mean"]
        assert r.compute_ms == pytest.approx(mean["computation_us"] / 1e3, rel=1e-12)
        assert r.exposed_comm_ms == pytest.approx(mean["communicationNotOverlapComputation_us"] / 1e3, rel=1e-12)
        assert r.free_ms == pytest.approx(mean["free_us"] / 1e3, rel=1e-12)
        assert r.samples_per_step == 2 * 2 * dp
        step_s = r.step_time_ms / 1e3
        assert r.samples_per_s == pytest.approx(r.samples_per_step / step_s, rel=1e-12)
        assert r.tokens_per_s == pytest.approx(r.samples_per_step * 128 / step_s, rel=1e-12)
        assert r.npu_hours_per_step == pytest.approx(r.npus * step_s / 3600, rel=1e-12)
        assert r.cost_per_step == pytest.approx(2.5 * r.npus * step_s / 3600, rel=1e-12)
    ref = ok.sort_values(["npus", "step_time_ms"]).iloc[0]
    for r in ok.itertuples():
        assert r.scaling_efficiency == pytest.approx((r.samples_per_s / r.npus) / (ref.samples_per_s / ref.npus))
    assert ok.loc[ref.name, "scaling_efficiency"] == 1.0
    assert df["pareto"].tolist() == _brute_pareto(df["step_time_ms"].tolist(), df["cost_per_step"].tolist(),
                                                   (df["status"] == "ok").tolist())


def test_invalid_points_are_reported_not_run(llm_plan):
    df, _ = llm_plan
    bad = df[df["status"] == "invalid"]
    assert len(bad) == 8
    for r in bad.itertuples():
        assert r.reason and "\n" not in r.reason
        assert math.isnan(r.step_time_ms) and math.isnan(r.cost_per_step)
        assert not r.pareto and not bool(r.meets_target)
    tp16 = bad[bad["tp"] == 16]
    assert tp16["reason"].str.startswith("tp = 16: a divisor of the 8 NPUs of one server").all()
    pp3 = bad[(bad["tp"] != 16) & (bad["pp"] == 3)]
    assert pp3["reason"].str.contains(r"does not divide the (?:8|16) NPUs").all()
    assert (df.loc[df["status"] == "ok", "reason"] == "").all()


def test_answer_is_the_fewest_npu_row_meeting_the_target(llm_plan):
    df, _ = llm_plan
    ok = df[df["status"] == "ok"]
    target = float(ok["step_time_ms"].median())
    again = plan(LLM, {"servers": [1, 2], "tp": [2, 4, 16], "pp": [1, 3]}, target_step_ms=target, progress=False)
    pd.testing.assert_series_equal(again["step_time_ms"], df["step_time_ms"])
    meets = [(r.status == "ok" and r.step_time_ms <= target) for r in df.itertuples()]
    assert again["meets_target"].tolist() == meets
    hits = [(r.npus, r.step_time_ms, r.point) for r in df.itertuples() if meets[r.point]]
    npus, step, point = min(hits)
    ans = again.attrs["answer"]
    assert ans["point"] == point
    assert ans["text"] == (f"smallest cluster with step time <= {target:g} ms: point {point}, "
                           f"{npus // 8} server{'s' if npus > 8 else ''} ({npus} NPUs), {step:.4g} ms")
    none = plan(LLM, {"tp": [2, 4]}, target_step_ms=1e-6, progress=False)
    assert none.attrs["answer"]["point"] is None
    assert none.attrs["answer"]["text"].endswith(f"no point meets it (fastest valid: {none['step_time_ms'].min():.4g} ms)")
    assert none["meets_target"].tolist() == [False, False]


def test_without_target_or_price():
    df = plan(EXPLICIT, {"servers": [1, 2]}, progress=False)
    assert df["meets_target"].isna().all() and str(df["meets_target"].dtype) == "boolean"
    assert df["cost_per_step"].isna().all() and df["samples_per_s"].isna().all()
    assert df["tokens_per_s"].isna().all()
    # the Pareto front is then time against NPU-hours; efficiency compares steps per second
    assert df["pareto"].tolist() == _brute_pareto(df["step_time_ms"].tolist(), df["npu_hours_per_step"].tolist(),
                                                  [True, True])
    s0, s1 = df["step_time_ms"]
    assert df["scaling_efficiency"].tolist() == pytest.approx([1.0, (1 / s1 / 16) / (1 / s0 / 8)])
    assert df.attrs["answer"]["question"] == "fastest point"


def test_collective_target_and_npus_axis():
    df = plan(EXPLICIT, {"npus": [8, 12, 16]}, target_collective_ms=0.3, collective="allreduce", progress=False)
    assert df["status"].tolist() == ["ok", "invalid", "ok"]
    assert df.loc[1, "reason"] == "npus = 12: a multiple of the 8 NPUs of one server"
    assert df.loc[[0, 2], "servers"].tolist() == [1, 2] and math.isnan(df.loc[1, "servers"])
    assert df["npus"].tolist() == [8, 12, 16]
    for i, servers in ((0, 1), (2, 2)):
        s = load_scenario(EXPLICIT, servers=servers)
        times = run(s.topology, s.workload).op_times()
        want = times.loc[times["op"] == "grad.ar", "duration_s"].max() * 1e3
        assert df.loc[i, "collective_ms"] == want
        assert df.loc[i, "meets_target"] == (want <= 0.3)
    assert df.columns.tolist().index("collective_ms") == df.columns.tolist().index("free_ms") + 1
    by_prefix = plan(EXPLICIT, {"npus": [8]}, collective="grad.", progress=False)
    assert by_prefix.loc[0, "collective_ms"] == df.loc[0, "collective_ms"]


# ---- strict axes ------------------------------------------------------------------------------

@pytest.mark.parametrize("space, start", [
    ({"oversubscription": [1, 2]}, "space.oversubscription = [1, 2]: not a parameter of topology 'atlas800t-a2'"),
    ({"servres": [1]}, "space.servres = [1]: not an axis (did you mean 'servers'?)"),
    ({"tp": [2]}, "space.tp = [2]: only for a generator workload"),
    ({"hccs_bandwidth_GBps": [-1]}, "space.hccs_bandwidth_GBps = -1: a number of GB/s > 0"),
    ({"servers": [0]}, "space.servers = 0: an integer from 1"),
    ({"servers": [1], "npus": [8]}, "space = ['npus', 'servers']: servers or npus, not both"),
    ({"policy": ["fastest"]}, "space.policy = 'fastest': one of auto, best"),
])
def test_bad_axes_are_one_line_errors(space, start):
    doc = {**EXPLICIT, "topology": "atlas800t-a2"}
    with pytest.raises(HcsimError) as e:
        plan(doc, space)
    assert str(e.value).startswith(start) and "\n" not in str(e.value)


def test_bad_generator_values_and_arguments():
    with pytest.raises(HcsimError, match=r"^space\.micro_batches = -1: a whole number"):
        plan(LLM, {"micro_batches": [2, -1]})
    with pytest.raises(HcsimError, match=r"^space\.grad_dtype = 'fp33': one of"):
        plan(LLM, {"grad_dtype": ["fp33"]})
    with pytest.raises(HcsimError, match=r"^target_step_ms = -5: a number > 0"):
        plan(LLM, {"tp": [2]}, target_step_ms=-5)
    with pytest.raises(HcsimError, match=r"^target_collective_ms = 1.0: needs collective"):
        plan(LLM, {"tp": [2]}, target_collective_ms=1)
    with pytest.raises(HcsimError, match=r"^collective = 'alltoall': a collective of the workload \(allreduce"):
        plan(EXPLICIT, {"servers": [1]}, collective="alltoall")


def test_odd_arguments_are_one_line_errors(tmp_path):
    import yaml

    with pytest.raises(HcsimError, match=r"^target_step_ms = 1000000000.*: a number > 0$"):
        plan(LLM, {"tp": [2]}, target_step_ms=10**400)  # too large for a float: not an OverflowError
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**LLM, "plan": {"space": {"tp": [2]}, "target_step_ms": "1e3"}}))
    with pytest.raises(HcsimError, match=r"plan\.target_step_ms = '1e3': a number > 0; YAML reads '1e3' as text"):
        plan(path)
    # a Scenario built from a mapping has no file to read again: say so, not 'no such file'
    with pytest.raises(HcsimError, match=r"^scenario = 'tiny-llm': a file or mapping \(a Scenario built from a "
                       r"mapping cannot be re-read"):
        plan(load_scenario(LLM), {"tp": [2]})
    # the same point twice, written two ways
    with pytest.raises(HcsimError, match=r"^space\.roce_bandwidth_GBps = \[10, 10\.0\]: distinct values"):
        plan(LLM, {"roce_bandwidth_GBps": [10, 10.0]})
    assert plan(LLM, {"overlap_grad_reduce": [True, False]}, progress=False)["status"].tolist() == ["ok", "ok"]
    # values as a range or an array are a list in their order; a set has no order
    import numpy as np

    df = plan(EXPLICIT, {"servers": np.arange(1, 3)}, progress=False)
    assert df["servers"].tolist() == [1, 2] and plan(EXPLICIT, {"servers": range(1, 3)}, progress=False).equals(df)
    with pytest.raises(HcsimError, match=r"^space\.servers = \{1, 2\}: a value or a list of values"):
        plan(EXPLICIT, {"servers": {1, 2}})


def test_collective_of_some_points_only():
    """A generator's workload changes with the point: send/recvs exist only where pp > 1, so
    collective sendrecv is asked about although the scenario as written (pp 1) has none."""
    df = plan(LLM, {"pp": [1, 2]}, collective="sendrecv", progress=False)
    assert df["status"].tolist() == ["ok", "ok"]
    assert math.isnan(df.loc[0, "collective_ms"]) and df.loc[1, "collective_ms"] > 0
    s = load_scenario(LLM, overrides={"layout.pp": 2})
    times = run(s.topology, s.workload, **s.options).op_times()
    assert df.loc[1, "collective_ms"] == times.loc[times["collective"] == "sendrecv", "duration_s"].max() * 1e3
    # at no point: refused in one line once the points have run
    with pytest.raises(HcsimError, match=r"^collective = 'sendrecv': a collective of the workload at some point "
                       r"\(none of the 1 valid point runs it; the scenario as written has a collective \(allreduce\)"):
        plan(LLM, {"pp": [1]}, collective="sendrecv", progress=False)
    with pytest.raises(HcsimError, match=r"^collective = 'sendrecv': a collective of the workload \(allreduce\)"):
        plan(EXPLICIT, {"servers": [1]}, collective="sendrecv")  # written-out operations: refused at once


def test_plan_section_gives_defaults_and_is_strict():
    doc = {**LLM, "plan": {"space": {"tp": [2, 4], "micro_batches": [1, 2]}, "target_step_ms": 1e9,
                           "price_per_npu_hour": 3.0}}
    df = plan(doc, progress=False)
    assert df.columns[1:3].tolist() == ["tp", "micro_batches"] and len(df) == 4
    assert (df["cost_per_step"] == df["npu_hours_per_step"] * 3.0).all()
    assert df["meets_target"].all()
    assert df["samples_per_step"].tolist() == [1 * 2 * 4, 2 * 2 * 4, 1 * 2 * 2, 2 * 2 * 2]
    with pytest.raises(HcsimError, match=r"plan: unknown key 'target_ms'"):
        plan({**LLM, "plan": {"space": {"tp": [2]}, "target_ms": 3}})
    with pytest.raises(HcsimError, match=r"^space = \{\}: at least one axis"):
        plan(LLM)


def test_plan_section_errors_name_the_file_and_field(tmp_path):
    import yaml

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**LLM, "plan": {"space": {"tp": [2], "bogus": [1]}, "policy": "auto"}}))
    with pytest.raises(HcsimError, match=rf"^{path}: plan\.space\.bogus = \[1\]: not an axis"):
        plan(path)
    path.write_text(yaml.safe_dump({**LLM, "plan": {"space": {"tp": [2]}, "target_step_ms": 0}}))
    with pytest.raises(HcsimError, match=rf"^{path}: plan\.target_step_ms = 0: a number > 0"):
        plan(path)
    path.write_text(yaml.safe_dump({**LLM, "plan": {"space": {"tp": [2]}, "target_step_ms": 3}}))
    with pytest.raises(HcsimError, match=r"^space\.bogus = \[1\]: not an axis"):  # an argument: no file field
        plan(path, {"bogus": [1]}, target_step_ms=1)
    # a file's value an argument replaces is still checked, and named as the file's
    for key, bad, argument, start in [
            ("space", {"bogus": [1]}, {"space": {"tp": [2]}}, r"plan\.space\.bogus = \[1\]: not an axis"),
            ("target_step_ms", -1, {"target_step_ms": 5}, r"plan\.target_step_ms = -1: a number > 0"),
            ("price_per_npu_hour", "2e0", {"price_per_npu_hour": 2}, r"plan\.price_per_npu_hour = '2e0': a number"),
            ("policy", "fastest", {"policy": "auto"}, r"plan\.policy = 'fastest': one of auto, best"),
            ("collective", 5, {"collective": "allreduce"}, r"plan\.collective = 5: a collective name")]:
        plan_section = {"space": {"tp": [2]}, key: bad}
        path.write_text(yaml.safe_dump({**LLM, "plan": plan_section}))
        with pytest.raises(HcsimError, match=rf"^{path}: {start}"):
            plan(path, **argument)


def test_global_batch_sets_micro_batches_or_is_invalid():
    df = plan(LLM, {"servers": [1, 2, 4], "global_batch": [16]}, progress=False)
    # tp 2 pp 1: dp = 4, 8, 16; micro_batch 2: micro-batches 2, 1, and 16 / (2 x 16) is not whole
    assert df["status"].tolist() == ["ok", "ok", "invalid"]
    assert df["samples_per_step"].tolist()[:2] == [16, 16]
    assert df.loc[2, "reason"] == "global_batch = 16: a multiple of micro_batch x dp = 2 x 16"
    # a topology parameter that changes the NPUs (6 per server) with tp x pp = 4: no dp, said so (was 'dp = 0')
    df = plan({**LLM, "layout": {"tp": 2, "pp": 2}}, {"npus_per_server": [6, 8], "global_batch": [16]},
              progress=False)
    assert df["status"].tolist() == ["invalid", "ok"]
    assert df.loc[0, "reason"] == "dp = 'auto': tp x pp = 4 does not divide the 6 NPUs"


# ---- policy best ----------------------------------------------------------------------------

ONE_COLLECTIVE = {
    "topology": "atlas900-a2-pod", "servers": 2,
    "workload": {"communicators": {"world": "all"}, "ops": [
        {"kind": "compute", "name": "fwd", "ranks": "all", "duration_us": 100},
        {"kind": "collective", "name": "ar", "comm": "world", "collective": "allreduce", "size": "1M",
         "after": ["fwd"]}]},
}


def test_policy_best_is_never_slower_and_shows_the_algorithm():
    df = plan(ONE_COLLECTIVE, {"policy": ["auto", "best"]}, progress=False)
    auto, best = df["step_time_ms"]
    assert best <= auto
    s = load_scenario(ONE_COLLECTIVE)
    w, choices = best_workload(s.topology, s.workload, **s.options)
    [c] = choices
    assert c["best_us"] <= c["auto_us"]
    plain = run(s.topology, s.workload, **s.options)
    raced = run(s.topology, w, **s.options)
    assert raced.step_time_s * 1e3 == best and plain.step_time_s * 1e3 == auto
    auto_algo = set(plain.ops.loc[plain.ops["op"] == "ar", "algorithm"])
    best_algo = set(raced.ops.loc[raced.ops["op"] == "ar", "algorithm"])
    assert auto_algo == {c["auto"]} and best_algo == {c["best"]}
    assert c["best"] != c["auto"]  # on 2 servers at 1 MiB a candidate beats HCCL's choice: the case tested
    assert best < auto
    assert df.attrs["algorithms"] == [f"allreduce={c['auto']}", f"allreduce={c['best']}"]
    assert s.workload.ops[1].algorithm == "auto"  # the given workload is not changed


# ---- the command line and Dask ----------------------------------------------------------------

def test_cli_prints_table_and_answer_and_writes_csv(tmp_path, capsys):
    import yaml

    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump({**LLM, "plan": {"space": {"servers": [1, 2]}, "target_step_ms": 1e9}}))
    csv = tmp_path / "plan.csv"
    assert main(["plan", str(path), "--vary", "servers=1,2", "--vary", "tp=2,16", "--price-per-npu-hour", "2",
                 "--csv", str(csv), "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"# plan of {path}: 4 points (2 invalid, not run), policy auto")
    assert [c.strip() for c in out[1].split("|")] == ["point", "servers", "tp", "npus", "status", "step ms",
                                                      "tokens/s", "efficiency", "exposed ms", "NPU-h/step", "cost",
                                                      "meets", "pareto", "reason"]
    rows = [[c.strip() for c in line.split("|")] for line in out[2:6]]
    assert [r[4] for r in rows] == ["ok", "invalid", "ok", "invalid"]
    assert rows[1][-1].startswith("tp = 16: a divisor of the 8 NPUs")
    df = pd.read_csv(csv)
    assert len(df) == 4 and df["status"].tolist() == ["ok", "invalid", "ok", "invalid"]
    assert float(rows[0][5]) == pytest.approx(df.loc[0, "step_time_ms"], rel=1e-3)
    answer = [line for line in out if line.startswith("answer: ")]
    # the answer's step time reads as the table's (4 significant figures below 100 ms)
    assert answer == [f"answer: smallest cluster with step time <= 1e+09 ms: point 0, 1 server (8 NPUs), {rows[0][5]} ms"]
    assert rows[0][5] == f"{df.loc[0, 'step_time_ms']:.4g}"
    assert "cost_per_step" in df.columns


@pytest.mark.parametrize("argv, start", [
    (["--vary", "servers"], "hcsim: error: --vary = 'servers': AXIS=V1,V2"),
    (["--vary", "servers=[1, 2"], "hcsim: error: --vary = 'servers=[1, 2': value '[1' is not YAML"),
    (["--vary", "servers=[1, {]"], "hcsim: error: --vary = 'servers=[1, {]': '[1, {]' is not a YAML list"),
    (["--vary", "servers=[1, 2]", "--vary", "bogus=[1]"], "hcsim: error: space.bogus = [1]: not an axis"),
    (["--vary", "foo=1"], "hcsim: error: space.foo = [1]: not an axis"),
    (["--vary", "tp=2", "--policy", "fast"], "hcsim: error: policy = 'fast': one of auto, best"),
    (["--vary", "tp=2", "--policy", ""], "hcsim: error: policy = '': one of auto, best"),  # not auto silently
    # nested past the parser's depth: a RecursionError from PyYAML's composer before
    (["--vary", "servers=" + "[" * 3000 + "]" * 3000], "hcsim: error: --vary = 'servers=[[[["),
    (["--vary", "tp=2", "--set", "global_batch=" + "[" * 3000 + "]" * 3000],
     "hcsim: error: --set = 'global_batch=[[[["),
    # values Python will not build: an int past 4,300 digits (ValueError), a date that does not exist
    (["--vary", "tp=2", "--set", "global_batch=" + "1" * 4301], "hcsim: error: --set = 'global_batch=1111"),
    (["--vary", "tp=2", "--set", "global_batch=2001-02-30"], "hcsim: error: --set = 'global_batch=2001-02-30'"),
    (["--vary", "servers=[" + "1" * 4301 + "]"], "hcsim: error: --vary = 'servers=[1111"),
])
def test_cli_bad_input_is_one_line(tmp_path, capsys, argv, start):
    import yaml

    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump(LLM))
    assert main(["plan", str(path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(start) and err.count("\n") == 1


def test_dask_local_cluster_gives_the_identical_frame():
    pytest.importorskip("distributed")
    from hcsim.parallel import dask_client

    space = {"servers": [1, 2], "tp": [2, 16], "policy": ["auto", "best"]}
    serial = plan(LLM, space, target_step_ms=1e9, price_per_npu_hour=2.0, progress=False)
    with dask_client(workers=2) as client:
        parallel = plan(LLM, space, target_step_ms=1e9, price_per_npu_hour=2.0, client=client, progress=False)
    pd.testing.assert_frame_equal(serial, parallel, check_exact=True)
    assert serial.attrs == parallel.attrs


def test_hcsim_plan_is_callable_after_the_module_is_imported():
    import hcsim.plan  # noqa: F401  (sets the package's attribute to the module)

    df = hcsim.plan(EXPLICIT, {"servers": [1]}, progress=False)
    assert df["status"].tolist() == ["ok"]


def test_cli_plots(tmp_path, capsys):
    import yaml

    path = tmp_path / "explicit.yaml"
    path.write_text(yaml.safe_dump(EXPLICIT))
    png, scaling = tmp_path / "pareto.png", tmp_path / "scaling.png"
    assert main(["plan", str(path), "--vary", "servers=1,2", "--plot", str(png), "--plot-scaling", str(scaling),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"# Pareto plot written to {png}" in out and png.stat().st_size > 0
    # written-out operations: step time and efficiency (the throughput panel says there is none)
    assert f"# scaling plot written to {scaling}" in out and scaling.stat().st_size > 0
    png.unlink()
    scaling.unlink()
    # every point invalid: the table and the answer, and a note instead of the pictures (exit 0)
    assert main(["plan", str(path), "--vary", "npus=4,12", "--plot", str(png), "--plot-scaling", str(scaling),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "answer: fastest point: no valid point (all 2 invalid)" in out
    assert "# --plot: nothing drawn, no valid point" in out and not png.exists()
    assert "# --plot-scaling: nothing drawn, no valid point" in out and not scaling.exists()
