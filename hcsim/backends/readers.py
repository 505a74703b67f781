"""Readers for any collective benchmark output: which format a text is, OSU-style tables, and
CSV or whitespace tables read through a column mapping.

Every reader returns the sweep-shaped frame :func:`hcsim.backends.load_measured` documents
(columns :data:`~hcsim.backends.parsers.COLUMNS`, ``attrs["left_out"]``), or raises one
:class:`~hcsim.errors.ConfigError` line naming the file, line, column and what is allowed.

The format is decided by the data lines only (:func:`detect_format`): a ``#`` comment never
decides it, whatever words it holds. Units are never guessed from magnitudes: a column's unit
is in its name as hcsim writes it (``time_us``, ``size_bytes``, ``bytes``, ``busbw_GBps``), in
an OSU header (``Avg Latency(us)``), or named in the mapping (``time=latency:ms``).
"""

from __future__ import annotations

import collections
import csv
import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from ..algorithms.schedule import BUSBW_FACTOR, COLLECTIVES
from ..errors import ConfigError, WorkLimitError, bad_value, shown, unknown_name
from ..limits import MAX_CALL_RANKS, MAX_SWEEP_SIZES
from .parsers import (
    COLUMNS,
    MIN_TIME_US,
    RANKS_ALLOWED,
    _check_arguments,
    _csv_records,
    _lines,
    _rank_count,
    _row_cells,
    _size,
    _Source,
    _StrDict,
    _time,
)

TIME_UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
"""Microseconds per unit of a time column."""

BANDWIDTH_UNITS = {"GBps": 1e9, "GiBps": 2.0**30, "MBps": 1e6, "MiBps": 2.0**20, "Gbps": 1e9 / 8}
"""Bytes per second per unit of a bandwidth column (GB = 1e9 as nccl-tests; Gbps in bits)."""

SIZE_UNITS = ("bytes", "count")
"""A size column holds bytes, or element counts with their data type (``count:fp32``)."""

IMPLIED_UNITS = {"time_us": ("time", "us"), "size_bytes": ("size", "bytes"), "bytes": ("size", "bytes"),
                 "busbw_GBps": ("busbw", "GBps"), "algbw_GBps": ("algbw", "GBps")}
"""Column names whose unit hcsim reads from the name itself (hcsim's own column names); any
other column's unit must be named in the mapping (``time=latency_ms`` is refused: say
``time=latency_ms:ms``)."""

TARGETS = ("size", "time", "busbw", "algbw", "ranks", "algorithm", "op", "wide", "values")
WIDE_KINDS = ("algorithm", "ranks", "nodes")
GRAMMAR = ("size=COL[:bytes|:count:DTYPE], one of time=COL:us|ms|s|ns, busbw=COL:UNIT, algbw=COL:UNIT "
           f"(UNIT: {', '.join(BANDWIDTH_UNITS)}), optional ranks=COL, algorithm=COL, op=COL; or a wide table: "
           "wide=algorithm|ranks|nodes:RANKS_PER_NODE with values=time:UNIT|busbw:UNIT|algbw:UNIT")

_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WHOLE = re.compile(r"[0-9]+")
_OSU_TITLE = re.compile(r"#\s*OSU\s+(?:[\w+-]+\s+)*?"
                        r"(Allreduce|Allgather|Reduce[\s_-]?Scatter|Alltoall|All-to-All|Bcast|Broadcast|Reduce|Gather|Scatter)"
                        r"\b[^\n]*?\b(Latency|Bandwidth)\b", re.I)
_OSU_OPS = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reducescatter",
            "alltoall": "alltoall", "bcast": "broadcast", "broadcast": "broadcast", "reduce": "reduce",
            "gather": "gather", "scatter": "scatter"}
_PER_RANK_SIZE = ("allgather", "alltoall", "alltoallv", "gather", "scatter")
"""Collectives whose OSU ``Size`` is one rank's share (allgather, gather, scatter) or what one rank
sends each peer (alltoall), where hcsim's size, like nccl-tests', is the whole buffer: size x ranks."""
_NCCL_DTYPES = frozenset("int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 float16 float32 "
                         "float64 fp8_e4m3 fp8_e5m2 f8e4m3 f8e5m2 char int byte".split())


_NAMES_SHOWN = 5
"""Names a warning lists before saying how many more it leaves unnamed."""


class MeasuredAlgorithmWarning(UserWarning):
    """Algorithm names in a measured file that hcsim has no schedule for: kept as given."""


# ---- format detection --------------------------------------------------------------------

def _is_number(token: str) -> bool:
    return bool(_NUMBER.fullmatch(token))


def _nccl_shaped(tokens: list[str]) -> bool:
    """An nccl-tests (or rccl-tests) data row: size count type redop [root] time algbw busbw
    #wrong time algbw busbw #wrong; or as older versions print it, with only the columns the test
    has: size count type root time ... (broadcast, 12 fields) or size count type time ...
    (allgather, alltoall: 11)."""
    n = len(tokens)
    return (n in (11, 12, 13) and bool(_WHOLE.fullmatch(tokens[0])) and bool(_WHOLE.fullmatch(tokens[1]))
            and tokens[2].lower() in _NCCL_DTYPES
            and (tokens[3].isalpha() if n == 13 else
                 tokens[3].isalpha() or bool(_WHOLE.fullmatch(tokens[3])) if n == 12 else _is_number(tokens[3])))


def _table_row(tokens: list[str]) -> bool:
    """A row of a whitespace table of numbers (OSU's): a whole first field, then numbers."""
    return len(tokens) >= 2 and bool(_WHOLE.fullmatch(tokens[0])) and all(_is_number(t) for t in tokens[1:])


