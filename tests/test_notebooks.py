"""Every notebook's code cells run, in order, without Jupyter (json + exec)."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cells = json.loads(path.read_text())["cells"]
    namespace: dict = {"__name__": "__notebook__"}
    ran = 0
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
        ran += 1
    assert ran >= 3

