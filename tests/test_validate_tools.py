"""The pieces of validation that need no testbed: the probe-line fit, the fastest-algorithm
agreement, the Open MPI algorithm table, and the predicted-versus-measured plot."""

import numpy as np
import pandas as pd
import pytest

import hcsim
from hcsim.backends.mpi import MPI_ALGORITHMS, MpiBackend, fit_line_log, mpi_algorithms
from hcsim.validate import fastest_agreement


def test_probe_line_fit_recovers_a_line_and_weighs_points_by_ratio():
    n = np.array([4096, 16384, 65536, 262144, 1048576], float)
    c, s, rms = fit_line_log(n, 2e-4 + n / 11.8e6)
    assert c == pytest.approx(2e-4, rel=1e-9) and 1 / s == pytest.approx(11.8e6, rel=1e-9) and rms < 1e-12
    # the largest point 10% slow: on log time the fitted rate moves by about as much, no more
    t = 2e-4 + n / 11.8e6
    t[-1] *= 1.1
    c2, s2, _ = fit_line_log(n, t)
    assert 1 / s2 == pytest.approx(11.8e6, rel=0.12)


def test_fastest_agreement_counts_only_clear_winners():
    rows = []
    for size, (t_ring, t_hd), (p_ring, p_hd) in [(1024, (100, 200), (110, 150)),   # clear, agree
                                                  (2048, (100, 110), (300, 100)),   # within 15%: not counted
                                                  (4096, (300, 100), (100, 200))]:  # clear, disagree
        rows += [{"collective": "allreduce", "size_bytes": size, "algorithm": "ring", "time_us": t_ring,
                  "predicted_us": p_ring},
                 {"collective": "allreduce", "size_bytes": size, "algorithm": "hd", "time_us": t_hd,
                  "predicted_us": p_hd}]
    got = fastest_agreement(pd.DataFrame(rows))
    assert got[["size_bytes", "measured_fastest", "predicted_fastest", "agree"]].values.tolist() == [
        [1024, "ring", "ring", True], [4096, "hd", "ring", False]]


def test_two_open_mpi_algorithms_on_one_schedule_tie_rather_than_disagree():
    df = pd.DataFrame({"collective": ["allreduce"] * 3, "size_bytes": [1] * 3,
                       "mpi_algorithm": ["ring", "segmented_ring", "rabenseifner"], "algorithm": ["ring", "ring", "hd"],
                       "time_us": [100.0, 130.0, 200.0], "predicted_us": [90.0, 90.0, 150.0]})
    assert fastest_agreement(df)["agree"].tolist() == [True]


def test_open_mpi_table_maps_to_registered_hcsim_algorithms():
    from hcsim.algorithms import REGISTRY

    for a in MPI_ALGORITHMS:
        assert a.hcsim in REGISTRY[a.collective], a
    assert [a.name for a in mpi_algorithms("allreduce", ["rd"])] == ["recursive_doubling"]
    assert MpiBackend(None).algorithms("broadcast") == ["binomial", "chain", "linear"]
    with pytest.raises(hcsim.ConfigError, match="algos = 'warp'.*allowed: ring"):
        mpi_algorithms("allgather", ["warp"])
    with pytest.raises(hcsim.ConfigError, match="op = 'scatter'"):
        mpi_algorithms("scatter")


