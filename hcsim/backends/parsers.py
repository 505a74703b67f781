"""Parse real benchmark output into sweep-shaped DataFrames.

Columns: collective, algorithm, mode ("measured"), ranks, size_bytes, time_us, algbw_GBps,
busbw_GBps (GB = 1e9, nccl-tests' bus factors), like :func:`hcsim.sweep`. hccl_test, nccl-tests
and hcsim's own CSV forms are read here; which format a file is, OSU tables and CSVs read
through a column mapping are in :mod:`hcsim.backends.readers`.

Any text or file gives either such a frame, in which every size is a whole byte count from 1
to ``MAX_SIZE_BYTES`` and every time finite and positive, or one :class:`~hcsim.errors.ConfigError`
line naming the file, the line and the column. What is an error and what is left out:

* errors: a file that is not UTF-8 text (or holds a NUL byte), empty, a directory, larger than
  :data:`MAX_MEASURED_BYTES`; no data rows; a cell that cannot be right (a size that is not a
  whole number of bytes, a time that is not a finite number > 0, a rank count that is not a
  whole number from 2 to ``MAX_CALL_RANKS``, a collective hcsim does not know); a row with
  another number of cells than its header (a truncated or ragged row); a CSV header naming a
  column twice; two runs of different collectives or rank counts in one file;
* left out, with a :class:`MeasuredRowWarning` and listed in ``attrs["left_out"]``: zero-byte
  rows (nccl-tests prints them where a size rounds down to nothing; there is no zero-byte call
  to simulate), a CSV header repeated inside the file (files pasted together), and rows of
  other collectives when a ``collective`` is asked for (silently: that is the filter).
"""

from __future__ import annotations

import collections
import csv
import itertools
import math
import os
import re
import warnings
from pathlib import Path

import pandas as pd

from ..algorithms.schedule import BUSBW_FACTOR, COLLECTIVES
from ..errors import ConfigError, WorkLimitError, bad_value, is_int, is_real, shown, unknown_name
from ..hccl.hccl_test import BINARIES
from ..limits import MAX_CALL_RANKS, MAX_MEASURED_BYTES, MAX_SIZE_BYTES, MAX_SWEEP_SIZES

NCCL_TESTS = {"all_reduce_perf": "allreduce", "all_gather_perf": "allgather", "reduce_scatter_perf": "reducescatter",
              "broadcast_perf": "broadcast", "reduce_perf": "reduce", "alltoall_perf": "alltoall",
              "sendrecv_perf": "sendrecv", "scatter_perf": "scatter", "gather_perf": "gather"}
COLUMNS = ["collective", "algorithm", "mode", "ranks", "size_bytes", "time_us", "algbw_GBps", "busbw_GBps"]


SIZE_ALLOWED = f"a whole number of bytes, 0 to {MAX_SIZE_BYTES} (1 PiB), in ASCII digits"
MIN_TIME_US = 1e-6
"""Shortest measured time taken (1 ps): anything below is no measurement, and a subnormal time
would make predicted / measured overflow."""
TIME_ALLOWED = f"a time in microseconds, a finite number > 0 (at least {MIN_TIME_US:g}, 1 ps)"
RANKS_ALLOWED = f"a whole number of ranks from 2 to {MAX_CALL_RANKS} (hcsim.limits.MAX_CALL_RANKS)"

_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WHOLE = re.compile(r"[0-9]+(?:\.0*)?")  # "65536" or "65536.0" (a CSV written from floats)
_DIGITS = re.compile(r"[0-9]+")
_TOKEN = re.compile(r"\S+")


HCCL_CHECK_FAILED = frozenset({"fail", "failed", "failure", "error", "false"})
"""hccl_test ``check_result`` cells that say the run's result was wrong: such a row is left out with a warning."""


class MeasuredRowWarning(UserWarning):
    """Rows of a measured file were left out (zero-byte rows, a repeated CSV header, a run whose own
    check failed: nccl-tests' ``#wrong`` above 0, hccl_test's ``check_result`` ``failed``)."""


class _StrList(list):
    """A list of strings in a frame's ``attrs``: pandas deep-copies ``attrs`` into every frame and
    row it derives (``iterrows`` once per row), so a long one costs rows x entries; strings are
    immutable, so a shallow copy is a deep one (linear again)."""

    def __deepcopy__(self, memo):
        return type(self)(self)


class _StrDict(dict):
    """A dict of strings in a frame's ``attrs``, copied shallowly (see :class:`_StrList`)."""

    def __deepcopy__(self, memo):
        return type(self)(self)


class _Source:
    """Names a place in a measured text for messages: ``measured 'f.csv' line 7, column 2 (time_us)``."""

    def __init__(self, source):
        self.name = "measured" if source is None else f"measured {str(source)!r}"
        self.left_out: list[str] = []

    def at(self, line: int, column: int | None = None, what: str | None = None) -> str:
        where = f"{self.name} line {line}"
        if column is not None:
            where += f", column {column}"
        return where + (f" ({what})" if what else "")

    def leave_out(self, line: int, why: str):
        self.left_out.append(f"line {line}: {why}")

    def warn(self, df: pd.DataFrame) -> pd.DataFrame:
        df.attrs["left_out"] = _StrList(self.left_out)
        if self.left_out:
            more = f" and {len(self.left_out) - 3} more" if len(self.left_out) > 3 else ""
            warnings.warn(f"{self.name}: left out {len(self.left_out)} row(s): "
                          f"{'; '.join(self.left_out[:3])}{more}", MeasuredRowWarning, stacklevel=3)
        return df


