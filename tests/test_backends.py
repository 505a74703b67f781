"""The execution-backend interface: hccl and nccl runners, driven here by stand-in binaries
that print real recorded output (the official hccl_test sample; nccl-tests output posted in
coreweave/nccl-tests PR #43), so the command line, the environment and the parsing are
tested where no NPU or GPU exists; and the one-line skip where the hardware is absent."""

import os
import stat
from pathlib import Path

import pytest

import hcsim
from hcsim.backends import HcclBackend, NcclBackend, get_backend
from hcsim.backends.base import geometric

HERE = Path(__file__).resolve().parent
HCCL_SAMPLE = HERE.parent / "docs" / "data" / "published" / "hccl_test_sample.txt"
NCCL_SAMPLE = HERE / "data" / "nccl_tests_gb200_allreduce.txt"


def stand_in(directory: Path, name: str, sample: Path, env_var: str) -> Path:
    """An executable that records its arguments and ``env_var`` and prints ``sample``."""
    path = directory / name
    path.write_text(f'#!/bin/sh\necho "$@" > "{directory}/argv"\necho "${{{env_var}}}" > "{directory}/env"\n'
                    f'cat "{sample}"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_hccl_backend_runs_hccl_test_with_hccl_algo(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stand_in(bindir, "all_reduce_test", HCCL_SAMPLE, "HCCL_ALGO")
    # mpirun stand-in: drop "-n N" and run the binary with the rest
    launcher = tmp_path / "mpirun"
    launcher.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')
    launcher.chmod(0o755)
    b = HcclBackend(bin_dir=bindir, devices=8, mpirun=str(launcher))
    assert b.available() is None
    sizes = [8192 * 2**k for k in range(14)]
    df = b.run("allreduce", sizes, algorithm="ring", iterations=20)
    argv = (bindir / "argv").read_text().split()
    assert argv == ["-b", "8192", "-e", "67108864", "-f", "2", "-p", "8", "-d", "fp32", "-o", "sum", "-n", "20"]
    assert (bindir / "env").read_text().strip() == "level0:NA;level1:ring"
    assert list(df["size_bytes"]) == sizes
    assert df["time_us"].iloc[0] == 764.55 and df["time_us"].iloc[-1] == 2630.20
    assert set(df.columns) >= {"collective", "algorithm", "mode", "ranks", "size_bytes", "time_us", "busbw_GBps"}
    assert (df["collective"] == "allreduce").all() and (df["mode"] == "measured").all()
    # a bad HCCL_ALGO never reaches HCCL
    with pytest.raises(hcsim.ConfigError, match="level1"):
        b.run("allreduce", sizes, algorithm="level1:warp")


def test_nccl_backend_runs_nccl_tests_with_nccl_algo(tmp_path):
    stand_in(tmp_path, "all_reduce_perf", NCCL_SAMPLE, "NCCL_ALGO")
    b = NcclBackend(bin_dir=tmp_path, gpus=4)
    assert b.available() is None
    sizes = [512 << 20, 1 << 30, 2 << 30]
    df = b.run("allreduce", sizes, algorithm="Ring", ranks=4, iterations=5)
    assert (tmp_path / "argv").read_text().split() == ["-b", str(512 << 20), "-e", str(2 << 30), "-f", "2",
                                                       "-g", "4", "-n", "5"]
    assert (tmp_path / "env").read_text().strip() == "Ring"
    assert list(df["size_bytes"]) == sizes  # the larger rows printed are not kept
    assert list(df["time_us"]) == [1806.7, 3108.8, 5589.1]  # out-of-place, as printed
    with pytest.raises(hcsim.ConfigError, match="algorithm = 'Warp'"):
        b.run("allreduce", [8], algorithm="Warp")


def test_backends_say_in_one_line_why_they_cannot_run(tmp_path):
    missing = str(tmp_path / "missing")  # a folder that surely does not exist (not a fixed path someone may make)
    assert HcclBackend(bin_dir=missing, devices=0).available() == "no Ascend NPU found (/dev/davinci* absent)"
    assert "hccl_test not found" in HcclBackend(bin_dir=missing, devices=8).available()
    assert NcclBackend(bin_dir=missing, gpus=0).available() == "no NVIDIA GPU found (nvidia-smi lists none)"
    with pytest.raises(hcsim.ConfigError, match="backend nccl: no NVIDIA GPU"):
        NcclBackend(gpus=0).run("allreduce", [8])
    with pytest.raises(hcsim.ConfigError, match="backend = 'cuda'"):
        get_backend("cuda")


def test_geometric_size_lists():
    assert geometric([8, 16, 32, 64]) == (8, 64, 2)
    assert geometric([1024, 4096, 16384]) == (1024, 16384, 4)
    assert geometric([8, 20]) is None and geometric([8, 16, 24]) is None


@pytest.mark.skipif(os.path.exists("/dev/davinci0"), reason="an NPU is present")
def test_cli_measure_skips_in_one_line_without_an_npu(capsys):
    from hcsim.cli import main

    assert main(["measure", "--backend", "hccl", "--op", "allreduce", "-b", "8K", "-e", "64K"]) == 0
    out = capsys.readouterr()
    assert out.out.strip().startswith("backend hccl skipped:") and len(out.out.strip().splitlines()) == 1


@pytest.mark.skipif(os.path.exists("/dev/davinci0"), reason="an NPU is present")
def test_cli_validate_on_hardware_skips_in_one_line_without_an_npu(capsys):
    from hcsim.cli import main

    assert main(["validate", "--backend", "hccl", "--topology", "atlas800t-a2"]) == 0
    assert capsys.readouterr().out.strip().startswith("backend hccl skipped: no Ascend NPU")


def test_cli_validate_on_hardware_runs_every_forcible_algorithm_with_algos_all(tmp_path, monkeypatch, capsys):
    import hcsim.backends as backends
    from hcsim.cli import main

    bindir = tmp_path / "bin"
    bindir.mkdir()
    stand_in(bindir, "all_reduce_test", HCCL_SAMPLE, "HCCL_ALGO")
    launcher = tmp_path / "mpirun"
    launcher.write_text(f'#!/bin/sh\nshift 2\necho "$HCCL_ALGO" >> "{tmp_path}/algos"\nexec "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setattr(backends, "get_backend",
                        lambda name: HcclBackend(bin_dir=bindir, devices=8, mpirun=str(launcher)))
    assert main(["validate", "--backend", "hccl", "--topology", "atlas800t-a2", "--ops", "allreduce",
                 "--sizes", "8K,64M"]) == 0
    # HCCL's choice first (no HCCL_ALGO), then each hcsim algorithm for allreduce that HCCL_ALGO
    # can force, by its HCCL name (pairwise is alltoall's)
    ran = (tmp_path / "algos").read_text().splitlines()
    assert ran == ["", *(f"level0:NA;level1:{a}" for a in ("ring", "fullmesh", "H-D_R", "NHR", "NB", "pipeline",
                                                           "AHC"))]
    assert "median |error|" in capsys.readouterr().out


def test_hccl_algo_names_invert_hcsims_reading_of_them():
    from hcsim.backends.hccl import HCCL_ALGO_NAME
    from hcsim.hccl.algo_env import HCSIM_NAME, parse_hccl_algo

    for ours, theirs in HCCL_ALGO_NAME.items():
        assert HCSIM_NAME[theirs] == ours
        parse_hccl_algo(f"level0:NA;level1:{theirs}")  # HCCL accepts it
