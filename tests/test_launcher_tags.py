"""Benchmark output as a job launcher prints it (rank tags before every line), and whitespace
tables whose rows hold words, read through a column mapping (hcsim.backends.parsers)."""

import pytest

from hcsim.backends.parsers import load_measured, strip_launcher_tags
from hcsim.errors import ConfigError

NCCL = """# nThread 1 nGpus 1 minBytes 8192 maxBytes 32768 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid 1666603 on node-a device  0 [0x00] NVIDIA GB10
#  Rank  1 Group  0 Pid 1669515 on node-b device  0 [0x00] NVIDIA GB10
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
        8192          2048     float     sum      -1    35.15    0.23    0.23       0    30.33    0.27    0.27       0
       16384          4096     float     sum      -1    31.67    0.52    0.52       0    30.75    0.53    0.53       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.4
"""
EXPECTED = [["allreduce", 2, 8192, 35.15], ["allreduce", 2, 16384, 31.67]]


def read(tmp_path, text, **kw):
    f = tmp_path / "out.txt"
    f.write_text(text)
    return load_measured(f, **kw)[["collective", "ranks", "size_bytes", "time_us"]].values.tolist()


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "[1,0]<stdout>: ", "[0] ", "[0]", "0: ", " 0: "])
def test_nccl_tests_output_under_a_launchers_tags(tmp_path, prefix):
    tagged = "".join(prefix + line + "\n" for line in NCCL.splitlines())
    assert read(tmp_path, tagged, collective="allreduce") == EXPECTED
    # the untagged text reads the same (the control: the tags were the only difference)
    assert read(tmp_path, NCCL, collective="allreduce") == EXPECTED


def test_a_command_line_above_tagged_output(tmp_path):
    tagged = "mpirun -np 2 --tag-output ./all_reduce_perf\n" + "".join(
        "[1,0]<stdout>: " + line + "\n" for line in NCCL.splitlines())
    assert read(tmp_path, tagged, collective="allreduce") == EXPECTED


def test_rank_tags_written_again_inside_a_row(tmp_path):
    # MPICH's -prepend-rank tags every write: nccl-tests writes a row's fields in several
    text = ("[0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24      0[0]"
            "    2302.3    0.46    0.87      0\n"
            "[0]      2097152        524288     float     sum      -1[0]    2325.3    0.90    1.73      0[0]"
            "     416.7    5.03    9.65      0\n")
    assert read(tmp_path, text, collective="allreduce", ranks=8) == [["allreduce", 8, 1048576, 1626.5],
                                                                    ["allreduce", 8, 2097152, 2325.3]]


def test_untagged_and_lightly_tagged_texts_are_left_as_they_are():
    osu = "# OSU MPI Allreduce Latency Test\n# Size   Avg Latency(us)\n4   1.80\n8   1.85\n"
    assert strip_launcher_tags(osu) == (osu, None)
    # one stray "1: " line among many untagged ones is not a launcher's doing
    text = "1: note\n" + osu
    assert strip_launcher_tags(text) == (text, None)
    # nccl-tests' device field [0x00] is not a rank tag
    assert strip_launcher_tags(NCCL) == (NCCL, None)


def test_a_whitespace_table_with_a_word_column_through_a_mapping(tmp_path):
    # AWS Neuron's nccom-test: a command line, a header, rows holding a data type, a summary line
    text = ("    nccom-test -r 2 allr\n"
            "         size(B)    count(elems)     type    time(us)    algbw(GB/s)    busbw(GB/s)\n"
            "        33554432        33554432    uint8         768          40.69          40.69\n"
            "        67108864        67108864    uint8        1500          44.74          44.74\n"
            "    Avg bus bandwidth:      40.6901GB/s\n")
    with pytest.warns(UserWarning, match="line 5: not a table row"):
        rows = read(tmp_path, text, collective="allreduce", ranks=2, columns="size=size(B):bytes,time=time(us):us")
    assert rows == [["allreduce", 2, 33554432, 768.0], ["allreduce", 2, 67108864, 1500.0]]
    # without a mapping it is still refused in one line (which columns to take is the user's to say)
    with pytest.raises(ConfigError, match="columns="):
        read(tmp_path, text, collective="allreduce", ranks=2)


def test_an_error_in_tagged_output_names_the_files_own_line(tmp_path):
    bad = NCCL.replace("35.15", "35.1x")
    tagged = "".join("[1,0]<stdout>: " + line + "\n" for line in bad.splitlines())
    line = next(i for i, x in enumerate(tagged.splitlines(), 1) if "35.1x" in x)
    # the column counts from after the tag (docs: strip_launcher_tags)
    column = bad.splitlines()[line - 1].index("35.1x") + 1
    with pytest.raises(ConfigError, match=rf"line {line}, column {column}\b.*35\.1x"):
        read(tmp_path, tagged, collective="allreduce")
