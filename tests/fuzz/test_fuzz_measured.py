"""Fuzz load_measured (hccl_test, nccl-tests and CSV outputs) with files mutated from the
repository's measured data: rows that load have whole positive sizes and finite positive times."""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import strategies as st

from hcsim.backends import load_measured

from .harness import Violation, fuzz, guarded
from .strategies import measured_file, show, write_case_file

COLLECTIVE_ARG = st.sampled_from([None, None, "allreduce", "allgather", "sendrecv", "alltoall", "bogus", "", 1,
                                  "AllReduce"])
RANKS_ARG = st.sampled_from([None, None, 8, 2, 200, 1, 0, -1, True, "8", 2**63, 8.0])


def load_and_check(path, collective, ranks):
    df = load_measured(path, collective, ranks)
    if not isinstance(df, pd.DataFrame):
        raise Violation(f"load_measured returned {type(df).__name__}")
    for col in ("collective", "size_bytes", "time_us"):
        if col not in df:
            raise Violation(f"no column {col!r} (has {list(df.columns)})")
    if df.empty:
        raise Violation("load_measured returned no rows and no error")
    if df["size_bytes"].dtype.kind not in "iu":
        raise Violation(f"size_bytes has dtype {df['size_bytes'].dtype}, not integer")
    for v in df["size_bytes"]:
        if int(v) < 1:
            raise Violation(f"a row with size_bytes = {v}")
    for v in df["time_us"]:
        if not (isinstance(v, float | int) and math.isfinite(v) and v > 0):
            raise Violation(f"a row with time_us = {v!r}")
    if "ranks" in df:
        for v in df["ranks"]:
            if v == v and (v != int(v) or v < 1):
                raise Violation(f"a row with ranks = {v!r}")
    return df


BAD_PATHS = [None, 1, "", "/", "/nonexistent/m.csv", "/dev/null", "docs", b"docs/data/published/hccl_test_sample.txt",
             "docs/data/published/README.md", "topologies/atlas800t-a2.yaml", "pyproject.toml", "\x00"]


@fuzz(st.tuples(measured_file(), COLLECTIVE_ARG, RANKS_ARG, st.sampled_from([None] * 11 + BAD_PATHS)), weight=1.5)
def test_measured(case):
    """load_measured on mutated hccl_test / nccl-tests / CSV files (and a few paths that are not)."""
    (raw, origin, suffix), collective, ranks, bad_path = case if len(case) == 4 else (*case, None)
    path = write_case_file(raw, suffix) if bad_path is None else bad_path
    if bad_path is not None:
        origin = "a path that is not a measured file"
    repro = f"hcsim.backends.load_measured({show(path if bad_path is not None else str(path))}, {show(collective)}, {show(ranks)})  # {origin}"
    return repro, guarded(load_and_check, path, collective, ranks)
