"""The public validation corpus (docs/data/published/corpus.yaml): every file loads with
load_measured as its entry says, with the row count and the hand-read points its text holds,
and every topology built for it loads with enough NPUs."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from hcsim.backends import load_measured
from hcsim.backends.readers import MeasuredAlgorithmWarning, detect_format
from hcsim.topology.io import load_topology

PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "data" / "published"
CORPUS = yaml.safe_load((PUBLISHED / "corpus.yaml").read_text())
PER_RANK_SIZE = {"allgather", "alltoall", "gather", "scatter"}  # OSU's Size is per rank for these


def data_lines(text: str) -> list[list[str]]:
    """Lines that are not comments or blank, split at commas or whitespace (no reader code)."""
    out = []
    for line in text.splitlines():
        if line.startswith("0: "):  # srun --label's tag before every line of a Slurm job's output
            line = line[3:]
        if line.strip() and not line.lstrip().startswith("#"):
            out.append([c.strip() for c in line.split(",")] if "," in line else line.split())
    return out


def rows_in_text(entry, text: str) -> int:
    """How many measured points the file's text holds, counted without the readers."""
    lines = data_lines(text)
    if entry["file"].endswith(".csv"):
        header, body = lines[0], lines[1:]
        wide = "wide=" in entry["load"].get("columns", "")
        return len(body) * (len(header) - 1 if wide else 1)
    return sum(1 for cells in lines if cells[0].isdigit() and int(cells[0]) > 0)


def printed(text: str, size: int, time_us: float) -> bool:
    """A line of the text holds this size (first, or in any cell of a CSV) and this time in a cell."""
    for cells in data_lines(text):
        if str(size) in cells[:1] or (len(cells) > 2 and "," in text and str(size) in cells):
            for c in cells:
                try:
                    if float(c) == time_us:
                        return True
                except ValueError:
                    continue
    return False


def load(entry):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasuredAlgorithmWarning)  # Open MPI's "default" etc. kept as given
        return load_measured(PUBLISHED / entry["file"], **entry["load"])


@pytest.mark.parametrize("entry", CORPUS, ids=[e["file"] for e in CORPUS])
def test_corpus_file_loads_with_its_rows_and_points(entry):
    text = (PUBLISHED / entry["file"]).read_text()
    assert text.lstrip().startswith("#"), "each file's header names its source"
    df = load(entry)
    assert len(df) == entry["rows"] == rows_in_text(entry, text)
    assert sorted(set(df["collective"])) == sorted(entry["collectives"])
    assert sorted({int(k) for k in df["ranks"].dropna()}) == sorted(entry["ranks"])
    for size, time_us in entry["check"]:
        assert printed(text, size, time_us), (size, time_us)
        scale = entry["ranks"][0] if (detect_format(text) == "table"
                                      and entry["collectives"][0] in PER_RANK_SIZE) else 1
        hit = df[(df["size_bytes"] == size * scale) & (df["time_us"] == time_us)]
        assert len(hit) == 1, (size, time_us)


@pytest.mark.parametrize("entry", [e for e in CORPUS if e["topology"]], ids=lambda e: e["topology"])
def test_corpus_topology_loads_and_holds_the_ranks(entry):
    topo = load_topology(PUBLISHED / entry["topology"])
    assert len(topo.npus) >= max(entry["ranks"])
    text = (PUBLISHED / entry["topology"]).read_text()
    assert text.startswith("#"), "each topology cites its figures in comments"


def test_corpus_covers_six_systems_one_ascend_and_the_readme_lists_every_file():
    systems = {e["system"] for e in CORPUS}
    assert len(systems) >= 6 and any("Ascend" in s for s in systems)
    readme = (PUBLISHED / "README.md").read_text()
    for e in CORPUS:
        assert f"`{e['file']}`" in readme, e["file"]
        if e["topology"]:
            assert f"`{e['topology']}`" in readme, e["topology"]


def test_a_wide_table_without_its_mapping_says_which_mapping(tmp_path):
    from hcsim.errors import HcsimError

    with pytest.raises(HcsimError, match=r"columns='size=bytes,wide=algorithm,values=time:UNIT'"):
        load_measured(PUBLISHED / "openmpi_allreduce_ib_200nodes.csv", "allreduce", 200)


def test_validate_corpus_systems_is_a_list_of_name_parts():
    # a str was iterated character by character: "GB200" matched every system with a 'G', '2' or '0'
    from hcsim.corpus import validate_corpus
    from hcsim.errors import HcsimError

    with pytest.raises(HcsimError, match=r"systems = \['Nonesuch'\]: no system of the corpus names any of them"):
        validate_corpus(systems="Nonesuch")
    with pytest.raises(HcsimError, match=r"systems = \[3\]: a list of non-empty strings"):
        validate_corpus(systems=[3])
    assert validate_corpus(systems="GB200")["system"].tolist() == [s for s in dict.fromkeys(e["system"] for e in CORPUS)
                                                                   if "GB200" in s][:1]
