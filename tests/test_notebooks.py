"""Every notebook's code cells run, in order, without Jupyter (json + exec); every notebook is
stored with its outputs (``make notebooks``) so it reads on GitHub, and none reads a file outside
the repository (a parent-directory path)."""

import ast
import contextlib
import io
import json
import re
import sys
import types
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

MAX_NOTEBOOK_BYTES = 1_000_000
"""A stored notebook (with its images) stays under this size."""


def _ipython_stub(shown: list):
    """``IPython.display`` for a run without IPython (the dev install has none): an ``Image``
    that checks its file exists and is not empty, and a ``display`` that records."""
    class Image:
        def __init__(self, data=None, **_kw):
            path = Path(data)
            assert path.is_file() and path.stat().st_size > 0, f"Image({data!r}): no picture there"
            self.path = path
            shown.append(self)

    Image.__module__ = "IPython.display"
    display_mod = types.ModuleType("IPython.display")
    display_mod.Image = Image
    display_mod.display = lambda *objs, **_kw: None
    package = types.ModuleType("IPython")
    package.display = display_mod
    # matplotlib looks for a running IPython shell and at its version: none, and a current one
    package.get_ipython = lambda: None
    package.version_info = (9, 0)
    return package, display_mod


def _run_cell(source: str, name: str, namespace: dict):
    """Run a cell as Jupyter would: its value is the last statement's if that is an expression
    (and the cell does not end with ';'). Returns (stdout, value)."""
    tree = ast.parse(source, name)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if last is None:
            exec(compile(tree, name, "exec"), namespace)
            value = None
        else:
            exec(compile(ast.Module(tree.body[:-1], type_ignores=[]), name, "exec"), namespace)
            value = eval(compile(ast.Expression(last.value), name, "eval"), namespace)
            if source.rstrip().endswith(";"):
                value = None
    return out.getvalue(), value


def _is_image(value) -> bool:
    return type(value).__name__ == "Image" and type(value).__module__.startswith("IPython")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_is_stored_with_its_outputs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HCSIM_PROGRESS", "0")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    shown: list = []
    try:
        import IPython.display  # noqa: F401
    except ImportError:
        package, display_mod = _ipython_stub(shown)
        monkeypatch.setitem(sys.modules, "IPython", package)
        monkeypatch.setitem(sys.modules, "IPython.display", display_mod)
    cells = json.loads(path.read_text())["cells"]
    namespace: dict = {"__name__": "__notebook__"}
    ran = images = 0
    unstored = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        printed, value = _run_cell(source, f"{path.name}[cell {i}]", namespace)
        ran += 1
        images += _is_image(value)
        stored = cell.get("outputs", [])
        if (printed or value is not None) and not stored:
            unstored.append(i)
        if _is_image(value) and not any("image/png" in o.get("data", {}) for o in stored):
            unstored.append(i)  # shows a picture, stored without it
    assert ran >= 3
    assert not unstored, f"{path.name}: cells {unstored} give output but are stored without it: run make notebooks"
    stored_images = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    shown_count = max(images, len(shown))  # len(shown): every picture made (display() too), without IPython
    assert stored_images >= shown_count, f"{path.name}: {shown_count} pictures shown, {stored_images} stored"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_clean_and_small(path):
    text = path.read_text()
    assert len(text.encode()) < MAX_NOTEBOOK_BYTES, f"{path.name} is {len(text.encode())} bytes"
    nb = json.loads(text)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), f"{path.name}: a code cell was never run"
    for c in code:
        for o in c.get("outputs", []):
            assert o["output_type"] != "error", f"{path.name}: a stored error: {o.get('ename')}: {o.get('evalue')}"
            if o["output_type"] == "stream" and o["name"] == "stderr":
                assert "it/s" not in "".join(o["text"]), f"{path.name}: a progress bar is stored"
    drawn = any("Image(" in "".join(c["source"]) for c in code)
    pictures = sum("image/png" in o.get("data", {}) for c in code for o in c.get("outputs", []))
    assert pictures >= 1 or not drawn, f"{path.name}: draws but stores no picture"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_reads_nothing_outside_the_repository(path):
    for c in json.loads(path.read_text())["cells"]:
        source = "".join(c["source"])
        # cells run in a scratch directory: any path up and out ('../x') reaches beyond the clone
        assert not re.search(r"\.\.[/\\]", source), f"{path.name} reads a path outside the repository"
