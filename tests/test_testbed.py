"""Root-only: the namespace testbed and the Open MPI backend, end to end (about a minute).

Marker ``testbed`` (``make test-testbed``, run by ``.ci/run`` when it is root): it needs root,
iproute2 and the ``mpi`` extra; without them each test is skipped and says why.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import hcsim

pytestmark = pytest.mark.testbed


def _leftovers(prefix=r"hcs\d+"):
    """Testbed objects (namespaces, links, qdiscs) named ``prefix`` + a letter + ..."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    words = (ns + links + qdiscs).replace(":", " ").replace("@", " ").split()
    return sorted(w for w in words if re.match(rf"{prefix}[a-z]", w))


@pytest.fixture(scope="module")
def root():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, veth, tc)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (iproute2)")


@pytest.fixture(scope="module")
def mpi(root):
    from hcsim.backends.mpi import available

    why = available()
    if why:
        pytest.skip(why)


def test_calibrated_prediction_on_a_4_host_testbed(mpi):
    from hcsim.backends.mpi import calibrated_topology, fit_point_to_point, run_mpi_sweep
    from hcsim.testbed import Testbed, TestbedSpec

    before = _leftovers()
    with Testbed(TestbedSpec(hosts=4, rate_mbit=100)) as tb:
        assert len(_leftovers()) > len(before)
        fit = fit_point_to_point(tb, sizes=(16384, 32768, 65536, 262144, 1048576), iterations=3, rounds=1)
        topo = calibrated_topology(tb, fit)
        ring = run_mpi_sweep(tb, "allgather", [1048576], "ring", iterations=3)
        tree = run_mpi_sweep(tb, "broadcast", [1048576], "binomial", iterations=3)
    assert _leftovers() == before  # namespaces, veths, bridges, qdiscs: gone
    # the shaped link: the one-way rate is within 15% of 100 Mbit/s of payload
    assert 0.85 * 12.5e6 < fit["rate_Bps"] < 1.02 * 12.5e6
    # calibrated on point-to-point probes only, the collectives are predicted within 25%
    for df, algo in ((ring, "ring"), (tree, "bmtree")):
        measured = float(df["time_us"].iloc[0])
        pred = hcsim.simulate(topo, df["collective"].iloc[0], 1048576, algo).time_us
        assert pred == pytest.approx(measured, rel=0.25), (algo, pred, measured)


def test_testbed_tears_down_on_error(root):
    from hcsim.testbed import Testbed, TestbedSpec

    before = _leftovers()
    with pytest.raises(RuntimeError):
        with Testbed(TestbedSpec(hosts=2, rate_mbit=50)):
            raise RuntimeError("boom")
    assert _leftovers() == before


_HOLD = """
import sys, time
from hcsim.testbed import Testbed, TestbedSpec
import subprocess
with Testbed(TestbedSpec(hosts=3, rate_mbit=50, leaves=2)) as tb:
    # a process inside a host, as an MPI rank would be: orphaned if this one is killed
    rank = subprocess.Popen(["ip", "netns", "exec", tb.hosts[0], "sleep", "120"])
    print("up", rank.pid, flush=True)
    time.sleep(120)
"""


def _running(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\tZ" not in next(line for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_killed_run_leaves_nothing_behind(root, sig):
    proc = subprocess.Popen([sys.executable, "-c", _HOLD], stdout=subprocess.PIPE, text=True)
    try:
        word, rank = proc.stdout.readline().split()
        assert word == "up" and _running(int(rank))
        mine = f"hcs{proc.pid}"
        assert _leftovers(mine)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # after a SIGKILL no handler runs: the testbed's guard process removes it
    deadline = time.time() + 10
    while _leftovers(mine) and time.time() < deadline:
        time.sleep(0.2)
    assert _leftovers(mine) == []
    assert not _running(int(rank))  # nothing keeps running in a removed namespace


def test_testbed_check_cli_sees_the_shaped_rate(root, capsys):
    from hcsim.cli import main

    assert main(["testbed", "check", "--testbed", "2x40mbit"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "->" in x]
    assert len(lines) == 2
    for line in lines:
        rate = float(line.split(":")[1].split()[0])
        assert 0.8 * 40 < rate < 1.05 * 40, line


def test_spec_parsing_and_errors():
    from hcsim.testbed import parse_testbed

    spec = parse_testbed("8x100mbit/2leaves/150mbit")
    assert (spec.hosts, spec.rate_mbit, spec.leaves, spec.uplink_mbit) == (8, 100.0, 2, 150.0)
    with pytest.raises(hcsim.ConfigError, match="testbed = '8by100'"):
        parse_testbed("8by100")


def test_cross_probe_measures_a_thin_uplink(mpi):
    from hcsim.backends.mpi import cross_flows, fit_line_log, run_mpi_sweep
    from hcsim.testbed import Testbed, TestbedSpec

    spec = TestbedSpec(hosts=4, rate_mbit=100, leaves=2, uplink_mbit=20)
    with Testbed(spec) as tb:
        df = run_mpi_sweep(tb, "p2p_cross", [262144, 1048576], "p2p", iterations=3)
    # 2 flows share each 20 Mbit/s uplink direction for 3 back-to-back steps: what crossed is
    # the uplink's rate (2.5 MB/s of payload at most), well below the hosts' 12.5 MB/s
    _, slope, _ = fit_line_log(df["size_bytes"], df["time_us"] * 1e-6)
    crossed = cross_flows(spec) * (spec.hosts - 1) / slope
    assert 0.8 * 2.5e6 < crossed < 1.02 * 2.5e6, crossed
