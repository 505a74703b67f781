"""Parse real benchmark output into sweep-shaped DataFrames.

Columns: collective, algorithm, mode ("measured"), ranks, size_bytes, time_us, algbw_GBps,
busbw_GBps (GB = 1e9, nccl-tests' bus factors), like :func:`hcsim.sweep`.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from ..algorithms.schedule import BUSBW_FACTOR
from ..errors import ConfigError, bad_value
from ..hccl.hccl_test import BINARIES

NCCL_TESTS = {"all_reduce_perf": "allreduce", "all_gather_perf": "allgather", "reduce_scatter_perf": "reducescatter",
              "broadcast_perf": "broadcast", "reduce_perf": "reduce", "alltoall_perf": "alltoall",
              "sendrecv_perf": "sendrecv", "scatter_perf": "scatter", "gather_perf": "gather"}
COLUMNS = ["collective", "algorithm", "mode", "ranks", "size_bytes", "time_us", "algbw_GBps", "busbw_GBps"]


def _frame(rows, collective, ranks, algorithm):
    out = []
    for size, time_us in rows:
        algbw = size / (time_us * 1e-6) / 1e9 if time_us > 0 else float("nan")
        factor = BUSBW_FACTOR[collective](ranks) if (collective and ranks) else float("nan")
        out.append({"collective": collective, "algorithm": algorithm, "mode": "measured", "ranks": ranks,
                    "size_bytes": size, "time_us": time_us, "algbw_GBps": algbw, "busbw_GBps": algbw * factor})
    return pd.DataFrame(out, columns=COLUMNS)


def _named(given, in_file, binary):
    """The collective: the one the file's binary names, which ``given`` may repeat but not
    contradict."""
    if given and in_file and given != in_file:
        raise ConfigError(f"op = {given!r}: the file is {in_file} output ({binary}); leave --op out or match it")
    return given or in_file


def _ranks(given, in_file, where):
    """The rank count: the file's, which ``given`` may repeat but not contradict."""
    if given and in_file and given != in_file:
        raise bad_value("ranks", given, f"the ranks the file records ({in_file}, from {where}), or leave it out")
    return given or in_file


def parse_hccl_test(text: str, collective: str | None = None, ranks: int | None = None,
                    algorithm: str = "hccl") -> pd.DataFrame:
    """Rows of hccl_test's table (``data_size(Bytes): | aveg_time(us): | ...``).

    The collective and rank count come from the ``mpirun -n N ./bin/<binary>`` line when the
    text has one, else from the arguments.

    Examples
    --------
    >>> text = "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\\n8192 | 764.55 | 0.00998 | success"
    >>> parse_hccl_test(text, "allreduce", 8)[["size_bytes", "time_us"]].values.tolist()
    [[8192.0, 764.55]]
    """
    m = re.search(r"mpirun\s+.*?-n\s+(\d+).*?(\w+_test)\b", text)
    if m:
        ranks = _ranks(ranks, int(m.group(1)), "mpirun -n")
        collective = _named(collective, BINARIES.get(m.group(2)), m.group(2))
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append((int(cells[0]), float(cells[1])))
    if not rows:
        raise ConfigError("measured: no hccl_test rows found (expected 'data_size(Bytes): | aveg_time(us): ...')")
    return _frame(rows, collective, ranks, algorithm)


def parse_nccl_tests(text: str, collective: str | None = None, ranks: int | None = None,
                     algorithm: str = "nccl", in_place: bool = False) -> pd.DataFrame:
    """Rows of an nccl-tests table (out-of-place times by default).

    The rank count is the number of ``#  Rank`` lines unless given; the collective comes
    from a ``*_perf`` name in the text unless given.
    """
    m = re.search(r"\b(\w+_perf)\b", text)
    if m:
        collective = _named(collective, NCCL_TESTS.get(m.group(1)), m.group(1))
    if ranks is None:  # a given count wins: an output may list only its own process's ranks
        ranks = len(re.findall(r"^#\s+Rank\s+\d+", text, flags=re.M)) or None
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 12 and not line.lstrip().startswith("#") and parts[0].isdigit():
            # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
            offset = 5 if len(parts) >= 13 else 4  # older versions print no root column
            half = parts[offset + 4:] if in_place else parts[offset:]
            rows.append((int(parts[0]), float(half[0])))
    if not rows:
        raise ConfigError("measured: no nccl-tests rows found (expected '# size count type redop root time ...')")
    return _frame(rows, collective, ranks, algorithm)


