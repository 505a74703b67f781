"""``hcsim calibrate --transport LIBRARY`` sets a two-point fit up as the public corpus does
(hcsim.corpus.transport_calibration; docs/validation.md, change 37): on an 8 x H100 server's NCCL
allreduce, NCCL's cited NVLink step and the launch fitted predict its allgathers, where the plain fit
(the floor taken as a per-step cost, no protocols) misses them by about half."""

from pathlib import Path

import pytest

from hcsim.cli import main

PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "data" / "published"


def _run(args, capsys):
    code = main(args)
    return code, capsys.readouterr()


@pytest.fixture
def h100(tmp_path):
    ar = PUBLISHED / "h100_8gpu_nccl_all_reduce_ring.txt"
    # the run forced NCCL_ALGO=RING (--algo ring): the topology's switch has NVLink SHARP, where NCCL's own choice is NVLS
    return (["calibrate", "--measured", str(ar), "--topology", str(PUBLISHED / "h100_8gpu_nvswitch.yaml"),
             "--fit", "bottleneck", "--algo", "ring", "--out", str(tmp_path / "cal.yaml")], tmp_path / "cal.yaml")


def _allgather_median(cal, capsys, extra=()):
    ag = PUBLISHED / "h100_8gpu_nccl_all_gather_ring.txt"
    code, out = _run(["validate", "--measured", str(ag), "--topology", str(cal), *extra], capsys)
    assert code == 0
    line = [x for x in out.out.splitlines() if "median |error|" in x][0]
    return float(line.split("median |error|")[1].split("%")[0])


def test_transport_sets_the_fit_up_as_the_corpus_does(h100, capsys):
    args, cal = h100
    code, out = _run(args + ["--transport", "nccl-nvlink", "--nccl-ll-max-gbps", "141"], capsys)
    assert code == 0 and "fitted for nccl-nvlink" in out.out and "step overhead 0.600 us" in out.out
    with_transport = _allgather_median(cal, capsys, ["--transport", "nccl-nvlink"])
    code, out = _run(args + ["--transport", "none"], capsys)
    assert code == 0 and "step overhead 0.600 us" not in out.out
    plain = _allgather_median(cal, capsys, ["--transport", "none"])
    assert with_transport < 10 < 40 < plain  # measured: 3.8% against 48.2%


def test_points_ends_fits_the_corpus_two_points(h100, capsys):
    args, cal = h100
    code, out = _run(args + ["--transport", "nccl-nvlink", "--nccl-ll-max-gbps", "141", "--points", "ends"], capsys)
    assert code == 0 and "on 2 points" in out.out
    assert _allgather_median(cal, capsys, ["--transport", "nccl-nvlink"]) < 10  # the rings that ran
    code, out = _run(args + ["--points", "ends", "--fit", "curve"], capsys)
    assert code != 0 and "--points ends" in out.err


@pytest.mark.parametrize("extra, needle", [
    (["--transport", "nccl"], "transport"),
    (["--transport", "nccl-nvlink junk"], "allowed"),
    (["--transport", "nccl-nvlink", "--fit", "tiers"], "only with --fit bottleneck"),
    (["--nccl-ll-max-gbps", "141", "--transport", "none"], "only with --transport nccl"),
    (["--transport", "nccl-net", "--nccl-ll-max-gbps", "-1"], "--nccl-ll-max-gbps"),
])
def test_bad_transport_arguments_are_one_line_errors(h100, capsys, extra, needle):
    args, _ = h100
    args = [a for a in args if a not in ("--fit", "bottleneck")] + (["--fit", "bottleneck"] if "--fit" not in extra
                                                                     else []) + extra
    code, out = _run(args, capsys)
    assert code != 0
    err = out.err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_validate_transport_predicts_rows_with_the_librarys_rule(tmp_path, capsys):
    from hcsim.corpus import open_mpi_fixed_rule

    osu = PUBLISHED / "alaska_ompi4_osu_allgather_64ranks.txt"
    out = tmp_path / "rows.csv"
    code, _ = _run(["validate", "--measured", str(osu), "--ranks", "64", "--topology",
                    str(PUBLISHED / "alaska_2nodes_edr_ib.yaml"), "--transport", "openmpi", "--max-work", "200000000",
                    "--csv", str(out)], capsys)
    assert code == 0
    import pandas as pd

    rows = pd.read_csv(out)
    want = [open_mpi_fixed_rule("allgather", int(n), 64) for n in rows.size_bytes]
    assert rows.algorithm.tolist() == want and len(set(want)) > 1  # the rule's own choices, more than one


