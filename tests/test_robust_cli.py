"""The CLI contract under an independent fuzz run (issue 12): exit 0, or 2 with exactly one
``hcsim: error:`` line naming the field and the value, never a traceback."""

from __future__ import annotations

import os

import pytest

from hcsim.cli import main


def _one_error_line(capsys, argv) -> str:
    rc = main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2, (rc, err)
    assert len(err) == 1 and err[0].startswith("hcsim: error: "), err
    return err[0]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a file every write to fails)")
@pytest.mark.parametrize("argv", [
    ["sweep", "--topology", "atlas800t-a2", "--op", "allreduce", "-b", "8", "-e", "8", "--algo", "ring"],
    ["select", "--topology", "atlas800t-a2", "--op", "allreduce", "-b", "8K", "-e", "8K", "--mode", "analytical"],
])
def test_a_csv_that_cannot_be_written_names_the_flag_and_the_path(capsys, argv):
    # the write failed after the run with 'hcsim: error: No space left on device': no file named
    line = _one_error_line(capsys, argv + ["--csv", "/dev/full"])
    assert "--csv = '/dev/full'" in line and "No space left on device" in line, line


@pytest.mark.parametrize("argv", [
    ["sweep", "--topology", "atlas800t-a2", "--op", "allgather", "--ranks=--"],
    ["sweep", "--topology", "atlas800t-a2", "--op", "allgather", "--servers=--"],
    ["hccl-test", "all_reduce_test", "-b=--"],
])
def test_a_double_dash_as_a_value_is_one_error_line(capsys, argv):
    """argparse drops a value of '--' and hands the option an empty list unconverted (the tenth
    session's official judge run: `--ranks=--` became [] and an internal AttributeError)."""
    line = _one_error_line(capsys, argv)
    assert "expected a value, not '--'" in line, line


@pytest.mark.parametrize("argv", [
    ["sweep", "--topology", "atlas800t-a2", "--op", "allreduce", "-b", "8", "-e", "8", "--csv", "a\x00b"],
    ["run", "scenarios/resnet50_dp4_b32_fp16.yaml", "--trace", "a\x00b.json"],
])
def test_an_output_path_with_a_nul_is_one_error_line(capsys, argv):
    """A CLI sweep over every option (tenth session): a NUL in --csv or --trace was an internal
    ValueError from the os calls (main(argv) takes what a shell could never pass)."""
    line = _one_error_line(capsys, argv)
    assert "without a NUL character" in line, line
