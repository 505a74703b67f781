"""The corpus accuracy table in docs/validation.md is what the code computes now.

Each system of docs/data/published/corpus.yaml is calibrated on at most two points of its sweep
(hcsim.corpus.calibration_points) and every other row predicted; the table's numbers are
recomputed here and compared with the stored ones, so a model change that moves the table fails
until the doc is updated (benchmarks/validate_corpus.py prints the new table). The default run
checks a two-system slice and the three systems whose files compare algorithms; the whole table is
``slow``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from hcsim.corpus import calibration_points, format_corpus_table, load_corpus, validate_corpus

DOC = Path(__file__).resolve().parents[1] / "docs" / "validation.md"
MARK = "<!-- corpus-table: current -->"
TOLERANCE_PP = 0.1  # percentage points; the doc prints one decimal


def stored_table() -> dict[str, list[str]]:
    """The rows of the current corpus table in docs/validation.md, by system."""
    text = DOC.read_text()
    assert MARK in text, f"docs/validation.md has no {MARK} table"
    out = {}
    for line in text.split(MARK, 1)[1].lstrip().splitlines():
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("system",) or set(cells[0]) <= set("-:"):
            continue
        out[cells[0]] = cells
    return out


def check_rows(df: pd.DataFrame, stored: dict[str, list[str]]):
    fresh = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
             for line in format_corpus_table(df).splitlines()[2:]}
    for system, cells in fresh.items():
        assert system in stored, f"{system!r} is not in the stored table"
        old = stored[system]
        for i, (a, b) in enumerate(zip(cells, old, strict=True)):
            if a.endswith("%") and b.endswith("%"):
                assert abs(float(a[:-1]) - float(b[:-1])) <= TOLERANCE_PP, (system, i, a, b)
            else:
                assert a == b, (system, i, a, b)


def test_calibration_points_are_the_first_sweeps_smallest_and_largest():
    for s in load_corpus():
        m = s["measured"]
        cal = calibration_points(m)
        assert 1 <= len(cal) <= 2
        sweep = m[(m.collective == m.collective.iloc[0]) & (m.ranks == m.ranks.iloc[0])]
        assert m.loc[cal, "size_bytes"].tolist() == sorted({sweep.size_bytes.min(), sweep.size_bytes.max()})


def test_corpus_table_slice_matches_docs():
    # MI300X, and both A100 systems: the sendrecv one and SuperBench's, whose broadcast and reduce run the
    # pipelined chain (change 40) and whose files are in nccl-tests' older columns (change 41); the p4de's two
    # instances (change 49), read from output tagged by srun --label; Oracle's two A100 nodes (change 51); and the
    # MI350X node (change 53), whose file prints nccl-tests' columns with the spacing collapsed; and the MI355X pair
    # (change 55) on its tiered mesh
    df = validate_corpus(systems=["MI300X", "MI350X", "MI355X", "A100"])
    assert len(df) == 7
    check_rows(df, stored_table())


def test_corpus_fastest_algorithm_slice_matches_docs():
    # the three AWS files are the corpus's only ones with a topology that compare algorithms (change 28):
    # their rows, "fastest" included, are recomputed by default, not only under -m slow
    df = validate_corpus(systems=["AWS c5n.18xlarge"])
    assert len(df) == 3 and (df["fastest"] != "").all()
    check_rows(df, stored_table())


@pytest.mark.slow
def test_corpus_table_matches_docs():
    df = validate_corpus()
    stored = stored_table()
    assert set(df["system"]) == set(stored)
    check_rows(df, stored)


def test_stored_table_names_every_system_with_a_topology():
    assert {s["system"] for s in load_corpus()} == set(stored_table())
    assert all(re.fullmatch(r"\d+", c[1]) for c in stored_table().values())


SWEEP_MARK = "<!-- corpus-sweep-table -->"


def test_corpus_sweep_calibration_slice_matches_docs():
    """The whole-sweep calibration's table (docs/validation.md change 34), recomputed for MI300X: its curve's
    direction and its in-sample median and p90 |error| over the 31-point sweep."""
    text = DOC.read_text()
    assert SWEEP_MARK in text
    stored = {}
    for line in text.split(SWEEP_MARK, 1)[1].lstrip().splitlines():
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        stored[cells[0]] = cells
    df = validate_corpus(systems=["MI300X"], sweep_bands=4)
    (system, rows), = df.attrs["rows"].items()
    rep = df.attrs["reports"][system]
    cells = stored[system]
    cal = rows[rows["calibration"]]["error"].abs()
    assert int(cells[1]) == len(cal) == 31
    assert cells[2].split()[0] == rep["direction"]
    assert abs(100 * cal.median() - float(cells[3][:-1])) <= TOLERANCE_PP
    assert abs(100 * cal.quantile(0.9) - float(cells[4][:-1])) <= TOLERANCE_PP