def _lines(text: str) -> list[str]:
    """The lines as an editor numbers them: split at ``\\n`` (a ``\\r\\n`` ending dropped; ``\\r``
    alone where the text has no ``\\n``), not at the form feeds and Unicode separators
    ``str.splitlines`` also takes."""
    if "\n" not in text:  # old Mac line ends
        return text.split("\r")
    return [line.removesuffix("\r") for line in text.split("\n")]


def _size(cell: str, where: str) -> int:
    """A size cell: a whole byte count (0 allowed here; the caller leaves zero-byte rows out)."""
    if not _WHOLE.fullmatch(cell):
        raise bad_value(where, cell, SIZE_ALLOWED)
    digits = cell.split(".")[0].lstrip("0") or "0"
    if len(digits) > len(str(MAX_SIZE_BYTES)) or int(digits) > MAX_SIZE_BYTES:  # no 5,000-digit int()
        raise bad_value(where, cell, SIZE_ALLOWED)
    return int(digits)


def _time(cell: str, where: str) -> float:
    """A time cell in microseconds: finite and > 0 (ASCII: float() would take 'nan', '1_0' and '١')."""
    t = float(cell) if _NUMBER.fullmatch(cell) else math.nan
    if not (math.isfinite(t) and t >= MIN_TIME_US):
        raise bad_value(where, cell, TIME_ALLOWED)
    return t


def _extra(cell: str, where: str, col: str) -> float:
    """A cell of time_us_min / time_us_max (a time, as :func:`_time`) or algbw_GBps / busbw_GBps
    (finite and >= 0: small sizes print 0.00); empty is NaN (not measured)."""
    if cell == "":
        return math.nan
    if col.startswith("time"):
        return _time(cell, where)
    v = float(cell) if _NUMBER.fullmatch(cell) else math.nan
    if not (math.isfinite(v) and v >= 0):
        raise bad_value(where, cell, "a bandwidth in GB/s, a finite number >= 0, or empty")
    return v


def _rank_count(value, where: str) -> int:
    """A rank count from a file (a cell or a token): whole, 2 to MAX_CALL_RANKS."""
    if not (isinstance(value, str) and _WHOLE.fullmatch(value)):
        raise bad_value(where, value, RANKS_ALLOWED)
    digits = value.split(".")[0].lstrip("0") or "0"
    if len(digits) > 6 or not 2 <= int(digits) <= MAX_CALL_RANKS:
        raise bad_value(where, value, RANKS_ALLOWED)
    return int(digits)


def _check_arguments(text, collective, ranks, algorithm) -> int | None:
    """Check a reader's arguments; returns ``ranks`` as a Python int (a numpy int8's own arithmetic
    would wrap in the bus-bandwidth factor), or None."""
    from ..algorithms.registry import check_collective

    if not isinstance(text, str):
        raise bad_value("text", text, "a str (the tool's output; load_measured reads a file)")
    if collective is not None:
        check_collective(collective)
    if ranks is not None and (not is_int(ranks) or
                              not 2 <= ranks <= MAX_CALL_RANKS):
        raise bad_value("ranks", ranks, f"an integer >= 2, at most {MAX_CALL_RANKS} (the ranks the measurement ran on)")
    if not isinstance(algorithm, str):
        raise bad_value("algorithm", algorithm, "a str (the label the rows get)")
    return None if ranks is None else int(ranks)


def _frame(rows, collective, ranks, algorithm):
    out = []
    factor = BUSBW_FACTOR[collective](ranks) if (collective and ranks) else float("nan")
    for size, time_us in rows:
        algbw = size / (time_us * 1e-6) / 1e9
        out.append({"collective": collective, "algorithm": algorithm, "mode": "measured",
                    "ranks": ranks if ranks else float("nan"), "size_bytes": size, "time_us": time_us,
                    "algbw_GBps": algbw, "busbw_GBps": algbw * factor})
    df = pd.DataFrame(out, columns=COLUMNS)
    return df.astype({"size_bytes": "int64", "time_us": "float64"})


def _named(given, in_file, binary):
    """The collective: the one the file's binary names, which ``given`` may repeat but not
    contradict."""
    if given and in_file and given != in_file:
        raise ConfigError(f"op = {shown(given)}: the file is {in_file} output ({binary}); leave --op out or match it")
    return given or in_file


def _ranks(given, in_file, where):
    """The rank count: the file's, which ``given`` may repeat but not contradict."""
    if given and in_file and given != in_file:
        raise bad_value("ranks", given, f"the ranks the file records ({in_file}, from {where}), or leave it out")
    return given or in_file


def _need_collective(collective, src: _Source, how: str):
    if not collective:
        raise ConfigError(f"{src.name}: the collective is not recorded ({how}); pass collective= (--op), "
                          f"one of {', '.join(COLLECTIVES)}")
    return collective


def _hccl_runs(lines, src: _Source):
    """(ranks, binary, line number) of every ``mpirun ... -n N ... ./bin/<op>_test`` line."""
    runs = []
    for number, line in enumerate(lines, 1):
        if "mpirun" not in line and "mpiexec" not in line:
            continue
        launcher = ranks = binary = None
        previous = ""
        for m in _TOKEN.finditer(line):  # up to the binary: its own arguments are not mpirun's
            name = m.group().rsplit("/", 1)[-1]
            if launcher is None:
                launcher = name if name in ("mpirun", "mpiexec") else None
            elif previous in ("-n", "-np", "--n", "--np"):
                ranks = _rank_count(m.group(), src.at(number, m.start() + 1, "mpirun -n"))
            elif re.fullmatch(r"\w+_test", name):
                binary = (name, m.start() + 1)
                break
            previous = m.group()
        if binary is not None:
            runs.append((ranks, binary, number))
    return runs


