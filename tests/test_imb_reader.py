"""Intel MPI Benchmarks (IMB-MPI1) output (hcsim.backends.readers.parse_imb, through load_measured)."""

import pytest

from hcsim.backends.parsers import load_measured
from hcsim.backends.readers import detect_format, is_imb, parse_imb
from hcsim.errors import ConfigError

HEAD = """#------------------------------------------------------------
#    Intel(R) MPI Benchmarks 2021.3, MPI-1 part
#------------------------------------------------------------
# MPI_Datatype                   :   MPI_BYTE
# MPI_Datatype for reductions    :   MPI_FLOAT
# MPI_Op                         :   MPI_SUM
#

# List of Benchmarks to run:

# PingPong
# Allreduce
# Allgather
"""
PINGPONG = """
#---------------------------------------------------
# Benchmarking PingPong
# #processes = 2
# ( 2 additional processes waiting in MPI_Barrier)
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            0         1000         0.95         0.00
            8         1000         0.97         8.25
"""
ALLREDUCE = """
#----------------------------------------------------------------
# Benchmarking Allreduce
# #processes = 2
# ( 2 additional processes waiting in MPI_Barrier)
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            0         1000         0.03         0.04         0.03
            4         1000         1.05         1.07         1.06
         1024         1000         2.30         2.34         2.32

#----------------------------------------------------------------
# Benchmarking Allreduce
# #processes = 4
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            0         1000         0.03         0.05         0.04
            4         1000         2.05         2.96         2.50
         1024         1000         4.30         5.31         4.80
"""
ALLGATHER = """
#----------------------------------------------------------------
# Benchmarking Allgather
# #processes = 4
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            1         1000         1.50         1.90         1.70
         1024         1000         3.00         3.40         3.20


# All processes entering MPI_Finalize
"""
TEXT = HEAD + PINGPONG + ALLREDUCE + ALLGATHER


def read(tmp_path, text, **kw):
    f = tmp_path / "imb.txt"
    f.write_text(text)
    return load_measured(f, **kw)


def rows(df):
    return [[c, int(r), int(n), t] for c, r, n, t in df[["collective", "ranks", "size_bytes", "time_us"]].values]


def test_every_section_with_its_process_count_and_t_avg(tmp_path):
    assert detect_format(TEXT) == "table" and is_imb(TEXT)
    with pytest.warns(UserWarning) as w:
        df = read(tmp_path, TEXT)
    assert rows(df) == [["allreduce", 2, 4, 1.06], ["allreduce", 2, 1024, 2.32],
                        ["allreduce", 4, 4, 2.50], ["allreduce", 4, 1024, 4.80],
                        # Allgather's X is one process's part: hcsim's whole buffer is X x np
                        ["allgather", 4, 4, 1.70], ["allgather", 4, 4096, 3.20]]
    said = str(w[0].message)
    assert "PingPong: not a collective hcsim simulates" in said and "0 bytes" in said
    # bus bandwidth from nccl-tests' factors: allreduce on 4 ranks is 2 (4-1)/4 = 1.5 x algbw
    r = df[(df["collective"] == "allreduce") & (df["ranks"] == 4) & (df["size_bytes"] == 1024)].iloc[0]
    assert r["busbw_GBps"] == pytest.approx(1.5 * 1024 / 4.80e-6 / 1e9)


def test_ranks_and_op_pick_sections(tmp_path):
    with pytest.warns(UserWarning):
        assert rows(read(tmp_path, TEXT, collective="allreduce", ranks=4)) == [["allreduce", 4, 4, 2.50],
                                                                               ["allreduce", 4, 1024, 4.80]]
    with pytest.warns(UserWarning):
        assert [r[0] for r in rows(read(tmp_path, TEXT, collective="allgather"))] == ["allgather", "allgather"]
    with pytest.raises(ConfigError, match=r"ranks = 8: the IMB file has no section of that many processes \(it has 2, 4\)"):
        read(tmp_path, TEXT, ranks=8)
    with pytest.raises(ConfigError, match=r"op = 'alltoall': the IMB file has no such benchmark \(it has allgather, allreduce\)"):
        read(tmp_path, TEXT, collective="alltoall")


def test_alltoall_and_v_variants_map_to_plain_collectives():
    text = ("# Benchmarking Alltoallv\n# #processes = 8\n#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n"
            "16 100 9.0 11.0 10.0\n# Benchmarking Bcast\n# #processes = 8\n"
            "#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n16 100 3.0 5.0 4.0\n")
    assert rows(parse_imb(text)) == [["alltoall", 8, 128, 10.0], ["broadcast", 8, 16, 4.0]]


@pytest.mark.parametrize("text, message", [
    ("# Benchmarking Allreduce\n#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n4 10 1 2 1.5\n",
     "no '# #processes = N' line"),
    ("# Benchmarking Allreduce\n# #processes = 4\n#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n"
     "4 10 1 2\n", "4 fields; the header \\(line 3\\) has 5"),
    ("# Benchmarking Allreduce\n# #processes = 4\n#bytes #repetitions t_min[usec] t_max[usec]\n4 10 1 2\n",
     "no t_avg\\[usec\\] column"),
    ("# Benchmarking Allreduce\n# #processes = 4\n#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n"
     "4 10 1 2 -1.5\n", "t_avg"),
    ("# Benchmarking Allreduce\n# #processes = 4\n#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n"
     "4.5 10 1 2 1.5\n", "#bytes"),
    ("# Benchmarking PingPong\n# #processes = 2\n#bytes #repetitions t[usec] Mbytes/sec\n8 10 1.0 8.0\n",
     "no rows left"),
])
def test_bad_sections_are_one_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        read(tmp_path, text)


def test_imb_under_a_launchers_tags(tmp_path):
    tagged = "".join("[0] " + line + "\n" for line in (HEAD + ALLREDUCE).splitlines())
    with pytest.warns(UserWarning):
        assert rows(read(tmp_path, tagged, ranks=2)) == [["allreduce", 2, 4, 1.06], ["allreduce", 2, 1024, 2.32]]


def test_one_process_sections_and_barrier_rows_are_left_out_with_their_reason(tmp_path):
    one = ("# Benchmarking Allreduce\n# #processes = 1\n#bytes #repetitions t_min[usec] t_max[usec] t_avg[usec]\n"
           "4 1000 0.1 0.1 0.1\n")
    barrier = "# Benchmarking Barrier\n# #processes = 4\n #repetitions t_min[usec] t_max[usec] t_avg[usec]\n 1000 3.0 3.5 3.2\n"
    with pytest.warns(UserWarning) as w:
        df = read(tmp_path, one + ALLREDUCE + barrier, ranks=4)
    assert rows(df) == [["allreduce", 4, 4, 2.50], ["allreduce", 4, 1024, 4.80]]
    said = str(w[0].message)
    assert "IMB Allreduce on 1 process" in said and "IMB Barrier: not a collective hcsim simulates" in said
