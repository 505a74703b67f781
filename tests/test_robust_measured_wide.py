"""Wide measured tables (issue 12): read in time linear in their columns, refused in one line
before any row is built when they would make more rows than a sweep takes (MAX_SWEEP_SIZES),
and every warning that lists names lists a few, then how many more."""

from __future__ import annotations

import copy
import warnings

import pytest

from hcsim.backends import load_measured
from hcsim.backends.readers import MeasuredAlgorithmWarning
from hcsim.cli import main
from hcsim.errors import HcsimError, WorkLimitError
from hcsim.limits import MAX_SWEEP_SIZES

WIDE = "size=bytes,wide=algorithm,values=time:us"


def _wide(path, columns: int, rows: int = 1, cell="1.5", sizes=None):
    sizes = sizes or [8 * (i + 1) for i in range(rows)]
    lines = [",".join(["bytes"] + [f"a{i}" for i in range(columns)])]
    lines += [",".join([str(s)] + [cell] * columns) for s in sizes]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_table_of_20000_columns_is_refused_in_one_line(tmp_path):
    path = _wide(tmp_path / "wide.csv", 20_000)
    with pytest.raises(WorkLimitError) as info:
        load_measured(path, "allreduce", 8, WIDE)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 400
    assert "20,000 rows (1 data line(s) x 20,000 value columns of wide=algorithm)" in msg
    assert f"at most {MAX_SWEEP_SIZES} (hcsim.limits.MAX_SWEEP_SIZES" in msg


def test_the_cli_refuses_a_wide_table_in_one_line(tmp_path, capsys):
    path = _wide(tmp_path / "wide.csv", 5_000)
    code = main(["validate", "--measured", str(path), "--topology", "atlas800t-a2", "--op", "allreduce",
                 "--ranks", "8", "--columns", WIDE])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "5,000 rows" in err and "MAX_SWEEP_SIZES" in err
    assert "Traceback" not in err and "warning" not in err  # refused before any name is looked up


def test_rows_times_columns_counts_only_the_rows_that_would_be_made(tmp_path):
    # 3 lines x 2,000 columns, but one line is 0 bytes and the others mostly empty: 20 rows
    header = ",".join(["bytes"] + [f"a{i}" for i in range(2_000)])
    sparse = ["1.5" if i < 10 else "" for i in range(2_000)]
    text = "\n".join([header, ",".join(["0"] + ["1.5"] * 2_000), ",".join(["8"] + sparse),
                      ",".join(["16"] + sparse)]) + "\n"
    path = tmp_path / "sparse.csv"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = load_measured(path, "allreduce", 8, WIDE)
    assert len(df) == 20
    assert sorted(set(df["size_bytes"])) == [8, 16]


def test_just_under_the_cap_is_read(tmp_path):
    path = _wide(tmp_path / "w.csv", MAX_SWEEP_SIZES // 2, rows=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(load_measured(path, "allreduce", 8, WIDE)) == MAX_SWEEP_SIZES
    path = _wide(tmp_path / "w.csv", MAX_SWEEP_SIZES // 2 + 1, rows=2)
    with pytest.raises(WorkLimitError, match=f"{MAX_SWEEP_SIZES + 2:,} rows"):
        load_measured(path, "allreduce", 8, WIDE)


def test_an_unknown_algorithm_warning_names_a_few_then_how_many_more(tmp_path):
    path = _wide(tmp_path / "w.csv", 300)
    with pytest.warns(MeasuredAlgorithmWarning) as record:
        df = load_measured(path, "allreduce", 8, WIDE)
    assert len(df) == 300
    msg = str(record[0].message)
    assert "a0 (allreduce), a1 (allreduce)" in msg and "and 295 more" in msg and "a299" not in msg
    assert len(msg) < 400
    # the names are all kept, and copied shallowly (pandas deep-copies attrs into each row)
    names = df.attrs["algorithm_names"]
    assert len(names) == 300 and copy.deepcopy(names) == names
    assert df.iloc[:1].attrs["algorithm_names"] == names


def test_a_header_naming_many_columns_twice_is_one_short_line(tmp_path):
    path = tmp_path / "twice.csv"
    names = [f"a{i}" for i in range(1_000)]
    path.write_text(",".join(["bytes"] + names + names) + "\n" + ",".join(["8"] + ["1.5"] * 2_000) + "\n")
    with pytest.raises(HcsimError) as info:
        load_measured(path, "allreduce", 8, WIDE)
    msg = str(info.value)
    assert "the header names 'a0', 'a1'" in msg and "and 995 more twice" in msg and len(msg) < 300
    path.write_text("op,bytes,time_us," + ",".join(names + names) + "\nallreduce,8,1.5" + ",1" * 2_000 + "\n")
    with pytest.raises(HcsimError, match="and 995 more twice"):
        load_measured(path)


def test_thousands_of_trailing_separators_are_dropped(tmp_path):
    path = tmp_path / "trail.csv"
    path.write_text("bytes,time_us" + "," * 20_000 + "\n8,1.5" + "," * 20_000 + "\n16,2.5" + "," * 30_000 + "\n")
    df = load_measured(path, "allreduce", 8)
    assert df["time_us"].tolist() == [1.5, 2.5]
    df = load_measured(path, "allreduce", 8, "size=bytes,time=time_us")
    assert df["time_us"].tolist() == [1.5, 2.5]