def detect_format(text: str) -> str | None:
    """Which reader a measured text needs, from its data lines alone.

    ``"hccl_test"`` (a line whose first ``|`` cell is ``data_size(Bytes)``), ``"nccl-tests"`` (a
    row of 12 or 13 fields: size, count, data type, reduction...), ``"csv"`` (the first data line
    holds a comma), ``"table"`` (rows of whitespace-separated numbers, as OSU prints them), or
    None when no data line says. Lines starting with ``#`` are skipped: a comment never decides, nor
    does a comma in the first line above a table whose rows hold none (ssh's "Permanently added
    'node1,10.0.0.1'" before OSU's output).

    Examples
    --------
    >>> detect_format("# out-of-place in-place\\nbytes,time_us\\n8,1.5\\n")
    'csv'
    >>> detect_format("# OSU MPI Allreduce Latency Test\\n# Size  Avg Latency(us)\\n4   1.8\\n")
    'table'
    """
    if not isinstance(text, str):
        raise bad_value("text", text, "a str (the tool's output; load_measured reads a file)")
    first = None
    table = False
    commas = 0  # data lines after the first holding a comma: a CSV's rows do, a table's never
    for line in _lines(text):
        stripped = line.strip().lstrip("\ufeff")
        if not stripped or stripped.startswith("#"):
            continue
        if "|" in stripped and stripped.split("|")[0].strip().rstrip(":").strip() == "data_size(Bytes)":
            return "hccl_test"
        tokens = stripped.split()
        if _nccl_shaped(tokens):
            return "nccl-tests"
        if first is None:
            first = stripped
        else:
            commas += "," in stripped
        table = table or _table_row(tokens)
    if first is not None and "," in first and (commas or not table):  # not a launcher's warning above a table
        return "csv"
    return "table" if table else None


# ---- the column mapping ------------------------------------------------------------------

@dataclass(frozen=True)
class ColumnMap:
    """Which column of a table holds what, with its unit (:func:`parse_columns` builds it).

    Exactly one of ``time``, ``bandwidth`` (long tables) or ``wide`` (one value column per
    algorithm, rank count or node count) says where the measured values are.
    """

    size: str
    size_unit: str = "bytes"
    dtype: str | None = None
    time: str | None = None
    time_unit: str = "us"
    bandwidth: str | None = None
    bandwidth_kind: str = "busbw"
    bandwidth_unit: str = "GBps"
    ranks: str | None = None
    algorithm: str | None = None
    op: str | None = None
    wide: str | None = None
    ranks_per_node: int | None = None
    values_kind: str = "time"
    values_unit: str = "us"


def _split_spec(spec) -> dict[str, str]:
    """``{target: 'COL[:unit...]'}`` from a mapping or a ``target=COL,target=COL:unit`` string."""
    if isinstance(spec, Mapping):
        items = list(spec.items())
    elif isinstance(spec, str):
        items = []
        for part in spec.split(","):
            if not part.strip():
                raise bad_value("columns", spec, f"comma-separated TARGET=COLUMN[:UNIT] with no empty part; {GRAMMAR}")
            if "=" not in part:
                raise bad_value("columns", part.strip(), f"TARGET=COLUMN[:UNIT]; {GRAMMAR}")
            key, _, value = part.partition("=")
            items.append((key.strip(), value.strip()))
    else:
        raise bad_value("columns", spec, f"a mapping or a 'size=bytes,time=time_us' string; {GRAMMAR}")
    out: dict[str, str] = {}
    for key, value in items:
        if key not in TARGETS:
            raise unknown_name("columns target", key, TARGETS)
        if key in out:
            raise bad_value(f"columns {key}", value, f"{key} is mapped twice; map each target once")
        if not isinstance(value, str) or not value.strip():
            raise bad_value(f"columns {key}", value, "a column name (a non-empty string)")
        out[key] = value.strip()
    return out


def _with_unit(key: str, value: str, units, implied_kind: str | None = None):
    """(column, unit) of ``COL:UNIT``; the unit is implied only by hcsim's own column names."""
    column, sep, unit = value.rpartition(":") if ":" in value else (value, "", "")
    if sep:
        if unit not in units:
            raise bad_value(f"columns {key}", value, f"COLUMN:UNIT with UNIT one of {', '.join(units)}")
        return column.strip(), unit
    implied = IMPLIED_UNITS.get(value)
    if implied and implied[0] == (implied_kind or key):
        return value, implied[1]
    raise bad_value(f"columns {key}", value, f"name the unit: {key}={value}:UNIT with UNIT one of "
                    f"{', '.join(units)} (no unit is guessed from a column's name or its numbers)")


