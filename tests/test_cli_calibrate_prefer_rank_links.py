"""``hcsim calibrate --prefer-rank-links`` passes ``calibrate(..., prefer_rank_links=True)``
(docs/validation.md, change 10): on two points that cannot tell the ranks' own links from the
NIC, the ranks' links are fitted and the NIC keeps its rate; without the flag the NIC is fitted."""

import pandas as pd
import pytest

import hcsim
from hcsim.calibrate import class_scaled
from hcsim.cli import main
from hcsim.topology import leaf_spine
from hcsim.topology.io import save_topology


@pytest.fixture
def cpu_cluster(tmp_path):
    # two 4-rank nodes whose 5 GB/s NIC is slower as built than each rank's 10 GB/s link; the
    # points come from the ranks' own links at x0.2 (tests/test_calibrate_bottleneck.py)
    base = leaf_spine(2, 4, 1, 10e9, oversubscription=8.0, tier="roce")
    truth = class_scaled(base, ("roce", 10e9), 0.2, 3e-6)
    pts = pd.DataFrame({"collective": "allreduce", "algorithm": "ring", "size_bytes": [64, 64 << 20]})
    pts["time_us"] = [hcsim.simulate(truth, "allreduce", n, "ring").time_us for n in pts.size_bytes]
    topo, measured = tmp_path / "base.yaml", tmp_path / "m.csv"
    save_topology(base, topo)
    pts.to_csv(measured, index=False)
    return ["calibrate", "--measured", str(measured), "--topology", str(topo), "--fit", "bottleneck",
            "--out", str(tmp_path / "fitted.yaml")]


def test_flag_fits_the_ranks_links_and_keeps_the_nic(cpu_cluster, tmp_path, capsys):
    assert main(cpu_cluster + ["--prefer-rank-links"]) == 0
    out = capsys.readouterr().out
    assert "roce@10GBps x0.2" in out and "roce@5GBps" not in out and "ranks' own links preferred" in out
    fitted = hcsim.load_topology(str(tmp_path / "fitted.yaml"))
    assert fitted.link_spec("leaf0", "spine0").bandwidth_Bps == 5e9  # the NIC as built
    assert main(cpu_cluster) == 0  # without the flag: the NIC, as before
    out = capsys.readouterr().out
    assert "roce@5GBps x0.4" in out and "preferred" not in out


def test_flag_is_refused_where_it_cannot_apply(cpu_cluster, capsys):
    tiers = [c if c != "bottleneck" else "tiers" for c in cpu_cluster]
    assert main(tiers + ["--prefer-rank-links"]) != 0
    assert "prefer_rank_links" in capsys.readouterr().err
    assert main(["calibrate", "--backend", "mpi", "--prefer-rank-links", "--out", cpu_cluster[-1]]) != 0
    assert "--prefer-rank-links" in capsys.readouterr().err
