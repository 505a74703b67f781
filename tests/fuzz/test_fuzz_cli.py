"""Fuzz the CLI: hcsim.cli.main(argv) returns 0, or 2 with one 'hcsim: error: ...' line on
stderr; it never raises, never prints a traceback, never reports an internal error."""

from __future__ import annotations

import os
import shlex

from hcsim.errors import HcsimError

from .harness import Violation, fuzz, guarded, run_cli
from .strategies import OUT_DIR, cli_argv, forbidden_argv, out_path, shrink_argv, write_case_file


def materialize(argv, measured):
    """'@name' -> a file in the case directory; '@measured' -> the mutated measured file."""
    out = []
    for a in argv:
        head, eq, tail = a.partition("=") if a.startswith("--") and "=" in a else ("", "", a)
        if tail == "@measured":
            raw, _origin, suffix = measured
            tail = str(write_case_file(raw, suffix))
        elif tail == "@dir/":
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            tail = str(OUT_DIR) + "/"
        elif tail.startswith("@"):  # a bare '@' too: nothing is written into the working tree
            tail = out_path(tail[1:] or "@")
        out.append(f"{head}{eq}{tail}")
    return out


def run_cli_elsewhere(argv):
    """run_cli with the working directory in the case folder: a junk token taken as an output
    path (``--csv é``) must not write into the repository."""
    here = os.getcwd()
    scratch = OUT_DIR / "cwd"
    scratch.mkdir(parents=True, exist_ok=True)
    os.chdir(scratch)
    try:
        return run_cli(argv)
    finally:
        os.chdir(here)


def run_and_check(argv):
    """run_cli, and for a successful ``hccl-test``: its table read back by load_measured gives
    the same sizes and times (the output is hccl_test's own format)."""
    outcome = run_cli_elsewhere(argv)
    if outcome.cls == "ok" and argv and argv[0] == "hccl-test" and "data_size(Bytes)" in outcome.value:
        from hcsim.backends import load_measured

        text = outcome.value
        rows = [line.split("|") for line in text.splitlines() if line[:1].isdigit() and "|" in line]
        path = write_case_file(text, ".txt")
        from hcsim.hccl.hccl_test import BINARIES

        # hccl_test prints no command line: the collective is given, as a user would
        try:
            df = load_measured(path, BINARIES.get(argv[1]))
        except HcsimError as exc:
            raise Violation(f"hcsim's own hccl-test output is refused by load_measured: {exc}") from None
        if len(df) != len(rows):
            raise Violation(f"hccl-test printed {len(rows)} rows, load_measured read {len(df)}")
        for (size, t, *_), got_size, got_t in zip(rows, df["size_bytes"], df["time_us"], strict=True):
            if int(size) != int(got_size) or abs(float(t) - float(got_t)) > 1e-9:
                raise Violation(f"hccl-test row {size.strip()} | {t.strip()} read back as {got_size} | {got_t}")
            if not float(t) > 0:
                raise Violation(f"hccl-test printed aveg_time {t.strip()} for {size.strip()} bytes")
    return outcome


@fuzz(cli_argv().filter(lambda c: not forbidden_argv(c[0])), weight=2.0, shrink=shrink_argv)
def test_cli(case):
    """hcsim sweep/select/hccl-test/topo/algos/validate/calibrate with random flags and values."""
    argv, measured = case
    real = materialize(argv, measured)
    note = f"  # measured file from {measured[1]}" if measured else ""
    printable = all(a.isprintable() and a.isascii() for a in real)
    repro = "hcsim " + shlex.join(real) if printable else f"hcsim.cli.main({real!r})"
    return repro + note, guarded(run_and_check, real)