def parse_columns(spec) -> ColumnMap:
    """A :class:`ColumnMap` from ``--columns`` text or a dict, checked.

    Grammar: ``size=COL[:bytes|:count:DTYPE]``; one of ``time=COL:UNIT`` (us, ms, s, ns),
    ``busbw=COL:UNIT`` or ``algbw=COL:UNIT`` (GBps, GiBps, MBps, MiBps, Gbps); optionally
    ``ranks=COL``, ``algorithm=COL``, ``op=COL``. A wide table has ``wide=algorithm``,
    ``wide=ranks`` or ``wide=nodes:RANKS_PER_NODE`` and ``values=time:UNIT`` (or
    ``busbw:UNIT``, ``algbw:UNIT``): every other column is one algorithm's, or one rank or node
    count's. A unit is implied only by hcsim's own names (``time_us``, ``bytes``,
    ``size_bytes``, ``busbw_GBps``, ``algbw_GBps``).

    Examples
    --------
    >>> m = parse_columns("size=bytes,time=latency:ms")
    >>> m.size, m.time, m.time_unit
    ('bytes', 'latency', 'ms')
    >>> parse_columns({"size": "Size:count:fp32", "wide": "nodes:8", "values": "busbw:GBps"}).ranks_per_node
    8
    """
    from ..dtypes import parse_dtype

    items = _split_spec(spec)
    if "size" not in items:
        raise bad_value("columns", spec if isinstance(spec, str) else dict(spec), f"map size; {GRAMMAR}")
    kw: dict = {}
    size = items["size"]
    parts = size.split(":")
    if len(parts) == 3 and parts[1] == "count":
        kw.update(size=parts[0].strip(), size_unit="count", dtype=parse_dtype(parts[2], "columns size dtype"))
    elif len(parts) == 2 and parts[1] == "count":
        raise bad_value("columns size", size, "COL:count:DTYPE (a count needs its data type, e.g. count:fp32)")
    else:
        column, _unit = _with_unit("size", size, ("bytes",))
        kw.update(size=column, size_unit="bytes")
    if "values" in items and "wide" not in items:
        raise bad_value("columns values", items["values"], "only with wide= (the values of the wide columns)")
    quantities = [k for k in ("time", "busbw", "algbw", "wide") if k in items]
    if len(quantities) != 1:
        raise bad_value("columns", ",".join(quantities) or "none of them",
                        f"exactly one of time=, busbw=, algbw= or wide= (where the measured values are); {GRAMMAR}")
    if "time" in items:
        kw["time"], kw["time_unit"] = _with_unit("time", items["time"], TIME_UNITS)
    for kind in ("busbw", "algbw"):
        if kind in items:
            kw["bandwidth"], kw["bandwidth_unit"] = _with_unit(kind, items[kind], BANDWIDTH_UNITS)
            kw["bandwidth_kind"] = kind
    if "wide" in items:
        kind, _, per_node = items["wide"].partition(":")
        if kind not in WIDE_KINDS:
            raise bad_value("columns wide", items["wide"], "algorithm, ranks or nodes:RANKS_PER_NODE "
                            "(what each value column stands for)")
        if kind == "nodes":
            if not _WHOLE.fullmatch(per_node) or not 1 <= int(per_node[:6]) <= 1024:
                raise bad_value("columns wide", items["wide"], "nodes:RANKS_PER_NODE with a whole number of "
                                "ranks per node from 1 to 1024 (the columns are node counts)")
            kw["ranks_per_node"] = int(per_node)
        elif per_node:
            raise bad_value("columns wide", items["wide"], f"{kind} takes nothing after it (nodes:N does)")
        kw["wide"] = kind
        if "values" not in items:
            raise bad_value("columns wide", items["wide"], "give values=time:UNIT, busbw:UNIT or algbw:UNIT "
                            "(what the wide columns hold, with its unit)")
        what, _, unit = items["values"].partition(":")
        units = TIME_UNITS if what == "time" else BANDWIDTH_UNITS if what in ("busbw", "algbw") else None
        if units is None or unit not in units:
            raise bad_value("columns values", items["values"], "time:us|ms|s|ns, busbw:UNIT or algbw:UNIT "
                            f"(UNIT: {', '.join(BANDWIDTH_UNITS)}), the unit always named")
        kw.update(values_kind=what, values_unit=unit)
        if kind in ("ranks", "nodes") and "ranks" in items:
            raise bad_value("columns ranks", items["ranks"], f"not with wide={kind} (the columns give the ranks)")
        if kind == "algorithm" and "algorithm" in items:
            raise bad_value("columns algorithm", items["algorithm"], "not with wide=algorithm (the columns are "
                            "the algorithms)")
    for key in ("ranks", "algorithm", "op"):
        if key in items:
            if ":" in items[key]:
                raise bad_value(f"columns {key}", items[key], f"a column name ({key} has no unit)")
            kw[key] = items[key]
    named = [v for k, v in kw.items() if k in ("size", "time", "bandwidth", "ranks", "algorithm", "op") and v]
    twice = sorted({c for c in named if named.count(c) > 1})
    if twice:
        raise bad_value("columns", twice[0], "one column for one target (mapped twice)")
    return ColumnMap(**kw)


# ---- algorithm names ---------------------------------------------------------------------

def hcsim_algorithm(collective: str, name: str) -> str | None:
    """hcsim's algorithm for a name a benchmark printed, or None where hcsim has none.

    hcsim's own names, HCCL_ALGO names (``H-D_R``, ``fullmesh``, ``NHR``...) and Open MPI
    coll_tuned names with the same communication (``hcsim.backends.mpi.MPI_ALGORITHMS``:
    ``recursive_doubling`` allreduce is ``rd``, ``bruck`` allgather is ``nb``) are known;
    case is ignored.

    Examples
    --------
    >>> hcsim_algorithm("allreduce", "recursive_doubling"), hcsim_algorithm("allreduce", "H-D_R")
    ('rd', 'hd')
    >>> hcsim_algorithm("allreduce", "basic_linear") is None
    True
    """
    from ..algorithms.registry import algorithms_for, check_collective
    from ..hccl.algo_env import HCSIM_NAME
    from .mpi import MPI_ALGORITHMS

    check_collective(collective)
    if not isinstance(name, str):
        return None
    known = algorithms_for(collective) if collective in COLLECTIVES else []
    key = name.strip()
    if key.lower() in known:
        return key.lower()
    for hccl_name, ours in HCSIM_NAME.items():
        if key.lower() == hccl_name.lower() and ours in known:
            return ours
    for algo in MPI_ALGORITHMS:
        if algo.collective == collective and algo.name == key.lower() and algo.hcsim in known:
            return algo.hcsim
    return None