def parse_hccl_test(text: str, collective: str | None = None, ranks: int | None = None,
                    algorithm: str = "hccl", *, source=None) -> pd.DataFrame:
    """Rows of hccl_test's table (``data_size(Bytes): | aveg_time(us): | ...``).

    The collective and rank count come from the ``mpirun -n N ./bin/<binary>`` line when the
    text has one, else from the arguments. Every line after the table's header that holds a
    ``|`` is a row and must have the header's number of cells. ``source`` (a file name) is
    quoted in errors.

    Examples
    --------
    >>> text = "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\\n8192 | 764.55 | 0.00998 | success"
    >>> parse_hccl_test(text, "allreduce", 8)[["size_bytes", "time_us"]].values.tolist()
    [[8192.0, 764.55]]
    """
    ranks = _check_arguments(text, collective, ranks, algorithm)
    src = source if isinstance(source, _Source) else _Source(source)  # load_measured's: it warns
    lines = _lines(text)
    runs = _hccl_runs(lines, src)
    for (k, (binary, column), number) in runs[1:]:
        if (k, binary) != (runs[0][0], runs[0][1][0]):
            raise ConfigError(f"{src.at(number, column, 'binary')}: a second run ({binary}, -n {k}) after "
                              f"{runs[0][1][0]}, -n {runs[0][0]} (line {runs[0][2]}); one run per file")
    if runs:
        k, (binary, column), number = runs[0]
        if k is not None:
            ranks = _ranks(ranks, k, "mpirun -n")
        if binary not in BINARIES and not collective:
            raise bad_value(src.at(number, column, "binary"), binary,
                            f"an hccl_test binary ({', '.join(sorted(BINARIES))}), or pass collective= (--op)")
        collective = _named(collective, BINARIES.get(binary), binary)
    header = check = None
    rows = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("#"):  # a comment is never the table (nor a row)
            continue
        if "data_size(Bytes)" in line:
            header = [c.strip().rstrip(":") for c in line.split("|")]
            check = next((i for i, c in enumerate(header) if c.lower() == "check_result"), None)
            continue
        if header is None or "|" not in line:
            continue
        cells = [c.strip() for c in line.split("|")]
        if len(cells) != len(header):
            raise ConfigError(f"{src.at(number)}: {len(cells)} cells; the table's header has {len(header)} "
                              "(a truncated or ragged row)")
        size = _size(cells[0], src.at(number, 1, header[0]))
        if size == 0:
            src.leave_out(number, "0 bytes")
            continue
        time_us = _time(cells[1], src.at(number, 2, header[1]))
        if check is not None and cells[check].lower() in HCCL_CHECK_FAILED:
            src.leave_out(number, f"{header[check]} {cells[check]!r}")
            continue
        rows.append((size, time_us))
    if not rows:
        raise ConfigError(f"{src.name}: no hccl_test rows found (expected 'data_size(Bytes): | aveg_time(us): ...' "
                          "and rows under it)")
    _need_collective(collective, src, "no 'mpirun -n N ./bin/<op>_test' line")
    df = _frame(rows, collective, ranks, algorithm)
    return df if src is source else src.warn(df)


_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\w+_perf)\b")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\w+_perf)\b")


def _nccl_sections(text: str, src) -> list[tuple[str, str]] | None:
    """A log of several nccl-tests binaries run one after another, cut into ``(collective, text)`` per
    binary; None for the output of one binary (or of none named).

    A section starts where a binary's output says so, ``# Collective test starting: all_gather_perf``
    (nccl-tests 2.13 and later), or at a launch command naming one binary (a line that is not a
    comment: ``mpirun ... ./all_gather_perf -b 8``); a comment that merely names a binary starts
    none. A section holds the rows up to the next start; one without rows (a header, or a binary that
    failed before its table) joins the section after it (the last, the one before). Each section's
    lines that name another binary are left blank, and so are the other sections' lines, so errors
    name the line of the whole file. A ``# Collective test concluded:`` line naming another binary
    than its section's is an error (the log is not cut where its binaries are).
    """
    lines = _lines(text)
    marks, current, names = [], None, {}  # marks: (line, collective) where a section starts
    for index, line in enumerate(lines):
        named = tuple(dict.fromkeys(NCCL_TESTS[b] for b in re.findall(r"\b(\w+_perf)\b", line) if b in NCCL_TESTS))
        if not named:
            continue
        names[index] = named
        start = _STARTING.match(line.lstrip())
        command = not line.lstrip().startswith("#") and len(named) == 1
        if start and start.group(1) in NCCL_TESTS or command:
            binary = NCCL_TESTS[start.group(1)] if start else named[0]
            if binary != current:
                marks.append((index, binary))
                current = binary
    if len(marks) < 2:
        return None
    marks[0] = (0, marks[0][1])  # lines above the first start belong to the first section
    bounds = [(lo, hi, b) for (lo, b), (hi, _) in zip(marks, marks[1:] + [(len(lines), None)], strict=True)]

    def has_rows(lo, hi):
        return any(_DIGITS.fullmatch((lines[i].split() or ["#"])[0]) for i in range(lo, hi))

    merged, pending = [], None  # sections with rows; pending: one without, waiting for the next
    for lo, hi, b in bounds:
        lo = pending if pending is not None else lo
        if has_rows(lo, hi):
            merged.append((lo, hi, b))
            pending = None
        else:
            pending = lo
    if pending is not None and merged:
        lo, _, b = merged.pop()
        merged.append((lo, len(lines), b))
    for lo, hi, b in merged:
        for i in range(lo, hi):
            end = _CONCLUDED.match(lines[i].lstrip())
            if end and end.group(1) in NCCL_TESTS and NCCL_TESTS[end.group(1)] != b:
                raise ConfigError(f"{src.at(i + 1)}: '# Collective test concluded: {end.group(1)}' inside the section "
                                  f"of {b} (from line {lo + 1}): the log's binaries do not start where they end")
    return [(b, "\n" * lo + "\n".join("" if names.get(i, (b,)) != (b,) else lines[i] for i in range(lo, hi)))
            for lo, hi, b in merged]


