"""benchmarks/bench_vs_smpi.py: the SMPI platform and the hcsim topology describe the same star,
hcsim's side runs without SimGrid, a missing smpirun is a skip; with SimGrid installed, the two
simulators agree on p = 16 (slow)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_vs_smpi.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_vs_smpi", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_vs_smpi"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _unit(value: str, unit: str) -> float:
    assert value.endswith(unit), value
    return float(value[: -len(unit)])


@pytest.mark.parametrize("p", [2, 7, 16])
def test_platform_has_p_hosts_p_links_and_matches_hcsim(bench, p):
    root = ET.fromstring(bench.platform_xml(p).split("\n", 2)[2])  # past the XML and DOCTYPE lines
    (zone,) = root.findall("zone")
    assert zone.get("routing") == "Cluster"  # SimGrid's star zone: host -> its link up, down -> host
    hosts, links, host_links = zone.findall("host"), zone.findall("link"), zone.findall("host_link")
    assert len(hosts) == len(links) == len(host_links) == p
    host_ids = [h.get("id") for h in hosts]
    link_ids = {lk.get("id") for lk in links}
    assert len(set(host_ids)) == p and len(link_ids) == p
    assert bench.hostfile_text(p).split() == host_ids  # rank i on host i
    used = set()
    for hl in host_links:
        up, down = hl.get("up"), hl.get("down")
        assert hl.get("id") in host_ids
        assert up.endswith("_UP") and down.endswith("_DOWN") and up[:-3] == down[:-5]
        assert up[:-3] in link_ids and up[:-3] not in used  # a private link per host
        used.add(up[:-3])
    for lk in links:
        assert lk.get("sharing_policy") == "SPLITDUPLEX"  # full duplex, as hcsim's links

    topo = bench.hcsim_topology(p)
    assert topo.num_npus == p
    switches = [n for n, d in topo.graph.nodes(data=True) if d["kind"] != "npu"]
    assert len(switches) == 1
    assert topo.graph.number_of_edges() == 2 * p  # one link per NPU, both directions
    for npu in topo.npus:
        for a, b in ((npu, switches[0]), (switches[0], npu)):
            spec = topo.link_spec(a, b)
            for lk in links:
                assert spec.bandwidth_Bps == _unit(lk.get("bandwidth"), "Bps")
                # hcsim's latency is per hop; SimGrid sums its links' latencies: 2 per path in both
                assert spec.latency_s == _unit(lk.get("latency"), "s")


def test_case_steps_and_envelope(bench):
    ring = bench.Case("ring", 512, "ring", "lr")
    rab = bench.Case("rabenseifner", 1024, "rabenseifner", "rab_rdb")
    assert ring.steps() == 1022 and rab.steps() == 20
    assert bench.Case("rabenseifner", 12, "rabenseifner", "rab_rdb").steps() == 2 * 3 + 2
    assert ring.envelope_s() == pytest.approx(1022 * 16 / 25e9)


def test_hcsim_child_predicts_the_closed_form(bench):
    p = 16
    case = bench.Case("ring", p, "ring", "lr")
    out = subprocess.run(bench.hcsim_command(case), capture_output=True, text=True, check=True).stdout
    r = bench.parse_hcsim(out)
    n = bench.SIZE_BYTES
    expected = 2 * (p - 1) * (2 * bench.LATENCY_S + n / p / bench.BANDWIDTH_BPS)
    assert r["time_s"] == pytest.approx(expected, rel=1e-12)
    assert 0 <= r["simulate_s"] < 60 and r["import_s"] > 0


def test_parse_smpi_output(bench):
    out = ("hcsim-bench-smpi start_s=0 end_s=0.00013866239999999999\n"
           "[0.000143] [smpi_utils/INFO] Simulated time: 0.000142691 seconds. \n\n"
           "The simulation took 0.0358671 seconds (after parsing and platform setup)\n")
    r = bench.parse_smpi(out)
    assert r["time_s"] == pytest.approx(138.6624e-6) and r["simulate_s"] == pytest.approx(0.0358671)
    with pytest.raises(RuntimeError):
        bench.parse_smpi("nothing here")


def test_dry_run_writes_platforms_without_simgrid(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    assert bench.main(["--dry-run", "--hosts", "4", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "--cfg=network/model:CM02" in out and "--cfg=smpi/allreduce:rab_rdb" in out
    assert (tmp_path / "p4" / "hostfile").read_text().split() == [bench.host_name(i) for i in range(4)]
    assert "<host_link" in (tmp_path / "p4" / "platform.xml").read_text()


def test_missing_smpirun_skips(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    assert bench.main(["--quick"]) == 0
    assert "skipped" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("smpirun") is None or shutil.which("smpicc") is None,
                    reason="SimGrid SMPI (smpirun, smpicc) is not installed")
def test_smpi_and_hcsim_agree_on_16_hosts(bench, tmp_path):
    out = tmp_path / "rows.json"
    assert bench.main(["--hosts", "16", "--repeats", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {r["smpi_algorithm"] for r in rows} == {"lr", "rab_rdb"}
    for r in rows:
        assert abs(r["rel_diff"]) < 0.01, r
        assert r["smpi_us"] >= r["hcsim_us"]  # SMPI's envelope only adds
        assert abs(r["residual_rel"]) < 1e-6, r  # and is all the difference