def _name_algorithms(df: pd.DataFrame, src: _Source) -> pd.DataFrame:
    """Map the ``algorithm_given`` names to hcsim's; keep the others as given, and say so."""
    names, unknown = {}, []
    for coll, given in df[["collective", "algorithm_given"]].drop_duplicates().itertuples(index=False):
        ours = hcsim_algorithm(coll, given)
        names[(coll, given)] = ours or given
        if ours is None:
            unknown.append(f"{given} ({coll})")
    df["algorithm"] = [names[k] for k in zip(df["collective"], df["algorithm_given"], strict=True)]
    df.attrs["algorithm_names"] = _StrDict({given: ours for (_, given), ours in names.items()})
    if unknown:  # a few named, then how many more (a wide table may have thousands of columns)
        more = f" and {len(unknown) - _NAMES_SHOWN:,} more" if len(unknown) > _NAMES_SHOWN else ""
        warnings.warn(f"{src.name}: no hcsim algorithm for {', '.join(unknown[:_NAMES_SHOWN])}{more}: kept as "
                      "given (validate predicts those rows with algorithm='auto')", MeasuredAlgorithmWarning,
                      stacklevel=4)
    return df


# ---- tables: records and the header --------------------------------------------------------

def _table_split(text: str, src: _Source):
    """(header line, header cells, data rows) of a whitespace table.

    A data row is a line whose first field is a number; its header is the nearest line above
    the first row (a ``#`` comment or plain text) with as many cells, split at tabs or runs of
    two or more spaces (``# Size       Avg Latency(us)``). Text lines among the rows (a header
    printed again, a launcher's message) are left out with a warning."""
    above, rows = [], []
    for number, line in enumerate(_lines(text), 1):
        stripped = line.strip()
        if not stripped:
            continue
        first = stripped.split()[0]
        if stripped.startswith("#") or not _is_number(first):
            if rows:
                if not stripped.startswith("#"):
                    src.leave_out(number, "not a table row")
            else:
                above.append((number, stripped))
            continue
        rows.append((number, stripped.split()))
    if not rows:
        return None, None, []
    width = len(rows[0][1])
    for number, line in reversed(above):
        cells = _header_cells(line, False)
        if len(cells) == width and not all(_is_number(c) for c in cells):
            return number, cells, rows
    if above:  # the line just above, when it names columns: a ragged first row is then its error
        number, line = above[-1]
        cells = _header_cells(line, False)
        if len(cells) >= 2 and not all(_is_number(c) for c in cells):
            return number, cells, rows
    raise ConfigError(f"{src.at(rows[0][0])}: data with no header row naming its {width} columns (a plain or "
                      "'#' line just above the data, its names separated by a tab or two spaces)")


def _header_cells(line: str, csv_like: bool) -> list[str]:
    body = line.lstrip().removeprefix("#")
    if csv_like:
        try:
            return [c.strip() for c in next(csv.reader([body]), [])]
        except csv.Error:  # a comment that is no CSV (a 200 KB field, a NUL) names no columns
            return []
    return [c.strip() for c in re.split(r"\t|\s{2,}", body.strip()) if c.strip()]


def _split_header(records, comments, src: _Source):
    """(header line, header cells, data records): the first record unless it is all numbers,
    then the last comment line before the data with as many cells (a ``#`` header)."""
    if not records:
        return None, None, []
    number, first = records[0]
    if not all(_is_number(c) or not c for c in first):
        return number, first, records[1:]
    for cnumber, ctext in reversed(comments):
        cells = _header_cells(ctext, True)
        if cells and len(cells) == len(first) and not all(_is_number(c) for c in cells):
            return cnumber, cells, records
    raise ConfigError(f"{src.at(number)}: data with no header row naming its {len(first)} columns "
                      "(a plain or '#' header line just above the data)")


# ---- OSU ---------------------------------------------------------------------------------

_OSU_TIME = re.compile(r"(?:(Avg|Min|Max|P\d+(?:\.\d+)?)\s*(?:Tail\s*)?)?Lat(?:ency)?\s*\((us|ms|s|ns)\)", re.I)
_UNIT_SUFFIX = re.compile(r"^(.*?)\s*\((us|ms|s|ns)\)$")


def _osu_title(comments, src: _Source | None = None) -> tuple[str | None, str | None]:
    """(collective, 'Latency' or 'Bandwidth') from an ``# OSU MPI Allreduce Latency Test`` line; a
    second title naming another test (two outputs pasted into one file) is refused."""
    found = None
    for number, line in comments:
        m = _OSU_TITLE.match(line)
        if m:
            title = (_OSU_OPS[re.sub(r"[\s_-]", "", m.group(1)).lower()], m.group(2).title())
            if found is not None and title != found[0]:
                raise ConfigError(f"{src.at(number) if src else f'line {number}'}: a second OSU test "
                                  f"({title[0]} {title[1].lower()}) after {found[0][0]} {found[0][1].lower()} "
                                  f"(line {found[1]}); one test per file")
            found = found or (title, number)
    return found[0] if found else (None, None)