def test_cli_validate_measured_writes_the_plot(tmp_path, capsys):
    from pathlib import Path

    from hcsim.cli import main

    data = Path(__file__).resolve().parents[1] / "docs" / "data" / "published" / "ascend910b_8npu_measured.csv"
    out = tmp_path / "pvm.png"
    assert main(["validate", "--measured", str(data), "--topology", "atlas800t-a2", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert "median |error|" in capsys.readouterr().out


@pytest.mark.parametrize("stem, points, label, fastest", [
    ("8x100mbit_run5", 42, r"Run 5 \([^)]*\)", "7/7"), ("8x100mbit_run11", 42, r"Run 11 \([^)]*\)", "7/7"),
    ("8x100mbit_run14", 42, r"Run 14 \([^)]*\)", "7/7"), ("8x100mbit_2leaves_run14", 28, r"Leaf-spine run 14", "6/6"),
    ("8x100mbit_run16", 42, r"Run 16 \([^)]*\)", "8/8"), ("8x100mbit_run17", 42, r"Run 17 \([^)]*\)", "9/9"),
    ("8x100mbit_2leaves_run17", 28, r"Leaf-spine run 17", "7/7"), ("8x100mbit_run18", 42, r"Run 18 \([^)]*\)", "7/7"),
    ("8x100mbit_run19", 42, r"Run 19 \([^)]*\)", "8/9"), ("8x100mbit_run20", 42, r"Run 20 \([^)]*\)", "8/8"),
    ("8x100mbit_run21", 42, r"Run 21 \([^)]*\)", "8/9"), ("8x100mbit_2leaves_run21", 28, r"Leaf-spine run 21", "6/6")])
def test_stored_testbed_run_reproduces_the_figures_in_the_docs(stem, points, label, fastest):
    # docs/validation.md: the measured CSV and the topology calibrated in that run
    import re
    from pathlib import Path

    from hcsim.backends import load_measured
    from hcsim.validate import validate_measured

    root = Path(__file__).resolve().parent.parent
    df = validate_measured(load_measured(root / f"docs/data/validation_{stem}.csv"),
                           root / f"docs/data/testbed-{stem.replace('_', '-')}.yaml", min_size=65536)
    assert df.attrs["points"] == points
    # each row is predicted with the algorithm that ran, not HCCL's choice
    assert set(df["algorithm"]) >= {"rd", "rabenseifner", "bmtree", "pairwise", "nb"}
    doc = (root / "docs/validation.md").read_text()
    m = re.search(label + r": median \|error\| \*\*([\d.]+)%\*\*,\s+90th\s+percentile\s+([\d.]+)%", doc)
    assert m, f"docs/validation.md should state {stem}'s median and 90th percentile"
    assert round(df.attrs["median_abs_error"] * 100, 1) == float(m.group(1))
    assert round(df.attrs["p90_abs_error"] * 100, 1) == float(m.group(2))
    # and the "fastest" calls of the runs table (docs/validation.md) come out of the stored rows
    assert df.attrs["fastest_agreement"] == fastest


def test_validate_mpi_keeps_the_median_of_interleaved_rounds(monkeypatch):
    import contextlib

    import pandas as pd

    import hcsim.backends.mpi as mpi
    import hcsim.testbed as testbed
    from hcsim.errors import ConfigError
    from hcsim.validate import validate_mpi
    from tests.test_regimes import synthetic_probes

    fit = mpi.fit_probes(synthetic_probes(8, 11.8e6, 11.9e6, 21e6, 11.9e6, 40e-6, 2e-3, 0.9), 8)
    seen_rounds, order = [], []
    monkeypatch.setattr(testbed, "Testbed", lambda spec: contextlib.nullcontext(
        type("Tb", (), {"spec": spec, "hosts": [f"h{i}" for i in range(spec.hosts)]})()))
    monkeypatch.setattr(mpi, "fit_point_to_point", lambda tb, iterations, rounds: seen_rounds.append(rounds) or fit)
    # ring allgather: 10, 30 (a slow spell) and 12 ms; recursive doubling 20 ms every round
    per_round = {"ring": [10e3, 30e3, 12e3], "recursive_doubling": [20e3, 20e3, 20e3]}

    def fake_sweep(tb, op, sizes, algo, iterations):
        order.append(algo.name)
        t = per_round[algo.name][order.count(algo.name) - 1]
        return pd.DataFrame({"size_bytes": list(sizes), "time_us": [t] * len(sizes)})

    monkeypatch.setattr(mpi, "run_mpi_sweep", fake_sweep)
    df = validate_mpi("8x100mbit", ["allgather"], ["ring", "hd"], sizes=[262144], rounds=3)
    assert seen_rounds == [3]
    assert order == ["ring", "recursive_doubling"] * 3  # interleaved, not one algorithm's rounds in a row
    ring = df[df.mpi_algorithm == "ring"].iloc[0]
    assert (ring.time_us, ring.time_us_min, ring.time_us_max, ring.rounds) == (12e3, 10e3, 30e3, 3)
    assert ring.error == pytest.approx(ring.predicted_us / 12e3 - 1)
    # the median, not the slow round, decides which is faster
    assert df.attrs["fastest"].iloc[0].measured_fastest == "ring"
    # but ring's slow round (30 ms) overlaps recursive doubling's 20 ms: not a separated case
    first = df.attrs["fastest"].iloc[0]
    assert first.separated is not None and not first.separated
    assert (df.attrs["fastest_agreement"], df.attrs["fastest_agreement_separated"]) == ("1/1", "0/0")
    # with recursive doubling at 40 ms every round, ring's slowest round still wins: separated
    per_round["recursive_doubling"] = [40e3] * 3
    order.clear()
    df = validate_mpi("8x100mbit", ["allgather"], ["ring", "hd"], sizes=[262144], rounds=3)
    assert bool(df.attrs["fastest"].iloc[0].separated) and df.attrs["fastest_agreement_separated"] == "1/1"
    with pytest.raises(ConfigError, match="rounds = 0"):
        validate_mpi("8x100mbit", ["allgather"], ["ring"], rounds=0)


def test_bad_measured_and_testbed_arguments_are_one_line_errors_before_anything_runs():
    from pathlib import Path

    from hcsim.backends import load_measured
    from hcsim.backends.mpi import MpiBackend, check_iterations
    from hcsim.errors import ConfigError
    from hcsim.testbed import TestbedSpec, parse_testbed

    root = Path(__file__).resolve().parent.parent
    run = root / "docs/data/validation_8x100mbit_run17.csv"
    sample = root / "docs/data/published/hccl_test_sample.txt"
    with pytest.raises(ConfigError, match="collective = 'warp': unknown"):
        load_measured(run, "warp")
    with pytest.raises(ConfigError, match="op = 'scatter': .* has no scatter rows"):
        load_measured(run, "scatter")
    with pytest.raises(ConfigError, match="ranks = 0: an integer >= 2"):
        load_measured(run, ranks=0)
    assert set(load_measured(run, ranks=8)["ranks"]) == {8}
    with pytest.raises(ConfigError, match=r"op = 'alltoall': the file is allreduce output \(all_reduce_test\)"):
        load_measured(sample, "alltoall")
    with pytest.raises(ConfigError, match="ranks = 4: the ranks the file records"):
        load_measured(sample, ranks=4)
    with pytest.raises(ConfigError, match="uplink_mbit = 0.0"):
        parse_testbed("8x100mbit/2leaves/0mbit")
    with pytest.raises(ConfigError, match="uplink_mbit = -5"):
        TestbedSpec(8, 100.0, 2, -5)
    with pytest.raises(ConfigError, match="iterations = 0"):
        check_iterations(0)
    backend = MpiBackend(None)
    assert backend.check("allreduce", "rd", None, 5, 8).name == "recursive_doubling"
    with pytest.raises(ConfigError, match="ranks = 3: 8, the testbed's hosts"):
        backend.check("allreduce", "auto", 3, 5, 8)
    with pytest.raises(ConfigError, match="algos = 'warp'"):
        backend.check("allreduce", "warp", None, 5, 8)


def test_hccl_test_rows_are_predicted_with_hccls_choice_not_their_label():
    from pathlib import Path

    from hcsim.backends import load_measured
    from hcsim.validate import validate_measured

    sample = Path(__file__).resolve().parents[1] / "docs/data/published/hccl_test_sample.txt"
    rows = load_measured(sample)
    assert set(rows.algorithm) == {"hccl"}
    df = validate_measured(rows, "atlas800t-a2")
    assert len(df) == len(rows) and "hccl" not in set(df.algorithm)


def test_validate_measured_refuses_options_simulate_does_not_take_or_each_row_sets():
    from pathlib import Path

    import hcsim
    from hcsim.errors import ConfigError
    from hcsim.validate import validate_measured

    df = hcsim.backends.load_measured(Path(__file__).resolve().parents[1] / "docs" / "data" / "published"
                                      / "hccl_test_sample.txt")
    for kw in ({"ranks": 2}, {"nope": 1}):
        with pytest.raises(ConfigError, match=r"validate_measured\(\w+=\.\.\.\) = .*not an option here"):
            validate_measured(df, "atlas800t-a2", **kw)
