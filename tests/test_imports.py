"""``import hcsim`` stays light, and each entry module imports on its own (no import cycles
hidden by the order the package happens to load them in)."""

import subprocess
import sys

import pytest

HEAVY = ("pandas", "networkx", "simpy", "matplotlib", "numpy")


def test_import_hcsim_loads_no_heavy_dependency_until_used():
    code = (f"import sys, hcsim; print(sorted(m for m in {HEAVY!r} if m in sys.modules)); "
            f"hcsim.load_topology; print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]"
    assert "networkx" in out[1]  # the lazy attribute did load the topology layer


def test_lazy_attributes_resolve_and_unknown_names_fail():
    import hcsim

    assert callable(hcsim.simulate) and callable(hcsim.verify) and hcsim.COLLECTIVES
    assert hcsim.workload.run  # a subpackage by attribute
    with pytest.raises(AttributeError, match="no_such_name"):
        hcsim.no_such_name  # noqa: B018


@pytest.mark.parametrize("module", ["hcsim.topology.model", "hcsim.topology", "hcsim.engine", "hcsim.engine.des",
                                    "hcsim.cli", "hcsim.workload", "hcsim.api", "hcsim.analytical", "hcsim.verify"])
def test_module_imports_first(module):
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, capture_output=True)