def parse_osu(text: str, collective: str | None = None, ranks: int | None = None, *, source=None) -> pd.DataFrame:
    """Rows of an OSU micro-benchmark collective latency table.

    ``# Size  Avg Latency(us)  [Min Latency(us)  Max Latency(us)  Iterations]``: each row's
    average latency is its time. The wide variant has one time column per algorithm,
    ``# Size  ring(us)  recursive_doubling(us)`` (the unit in each name): each becomes rows
    of that algorithm (mapped to hcsim's name where one exists, kept as given otherwise, with a
    :class:`MeasuredAlgorithmWarning`). The collective is the title's (``# OSU MPI Allreduce
    Latency Test v7.3``) or ``collective``; the header may be a ``#`` line or a plain one.
    OSU's ``Size`` is one rank's share for allgather, gather and scatter and what one rank sends
    each peer for alltoall, so those sizes are multiplied by the rank count (hcsim's size is the whole buffer, as in
    nccl-tests), which then must be given.

    Examples
    --------
    >>> text = "# OSU MPI Allreduce Latency Test v7.3\\n# Size       Avg Latency(us)\\n4   1.77\\n8   1.80\\n"
    >>> parse_osu(text, ranks=16)[["collective", "size_bytes", "time_us"]].values.tolist()
    [['allreduce', 4, 1.77], ['allreduce', 8, 1.8]]
    """
    ranks = _check_arguments(text, collective, ranks, "osu")
    src = source if isinstance(source, _Source) else _Source(source)
    comments = [(n, line.strip()) for n, line in enumerate(_lines(text), 1) if line.lstrip().startswith("#")]
    title_op, kind = _osu_title(comments, src)
    if kind == "Bandwidth":
        raise ConfigError(f"{src.name}: an OSU bandwidth test; hcsim reads the collective latency tests "
                          "(or give the columns: columns=)")
    if title_op and collective and title_op != collective:
        raise ConfigError(f"op = {shown(collective)}: the file is OSU {title_op} output; leave --op out or match it")
    collective = collective or title_op
    header_line, header, rows = _table_split(text, src)
    if header is None:
        raise ConfigError(f"{src.name}: no OSU rows found (expected '# Size  Avg Latency(us)' and rows under it)")
    if header[0].lower() not in ("size", "bytes", "size(b)", "size (b)", "msg size", "message size"):
        raise bad_value(src.at(header_line, 1, "header"), header[0], "Size (OSU's first column, bytes)")
    time_columns = []  # (index, algorithm or None)
    for i, name in enumerate(header[1:], 1):
        m = _OSU_TIME.fullmatch(name)
        if m:
            if (m.group(1) or "avg").lower() == "avg":
                time_columns.append((i, None, m.group(2)))
            continue
        if name.lower() in ("iterations", "size"):
            continue
        unit = _UNIT_SUFFIX.match(name)
        if unit is None:
            raise bad_value(src.at(header_line, i + 1, "header"), name, "an OSU column (Avg Latency(us), "
                            "Min Latency(us), Max Latency(us), Iterations) or an algorithm's time with its "
                            "unit, e.g. ring(us); for other tables name the columns (columns=, --columns)")
        time_columns.append((i, unit.group(1).strip(), unit.group(2)))
    if not time_columns:
        raise ConfigError(f"{src.at(header_line)}: no time column (Avg Latency(us), or one per algorithm as "
                          "'ring(us)')")
    named = [(i, algo) for i, algo, _ in time_columns if algo]
    if named and len(named) < len(time_columns):  # an average of what ran beside named algorithms
        i, algo = named[0]
        raise bad_value(src.at(header_line, i + 1, "header"), header[i], "either OSU's own columns (Avg "
                        "Latency(us)...) or one time column per algorithm, not both")
    if not collective:
        raise ConfigError(f"{src.name}: the collective is not recorded (no '# OSU MPI <Collective> Latency Test' "
                          f"line); pass collective= (--op), one of {', '.join(COLLECTIVES)}")
    if collective in _PER_RANK_SIZE and ranks is None:
        raise ConfigError(f"{src.name}: OSU's {collective} Size is per rank, hcsim's the whole buffer; pass "
                          "ranks= (--ranks) to convert")
    out = []
    for number, cells in rows:
        if len(cells) != len(header):
            raise ConfigError(f"{src.at(number)}: {len(cells)} fields; the header (line {header_line}) has "
                              f"{len(header)} (a truncated or ragged row)")
        size = _size(cells[0], src.at(number, 1, header[0]))
        if size == 0:
            src.leave_out(number, "0 bytes")
            continue
        if collective in _PER_RANK_SIZE:
            size *= ranks
        for i, algo, unit in time_columns:
            value = _time(cells[i], src.at(number, i + 1, header[i]))
            t = _check_converted(value * TIME_UNITS[unit], src.at(number, i + 1, header[i]), cells[i])
            out.append({"size_bytes": size, "time_us": t, "algorithm_given": algo})
    df = _rows_frame(out, collective, ranks, "osu", src)
    if any(algo for _, algo, _ in time_columns):
        df = _name_algorithms(df, src)
    else:
        df = df.drop(columns="algorithm_given")
    return df


IMB_OPS = {"allreduce": "allreduce", "allgather": "allgather", "allgatherv": "allgather", "alltoall": "alltoall",
           "alltoallv": "alltoall", "bcast": "broadcast", "reduce": "reduce", "reduce_scatter": "reducescatter",
           "gather": "gather", "gatherv": "gather", "scatter": "scatter", "scatterv": "scatter",
           "sendrecv": "sendrecv"}
"""IMB-MPI1's benchmarks (``# Benchmarking <Name>``, case-insensitive) as hcsim's collectives. IMB's
v-variants run with equal counts, so they are their plain collectives; ``Sendrecv`` passes X bytes to
the right neighbour while receiving from the left one, as nccl-tests' sendrecv. Others (PingPong,
PingPing, Exchange, Uniband, Biband, Barrier, Reduce_scatter_block, the non-blocking IMB-NBC ones) are
left out with a warning."""
IMB_PER_RANK_SIZE = ("allgather", "alltoall", "gather", "scatter")
"""Collectives whose IMB ``#bytes`` X is one process's part, not the whole buffer: Allgather, every process
inputs X and receives X*np; Alltoall, X to and from each process (Intel MPI Benchmarks user guide, MPI-1
benchmarks); Gather and Scatter, X per process. hcsim's size is then X x np."""
_IMB_BENCH = re.compile(r"#\s*Benchmarking\s+(\S+)", re.I)
_IMB_PROCS = re.compile(r"#\s*#processes\s*=\s*(\d+)", re.I)
_IMB_HEADER = re.compile(r"#?\s*#bytes\b", re.I)