def _nccl_binary(text, collective, src):
    found = dict.fromkeys(m.group(1) for m in re.finditer(r"\b(\w+_perf)\b", text))
    known = [b for b in found if b in NCCL_TESTS]
    if len({NCCL_TESTS[b] for b in known}) > 1:  # _nccl_sections cut a log of several apart first
        raise ConfigError(f"{src.name}: output of several nccl-tests binaries ({', '.join(known)}); one per file")
    if known:
        return _named(collective, NCCL_TESTS[known[0]], known[0])
    if found and not collective:
        raise bad_value(f"{src.name} binary", next(iter(found)),
                        f"an nccl-tests binary ({', '.join(NCCL_TESTS)}), or pass collective= (--op)")
    return collective


def _nccl_ranks(text, ranks, src):
    if ranks is not None:  # a given count wins: an output may list only its own process's ranks
        return ranks
    times = collections.Counter(int(m.group(1)) for m in re.finditer(r"^#\s+Rank\s+([0-9]{1,9})\b", text, flags=re.M))
    listed = set(times)
    if len(set(times.values())) > 1:  # two runs pasted together, of different rank counts
        fewest = min(times, key=lambda r: (times[r], r))
        raise ConfigError(f"{src.name}: runs of different rank counts ('#  Rank {fewest}' is listed "
                          f"{times[fewest]} time(s), '#  Rank 0' {times.get(0, 0)}); one run per file, or pass "
                          "ranks= (--ranks) if every row ran on that many")
    if listed == {0}:  # rank 0 alone: a one-GPU run, or separate one-rank runs (nccl-tests built without MPI)
        raise ConfigError(f"{src.name}: lists one rank ('#  Rank 0' only{f', {times[0]} times' if times[0] > 1 else ''}"
                          "): a run of one GPU, or separate one-GPU runs (nccl-tests built without MPI=1); "
                          "hcsim needs 2 ranks or more: pass ranks= (--ranks) if the table is of that many")
    if len(listed) > MAX_CALL_RANKS:
        raise ConfigError(f"{src.name}: lists {len(listed)} ranks ('#  Rank' lines); hcsim takes at most "
                          f"{MAX_CALL_RANKS} (hcsim.limits.MAX_CALL_RANKS)")
    return len(listed) if len(listed) >= 2 else None  # one listed rank: this process's only; unknown


def parse_nccl_tests(text: str, collective: str | None = None, ranks: int | None = None,
                     algorithm: str = "nccl", in_place: bool = False, *, source=None) -> pd.DataFrame:
    """Rows of an nccl-tests table (out-of-place times by default).

    The rank count is the number of distinct ``#  Rank`` lines (when at least 2) unless given;
    the collective comes from a ``*_perf`` name in the text unless given. A data row is a line
    not starting with ``#`` whose first field is a whole number; it must have 13 fields, or 12 or
    11 (older versions print only the columns a test has: no root, or no reduction and no root). ``source`` (a file name) is quoted in errors.
    """
    ranks = _check_arguments(text, collective, ranks, algorithm)
    if not isinstance(in_place, bool):
        raise bad_value("in_place", in_place, "True or False")
    src = source if isinstance(source, _Source) else _Source(source)  # load_measured's: it warns
    sections = _nccl_sections(text, src)
    if sections is not None:  # one log of several binaries: each section read as its own output
        df = pd.concat([parse_nccl_tests(part, binary, ranks, algorithm, in_place, source=src)
                        for binary, part in sections], ignore_index=True)
        if collective is not None:
            df = df[df["collective"] == collective].reset_index(drop=True)
            if df.empty:
                raise ConfigError(f"{src.name}: no {collective} rows (the log's binaries: "
                                  f"{', '.join(dict.fromkeys(b for b, _ in sections))})")
        return df if src is source else src.warn(df)
    collective = _nccl_binary(text, collective, src)
    ranks = _nccl_ranks(text, ranks, src)
    # the header names the columns a row has: size count type [redop] [root] time ... (older versions print
    # only those a test has); without one, a row of 11, 12 or 13 fields is read by its own count
    header = re.search(r"^#\s+size\s+count\s+type\s+(redop\s+)?(root\s+)?time\b", text, flags=re.M)
    fields = (11, 12, 13) if header is None else (11 + bool(header.group(1)) + bool(header.group(2)),)
    redop_column = header is not None and bool(header.group(1))
    rows = []
    for number, line in enumerate(_lines(text), 1):
        if line.lstrip().startswith("#"):
            continue
        tokens = [(m.group(), m.start() + 1) for m in _TOKEN.finditer(line)]
        if not tokens or not _NUMBER.fullmatch(tokens[0][0]):
            continue
        if not _DIGITS.fullmatch(tokens[0][0]):  # '256.5', '-8', '1e3': a row with a bad size, not a banner
            _size(tokens[0][0], src.at(number, tokens[0][1], "size"))
        # an empty reduction cell (older versions' alltoall, under a header naming one) is one field fewer
        empty_redop = (redop_column and len(tokens) == fields[0] - 1 and len(tokens) > 3
                       and not tokens[3][0].isalpha())
        if len(tokens) not in fields and not empty_redop:
            raise ConfigError(f"{src.at(number)}: {len(tokens)} fields; an nccl-tests row has "
                              f"{' or '.join(map(str, fields))} (a truncated or ragged row)")
        # size count type [redop] [root] | time algbw busbw #wrong | time algbw busbw #wrong
        offset = len(tokens) - 8
        size = _size(tokens[0][0], src.at(number, tokens[0][1], "size"))
        if size == 0:
            src.leave_out(number, "0 bytes")
            continue
        cell, column = tokens[offset + 4 if in_place else offset]
        wrong = tokens[offset + (7 if in_place else 3)][0]
        if _DIGITS.fullmatch(wrong) and int(wrong) > 0:  # '#wrong' (older versions print a float 'error': kept)
            src.leave_out(number, f"{int(wrong)} wrong elements ({'in-place' if in_place else 'out-of-place'} "
                                  "#wrong: nccl-tests' check failed)")
            continue
        rows.append((size, _time(cell, src.at(number, column, "in-place time" if in_place else "out-of-place time"))))
    if not rows:
        raise ConfigError(f"{src.name}: no nccl-tests rows found (expected '# size count type redop root time ...' "
                          "and rows under it)")
    _need_collective(collective, src, "no '<op>_perf' binary named")
    df = _frame(rows, collective, ranks, algorithm)
    return df if src is source else src.warn(df)