def nccl_tests_rows(text: str) -> list[tuple]:
    """Every data row of an nccl-tests table as (size, count, type, redop, root, halves), with
    halves = ((time_us, algbw, busbw, wrong), (time_us, algbw, busbw, wrong))."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 13 and parts[0].isdigit():
            halves = tuple((float(parts[i]), float(parts[i + 1]), float(parts[i + 2]), parts[i + 3]) for i in (5, 9))
            out.append((int(parts[0]), int(parts[1]), parts[2], parts[3], int(parts[4]), halves))
    return out


def format_nccl_tests_row(size, count, dtype, redop, root, halves) -> str:
    """An nccl-tests row from its values: ``halves`` is two (time_us, algbw, busbw, wrong)."""
    def time_str(t):
        return f"{t:7.0f}" if t >= 10000 else f"{t:7.1f}" if t >= 100 else f"{t:7.2f}"

    out = f"{size:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {root:6d}"
    for t, algbw, busbw, wrong in halves:
        out += f"  {time_str(t)}  {algbw:6.2f}  {busbw:6.2f}  {wrong!s:>5}"
    return out


def load_measured(path, collective: str | None = None, ranks: int | None = None) -> pd.DataFrame:
    """Read a measured file: hccl_test output, nccl-tests output, a sweep-shaped CSV, or a CSV
    with ``op, ranks, bytes, time_us`` columns (as docs/data/published keeps them)."""
    from ..algorithms.registry import check_collective

    path = Path(path)
    if collective is not None:
        check_collective(collective)
    if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2):
        raise bad_value("ranks", ranks, "an integer >= 2 (the ranks the measurement ran on)")
    if not path.is_file():
        raise ConfigError(f"measured = {str(path)!r}: no such file")
    text = path.read_text()
    if "data_size(Bytes)" in text:
        return _only(parse_hccl_test(text, collective, ranks), path, collective)
    if "algbw" in text and "busbw" in text and "#wrong" in text or "out-of-place" in text:
        return _only(parse_nccl_tests(text, collective, ranks), path, collective)
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    if not rows:
        raise ConfigError(f"measured = {str(path)!r}: not hccl_test, nccl-tests or CSV output")
    cols = set(rows[0])
    if {"collective", "size_bytes", "time_us"} <= cols:
        df = pd.DataFrame(rows)
    elif {"op", "bytes", "time_us"} <= cols:
        df = pd.DataFrame({"collective": [r["op"] for r in rows], "ranks": [r.get("ranks") for r in rows],
                           "size_bytes": [r["bytes"] for r in rows], "time_us": [r["time_us"] for r in rows],
                           "case": [r.get("case", "") for r in rows]})
    else:
        raise ConfigError(f"measured = {str(path)!r}: CSV needs columns collective,size_bytes,time_us or "
                          f"op,bytes,time_us (has {', '.join(sorted(cols))})")
    df["size_bytes"] = df["size_bytes"].astype("int64")
    df["time_us"] = df["time_us"].astype(float)
    df["ranks"] = pd.to_numeric(df.get("ranks"), errors="coerce")
    if ranks is not None:
        recorded = sorted({int(k) for k in df["ranks"].dropna()})
        if recorded and recorded != [ranks]:
            raise bad_value("ranks", ranks, f"the ranks the file records ({', '.join(map(str, recorded))}), "
                            "or leave it out")
        df["ranks"] = float(ranks)
    if collective:
        df = df[df["collective"] == collective]
    df["mode"] = "measured"
    return _only(df.reset_index(drop=True), path, collective)


def _only(df: pd.DataFrame, path, collective) -> pd.DataFrame:
    """``df``, or a one-line error when filtering on ``collective`` left no row."""
    if collective and df.empty:
        raise ConfigError(f"op = {collective!r}: {str(path)!r} has no {collective} rows")
    return df