def is_imb(text: str) -> bool:
    """Whether a table is the Intel MPI Benchmarks' (IMB-MPI1): a ``# Benchmarking <Name>`` line and a
    ``#bytes`` header."""
    bench = header = False
    for line in _lines(text):
        stripped = line.strip()
        bench = bench or bool(_IMB_BENCH.match(stripped))
        header = header or bool(_IMB_HEADER.match(stripped))
        if bench and header:
            return True
    return False


def parse_imb(text: str, collective: str | None = None, ranks: int | None = None, *, source=None) -> pd.DataFrame:
    """Rows of Intel MPI Benchmarks (IMB-MPI1) output: one section per benchmark and process count.

    A section is ``# Benchmarking <Name>``, ``# #processes = N`` and a header ``#bytes #repetitions
    t_min[usec] t_max[usec] t_avg[usec]`` over its rows; a row's time is ``t_avg[usec]``, the mean
    over the processes, as OSU's average latency. IMB runs each benchmark at several process
    counts by default (2, 4, ... up to the job's), so a file holds several: every section's rows are
    kept, each with its own rank count, unless ``ranks`` picks one; ``collective`` keeps one
    benchmark (:data:`IMB_OPS`). Sizes of :data:`IMB_PER_RANK_SIZE` are multiplied by the section's
    process count. Zero-byte rows and benchmarks that are no collective hcsim simulates are left
    out with a warning.

    Examples
    --------
    >>> text = ("# Benchmarking Allgather\\n# #processes = 4\\n"
    ...         "#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\\n8 1000 2.0 2.4 2.2\\n")
    >>> parse_imb(text)[["collective", "ranks", "size_bytes", "time_us"]].values.tolist()
    [['allgather', 4.0, 32, 2.2]]
    """
    ranks = _check_arguments(text, collective, ranks, "imb")
    src = source if isinstance(source, _Source) else _Source(source)
    bench = procs = header = None
    header_line = 0
    seen_ops, seen_ranks, out = set(), set(), []
    for number, line in enumerate(_lines(text), 1):
        stripped = line.strip()
        if not stripped:
            continue
        m = _IMB_BENCH.match(stripped)
        if m:
            bench, procs, header = m.group(1), None, None
            continue
        m = _IMB_PROCS.match(stripped)
        if m:
            procs = int(m.group(1))
            continue
        if _IMB_HEADER.match(stripped):
            header, header_line = [c.lstrip("#").lower() for c in stripped.split()], number
            continue
        if stripped.startswith("#") or not _NUMBER.match(stripped.split()[0]):
            continue
        cells = stripped.split()
        if bench is None:
            src.leave_out(number, "a row outside an IMB section (no '# Benchmarking' line above)")
            continue
        op = IMB_OPS.get(bench.lower())
        if op is None:
            src.leave_out(number, f"IMB {bench}: not a collective hcsim simulates")
            continue
        if header is None:
            src.leave_out(number, f"IMB {bench}: a row with no '#bytes' header above it in its section")
            continue
        seen_ops.add(op)
        if collective is not None and op != collective:
            continue
        if procs is None:
            raise ConfigError(f"{src.at(number)}: IMB {bench} with no '# #processes = N' line above its rows")
        where = src.at(number)
        if procs < 2:  # IMB run with -npmin 1 times its collectives on one process too: no communication
            src.leave_out(number, f"IMB {bench} on {procs} process")
            continue
        if procs > MAX_CALL_RANKS:
            raise bad_value(f"{where} (#processes)", procs, RANKS_ALLOWED)
        seen_ranks.add(procs)
        if ranks is not None and procs != ranks:
            continue
        if len(cells) != len(header):
            raise ConfigError(f"{where}: {len(cells)} fields; the header (line {header_line}) has {len(header)} "
                              "(a truncated or ragged row)")
        if "t_avg[usec]" not in header:
            raise ConfigError(f"{src.at(header_line)}: IMB {bench}'s header has no t_avg[usec] column")
        t_col = header.index("t_avg[usec]")
        size = _size(cells[0], src.at(number, 1, "#bytes"))
        if size == 0:
            src.leave_out(number, "0 bytes")
            continue
        t = _check_converted(_time(cells[t_col], src.at(number, t_col + 1, "t_avg[usec]")),
                             src.at(number, t_col + 1, "t_avg[usec]"), cells[t_col])
        out.append({"collective": op, "ranks": procs, "time_us": t,
                    "size_bytes": size * procs if op in IMB_PER_RANK_SIZE else size})
    if collective is not None and collective not in seen_ops:
        raise ConfigError(f"op = {shown(collective)}: the IMB file has no such benchmark (it has "
                          f"{', '.join(sorted(seen_ops)) or 'none hcsim simulates'})")
    if ranks is not None and ranks not in seen_ranks:
        raise ConfigError(f"ranks = {ranks}: the IMB file has no section of that many processes (it has "
                          f"{', '.join(map(str, sorted(seen_ranks))) or 'none'})")
    return _rows_frame(out, collective, ranks, "imb", src)


def _check_converted(t: float, where: str, cell: str) -> float:
    if not (math.isfinite(t) and t >= MIN_TIME_US):
        raise bad_value(where, cell, f"a time that is finite and at least {MIN_TIME_US:g} us once converted")
    return t