def nccl_tests_rows(text: str) -> list[tuple]:
    """Every data row of an nccl-tests table as (size, count, type, redop, root, halves), with
    halves = ((time_us, algbw, busbw, wrong), (time_us, algbw, busbw, wrong))."""
    if not isinstance(text, str):
        raise bad_value("text", text, "a str (nccl-tests' output)")
    src = _Source(None)
    out = []

    def number(cell, where, whole=False):
        ok = _DIGITS.fullmatch(cell.lstrip("-")) if whole else _NUMBER.fullmatch(cell)
        value = (int(cell) if whole else float(cell)) if ok and len(cell) < 40 else math.nan
        if not math.isfinite(value):
            raise bad_value(where, cell, "a whole number" if whole else "a finite number")
        return value

    for index, line in enumerate(_lines(text), 1):
        parts = line.split()
        if len(parts) == 13 and _DIGITS.fullmatch(parts[0]):
            def at(i, name, _index=index):
                return src.at(_index, i + 1, name)
            halves = tuple((number(parts[i], at(i, "time")), number(parts[i + 1], at(i + 1, "algbw")),
                            number(parts[i + 2], at(i + 2, "busbw")), parts[i + 3]) for i in (5, 9))
            out.append((number(parts[0], at(0, "size"), True), number(parts[1], at(1, "count"), True), parts[2],
                        parts[3], number(parts[4], at(4, "root"), True), halves))
    return out


def format_nccl_tests_row(size, count, dtype, redop, root, halves) -> str:
    """An nccl-tests row from its values: ``halves`` is two (time_us, algbw, busbw, wrong)."""
    def time_str(t):
        return f"{t:7.0f}" if t >= 10000 else f"{t:7.1f}" if t >= 100 else f"{t:7.2f}"

    out = f"{size:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {root:6d}"
    for t, algbw, busbw, wrong in halves:
        out += f"  {time_str(t)}  {algbw:6.2f}  {busbw:6.2f}  {wrong!s:>5}"
    return out


LAUNCHER_TAGS = (
    ("open-mpi", re.compile(r"\[\d+,\d+\]<std(?:out|err)>: ?")),  # mpirun --tag-output: [1,0]<stdout>:
    ("rank", re.compile(r"\[\d+\] ?")),  # MPICH / Intel MPI -prepend-rank (-l): [0]
    ("slurm", re.compile(r" *\d+: ")),  # srun --label: 0: (padded to the widest rank)
)
"""Prefixes a job launcher puts before every line of a benchmark's output (name, pattern at a line's start)."""


def strip_launcher_tags(text: str) -> tuple[str, str | None]:
    """``text`` without the rank tags a job launcher put before its lines, and the tag's kind.

    ``mpirun --tag-output`` (``[1,0]<stdout>:``), MPICH's and Intel MPI's ``-prepend-rank``
    (``[0]``) and ``srun --label`` (``0: ``) tag every line a rank prints. A kind counts when it
    starts at least half the non-blank lines (a user's own untagged lines above the output stay
    as they are); it is then taken off every line it starts. With ``[0]`` tags, the same tag
    written again inside a line (the launcher tags each write, and nccl-tests writes a row's
    fields in several: ``-1[0]    1626.5``) goes too. Nothing else is touched (``[0x00]`` in
    nccl-tests' device lines is not a tag), and a text without tags comes back as it was. Lines keep their
    numbers, so an error names the file's own line; its column counts from after the tag.

    Examples
    --------
    >>> strip_launcher_tags("[0]   1048576  262144  float  sum  -1[0]  1626.5\\n")[0].split()[:6]
    ['1048576', '262144', 'float', 'sum', '-1', '1626.5']
    >>> strip_launcher_tags("0: # OSU MPI Allreduce Latency Test\\n0: 4   1.80\\n")
    ('# OSU MPI Allreduce Latency Test\\n4   1.80\\n', 'slurm')
    """
    lines = _lines(text)
    filled = [line for line in lines if line.strip()]
    for kind, tag in LAUNCHER_TAGS:
        tagged = sum(1 for line in filled if tag.match(line))
        if not filled or 2 * tagged < len(filled):
            continue
        out = []
        for line in lines:
            m = tag.match(line)
            if m:  # cut (the readers anchor '#  Rank' and the rest at a line's start)
                line = line[m.end():]
                if kind == "rank":
                    line = re.sub(r"\[\d+\]", " ", line)
            out.append(line)
        return "\n".join(out), kind
    return text, None


