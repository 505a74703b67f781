"""Readers for any benchmark output (hcsim.backends.readers): format detection from data lines
only, OSU tables, CSVs through a column mapping, robustness to comments, BOMs, CRLF and
trailing separators; every bad input is one HcsimError line."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcsim.algorithms.schedule import BUSBW_FACTOR, COLLECTIVES
from hcsim.backends import load_measured
from hcsim.backends.parsers import MeasuredRowWarning, check_measured
from hcsim.backends.readers import (
    MeasuredAlgorithmWarning,
    detect_format,
    hcsim_algorithm,
    parse_columns,
)
from hcsim.cli import main
from hcsim.errors import HcsimError

OSU = """# OSU MPI Allreduce Latency Test v7.1
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
1                     174.36            135.35            221.55        1000
2                     171.71            130.58            219.23        1000
4                     173.35            129.88            221.56        1000
"""

OSU_WIDE = """# OSU MPI Allgather Latency Test, one column per algorithm
Size    ring(us)    recursive_doubling(us)    neighbor(ms)
1024    10.5        9.25                      0.0125
2048    11.0        9.75                      0.0130
"""

NCCL_WITH_CSV_COMMENT = """# nccl-tests style words: out-of-place in-place algbw busbw #wrong
op,ranks,bytes,time_us
allreduce,8,1024,12.5
"""

CSV_WORDS_IN_COMMENTS = """# data_size(Bytes): | aveg_time(us): (a comment quoting hccl_test's header)
# out-of-place busbw #wrong
bytes,latency
1024,0.5
2048,0.75
"""


def one_line(call, *needles):
    with pytest.raises(HcsimError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and "\r" not in text, text
    for needle in needles:
        assert needle in text, text
    return text


def write(tmp_path, text, name="m.txt", raw=False):
    path = tmp_path / name
    if raw:
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


# ---- detection ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind", [
    (OSU, "table"),
    (OSU_WIDE, "table"),
    (NCCL_WITH_CSV_COMMENT, "csv"),
    (CSV_WORDS_IN_COMMENTS, "csv"),
    ("mpirun -n 8 ./bin/all_reduce_test\nthe minbytes is 8, maxbytes is 8\ndata_size(Bytes): | aveg_time(us):\n"
     "8 | 1.5\n", "hccl_test"),
    ("#  size count type redop root time\n        1024           256     float     sum      -1     5.45    0.19"
     "    0.33      0     5.35    0.19    0.33      0\n", "nccl-tests"),
    ("# only\n# comments, here\n\n", None),
    ("hello world\n", None),
])
def test_format_is_decided_by_data_lines_not_comments(text, kind):
    assert detect_format(text) == kind


def test_comments_with_other_formats_words_do_not_fool_the_reader(tmp_path):
    df = load_measured(write(tmp_path, NCCL_WITH_CSV_COMMENT, "a.csv"))
    assert df[["collective", "ranks", "size_bytes", "time_us"]].values.tolist() == [["allreduce", 8.0, 1024, 12.5]]
    df = load_measured(write(tmp_path, CSV_WORDS_IN_COMMENTS, "b.csv"), "allgather", 4,
                       columns="size=bytes,time=latency:ms")
    assert df["time_us"].tolist() == [500.0, 750.0] and df["size_bytes"].tolist() == [1024, 2048]


# ---- OSU ---------------------------------------------------------------------------------

def test_osu_table_reads_the_average_latency():
    df = load_measured_text(OSU, ranks=16)
    # values read from the text above, independently of the reader
    assert df["size_bytes"].tolist() == [1, 2, 4]
    assert df["time_us"].tolist() == [174.36, 171.71, 173.35]
    assert set(df["collective"]) == {"allreduce"} and set(df["ranks"]) == {16.0}
    check_measured(df)


def load_measured_text(text, *args, tmp=None, **kwargs):
    import pathlib
    import tempfile

    path = pathlib.Path(tempfile.mkdtemp()) / "measured.txt"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasuredAlgorithmWarning)
        return load_measured(path, *args, **kwargs)


def test_osu_wide_table_one_column_per_algorithm():
    with pytest.warns(MeasuredAlgorithmWarning, match="neighbor"):
        df = load_measured(write_tmp(OSU_WIDE), "allgather", 8)
    # OSU's allgather Size is per rank: hcsim's size is the whole buffer (x 8 ranks)
    assert df["size_bytes"].tolist() == [8192, 8192, 8192, 16384, 16384, 16384]
    assert df["time_us"].tolist() == pytest.approx([10.5, 9.25, 12.5, 11.0, 9.75, 13.0])
    assert df["algorithm_given"].tolist()[:3] == ["ring", "recursive_doubling", "neighbor"]
    # recursive doubling allgather is hcsim's hd (hcsim.backends.mpi.MPI_ALGORITHMS); neighbor has none
    assert df["algorithm"].tolist()[:3] == ["ring", "hd", "neighbor"]
    assert df.attrs["algorithm_names"] == {"ring": "ring", "recursive_doubling": "hd", "neighbor": "neighbor"}


def write_tmp(text, name="m.txt"):
    import pathlib
    import tempfile

    path = pathlib.Path(tempfile.mkdtemp()) / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, kwargs, needles", [
    (OSU, dict(collective="alltoall"), ["op = 'alltoall'", "OSU allreduce output"]),
    (OSU.replace("# OSU MPI Allreduce Latency Test v7.1\n", ""), {}, ["the collective is not recorded", "--op"]),
    (OSU_WIDE, dict(collective="allgather"), ["Size is per rank", "ranks="]),
    (OSU.replace("174.36", "fast"), dict(ranks=4), ["line 4, column 2 (Avg Latency(us)) = 'fast'"]),
    (OSU.replace("            135.35", ""), dict(ranks=4), ["line 4: 4 fields; the header (line 3) has 5"]),
    (OSU.replace("Avg Latency(us)", "Avg Latency"), dict(ranks=4), ["(header) = 'Avg Latency'", "ring(us)"]),
    (OSU.replace("# Size ", "# Bytes"), dict(ranks=4), []),  # Bytes is a size column name too
    (OSU.replace("# Size ", "# Lines"), dict(ranks=4), ["(header) = 'Lines'", "Size"]),
    (OSU.replace("# Size       Avg", "# Size Avg"), dict(ranks=4), ["(header) = 'Size Avg Latency(us)'"]),
    (OSU.replace("Latency Test", "Bandwidth Test"), {}, ["OSU bandwidth test"]),
    # an algorithm's column beside OSU's own average (found by fuzzing: a byte flipped into a header name)
    (OSU.replace("Min Latency(us)", "\x01Min Latency(us)"), dict(ranks=4),
     ["line 3, column 3 (header) = '\\x01Min Latency(us)'", "not both"]),
])
def test_osu_errors_are_one_line(text, kwargs, needles):
    path = write_tmp(text)
    if not needles:
        assert len(load_measured(path, **kwargs)) == 3
        return
    one_line(lambda: load_measured(path, **kwargs), *needles)


def test_osu_plain_header_crlf_bom_and_text_lines():
    text = ("\ufeffsome launcher line\r\nSize\tAvg Latency(us)\r\n\r\n8\t2.5\r\n# a comment\r\n16\t3.5\r\n"
            "Size\tAvg Latency(us)\r\n")
    path = write_tmp("")
    path.write_bytes(text.encode())
    with pytest.warns(MeasuredRowWarning, match="not a table row"):
        df = load_measured(path, "broadcast", 4)
    assert df["time_us"].tolist() == [2.5, 3.5] and df["size_bytes"].tolist() == [8, 16]


# ---- the column mapping -------------------------------------------------------------------

@pytest.mark.parametrize("spec, needles", [
    ("size=bytes,time=latency_ms", ["columns time = 'latency_ms'", "name the unit", "ms"]),
    ("size=bytes,time=latency:minutes", ["columns time = 'latency:minutes'", "us, ms, s"]),
    ("size=Size,time=time_us", ["columns size = 'Size'", "name the unit"]),
    ("size=n:count", ["count:DTYPE"]),
    ("size=n:count:float128", ["columns size dtype = 'float128'"]),
    ("time=time_us", ["map size"]),
    ("size=bytes", ["exactly one of time=, busbw=, algbw= or wide="]),
    ("size=bytes,time=time_us,busbw=busbw_GBps", ["exactly one of"]),
    ("size=bytes,busbw=bw", ["columns busbw = 'bw'", "GBps, GiBps"]),
    ("size=bytes,wide=algorithm", ["give values=time:UNIT"]),
    ("size=bytes,wide=algorithm,values=time", ["columns values = 'time'", "unit always named"]),
    ("size=bytes,wide=nodes,values=time:us", ["nodes:RANKS_PER_NODE"]),
    ("size=bytes,wide=gpus,values=time:us", ["columns wide = 'gpus'"]),
    ("size=bytes,time=time_us,values=time:us", ["only with wide="]),
    ("size=bytes,time=time_us,speed=x", ["columns target = 'speed': unknown; known:"]),
    ("size=bytes,,time=time_us", ["no empty part"]),
    ("size=bytes,time", ["columns = 'time'"]),
    ("size=bytes,time=time_us,time=t:s", ["time is mapped twice"]),
    ("size=bytes,time=bytes:us", ["columns = 'bytes': one column for one target"]),
    ("size=bytes,time=time_us,ranks=n:ranks", ["columns ranks = 'n:ranks'", "no unit"]),
    ("size=bytes,wide=ranks,ranks=n,values=time:us", ["not with wide=ranks"]),
    (5, ["columns = 5"]),
    ({"size": 5}, ["columns size = 5"]),
])
def test_column_mapping_grammar_errors(spec, needles):
    one_line(lambda: parse_columns(spec), *needles)


def test_mapping_parses_units():
    m = parse_columns("size=elements:count:float,busbw=bw:GiBps,ranks=n,op=coll")
    assert (m.size, m.size_unit, m.dtype, m.bandwidth, m.bandwidth_kind, m.bandwidth_unit, m.ranks, m.op) == (
        "elements", "count", "fp32", "bw", "busbw", "GiBps", "n", "coll")
    assert parse_columns({"size": "bytes", "time": "time_us"}).time_unit == "us"


def test_bandwidth_columns_become_times_with_hcsim_bus_factors(tmp_path):
    text = "coll,n,elements,bw\nAllReduce,8,262144,100\nall_gather,4,262144,50\nbroadcast,16,1024,2\n"
    df = load_measured(write(tmp_path, text, "bw.csv"), columns="size=elements:count:fp32,busbw=bw:GBps,"
                       "ranks=n,op=coll")
    size = 262144 * 4
    # busbw = algbw x factor (nccl-tests' definition); time = size / algbw
    expected = [size / (100e9 / BUSBW_FACTOR["allreduce"](8)) * 1e6, size / (50e9 / (3 / 4)) * 1e6,
                4096 / 2e9 * 1e6]
    assert df["time_us"].tolist() == pytest.approx(expected, rel=1e-12)
    assert df["collective"].tolist() == ["allreduce", "allgather", "broadcast"]
    assert df["busbw_GBps"].tolist() == pytest.approx([100, 50, 2])
    algbw = load_measured(write(tmp_path, "bytes,algbw\n1000000,2.5\n", "a.csv"), "allreduce",
                          columns="size=bytes,algbw=algbw:GBps")
    assert algbw["time_us"].tolist() == pytest.approx([400.0])
    # a busbw whose factor needs the rank count, with none given
    one_line(lambda: load_measured(write(tmp_path, "bytes,bw\n1000,5\n", "c.csv"), "allreduce",
                                   columns="size=bytes,busbw=bw:GBps"), "line 2, column 2 (bw)", "rank count")
    assert load_measured(write(tmp_path, "bytes,bw\n1000,5\n", "d.csv"), "broadcast",
                         columns="size=bytes,busbw=bw:GBps")["time_us"].tolist() == pytest.approx([0.2])


def test_wide_tables_by_rank_and_node_count(tmp_path):
    text = "# nodes as columns, times in ms\nbytes,2,4,,\n1048576,1.5,2.5,,\n2097152,3.0,,,\n"
    with pytest.warns(MeasuredRowWarning, match="no value in column '4'"):
        df = load_measured(write(tmp_path, text, "n.csv"), "allreduce",
                           columns="size=bytes,wide=nodes:8,values=time:ms")
    assert df[["ranks", "size_bytes", "time_us"]].values.tolist() == [[16, 1048576, 1500], [32, 1048576, 2500],
                                                                     [16, 2097152, 3000]]
    df = load_measured(write(tmp_path, "bytes,8,16\n64,1,2\n", "r.csv"), "alltoall",
                       columns="size=bytes,wide=ranks,values=busbw:GBps")
    assert df["ranks"].tolist() == [8, 16]
    assert df["time_us"].tolist() == pytest.approx([64 / (1e9 / (7 / 8)) * 1e6, 64 / (2e9 / (15 / 16)) * 1e6])
    one_line(lambda: load_measured(write(tmp_path, "bytes,8 nodes\n64,1\n", "x.csv"), "alltoall",
                                   columns="size=bytes,wide=nodes:4,values=time:us"),
             "line 1, column 2 (header) = '8 nodes'", "node count")
    one_line(lambda: load_measured(write(tmp_path, "bytes,8,16\n64,1,2\n", "y.csv"), "alltoall", 8,
                                   columns="size=bytes,wide=ranks,values=time:us"), "ranks = 8", "leave it out")


@pytest.mark.parametrize("text, spec, kwargs, needles", [
    ("bytes,t\n1024,1\n", "size=bytes,time=t:us", {}, ["collective is not recorded"]),
    ("bytes,t\n1024,1\n", "size=size:bytes,time=t:us", dict(collective="allreduce"),
     ["columns size = 'size'", "a column of the header (line 1)"]),
    ("bytes,t\n1024,x\n", "size=bytes,time=t:us", dict(collective="allreduce"), ["line 2, column 2 (t) = 'x'"]),
    ("bytes,t\n1024,1e-9\n", "size=bytes,time=t:ms", dict(collective="allreduce"),
     ["line 2, column 2 (t) = '1e-9'"]),
    ("bytes,t\n1024,1e303\n", "size=bytes,time=t:s", dict(collective="allreduce"), ["once converted"]),
    ("bytes,t\n1024.5,1\n", "size=bytes,time=t:us", dict(collective="allreduce"), ["(bytes) = '1024.5'"]),
    ("op,bytes,t\nbarrier,1024,1\n", "size=bytes,time=t:us,op=op", {}, ["(op) = 'barrier': unknown"]),
    ("bytes,t,n\n1024,1,1\n", "size=bytes,time=t:us,ranks=n", dict(collective="allreduce"), ["(n) = '1'"]),
    ("bytes,t,n\n1024,1,8\n", "size=bytes,time=t:us,ranks=n", dict(collective="allreduce", ranks=4),
     ["ranks = 4: the ranks the file records (8"]),
    ("bytes,t\n1024,1,5\n", "size=bytes,time=t:us", dict(collective="allreduce"), ["line 2: 3 cells"]),
    ("bytes,bytes\n1,2\n", "size=bytes,time=t:us", dict(collective="allreduce"), ["names 'bytes' twice"]),
    ("# comments only\n", "size=bytes,time=t:us", dict(collective="allreduce"), ["no data lines"]),
    ("1024,1\n", "size=bytes,time=t:us", dict(collective="allreduce"), ["no header row naming its 2 columns"]),
    ("# " + "a" * 200_000 + ",b\n1,2\n", "size=bytes,time=t:us", dict(collective="allreduce"),
     ["line 2: data with no header row"]),  # a comment too long for csv is no header, not a crash
    ("bytes,t\nbytes,5\n", "size=bytes,time=t:us", dict(collective="allreduce"), ["line 2, column 1 (bytes) = 'bytes'"]),
    ("bytes,bw\n1024,0\n", "size=bytes,algbw=bw:GBps", dict(collective="allreduce"), ["(bw) = '0'", "> 0"]),
    ("op,bytes,t\nallgather,1024,1\n", "size=bytes,time=t:us,op=op", dict(collective="allreduce"),
     ["op = 'allreduce'", "has no allreduce rows"]),
])
def test_mapped_csv_errors_are_one_line(tmp_path, text, spec, kwargs, needles):
    path = write(tmp_path, text, "m.csv")
    msg = one_line(lambda: load_measured(path, columns=spec, **kwargs), *needles)
    assert len(msg) < 700


def test_columns_refused_for_tool_outputs(tmp_path):
    path = write(tmp_path, "data_size(Bytes): | aveg_time(us):\n8 | 1.5\n")
    one_line(lambda: load_measured(path, "allreduce", columns="size=bytes,time=time_us"),
             "columns = ", "hccl_test output")


def test_robust_csv_bom_crlf_trailing_separators_and_hash_header(tmp_path):
    data = "\ufeff# my run\r\n# bytes,time_us,\r\n\r\n1024,2.5,\r\n# a note in the middle\r\n2048,3.5,\r\n"
    df = load_measured(write(tmp_path, data.encode(), "r.csv", raw=True), "allreduce", 8,
                       columns="size=bytes,time=time_us")
    assert df["time_us"].tolist() == [2.5, 3.5] and df["size_bytes"].tolist() == [1024, 2048]
    # hcsim's own names with no op column: the collective given says what ran (no mapping needed)
    df = load_measured(write(tmp_path, "bytes,time_us,ranks\n1024,2.5,8\n", "s.csv"), "allgather")
    assert df[["collective", "ranks", "time_us"]].values.tolist() == [["allgather", 8.0, 2.5]]
    check_measured(df)


def test_algorithm_names_map_to_hcsim():
    assert hcsim_algorithm("allreduce", "Ring") == "ring"
    assert hcsim_algorithm("allreduce", "H-D_R") == "hd"
    assert hcsim_algorithm("allreduce", "fullmesh") == "mesh"
    assert hcsim_algorithm("allgather", "bruck") == "nb"
    assert hcsim_algorithm("allreduce", "segmented_ring") == "ring"
    assert hcsim_algorithm("allreduce", "NVLS") == "nvls"  # NCCL's name, hcsim's in-network allreduce
    assert hcsim_algorithm("allgather", "nvls") is None  # hcsim has no NVLS allgather
    assert hcsim_algorithm("allreduce", "collnet_direct") is None


def test_cli_columns_for_validate_and_calibrate(tmp_path, capsys):
    path = write(tmp_path, "# an 8-NPU run\nbytes,latency\n1048576,0.2\n", "c.csv")
    assert main(["validate", "--measured", str(path), "-t", "atlas800t-a2", "--op", "allreduce", "--ranks", "8",
                 "--columns", "size=bytes,time=latency:ms"]) == 0
    out = capsys.readouterr().out
    assert "200.00" in out and "1 points" in out
    assert main(["validate", "--measured", str(path), "-t", "atlas800t-a2", "--op", "allreduce",
                 "--columns", "size=bytes,time=latency_ms"]) == 2
    assert "columns time = 'latency_ms'" in capsys.readouterr().err
    out_yaml = tmp_path / "t.yaml"
    assert main(["calibrate", "--measured", str(path), "-t", "atlas800t-a2", "--op", "allreduce", "--ranks", "8",
                 "--columns", "size=bytes,time=latency:ms", "--out", str(out_yaml), "--max-work", "200000"]) == 0
    assert out_yaml.exists()


# ---- property tests ------------------------------------------------------------------------

SAMPLES = {
    "osu.txt": (OSU.encode(), dict(ranks=8)),
    "osu_wide.txt": (OSU_WIDE.encode(), dict(collective="allgather", ranks=8)),
    "wide.csv": (b"# times in ms\r\nbytes,2,4,\r\n1048576,1.5,2.5,\r\n2097152,3.0,,\r\n",
                 dict(collective="allreduce", columns="size=bytes,wide=nodes:8,values=time:ms")),
    "bw.csv": (b"\xef\xbb\xbfcoll,n,elements,bw\nAllReduce,8,262144,100\nall_gather,4,262144,50\n",
               dict(columns="size=elements:count:fp32,busbw=bw:GBps,ranks=n,op=coll")),
    "algos.csv": (b"bytes,ring,tree,segmented_ring\n1024,5,6,7\n2048,8,9,\n",
                  dict(collective="allreduce", ranks=8, columns="size=bytes,wide=algorithm,values=time:us")),
}


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(sorted(SAMPLES)))
    data, kwargs = SAMPLES[name]
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "cell", "delete", "duplicate", "truncate", "comment"]))
        lines = data.split(b"\n")
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "flip":
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
            continue
        if kind == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
            continue
        if kind == "cell":
            sep = b"," if b"," in lines[i] else b" "
            cells = lines[i].split(sep)
            j = draw(st.integers(0, len(cells) - 1))
            cells[j] = draw(st.sampled_from([b"", b"0", b"-1", b"nan", b"1e309", b"x", b"8.0", b"\xff", b'"',
                                             b"# out-of-place", b"data_size(Bytes)", b"1e-300", b"99999999999"]))
            lines[i] = sep.join(cells)
        elif kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "comment":
            lines.insert(i, draw(st.sampled_from([b"# out-of-place in-place #wrong", b"# OSU MPI Alltoall Latency Test",
                                                  b"#  data_size(Bytes): | aveg_time(us):", b"", b"\r"])))
        data = b"\n".join(lines)
    return name, data, kwargs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(case=mutated(), op=st.sampled_from([None, None, "allreduce", "allgather"]))
def test_mutated_inputs_load_clean_or_fail_in_one_line(tmp_path, case, op):
    name, data, kwargs = case
    kwargs = dict(kwargs)
    if op is not None:
        kwargs["collective"] = op
    path = tmp_path / f"fuzz-{name}"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasuredRowWarning)
        warnings.simplefilter("ignore", MeasuredAlgorithmWarning)
        try:
            df = load_measured(path, **kwargs)
        except HcsimError as e:
            assert "\n" not in str(e) and len(str(e)) < 1000, str(e)
            return
    assert isinstance(df, pd.DataFrame) and len(df) >= 1
    assert df["size_bytes"].dtype == np.int64 and (df["size_bytes"] >= 1).all()
    assert np.isfinite(df["time_us"]).all() and (df["time_us"] > 0).all()
    assert set(df["collective"]) <= set(COLLECTIVES)
    check_measured(df)


def test_whitespace_tables_through_a_mapping():
    # OSU's own table read through a mapping: the column names hold spaces and a unit in parentheses
    df = load_measured(write_tmp(OSU), ranks=16, columns={"size": "Size:bytes", "time": "Max Latency(us):us"})
    assert df["time_us"].tolist() == [221.55, 219.23, 221.56]  # the Max column, read from OSU above
    assert set(df["collective"]) == {"allreduce"}  # from the OSU title
    text = "# size  busbw_GBps\n1048576  20\n"
    df = load_measured(write_tmp(text), "reducescatter", 4, columns="size=size:bytes,busbw=busbw_GBps")
    assert df["time_us"].tolist() == pytest.approx([1048576 / (20e9 / 0.75) * 1e6])


def test_public_readers_check_their_arguments():
    from hcsim.backends.readers import parse_mapped, parse_osu

    one_line(lambda: parse_osu(OSU, "warp"), "collective = 'warp': unknown")
    one_line(lambda: parse_osu(OSU.encode()), "text = b")
    one_line(lambda: parse_osu(OSU, ranks=1), "ranks = 1")
    one_line(lambda: parse_mapped("bytes,t\n8,1\n", "size=bytes,time=t:us", "warp"), "collective = 'warp'")
    one_line(lambda: parse_mapped("bytes,t\n8,1\n", "size=bytes,time=t:us", "allreduce", csv_like="yes"),
             "csv_like = 'yes'")
    assert parse_osu(OSU, ranks=8)["time_us"].tolist()[0] == 174.36


@pytest.mark.parametrize("text", ["op,bytes,time_us\nallreduce,8,1.5,\n", "op,bytes,time_us,\nallreduce,8,1.5\n",
                                  "op,bytes,time_us,\r\nallreduce,8,1.5,,\r\n"])
def test_hcsim_csv_forms_take_trailing_separators(tmp_path, text):
    assert load_measured(write(tmp_path, text, "t.csv"))["time_us"].tolist() == [1.5]


def test_hcsim_csv_forms_take_a_hash_header(tmp_path):
    text = "# run of 2026-11-23\n# op,ranks,bytes,time_us\nallreduce,8,1024,2.5\nallgather,8,2048,3.5\n"
    df = load_measured(write(tmp_path, text, "h.csv"))
    assert df[["collective", "size_bytes", "time_us"]].values.tolist() == [["allreduce", 1024, 2.5],
                                                                          ["allgather", 2048, 3.5]]
    one_line(lambda: load_measured(write(tmp_path, text.replace("2.5", "x"), "i.csv")),
             "line 3, column 4 (time_us) = 'x'")


# ---- review 2026-11-23: inputs that were read without a word ------------------------------------

NCCL_HEAD = """# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid   6899 on a device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   6900 on a device  1 [0000:05:00] NVIDIA H100 80GB HBM3
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
"""
NCCL_ROW = "{size:>12}  {count:>12}     float     sum      -1    135.8    0.00    0.00  {w1:>5}    123.5    0.00    0.00  {w2:>5}\n"


def _nccl(tmp_path, *rows):
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("# all_reduce_perf\n" + NCCL_HEAD + "".join(NCCL_ROW.format(**r) for r in rows))
    return path


@pytest.mark.parametrize("size", ["256.5", "-256", "2.5e2"])
def test_nccl_row_with_a_size_that_is_no_byte_count_is_an_error_not_skipped(tmp_path, size):
    path = _nccl(tmp_path, dict(size=8, count=2, w1=0, w2=0), dict(size=size, count=64, w1=0, w2=0))
    with pytest.raises(HcsimError, match=r"line 7, column \d+ \(size\) = '.*': a whole number of bytes"):
        load_measured(path)


def test_nccl_rows_whose_check_failed_are_left_out_with_a_warning(tmp_path):
    path = _nccl(tmp_path, dict(size=8, count=2, w1=0, w2=0), dict(size=16, count=4, w1=3, w2=0),
                 dict(size=32, count=8, w1=0, w2=5), dict(size=64, count=16, w1="N/A", w2="N/A"))
    with pytest.warns(MeasuredRowWarning, match=r"line 7: 3 wrong elements \(out-of-place #wrong"):
        df = load_measured(path)
    assert df["size_bytes"].tolist() == [8, 32, 64]  # in-place #wrong does not touch the out-of-place time
    from hcsim.backends.parsers import parse_nccl_tests

    with pytest.warns(MeasuredRowWarning, match=r"line 8: 5 wrong elements \(in-place"):
        df = parse_nccl_tests(path.read_text(), in_place=True)
    assert df["size_bytes"].tolist() == [8, 16, 64]


def test_old_nccl_tests_error_column_is_not_a_wrong_count(tmp_path):
    # nccl-tests before the root column printed the largest error as a float ("1e-07"): not a failure
    path = tmp_path / "old.txt"
    path.write_text("#  Rank  0 Pid  1 on h device  0 [0x1a] Tesla V100\n#  Rank  1 Pid  1 on h device  1 [0x1b] V100\n"
                    "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   "
                    "busbw  error\n"
                    "           8             2   float     sum    158.3    0.00    0.00  1e-07    158.4    0.00    "
                    "0.00  0e+00\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = load_measured(path, collective="allreduce")
    assert df["time_us"].tolist() == [158.3]


def test_hccl_test_rows_whose_check_failed_are_left_out_with_a_warning(tmp_path):
    path = tmp_path / "h.txt"
    path.write_text("mpirun -n 8 ./bin/all_reduce_test -b 8K -e 32K -f 2 -p 8\n"
                    "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\n"
                    "8192              | 764.55         | 0.00998              | success\n"
                    "16384             | 858.80         | 0.01777              | failed\n"
                    "32768             | 901.10         | 0.03387              | success\n")
    with pytest.warns(MeasuredRowWarning, match=r"line 4: check_result 'failed'"):
        df = load_measured(path)
    assert df["size_bytes"].tolist() == [8192, 32768]


def test_osu_file_with_two_different_tests_is_refused(tmp_path):
    path = tmp_path / "osu.txt"
    path.write_text(OSU.replace("Allreduce", "Allgather") + OSU.replace("Allreduce", "Alltoall"))
    with pytest.raises(HcsimError, match=r"line 7: a second OSU test \(alltoall latency\) after allgather latency "
                                         r"\(line 1\); one test per file"):
        load_measured(path, ranks=8)
    path.write_text(OSU + OSU)  # the same test twice: its runs, all kept
    assert len(load_measured(path)) == 6


def test_wide_table_column_without_a_name_but_with_values_is_an_error(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("bytes,ring,,rd\n1024,10,5,11\n")
    with pytest.raises(HcsimError, match=r"line 2, column 3 = '5': an empty cell: column 3 has no name"):
        load_measured(path, "allreduce", 8, columns="size=bytes,wide=algorithm,values=time:us")
    path.write_text("bytes,ring,,rd\n1024,10,,11\n")  # an empty column (a spreadsheet's gap) is fine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasuredAlgorithmWarning)
        df = load_measured(path, "allreduce", 8, columns="size=bytes,wide=algorithm,values=time:us")
    assert df["algorithm_given"].tolist() == ["ring", "rd"]


def test_an_empty_cell_of_a_mapped_ranks_column_is_an_error_unless_ranks_are_given(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("bytes,lat,n\n1024,1.5,16\n2048,2.5,\n")
    spec = "size=bytes,time=lat:us,ranks=n"
    with pytest.raises(HcsimError, match=r"line 3, column 3 \(n\) = '': a whole number of ranks .* or pass ranks="):
        load_measured(path, "allreduce", columns=spec)
    assert load_measured(path, "allreduce", 16, columns=spec)["ranks"].tolist() == [16.0, 16.0]


def test_a_launchers_line_with_a_comma_above_an_osu_table_does_not_make_it_a_csv(tmp_path):
    warning = "Warning: Permanently added 'node1,10.0.0.1' (ECDSA) to the list of known hosts.\n"
    assert detect_format(warning + OSU) == "table"
    path = tmp_path / "osu.txt"
    path.write_text(warning + OSU)
    assert load_measured(path)["size_bytes"].tolist() == [1, 2, 4]
    assert detect_format("bytes,time_us\n1024,10\n") == "csv"
    assert detect_format("# a, b\nbytes,time_us\n") == "csv"  # a header alone is still a CSV's


def test_nccl_runs_of_different_rank_counts_in_one_file_are_refused(tmp_path):
    # the rank count was the union of the '#  Rank' lines: an 8-rank run's rows read as 16 ranks
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on h device  0 [0x1a] H100\n" for r in range(16))
    row = NCCL_ROW.format(size=8, count=2, w1=0, w2=0)
    path = tmp_path / "two.txt"
    path.write_text("# all_reduce_perf\n" + ranks[: ranks.index("#  Rank  8")] + row + "# all_reduce_perf\n" + ranks + row)
    with pytest.raises(HcsimError, match=r"runs of different rank counts \('#  Rank 8' is listed 1 time\(s\), "
                                         r"'#  Rank 0' 2\); one run per file"):
        load_measured(path)
    assert load_measured(path, ranks=16)["ranks"].tolist() == [16.0, 16.0]
    path.write_text(("# all_reduce_perf\n" + ranks + row) * 2)  # the same run twice: its rows, 16 ranks
    assert load_measured(path)["ranks"].tolist() == [16.0, 16.0]


def test_values_without_wide_says_so():
    with pytest.raises(HcsimError, match=r"^columns values = 'time:us': only with wide="):
        parse_columns("size=bytes,values=time:us")
    with pytest.raises(HcsimError, match=r"^columns = 'none of them': exactly one of time="):
        parse_columns("size=bytes,ranks=n")


def test_nccl_output_of_rank_0_alone_is_not_given_the_topologys_rank_count(tmp_path):
    # one rank (or 16 separate one-rank runs of a build without MPI) was 'ranks unknown': the topology's count
    rank0 = "#  Rank  0 Group  0 Pid 1 on h device  0 [0x1a] H100\n"
    row = NCCL_ROW.format(size=8, count=2, w1=0, w2=0)
    path = tmp_path / "one.txt"
    for copies, needle in ((1, r"lists one rank \('#  Rank 0' only\)"), (16, r"'#  Rank 0' only, 16 times")):
        path.write_text(("# all_reduce_perf\n" + rank0 + row) * copies)
        with pytest.raises(HcsimError, match=needle + r".*pass ranks= \(--ranks\)"):
            load_measured(path)
    assert load_measured(path, ranks=16)["ranks"].tolist() == [16.0] * 16


_OLD_RANKS = "#   Rank  0 Pid 1 on h device  0 [0x00] A100-SXM4-40GB\n#   Rank  1 Pid 1 on h device  1 [0x00] A100-SXM4-40GB\n"


@pytest.mark.parametrize("header, row, collective, time_us", [
    # broadcast before 2.10: no reduction column, a root (12 fields, the fourth a number)
    ("#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error\n",
     "     1048576        262144   float       0    76.02   13.79   13.79    N/A    75.10   13.96   13.96    N/A\n",
     "broadcast", 76.02),
    # allgather before 2.10: neither (11 fields)
    ("#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error\n",
     "     1048576         32768   float    72.95   14.37   12.58    N/A    71.10   14.75   12.90    N/A\n",
     "allgather", 72.95),
    # alltoall under a header naming a reduction, its cell empty (11 fields)
    ("#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n",
     "     1048576         32768   float             70.11   14.96   13.09    N/A    69.50   15.09   13.20    N/A\n",
     "alltoall", 70.11),
])
def test_older_nccl_tests_rows_with_only_the_columns_a_test_has(tmp_path, header, row, collective, time_us):
    path = tmp_path / "old.log"
    path.write_text("# nThread 1 nGpus 2 minBytes 1 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20\n"
                    + _OLD_RANKS + header + "hostname:3442:3442 [0] NCCL INFO Launch mode Parallel\n" + row)
    df = load_measured(path, collective=collective)
    assert df[["size_bytes", "time_us", "ranks"]].values.tolist() == [[1048576, time_us, 2]]


def test_a_row_that_lost_a_time_cell_under_a_reduction_header_is_still_an_error(tmp_path):
    # 11 fields under a header naming a reduction, but the fourth is the reduction: a cell is missing, not empty
    path = tmp_path / "cut.log"
    path.write_text(_OLD_RANKS + "#       size         count    type   redop     time   algbw   busbw  error     time"
                    "   algbw   busbw  error\n"
                    "      524288        131072   float     sum    60.32    8.69   15.21    N/A    60.10    8.72   15.27    N/A\n"
                    "     1048576        262144   float     sum    74.78   14.02   24.54    N/A    14.10   24.67    N/A\n")
    with pytest.raises(HcsimError, match=r"line 5: 11 fields; an nccl-tests row has 12"):
        load_measured(path, collective="allreduce")


@pytest.mark.parametrize("header, row, fields, want", [
    # an older broadcast (header: type root time) whose row lost a cell: not its root read as the time
    ("#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error\n",
     "     2097152        524288   float       3    78.12   26.85   26.85    N/A    26.71   26.71    N/A\n", 11, 12),
    # an older allgather (header: type time) with one cell too many: not its algbw read as the time
    ("#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error\n",
     "     2097152         65536   float     sum    77.28   27.14   23.75    N/A    76.10   27.56   24.11    N/A\n",
     12, 11),
])
def test_older_headers_fix_the_row_length(tmp_path, header, row, fields, want):
    path = tmp_path / "old.log"
    path.write_text(_OLD_RANKS + header + row)
    with pytest.raises(HcsimError, match=rf"line 4: {fields} fields; an nccl-tests row has {want}"):
        load_measured(path, collective="broadcast")


def test_a_log_of_several_nccl_tests_binaries_reads_each_section_as_its_own(tmp_path):
    # a script running all_reduce_perf, then all_gather_perf, into one log (as xxrjun/nccl-tests-cluster keeps them)
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid {r} on h device  0 [0x1a] H100\n" for r in range(8))
    header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
    text = ("# Collective test starting: all_reduce_perf\n" + ranks + header
            + NCCL_ROW.format(size=1024, count=256, w1=0, w2=0)
            + "# Collective test concluded: all_reduce_perf\n\n"
            + "# Collective test starting: all_gather_perf\n" + ranks[: ranks.index("#  Rank  4")] + header
            + NCCL_ROW.format(size=2048, count=128, w1=0, w2=0) + NCCL_ROW.format(size=4096, count=256, w1=0, w2=0))
    path = tmp_path / "log.txt"
    path.write_text(text)
    df = load_measured(path)
    assert df[["collective", "ranks", "size_bytes"]].values.tolist() == [
        ["allreduce", 8.0, 1024], ["allgather", 4.0, 2048], ["allgather", 4.0, 4096]]
    assert load_measured(path, collective="allgather")["size_bytes"].tolist() == [2048, 4096]
    with pytest.raises(HcsimError, match=r"no alltoall rows"):
        load_measured(path, collective="alltoall")
    # an error in the second section names the line of the whole file
    lines = text.split("\n")
    bad = next(i for i, line in enumerate(lines) if line.lstrip().startswith("4096"))
    lines[bad] = lines[bad].replace("4096", "4096.5", 1)
    path.write_text("\n".join(lines))
    with pytest.raises(HcsimError, match=rf"line {bad + 1}, column \d+ \(size\) = '4096.5'"):
        load_measured(path)
    # a comment naming several binaries starts no section (the log's header listing what it ran)
    path.write_text("# runs all_reduce_perf, then all_gather_perf\n" + text)
    assert load_measured(path)["collective"].tolist() == ["allreduce", "allgather", "allgather"]
    path.write_text("mpirun ./all_reduce_perf ./all_gather_perf\n" + ranks + header  # one run, two binaries named
                    + NCCL_ROW.format(size=1024, count=256, w1=0, w2=0))
    with pytest.raises(HcsimError, match=r"output of several nccl-tests binaries \(all_reduce_perf, all_gather_perf\)"):
        load_measured(path)


def test_a_log_is_cut_only_where_a_binary_starts_and_refused_where_its_markers_disagree(tmp_path):
    """Review findings: a comment naming another binary inside a section moved its rows to that binary; a log
    without its 'starting' markers had every section's rows named after the binary before."""
    src = (Path(__file__).resolve().parents[1] / "docs/data/published/h100_8gpu_nccl229_5tests.txt").read_text()
    path = tmp_path / "log.txt"
    path.write_text(src.replace("# Collective test starting: all_gather_perf",
                                "# Collective test starting: all_gather_perf\n# (compare with all_reduce_perf above)"))
    assert load_measured(path).groupby("collective").size().to_dict() == {
        "allgather": 10, "allreduce": 10, "alltoall": 10, "reducescatter": 10, "sendrecv": 10}
    path.write_text(src.replace("# Collective test starting", "#"))  # no start markers: refused, not mislabelled
    with pytest.raises(HcsimError, match="several nccl-tests binaries"):
        load_measured(path)
    path.write_text(src.replace("# Collective test concluded: all_gather_perf", "# Collective test concluded: alltoall_perf"))
    with pytest.raises(HcsimError, match=r"'# Collective test concluded: alltoall_perf' inside the section of allgather"):
        load_measured(path)
    # a second binary that failed before its table: the first one's rows are read
    head = src[: src.index("# Collective test starting: reduce_scatter_perf")]
    crashed = head[: head.index("    33554432        524288    double    none")]
    path.write_text(crashed)
    assert load_measured(path)["collective"].unique().tolist() == ["allreduce"]