def _rows_frame(rows: list[dict], collective, ranks, algorithm: str, src: _Source) -> pd.DataFrame:
    """The sweep-shaped frame of ``rows`` (dicts with size_bytes, time_us and optionally
    collective, ranks, algorithm_given)."""
    out = []
    for r in rows:
        coll = r.get("collective", collective)
        k = r.get("ranks", ranks)
        factor = BUSBW_FACTOR[coll](k) if k else float("nan")
        algbw = r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9
        row = {"collective": coll, "algorithm": algorithm, "mode": "measured",
               "ranks": float(k) if k else float("nan"), "size_bytes": r["size_bytes"], "time_us": r["time_us"],
               "algbw_GBps": algbw, "busbw_GBps": algbw * factor}
        if "algorithm_given" in r:
            row["algorithm_given"] = r["algorithm_given"]
        out.append(row)
    extra = ["algorithm_given"] if any("algorithm_given" in r for r in rows) else []
    df = pd.DataFrame(out, columns=COLUMNS + extra)
    if df.empty:
        raise ConfigError(f"{src.name}: no rows left" + (f" ({'; '.join(src.left_out[:3])})" if src.left_out else ""))
    return df.astype({"size_bytes": "int64", "time_us": "float64", "ranks": "float64"})


# ---- mapped tables -------------------------------------------------------------------------

def _collective_name(cell: str) -> str | None:
    """hcsim's name of a collective as benchmarks print it (AllReduce, all_reduce, reduce-scatter)."""
    key = re.sub(r"[\s_-]", "", cell).lower().removesuffix("perf").removesuffix("test")
    key = {"bcast": "broadcast", "reducescatterblock": "reducescatter"}.get(key, key)
    return key if key in COLLECTIVES else None


def parse_mapped(text: str, columns, collective: str | None = None, ranks: int | None = None,
                 csv_like: bool = True, *, source=None) -> pd.DataFrame:
    """Rows of a CSV (or whitespace table) read through a column mapping (:func:`parse_columns`).

    Bandwidths become times with hcsim's bus factors (:data:`hcsim.algorithms.schedule.BUSBW_FACTOR`,
    nccl-tests' definitions): ``time = size / algbw`` and ``algbw = busbw / factor(collective,
    ranks)``. Wide tables become one row per (row, value column); an empty value cell (that
    algorithm or rank count was not run at that size) is left out with a warning.

    Examples
    --------
    >>> text = "bytes,ring,recursive_doubling\\n1048576,50.0,60.0\\n"
    >>> df = parse_mapped(text, "size=bytes,wide=algorithm,values=time:us", "allreduce", 8)
    >>> df[["algorithm", "algorithm_given", "time_us"]].values.tolist()
    [['ring', 'ring', 50.0], ['rd', 'recursive_doubling', 60.0]]
    """
    from ..dtypes import DTYPES

    ranks = _check_arguments(text, collective, ranks, "csv")
    if not isinstance(csv_like, bool):
        raise bad_value("csv_like", csv_like, "True (comma-separated) or False (whitespace-separated)")
    src = source if isinstance(source, _Source) else _Source(source)
    cmap = columns if isinstance(columns, ColumnMap) else parse_columns(columns)
    if csv_like:
        records = list(_csv_records(text, src))
        comments = [(n, line.strip()) for n, line in enumerate(_lines(text), 1) if line.lstrip().startswith("#")]
        if records:
            comments = [(n, c) for n, c in comments if n < records[0][0]]
        header_line, header, rows = _split_header(records, comments, src)
    else:
        header_line, header, rows = _table_split(text, src)
    if header is None:
        raise ConfigError(f"{src.name}: no data lines (only comments and blank lines)")
    end = len(header)
    while end and header[end - 1] == "":  # trailing separators name no column
        end -= 1
    header = header[:end]
    names = [h for h in header if h]
    twice = sorted(h for h, n in collections.Counter(names).items() if n > 1)  # linear: a header may be wide
    if twice:
        more = f" and {len(twice) - _NAMES_SHOWN:,} more" if len(twice) > _NAMES_SHOWN else ""
        raise ConfigError(f"{src.at(header_line)}: the header names {', '.join(map(repr, twice[:_NAMES_SHOWN]))}"
                          f"{more} twice")
    index = {h: i for i, h in enumerate(header) if h}
    for target in ("size", "time", "bandwidth", "ranks", "algorithm", "op"):
        col = getattr(cmap, target)
        if col is not None and col not in index:
            raise bad_value(f"columns {'busbw/algbw' if target == 'bandwidth' else target}", col,
                            f"a column of the header (line {header_line}): {shown(', '.join(names))}")
    if cmap.op is None and not collective:  # an OSU title names it, as in parse_osu
        collective = _osu_title([(n, line.strip()) for n, line in enumerate(_lines(text), 1)
                                 if line.lstrip().startswith("#")], src)[0]
    if cmap.op is None and not collective:
        raise ConfigError(f"{src.name}: the collective is not recorded (no op= column mapped); pass collective= "
                          f"(--op), one of {', '.join(COLLECTIVES)}")
    mapped = {c for c in (cmap.size, cmap.time, cmap.bandwidth, cmap.ranks, cmap.algorithm, cmap.op) if c}
    wide = []  # (index, name, algorithm or None, ranks or None)
    if cmap.wide:
        if cmap.wide != "algorithm" and ranks is not None:
            raise bad_value("ranks", ranks, f"leave it out: with wide={cmap.wide} the columns give the ranks")
        for i, name in enumerate(header):
            if not name or name in mapped:
                continue
            if cmap.wide == "algorithm":
                wide.append((i, name, name, None))
                continue
            count = name.strip()
            if not _WHOLE.fullmatch(count):
                raise bad_value(src.at(header_line, i + 1, "header"), name,
                                f"a {'rank' if cmap.wide == 'ranks' else 'node'} count (a whole number) as the "
                                "column name, or map this column (columns=)")
            k = int(count[:9]) * (cmap.ranks_per_node or 1)
            wide.append((i, name, None, _rank_count(str(k), src.at(header_line, i + 1, "header"))))
        if not wide:
            raise ConfigError(f"{src.at(header_line)}: no value columns left for wide={cmap.wide} (every column "
                              "is mapped to something else)")
        _wide_rows(rows, header, header_line, wide, cmap, collective, src)
    unnamed = [i for i, name in enumerate(header) if not name]
    elem = DTYPES[cmap.dtype].size_bytes if cmap.size_unit == "count" else 1
    out = []
    for number, cells in rows:
        cells = _row_cells(src, number, cells, header, header_line)
        if cells is None:
            continue

        def at(i, _number=number):
            return src.at(_number, i + 1, header[i])

        coll = collective
        if cmap.op is not None:
            cell = cells[index[cmap.op]]
            coll = _collective_name(cell)
            if coll is None:
                raise unknown_name(at(index[cmap.op]), cell, COLLECTIVES)
            if collective and coll != collective:
                continue
        size = _size(cells[index[cmap.size]], at(index[cmap.size]))
        if size == 0:
            src.leave_out(number, "0 bytes")
            continue
        size *= elem
        k = ranks
        if cmap.ranks is not None:
            cell = cells[index[cmap.ranks]]
            if not cell and ranks is None:  # an empty cell would leave the rank count to the topology
                raise bad_value(at(index[cmap.ranks]), cell, RANKS_ALLOWED + "; or pass ranks= (--ranks) for "
                                "the rows that leave it empty")
            k = _rank_count(cell, at(index[cmap.ranks])) if cell else ranks
            if ranks is not None and k != ranks:
                raise bad_value("ranks", ranks, f"the ranks the file records ({k}, {at(index[cmap.ranks])}), "
                                "or leave it out")
        given = cells[index[cmap.algorithm]] if cmap.algorithm else None
        if cmap.wide:
            values = [(i, cells[i], algo or given, wk or k) for i, _, algo, wk in wide]
            kind, unit = cmap.values_kind, cmap.values_unit
        else:
            col = cmap.time or cmap.bandwidth
            values = [(index[col], cells[index[col]], given, k)]
            kind = "time" if cmap.time else cmap.bandwidth_kind
            unit = cmap.time_unit if cmap.time else cmap.bandwidth_unit
        if cmap.wide:  # every unmapped column is a value column: one with no name cannot say whose values
            for i in unnamed:
                if cells[i] != "":
                    raise bad_value(at(i), cells[i], f"an empty cell: column {i + 1} has no "
                                    f"name in the header (line {header_line}), so with wide={cmap.wide} it is "
                                    "no one's; name it or delete the column")
        for i, cell, algo, kk in values:
            if cmap.wide and cell == "":
                src.leave_out(number, f"no value in column {header[i]!r}")
                continue
            t = _value_time(cell, kind, unit, size, coll, kk, at(i))
            row = {"size_bytes": size, "time_us": t, "collective": coll, "ranks": kk}
            if algo is not None:
                row["algorithm_given"] = algo
            out.append(row)
    if not out and collective and not src.left_out:
        raise ConfigError(f"op = {collective!r}: {src.name.removeprefix('measured ')} has no {collective} rows")
    df = _rows_frame(out, collective, ranks, "csv" if csv_like else "table", src)
    if "algorithm_given" in df.columns:
        df = _name_algorithms(df, src)
    df.attrs["columns"] = cmap
    return df


