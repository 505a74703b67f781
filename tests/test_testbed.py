"""Root-only: the namespace testbed and the Open MPI backend, end to end (about 15 s).

Off the default run (marker ``testbed``; ``make test-testbed``): it needs root and the
``mpi`` extra, and its accuracy is not calibrated yet.
"""

import subprocess

import pytest

import hcsim

pytestmark = pytest.mark.testbed


def _leftovers():
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [w for w in (ns + links).split() if w.startswith("hcs")]


@pytest.fixture(scope="module")
def backend():
    from hcsim.backends.mpi import available

    why = available()
    if why:
        pytest.skip(why)


def test_testbed_runs_mpi_and_tears_down(backend):
    from hcsim.backends.mpi import run_mpi_sweep
    from hcsim.testbed import Testbed, TestbedSpec

    before = _leftovers()
    with Testbed(TestbedSpec(hosts=4, rate_mbit=100)) as tb:
        assert len(_leftovers()) > len(before)
        df = run_mpi_sweep(tb, "allreduce", [262144, 1048576], "hd", iterations=3)
        topo = tb.topology()
    assert _leftovers() == before  # namespaces, veths, bridges, qdiscs: gone
    assert list(df["size_bytes"]) == [262144, 1048576]
    assert (df["time_us"] > 0).all() and df["time_us"].is_monotonic_increasing
    # uncalibrated model: Rabenseifner (hd) at 1 MiB on 4 x 100 Mbit within 35% of the measurement
    pred = hcsim.simulate(topo, "allreduce", 1048576, "hd").time_us
    assert pred == pytest.approx(float(df["time_us"].iloc[-1]), rel=0.35)


def test_testbed_tears_down_on_error(backend):
    from hcsim.testbed import Testbed, TestbedSpec

    before = _leftovers()
    with pytest.raises(RuntimeError):
        with Testbed(TestbedSpec(hosts=2, rate_mbit=50)):
            raise RuntimeError("boom")
    assert _leftovers() == before


def test_spec_parsing_and_errors():
    from hcsim.testbed import parse_testbed

    spec = parse_testbed("8x100mbit/2leaves/150mbit")
    assert (spec.hosts, spec.rate_mbit, spec.leaves, spec.uplink_mbit) == (8, 100.0, 2, 150.0)
    with pytest.raises(hcsim.ConfigError, match="testbed = '8by100'"):
        parse_testbed("8by100")