def _read_text(path) -> tuple[Path, str]:
    """The file's text, or one line saying why it is not a measured file."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise bad_value("measured", path, "a file path (str or pathlib.Path)")
    try:
        path = Path(path)
        if path.is_dir():
            raise ConfigError(f"measured = {str(path)!r}: a directory, not a file")
        if not path.exists():
            raise ConfigError(f"measured = {str(path)!r}: no such file")
        if not path.is_file():  # a device, a pipe or a socket: nothing a benchmark wrote and left
            raise ConfigError(f"measured = {str(path)!r}: not a regular file (a device, pipe or socket); "
                              "give the benchmark's output file")
        with path.open("rb") as f:
            data = f.read(MAX_MEASURED_BYTES + 1)
    except (OSError, ValueError) as e:  # permissions, a NUL in the name, a name too long
        if isinstance(e, ConfigError):
            raise
        why = getattr(e, "strerror", None) or str(e)
        raise ConfigError(f"measured = {shown(str(path))}: cannot be read ({why})") from None
    name = f"measured = {str(path)!r}"
    if len(data) > MAX_MEASURED_BYTES:
        raise ConfigError(f"{name}: larger than {MAX_MEASURED_BYTES} bytes (MAX_MEASURED_BYTES); "
                          "a benchmark's output is a few KiB")
    if not data.strip():
        raise ConfigError(f"{name}: empty")

    def place(i):
        newline = b"\n"
        return f"line {data.count(newline, 0, i) + 1}, column {i - data.rfind(newline, 0, i)}"

    if b"\x00" in data:
        hint = " (UTF-16? save it as UTF-8)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ConfigError(f"{name}: binary, not text (a NUL byte at {place(data.index(0))}){hint}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{name}: not UTF-8 text (byte 0x{data[e.start]:02x} at {place(e.start)}); "
                          "save it as UTF-8") from None
    return path, text.removeprefix("\ufeff")


_SWEEP_FORM = ("collective", "size_bytes", "time_us")
_OP_FORM = ("op", "bytes", "time_us")
_NUMERIC_EXTRAS = ("time_us_min", "time_us_max", "algbw_GBps", "busbw_GBps")


def _csv_records(text, src: _Source):
    """(line number, cells) of every CSV record, ``#`` comment and blank lines left out."""
    kept = [(number, line) for number, line in enumerate(_lines(text), 1)
            if line.strip() and not line.lstrip().startswith("#")]
    reader = csv.reader(line for _, line in kept)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            number = kept[min(reader.line_num, len(kept)) - 1][0] if kept else 1
            raise ConfigError(f"{src.at(number)}: not CSV ({e})") from None
        yield kept[reader.line_num - 1][0], [c.strip() for c in cells]


def _names_a_form(cells) -> bool:
    return set(_SWEEP_FORM) <= set(cells) or set(_OP_FORM) <= set(cells)


def _commented_header(text, before: int, width: int):
    """(line, cells) of the last ``#`` line above line ``before`` that, read as CSV, names one of
    hcsim's CSV forms in ``width`` cells (a header written as a comment), else None."""
    lines = _lines(text)[:before - 1]
    for number in range(len(lines), 0, -1):
        line = lines[number - 1].lstrip()
        if not line.startswith("#"):
            continue
        try:
            cells = [c.strip() for c in next(csv.reader([line[1:]]), [])]
        except csv.Error:
            continue
        if len(cells) == width and _names_a_form(cells):
            return number, cells
    return None


def _row_cells(src, number: int, cells: list, header: list, header_line: int):
    """A data row's cells matched to ``header``: empty cells past its end (trailing separators)
    dropped; None for the header repeated (left out, and said); a one-line error for a row of
    another width."""
    if len(cells) > len(header) and cells[-1] == "":
        end = len(cells)
        while end > len(header) and cells[end - 1] == "":
            end -= 1
        cells = cells[:end]  # one copy: a row may end in thousands of separators
    if cells == header:
        src.leave_out(number, "the header again")
        return None
    if len(cells) != len(header):
        raise ConfigError(f"{src.at(number)}: {len(cells)} cells; the header (line {header_line}) has "
                          f"{len(header)} (a truncated or ragged row)")
    return cells