@pytest.mark.parametrize("extra, needle", [
    (["--transport", "mpich"], "allowed"),
    (["--transport", "openmpi", "--algo", "ring"], "only with --algo auto"),
])
def test_validate_transport_bad_arguments(capsys, extra, needle):
    osu = PUBLISHED / "alaska_ompi4_osu_allgather_64ranks.txt"
    code, out = _run(["validate", "--measured", str(osu), "--ranks", "64", "--topology",
                      str(PUBLISHED / "alaska_2nodes_edr_ib.yaml")] + extra, capsys)
    assert code != 0 and len(out.err.strip().splitlines()) == 1 and needle in out.err


@pytest.mark.parametrize("cmd, extra", [
    ("calibrate", ["--transport", "openmpi", "--out", "x.yaml"]),
    ("calibrate", ["--points", "ends", "--out", "x.yaml"]),
    ("calibrate", ["--nccl-ll-max-gbps", "141", "--out", "x.yaml"]),
    ("validate", ["--transport", "openmpi"]),
])
def test_measured_file_options_are_refused_with_a_backend(tmp_path, capsys, monkeypatch, cmd, extra):
    monkeypatch.chdir(tmp_path)
    code, out = _run([cmd, "--backend", "mpi"] + extra, capsys)  # refused before any testbed is brought up
    assert code != 0 and len(out.err.strip().splitlines()) == 1
    assert "not with --backend" in out.err or "only with --measured" in out.err


def test_validate_takes_nccl_rows_as_nccl_on_an_nvlink_topology(capsys):
    # nccl-tests rows without --transport on an NVLink topology run what NCCL runs (a broadcast: the pipelined chain),
    # and the command says in one line which transport it took; --transport hccl gives HCCL's choice (the star)
    args = ["validate", "--measured", str(PUBLISHED / "a100_8gpu_superbench_nccl_broadcast.txt"), "--topology",
            str(PUBLISHED / "a100_8gpu_nvswitch.yaml")]
    code, out = _run(args, capsys)
    assert code == 0 and "chain" in out.out and "star" not in out.out
    assert "taken as --transport nccl-nvlink (the topology's ranks are linked by NVLink in one domain)" in out.out
    code, out = _run(args + ["--transport", "none"], capsys)
    assert code == 0 and "star" in out.out and "taken as" not in out.out
    # on a topology whose links say nothing of NVLink (MI300X's xGMI, a generic tier) the old line says what stood in
    code, out = _run(["validate", "--measured", str(PUBLISHED / "mi300x_8gpu_rccl_allreduce.txt"), "--topology",
                      str(PUBLISHED / "mi300x_8gpu_xgmi.yaml")], capsys)
    assert code == 0 and "predicted with HCCL's choice" in out.out


def test_calibrate_takes_nccl_rows_as_nccl_and_says_when_the_work_bound_stopped_the_fit(tmp_path, capsys):
    args = ["calibrate", "--measured", str(PUBLISHED / "a100_8gpu_superbench_nccl_all_reduce.txt"), "--topology",
            str(PUBLISHED / "a100_8gpu_nvswitch.yaml"), "--fit", "bottleneck", "--points", "ends",
            "--out", str(tmp_path / "t.yaml")]
    code, out = _run(args, capsys)
    assert code == 0 and "taken as --transport nccl-nvlink" in out.out and "fitted for nccl-nvlink" in out.out
    assert "work bound stopped" not in out.out
    code, out = _run(args + ["--transport", "none"], capsys)
    assert code == 0 and "taken as" not in out.out
    code, out = _run(args + ["--max-work", "40000"], capsys)  # a bound too small for the fit to settle
    assert code == 0 and "# the work bound stopped the fit before it settled (--max-work 40000" in out.out