def _wide_rows(rows, header, header_line, wide, cmap, collective, src: _Source) -> None:
    """Refuse a wide table that would make more than MAX_SWEEP_SIZES rows (one per value
    cell), before any row is built: the value cells that are not empty, in the rows that are
    not the header again, 0 bytes or another collective's, are counted (linear in the cells)."""
    if len(rows) * len(wide) <= MAX_SWEEP_SIZES:
        return
    columns = [i for i, *_ in wide]
    size_at = header.index(cmap.size)
    op_at = header.index(cmap.op) if cmap.op is not None else None
    count = lines = 0
    for _, cells in rows:
        if len(cells) < len(header) or cells[:len(header)] == header:
            continue  # a ragged row or the header again: the reading loop says what it is
        size = cells[size_at]
        if _WHOLE.fullmatch(size) and not size.strip("0"):
            continue  # 0 bytes: left out
        if op_at is not None and collective and _collective_name(cells[op_at]) != collective:
            continue
        lines += 1
        count += sum(1 for i in columns if cells[i] != "")
    if count > MAX_SWEEP_SIZES:
        raise WorkLimitError(f"{src.name}: {count:,} rows ({lines:,} data line(s) x {len(wide):,} value columns "
                             f"of wide={cmap.wide}); at most {MAX_SWEEP_SIZES} (hcsim.limits.MAX_SWEEP_SIZES, as a "
                             "sweep): each row is a simulation; pass fewer lines or value columns")


def _value_time(cell: str, kind: str, unit: str, size: int, collective: str, ranks, where: str) -> float:
    """A value cell as a time in microseconds: a time in ``unit``, or a bandwidth converted."""
    if kind == "time":
        return _check_converted(_time(cell, where) * TIME_UNITS[unit], where, cell)
    bw = float(cell) if _NUMBER.fullmatch(cell) else math.nan
    if not (math.isfinite(bw) and bw > 0):
        raise bad_value(where, cell, f"{'an' if kind == 'algbw' else 'a'} {kind} in {unit}, a finite number > 0")
    algbw = bw * BANDWIDTH_UNITS[unit]
    if kind == "busbw":
        factor = BUSBW_FACTOR[collective](ranks or 2)
        if ranks is None and factor != BUSBW_FACTOR[collective](3):
            raise ConfigError(f"{where}: a {collective} bus bandwidth needs the rank count (its factor "
                              "depends on it); pass ranks= (--ranks) or map ranks=COL")
        algbw /= factor
    return _check_converted(size / algbw * 1e6, where, cell)


__all__ = ["ColumnMap", "MeasuredAlgorithmWarning", "detect_format", "hcsim_algorithm", "parse_columns",
           "parse_mapped", "parse_osu"]