def _parse_csv(text, path, collective, src: _Source) -> pd.DataFrame:
    records = _csv_records(text, src)
    first = next(records, None)
    if first is None:
        raise ConfigError(f"measured = {str(path)!r}: not hccl_test, nccl-tests or CSV output")
    header_line, header = first
    commented = None if _names_a_form(header) else _commented_header(text, header_line, len(header))
    if commented is not None:  # '# op,bytes,time_us' above the rows: the first record is a row
        records = itertools.chain([first], records)
        header_line, header = commented
    end = len(header)
    while end and header[end - 1] == "":  # a trailing separator names no column
        end -= 1
    header = header[:end]
    names = [h for h in header if h]
    twice = sorted(h for h, n in collections.Counter(names).items() if n > 1)  # linear: a header may be wide
    if twice:
        more = f" and {len(twice) - 5:,} more" if len(twice) > 5 else ""
        raise ConfigError(f"{src.at(header_line)}: the header names {', '.join(map(repr, twice[:5]))}{more} twice")
    if set(_SWEEP_FORM) <= set(names):
        coll_col, size_col, time_col = _SWEEP_FORM
        keep = [h for h in header if h]
    elif set(_OP_FORM) <= set(names):
        coll_col, size_col, time_col = _OP_FORM
        keep = [h for h in ("op", "ranks", "bytes", "time_us", "case") if h in names]
    else:
        wide = names and names[0].lower() in ("bytes", "size", "size_bytes", "msg_size") and len(names) > 2
        size = (names[0] if names[0] in ("bytes", "size_bytes") else f"{names[0]}:bytes") if wide else ""
        hint = (f"'size={size},wide=algorithm,values=time:UNIT' (one time column per algorithm; "
                "wide=ranks or wide=nodes:N for rank or node counts)" if wide else "'size=COL:bytes,time=COL:us'")
        raise ConfigError(f"measured = {str(path)!r}: CSV needs columns collective,size_bytes,time_us or "
                          f"op,bytes,time_us (has {shown(', '.join(sorted(names)))}), or a mapping: "
                          f"columns={hint} (--columns; docs/validation.md)")
    rename = {"op": "collective", "bytes": "size_bytes"} if coll_col == "op" else {}
    index = {h: i for i, h in enumerate(header) if h}
    rows = []
    for number, cells in records:
        cells = _row_cells(src, number, cells, header, header_line)
        if cells is None:
            continue

        def at(col, _number=number):
            return src.at(_number, index[col] + 1, col)

        row = {rename.get(h, h): cells[index[h]] for h in keep}
        coll = row["collective"]
        if collective and coll != collective:
            continue  # another collective's row: the filter asked
        if coll not in COLLECTIVES:
            raise unknown_name(at(coll_col), coll, COLLECTIVES)
        row["size_bytes"] = _size(row["size_bytes"], at(size_col))
        if row["size_bytes"] == 0:
            src.leave_out(number, "0 bytes")
            continue
        row["time_us"] = _time(row["time_us"], at(time_col))
        for col in _NUMERIC_EXTRAS:  # the spread of rounds and the bandwidths: checked as what they are, or empty
            if col in row:
                row[col] = _extra(row[col], at(col), col)
        if "ranks" in row:
            row["ranks"] = _rank_count(row["ranks"], at("ranks")) if row["ranks"] else float("nan")
        rows.append(row)
    columns = [rename.get(h, h) for h in keep]
    if "ranks" not in columns:
        columns.append("ranks")
    df = pd.DataFrame(rows, columns=columns)
    if not rows and not src.left_out and not collective:
        raise ConfigError(f"measured = {str(path)!r}: a CSV header and no rows")
    df["size_bytes"] = df["size_bytes"].astype("int64")
    df["time_us"] = df["time_us"].astype("float64")
    df["ranks"] = pd.to_numeric(df["ranks"], errors="coerce").astype("float64")
    for col in _NUMERIC_EXTRAS:
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def load_measured(path, collective: str | None = None, ranks: int | None = None, columns=None) -> pd.DataFrame:
    """Read a measured file: hccl_test output, nccl-tests (or rccl-tests) output, an OSU
    collective latency table, Intel MPI Benchmarks (IMB-MPI1) output, a sweep-shaped CSV, a CSV with ``op, ranks, bytes, time_us``
    columns (as docs/data/published keeps them), or any CSV or whitespace table through a
    column mapping.

    The format is decided by the data lines (:func:`hcsim.backends.readers.detect_format`),
    never by words in ``#`` comments.

    Parameters
    ----------
    path : str or Path
        The file (UTF-8; a BOM, CRLF line ends, comments and blank lines anywhere are fine).
    collective : str, optional
        The collective (``--op``): required where the file does not record it; where it does,
        rows of other collectives are left out.
    ranks : int, optional
        The rank count, where the file does not record it (it may repeat, not contradict it).
    columns : str or dict, optional
        Which column holds what, with units (``"size=bytes,time=latency:ms"``, a wide table
        ``"size=bytes,wide=algorithm,values=time:us"``; grammar:
        :func:`hcsim.backends.readers.parse_columns`). For CSV and whitespace tables only.

    Returns
    -------
    DataFrame
        Columns :data:`COLUMNS` (plus the CSV's own extra columns, and ``algorithm_given`` where
        algorithm names were read); sizes are whole byte counts >= 1 (int64) and times finite
        and > 0; ``attrs["left_out"]``. Anything else in the file is one
        :class:`~hcsim.errors.ConfigError` line naming the file, line and column (the module
        docstring lists what is left out with a warning).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "osu.txt"
    >>> _ = f.write_text("# OSU MPI Allreduce Latency Test v7.3\\n# Size   Avg Latency(us)\\n1024   5.5\\n")
    >>> load_measured(f, ranks=8)[["collective", "ranks", "size_bytes", "time_us"]].values.tolist()
    [['allreduce', 8.0, 1024, 5.5]]
    """
    from ..algorithms.registry import check_collective
    from .readers import detect_format, is_imb, parse_imb, parse_mapped, parse_osu

    if collective is not None:
        check_collective(collective)
    if ranks is not None and (not is_int(ranks) or
                              not 2 <= ranks <= MAX_CALL_RANKS):
        raise bad_value("ranks", ranks, f"an integer >= 2, at most {MAX_CALL_RANKS} (the ranks the measurement ran on)")
    ranks = None if ranks is None else int(ranks)
    path, text = _read_text(path)
    text, _ = strip_launcher_tags(text)  # a launcher's rank tags before every line (mpirun --tag-output, srun -l)
    src = _Source(path)
    kind = detect_format(text)
    if columns is not None:
        if kind in ("hccl_test", "nccl-tests"):
            raise bad_value("columns", columns, f"only for CSV and whitespace tables; {str(path)!r} is {kind} "
                            "output, read as it is (leave columns out)")
        # no kind: rows holding a word (a data type, a name) are no OSU table, and are a CSV only with commas
        csv_like = kind == "csv" or (kind is None and _rows_hold_commas(text))
        df = parse_mapped(text, columns, collective, ranks, csv_like=csv_like, source=src)
        return src.warn(_only(df, path, collective))
    if kind == "hccl_test":
        return src.warn(_only(parse_hccl_test(text, collective, ranks, source=src), path, collective))
    if kind == "nccl-tests":
        return src.warn(_only(parse_nccl_tests(text, collective, ranks, source=src), path, collective))
    if kind in (None, "table") and is_imb(text):  # the Intel MPI Benchmarks' sections (a bad row: its own error)
        return src.warn(_only(parse_imb(text, collective, ranks, source=src), path, collective))
    if kind == "table":
        return src.warn(_only(parse_osu(text, collective, ranks, source=src), path, collective))
    implied = _implied_columns(text, collective, src) if kind == "csv" else None
    if implied:  # a CSV in hcsim's units with no op column: the collective given says what ran
        return src.warn(_only(parse_mapped(text, implied, collective, ranks, source=src), path, collective))
    df = _parse_csv(text, path, collective, src)
    if ranks is not None:
        recorded = sorted({int(k) for k in df["ranks"].dropna()})
        if recorded and recorded != [ranks]:
            raise bad_value("ranks", ranks, f"the ranks the file records ({', '.join(map(str, recorded))}), "
                            "or leave it out")
        df["ranks"] = float(ranks)
    df["mode"] = "measured"
    df = _only(df.reset_index(drop=True), path, collective)
    if df.empty:
        raise ConfigError(f"measured = {str(path)!r}: no rows left ({'; '.join(src.left_out[:3])})")
    return src.warn(df)


