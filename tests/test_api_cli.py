"""The Python API and the CLI: shapes of results, and one-line errors with exit status 2."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import hcsim
from hcsim.cli import main
from hcsim.errors import ConfigError


def test_simulate_returns_a_result_with_bandwidths():
    r = hcsim.simulate("atlas800t-a2", "allreduce", "64MiB", algorithm="ring")
    assert r.time_s > 0 and r.ranks == 8 and r.size_bytes == 64 << 20
    assert r.algbw_GBps == pytest.approx((64 << 20) / r.time_s / 1e9)
    assert r.busbw_GBps == pytest.approx(r.algbw_GBps * 2 * 7 / 8)
    assert set(r.links.columns) >= {"src", "dst", "tier", "bytes", "utilization"}
    assert len(r.steps) == 14 and r.critical_path is not None


def test_busbw_factors_follow_nccl_tests():
    t = "atlas800t-a2"
    for coll, factor in (("allgather", 7 / 8), ("reducescatter", 7 / 8), ("alltoall", 7 / 8),
                         ("broadcast", 1.0), ("reduce", 1.0), ("sendrecv", 1.0)):
        r = hcsim.simulate(t, coll, "1M")
        assert r.busbw_GBps == pytest.approx(r.algbw_GBps * factor)


def test_sweep_returns_one_row_per_size_and_algorithm():
    df = hcsim.sweep("atlas800t-a2", "allreduce", sizes=("8", "1K"), algorithms=["ring", "mesh", "hd"])
    assert isinstance(df, pd.DataFrame) and len(df) == 8 * 3
    assert list(df.columns) == ["collective", "algorithm", "mode", "ranks", "size_bytes", "time_us",
                                "algbw_GBps", "busbw_GBps", "selected"]
    assert sorted(df["size_bytes"].unique()) == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert (df.groupby("algorithm")["time_us"].apply(lambda s: s.is_monotonic_increasing)).all()
    explicit = hcsim.sweep("atlas800t-a2", "allgather", sizes=["1K", "1M"], algorithms="mesh", mode="analytical")
    assert list(explicit["size_bytes"]) == [1024, 1 << 20]


def test_mesh_beats_ring_on_the_910b_full_mesh_and_analytical_agrees():
    from hcsim.topology import atlas800t_a2

    plain = atlas800t_a2()  # HCCL's constants, no per-NPU cap: contention-free for mesh
    des = hcsim.sweep(plain, "allgather", sizes=["1G"], algorithms=["ring", "mesh"]).set_index("algorithm")
    ana = hcsim.sweep(plain, "allgather", sizes=["1G"], algorithms=["ring", "mesh"],
                      mode="analytical").set_index("algorithm")
    assert des.loc["mesh", "time_us"] < des.loc["ring", "time_us"]
    assert des["time_us"].to_numpy() == pytest.approx(ana["time_us"].to_numpy(), rel=1e-9)
    # the calibrated server caps each NPU at 7 x 17.0 GB/s: mesh's 7 flows share it, the
    # analytical mode (one flow per link at 20.3 GB/s) does not see that
    cal_des = hcsim.simulate("atlas800t-a2", "allgather", "1G", "mesh")
    cal_ana = hcsim.simulate("atlas800t-a2", "allgather", "1G", "mesh", mode="analytical")
    assert cal_des.time_s > cal_ana.time_s * 1.15


def test_contention_shows_only_in_event_driven_mode():
    from hcsim.topology import single_switch

    t = single_switch(8, 25e9, 1e-6)
    des = hcsim.simulate(t, "allgather", "256M", "mesh")
    ana = hcsim.simulate(t, "allgather", "256M", "mesh", mode="analytical")
    # 7 flows share each NPU's single link: the event-driven run is 7x slower in its bandwidth term
    assert des.time_s / ana.time_s == pytest.approx(7, rel=0.01)


@pytest.mark.parametrize("kwargs,needle", [
    (dict(collective="allreduxe"), "collective = 'allreduxe'"),
    (dict(algorithm="nope"), "algorithm for allreduce = 'nope': unknown; known: <level0>/<level1>[/<level2>], ahc, "
                              "auto, best, double_ring, hd, mesh, multiring, nb, nhr, nvls, pipeline, rabenseifner, railring, rd, reduce_bcast, ring"),
    (dict(size=0), "size = 0"),
    (dict(size="1Q"), "size = '1Q'"),
    (dict(ranks=1), "ranks = 1"),
    (dict(ranks=["npu0", "npu42"]), "ranks = 'npu42'"),
    (dict(mode="fast"), "mode = 'fast'"),
    (dict(routing="random"), "routing = 'random'"),
    (dict(step_overhead_s=-1.0), "step_overhead_s = -1.0"),
    (dict(topology="nowhere"), "topology = 'nowhere'"),
    (dict(collective="broadcast", root=8), "root = 8"),
    (dict(algorithm="best", hccl_algo="level0:NA;level1:ring"), "'best' races every candidate"),
])
def test_api_errors_are_one_line(kwargs, needle):
    args = dict(topology="atlas800t-a2", collective="allreduce", size="1M", algorithm=None)
    args.update(kwargs)
    if args["collective"] == "broadcast":
        args["algorithm"] = "tree"
    with pytest.raises(ConfigError) as exc:
        hcsim.simulate(args.pop("topology"), args.pop("collective"), args.pop("size"), args.pop("algorithm"), **args)
    assert "\n" not in str(exc.value) and needle in str(exc.value)


def test_analytical_mode_needs_a_closed_form():
    from hcsim.algorithms import build_schedule

    def mine(args):
        return build_schedule("allgather", "ring", args.p, args.nbytes)

    with pytest.raises(ConfigError, match="closed form"):
        hcsim.simulate("atlas800t-a2", "allgather", "1M", mine, mode="analytical")


def test_cli_sweep_prints_hccl_test_table_and_writes_files(tmp_path, capsys):
    csv, png = tmp_path / "s.csv", tmp_path / "s.png"
    assert main(["sweep", "--topology", "atlas800t-a2", "--op", "allgather", "-b", "8K", "-e", "64K",
                 "--algo", "ring,mesh", "--csv", str(csv), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | bus_bandwidth(GB/s):" in out
    rows = [line for line in out.splitlines() if line.startswith("8192 ")]
    assert len(rows) == 3  # ring, mesh, fastest
    assert pd.read_csv(csv).shape[0] == 8 and png.stat().st_size > 5000


@pytest.mark.parametrize("argv,needle", [
    (["sweep", "--op", "allgatherx"], "collective = 'allgatherx'"),
    (["sweep", "--op", "allreduce", "-b", "0"], "min size = '0'"),
    (["sweep", "--op", "allreduce", "-b", "1M", "-e", "1K"], "max size"),
    (["sweep", "--op", "allreduce", "-f", "1"], "factor = 1"),
    (["sweep", "--op", "allreduce", "--topology", "nope"], "topology = 'nope'"),
    (["sweep", "--op", "allreduce", "--algo", "ring,foo"], "'foo'"),
    (["sweep", "--op", "allreduce", "--ranks", "99"], "ranks = 99"),
    (["sweep", "--op", "allreduce", "--ranks", "0,1,npu9"], "ranks = 'npu9'"),
    (["sweep", "--op", "allreduce", "--mode", "exact"], "mode = 'exact'"),
    (["topo", "show", "missing.yaml"], "topology = 'missing.yaml'"),
    (["algos", "--op", "gatherall"], "collective = 'gatherall'"),
])
def test_cli_bad_input_one_line_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hcsim: error: ") and "\n" not in err and needle in err


def test_cli_bad_yaml_and_no_traceback_via_console_script(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("npus: [{name: a}, {name: b}]\nlinks: [{src: a, dst: b, bandwidth_GBps: -1}]\n")
    proc = subprocess.run([sys.executable, "-m", "hcsim.cli", "sweep", "--op", "allreduce", "--topology", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "links[0].bandwidth_GBps = -1" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_topo_show_and_algos(tmp_path, capsys):
    assert main(["topo", "show", "atlas800t-a2", "--draw", str(tmp_path / "t.png")]) == 0
    out = capsys.readouterr().out
    assert "NPUs: 8" in out and "hccs" in out and "bisection" in out
    assert (tmp_path / "t.png").stat().st_size > 5000
    assert main(["algos"]) == 0
    out = capsys.readouterr().out
    for coll in hcsim.COLLECTIVES:
        assert coll in out
    assert main(["topo", "list"]) == 0
    assert "atlas800t-a2" in capsys.readouterr().out


def test_cli_select_prints_choice_best_candidates_and_crossovers(tmp_path, capsys):
    png, csv = tmp_path / "sel.png", tmp_path / "sel.csv"
    assert main(["select", "--topology", "atlas900-a2-pod", "--servers", "4", "--op", "allgather", "-b", "16K",
                 "-e", "64M", "-f", "16", "--plot", str(png), "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "hccl_choice" in out and "slowdown" in out and "# crossovers" in out
    df = pd.read_csv(csv)
    assert list(df["size_bytes"]) == [16384, 262144, 4194304, 67108864]  # 64M: 2 MB per rank, the pipeline
    assert (df["slowdown"] >= 1 - 1e-12).all()
    assert (df["hccl_choice"].iloc[-1], df["hccl_choice"].iloc[0]) == ("pipeline", "mesh/nhr")  # m = 4: NHR
    assert png.stat().st_size > 5000


def test_hccl_test_alg_bandwidth_convention_reproduces_the_sample():
    from hcsim.hccl.hccl_test import alg_bandwidth

    sample = Path(__file__).resolve().parents[1] / "docs" / "data" / "published" / "hccl_test_sample.txt"
    rows = [line.split("|") for line in sample.read_text().splitlines() if line[:1].isdigit()]
    assert len(rows) == 14
    for size, time_us, bw, _ in rows:
        assert f"{alg_bandwidth(int(size), float(time_us)):.5f}" == bw.strip()


def test_hccl_test_takes_p_npus_of_n_servers_of_a_given_topology(capsys):
    assert main(["hccl-test", "all_reduce_test", "-p", "4", "-n", "2", "-t", "atlas900-a2-pod", "-b", "64M",
                 "-e", "64M"]) == 0
    two_by_four = float(capsys.readouterr().out.splitlines()[2].split("|")[1])
    assert main(["hccl-test", "all_reduce_test", "-p", "8", "-n", "1", "-t", "atlas900-a2-pod", "-b", "64M",
                 "-e", "64M"]) == 0
    one_by_eight = float(capsys.readouterr().out.splitlines()[2].split("|")[1])
    assert two_by_four > one_by_eight  # 2 servers x 4 NPUs cross RoCE; 8 in one server do not


def test_cli_hccl_test_matches_hccl_test_format(capsys):
    sample = (Path(__file__).resolve().parents[1] / "docs" / "data" / "published" / "hccl_test_sample.txt")
    assert main(["hccl-test", "all_reduce_test", "-p", "8", "-b", "8K", "-e", "64M", "-f", "2", "-d", "fp32",
                 "-o", "sum"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "the minbytes is 8192, maxbytes is 67108864, iters is 20, warmup_iters is 5"
    if sample.is_file():
        real = [line for line in sample.read_text().splitlines() if not line.startswith(("#", "mpirun"))]
        assert out[:2] == real[:2]  # header lines identical
        assert len(out) == len(real)
        for mine, theirs in zip(out[2:], real[2:], strict=True):
            # same columns at the same offsets; only the numbers differ
            assert [i for i, ch in enumerate(mine) if ch == "|"] == [i for i, ch in enumerate(theirs) if ch == "|"]
            assert mine.split("|")[0] == theirs.split("|")[0] and mine.endswith("| success")


@pytest.mark.parametrize("argv,needle", [
    (["hccl-test", "all_reduce_tst"], "hccl_test binary = 'all_reduce_tst'"),
    (["hccl-test", "all_reduce_test", "-d", "fp33"], "-d = 'fp33'"),
    (["hccl-test", "all_reduce_test", "-o", "avg"], "-o = 'avg'"),
    (["hccl-test", "all_reduce_test", "-p", "16", "--topology", "atlas800t-a2"], "-n x -p = 16"),
    (["hccl-test", "all_reduce_test", "-b", "6", "-e", "6", "-d", "fp32"], "a multiple of 4 bytes"),
    (["select", "--op", "allreduce", "--hccl-algo", "level0:NA;level1:hd"], "'hd' is not an HCCL algorithm"),
    (["select", "--op", "allreduce", "--buffsize", "0"], "--buffsize = '0'"),
    (["hccl-test", "all_gather_test", "-b", "4", "-e", "4", "-d", "fp32"], "a multiple of 32 bytes (fp32 x 8 ranks)"),
    (["sweep"], "the following arguments are required: --op"),
    (["sweep", "--op", "allreduce", "-f", "x"], "invalid int value: 'x'"),
])
def test_cli_hccl_errors_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hcsim: error: ") and "\n" not in err and needle in err


def test_cli_best_across_servers_for_point_to_point(capsys):
    assert main(["sweep", "--op", "sendrecv", "--algo", "best", "-t", "atlas900-a2-pod", "--servers", "2",
                 "-b", "8", "-e", "8"]) == 0
    assert "algorithm best (ran: ring)" in capsys.readouterr().out


def test_cli_draw_refuses_a_topology_too_large_to_draw_in_one_line(tmp_path, capsys, monkeypatch):
    """Drawing costs about 30 us a link: past MAX_DRAW_LINKS it is refused before any drawing."""
    from hcsim import plot

    links = hcsim.load_topology("atlas800t-a2").graph.number_of_edges()
    monkeypatch.setattr(plot, "MAX_DRAW_LINKS", links - 1)
    png = tmp_path / "t.png"
    assert main(["topo", "show", "atlas800t-a2", "--draw", str(png)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"has {links:,} links, more than the {links - 1:,}" in err
    assert not png.exists()
    monkeypatch.setattr(plot, "MAX_DRAW_LINKS", links)
    assert main(["topo", "show", "atlas800t-a2", "--draw", str(png)]) == 0 and png.exists()