def _rows_hold_commas(text: str) -> bool:
    """Whether a line that starts with a number (a data row) holds a comma: a CSV's rows do, a
    whitespace table's never."""
    for line in _lines(text):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and _NUMBER.match(stripped):
            return "," in stripped
    return True  # no numeric row: read as a CSV, which says what is missing


def _implied_columns(text, collective, src: _Source) -> str | None:
    """The mapping a CSV in hcsim's own column names implies (``bytes`` or ``size_bytes``, and
    ``time_us``, ``busbw_GBps`` or ``algbw_GBps``) when it has no op column and ``collective``
    is given; None for every other CSV (read as before, or refused)."""
    first = next(_csv_records(text, src), None)
    if not collective or first is None:
        return None
    names = set(first[1])
    if names & {"op", "collective"}:
        return None
    size = next((c for c in ("size_bytes", "bytes") if c in names), None)
    value = next((c for c in ("time_us", "busbw_GBps", "algbw_GBps") if c in names), None)
    if size is None or value is None:
        return None
    spec = f"size={size},{value.split('_')[0]}={value}"
    return spec + "".join(f",{c}={c}" for c in ("ranks", "algorithm") if c in names)


def _only(df: pd.DataFrame, path, collective) -> pd.DataFrame:
    """``df``, or a one-line error when filtering on ``collective`` left no row."""
    if collective and df.empty:
        raise ConfigError(f"op = {collective!r}: {str(path)!r} has no {collective} rows")
    return df


def check_measured(measured, purpose: str = "validate") -> pd.DataFrame:
    """``measured`` if :func:`hcsim.validate_measured` and :func:`hcsim.calibrate.calibrate` can
    take it, else one line naming the row (``measured.iloc[i]``) and column.

    It must be a DataFrame with ``collective``, ``size_bytes`` and ``time_us`` columns (and
    optionally ``ranks``), 1 to ``MAX_SWEEP_SIZES`` rows (more is a :class:`WorkLimitError`:
    every row is a simulation), known collectives, whole sizes from 1 to ``MAX_SIZE_BYTES``,
    finite times > 0 and, where given, whole rank counts from 2 to ``MAX_CALL_RANKS``.
    :func:`load_measured`'s frames always pass.
    """
    allowed = "a DataFrame with columns collective, size_bytes, time_us [, ranks] (hcsim.backends.load_measured)"
    if not isinstance(measured, pd.DataFrame):
        raise bad_value("measured", measured, allowed)
    twice = sorted({str(c) for c in measured.columns[measured.columns.duplicated()]})
    if twice:
        raise ConfigError(f"measured: the columns {', '.join(twice)} appear twice; {allowed}")
    missing = [c for c in _SWEEP_FORM if c not in measured.columns]
    if missing:
        raise ConfigError(f"measured: no {', '.join(missing)} column (has {', '.join(map(str, measured.columns))}); "
                          f"{allowed}")
    if measured.empty:
        raise ConfigError(f"measured: no points to {purpose} (an empty DataFrame)")
    if len(measured) > MAX_SWEEP_SIZES:
        raise WorkLimitError(f"measured: {len(measured)} rows; at most {MAX_SWEEP_SIZES} (hcsim.limits."
                             f"MAX_SWEEP_SIZES, as a sweep): each row is a simulation; pass fewer rows")

    def number(value):
        return is_real(value)

    def whole(value, lo, hi):
        return number(value) and lo <= value <= hi and float(value).is_integer()  # NaN fails the range

    ranks = measured["ranks"].tolist() if "ranks" in measured.columns else [None] * len(measured)
    cells = zip(measured["collective"].tolist(), measured["size_bytes"].tolist(), measured["time_us"].tolist(),
                ranks, strict=True)
    for i, (coll, size, time_us, k) in enumerate(cells):
        if not isinstance(coll, str) or coll not in COLLECTIVES:
            raise unknown_name(f"measured.iloc[{i}].collective", coll, COLLECTIVES)
        if not whole(size, 1, MAX_SIZE_BYTES):
            raise bad_value(f"measured.iloc[{i}].size_bytes", size, f"a whole number of bytes, 1 to {MAX_SIZE_BYTES}")
        if not (number(time_us) and math.isfinite(time_us) and time_us >= MIN_TIME_US):
            raise bad_value(f"measured.iloc[{i}].time_us", time_us, TIME_ALLOWED)
        if not (k is None or k is pd.NA or (number(k) and math.isnan(k)) or whole(k, 2, MAX_CALL_RANKS)):
            raise bad_value(f"measured.iloc[{i}].ranks", k, RANKS_ALLOWED + ", or NaN (the topology's)")
    return measured
