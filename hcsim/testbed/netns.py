"""Network-namespace testbed with guaranteed teardown.

Layout: host i is namespace ``<prefix>h<i>`` with one interface ``eth0`` (10.77.0.(i+1)/24 in
the testbed's own subnet); its peer end joins leaf bridge ``<prefix>l<k>`` in the root
namespace. With more than one leaf, every leaf joins a spine bridge through a veth pair
shaped to ``uplink_mbit``. Every host link is shaped with tbf in both directions (egress
inside the namespace and on the bridge side). The root namespace holds the address
10.77.0.254 on the first leaf so mpirun can reach its daemons.

Names carry the creating process id (``hcs<pid>``): :func:`cleanup_stale` removes testbeds
whose creator is gone (a killed run), and :class:`Testbed` tears down on exit, error, Ctrl-C
and SIGTERM.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass

from ..errors import ConfigError, bad_value

SUBNET = "10.77.0"
PREFIX_RE = re.compile(r"^hcs(\d+)")
TCP_SYSCTLS = {"net.ipv4.tcp_slow_start_after_idle": "0"}
"""Per-namespace TCP settings (they change nothing outside the testbed): a collective's
next step on a connection should not restart slow start after a pause."""


@dataclass(frozen=True)
class TestbedSpec:
    """What to emulate.

    Attributes
    ----------
    hosts : int
        Namespaces (one MPI rank each).
    rate_mbit : float
        Each host link's rate, per direction.
    leaves : int
        Leaf bridges the hosts are spread over (1: a single switch).
    uplink_mbit : float or None
        Each leaf's uplink to the spine, per direction (None: hosts per leaf x rate).
    """

    hosts: int = 8
    rate_mbit: float = 100.0
    leaves: int = 1
    uplink_mbit: float | None = None

    def __post_init__(self):
        if isinstance(self.hosts, bool) or not isinstance(self.hosts, int) or not 2 <= self.hosts <= 64:
            raise bad_value("hosts", self.hosts, "2 to 64")
        if not isinstance(self.rate_mbit, (int, float)) or not 1 <= self.rate_mbit <= 10000:
            raise bad_value("rate_mbit", self.rate_mbit, "1 to 10000 Mbit/s")
        if isinstance(self.leaves, bool) or not isinstance(self.leaves, int) or not 1 <= self.leaves <= self.hosts:
            raise bad_value("leaves", self.leaves, f"1 to {self.hosts}")
        if self.uplink_mbit is not None and (isinstance(self.uplink_mbit, bool)
                                             or not isinstance(self.uplink_mbit, (int, float))
                                             or not 1 <= self.uplink_mbit <= 100000):
            raise bad_value("uplink_mbit", self.uplink_mbit, "1 to 100000 Mbit/s, or none (hosts per leaf x rate)")

    def leaf_of(self, i: int) -> int:
        per = -(-self.hosts // self.leaves)
        return i // per


def parse_testbed(text: str) -> TestbedSpec:
    """``"8x100mbit"``, ``"8x100mbit/2leaves"``, ``"8x100mbit/2leaves/200mbit"``."""
    m = re.fullmatch(r"(\d+)x(\d+(?:\.\d+)?)mbit(?:/(\d+)leaves(?:/(\d+(?:\.\d+)?)mbit)?)?", str(text).strip())
    if not m:
        raise bad_value("testbed", text, "HOSTSxRATEmbit[/Lleaves[/UPLINKmbit]], e.g. 8x100mbit")
    return TestbedSpec(int(m.group(1)), float(m.group(2)), int(m.group(3) or 1),
                       float(m.group(4)) if m.group(4) else None)


def _run(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def _names():
    ns = [line.split()[0] for line in _run("ip", "netns", "list", check=False).stdout.splitlines() if line.strip()]
    links = re.findall(r"^\d+: ([^:@]+)", _run("ip", "-o", "link", "show", check=False).stdout, flags=re.M)
    return ns, links


def _owned(name: str, prefix: str) -> bool:
    """Whether ``name`` belongs to the testbed ``prefix`` (``hcs<pid>``): the whole pid, so
    ``hcs12`` does not claim ``hcs123h0``.

    Examples
    --------
    >>> _owned("hcs12h0", "hcs12"), _owned("hcs123h0", "hcs12"), _owned("eth0", "hcs12")
    (True, False, False)
    """
    m = PREFIX_RE.match(name)
    return bool(m) and f"hcs{m.group(1)}" == prefix


def remove_testbed(prefix: str) -> list[str]:
    """Remove every namespace and link of the testbed ``prefix`` (``hcs<pid>``), after killing
    what still runs inside its namespaces (an orphaned MPI rank would keep a deleted
    namespace, and its veth, alive). Returns what went."""
    ns, links = _names()
    mine = [n for n in ns if _owned(n, prefix)]
    for name in mine:
        for pid in _run("ip", "netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    for name in mine:
        _run("ip", "netns", "del", name, check=False)
    gone = [n for n in links if _owned(n, prefix)]
    for name in gone:
        _run("ip", "link", "del", name, check=False)
    return mine + gone


_GUARD = """
import sys
sys.stdin.read()  # returns when the testbed's process closes the pipe or dies, however it dies
from hcsim.testbed.netns import remove_testbed
remove_testbed(sys.argv[1])
"""
"""The guard each testbed starts: a process in its own session (a Ctrl-C to the terminal's
process group does not reach it) that waits for its creator to go, then removes what is left
of the testbed, also after a SIGKILL, which no handler can catch."""


def cleanup_stale(all_testbeds: bool = False) -> list[str]:
    """Remove testbeds whose creating process is gone (or every hcsim testbed). Returns what went."""
    ns, links = _names()
    stale = set()
    for name in ns + links:
        m = PREFIX_RE.match(name)
        if m:
            pid = int(m.group(1))
            alive = pid != os.getpid() and os.path.exists(f"/proc/{pid}")
            if all_testbeds or not alive:
                stale.add(f"hcs{pid}")
    return [name for prefix in sorted(stale) for name in remove_testbed(prefix)]


class Testbed:
    """A running emulated cluster; use as a context manager.

    Examples
    --------
    >>> with Testbed(TestbedSpec(hosts=4, rate_mbit=100)) as tb:   # doctest: +SKIP
    ...     tb.hosts
    ['hcs123h0', 'hcs123h1', 'hcs123h2', 'hcs123h3']
    """

    def __init__(self, spec: TestbedSpec):
        self.spec = spec
        self.prefix = f"hcs{os.getpid()}"
        self.hosts = [f"{self.prefix}h{i}" for i in range(spec.hosts)]
        self.addresses = [f"{SUBNET}.{i + 1}" for i in range(spec.hosts)]
        self._up = False
        self._guard = None
        self._old_handlers = {}

    def __enter__(self):
        if os.geteuid() != 0:
            raise ConfigError("testbed: needs root (network namespaces, veth, tc)")
        cleanup_stale()
        self._guard = subprocess.Popen([sys.executable, "-c", _GUARD, self.prefix], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        atexit.register(self.down)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        return False

    def _on_signal(self, signum, frame):
        self.down()
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    def _tbf(self, dev, mbit, netns=None):
        cmd = ["tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit", "burst", "32kbit",
               "latency", "400ms"]
        _run(*(["ip", "netns", "exec", netns] + cmd if netns else cmd))

    def up(self):
        s, p = self.spec, self.prefix
        self._up = True
        leaves = [f"{p}l{k}" for k in range(s.leaves)]
        for k, br in enumerate(leaves):
            _run("ip", "link", "add", br, "type", "bridge")
            _run("ip", "link", "set", br, "up")
            if k == 0:
                _run("ip", "addr", "add", f"{SUBNET}.254/24", "dev", br)
        if s.leaves > 1:
            spine = f"{p}sp"
            _run("ip", "link", "add", spine, "type", "bridge")
            _run("ip", "link", "set", spine, "up")
            per_leaf = -(-s.hosts // s.leaves)
            up_mbit = s.uplink_mbit or per_leaf * s.rate_mbit
            for k, br in enumerate(leaves):
                a, b = f"{p}u{k}a", f"{p}u{k}b"
                _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
                _run("ip", "link", "set", a, "master", br)
                _run("ip", "link", "set", b, "master", spine)
                for dev in (a, b):
                    _run("ip", "link", "set", dev, "up")
                    self._tbf(dev, up_mbit)
        for i, (ns, addr) in enumerate(zip(self.hosts, self.addresses, strict=True)):
            peer = f"{p}v{i}"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "link", "set", peer, "master", leaves[s.leaf_of(i)])
            _run("ip", "link", "set", peer, "up")
            _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", "eth0")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            for key, value in TCP_SYSCTLS.items():
                _run("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}", check=False)
            self._tbf("eth0", s.rate_mbit, ns)   # host -> switch
            self._tbf(peer, s.rate_mbit)        # switch -> host

    def down(self):
        if self._up:
            self._up = False
            remove_testbed(self.prefix)
        guard, self._guard = self._guard, None
        if guard is not None:  # nothing is left for it to remove: let it go
            guard.stdin.close()
            guard.wait(timeout=30)

    def topology(self):
        """The hcsim topology of this testbed (one NPU per host, bridges as switches).

        Open MPI's TCP transport does not overlap the two directions of a send-receive
        exchange (FACTS: found while trying this here), so each host's endpoint is half
        duplex at the link rate; latencies start at zero for calibration to fill in.
        """
        from ..topology import LinkSpec, NpuSpec, Topology

        s = self.spec
        rate = s.rate_mbit * 1e6 / 8
        t = Topology(f"testbed-{s.hosts}x{s.rate_mbit:g}mbit", f"netns testbed, {s.hosts} hosts, {s.leaves} leaves")
        for k in range(s.leaves):
            t.add_node(f"leaf{k}", "switch")
        if s.leaves > 1:
            t.add_node("spine", "switch")
            per_leaf = -(-s.hosts // s.leaves)
            up = (s.uplink_mbit or per_leaf * s.rate_mbit) * 1e6 / 8
            for k in range(s.leaves):
                t.add_link(f"leaf{k}", "spine", LinkSpec(up, 0.0, "eth"))
        for i in range(s.hosts):
            t.add_npu(f"npu{i}", NpuSpec(server=i, injection_Bps=rate, half_duplex=True))
            t.add_link(f"npu{i}", f"leaf{s.leaf_of(i)}", LinkSpec(rate, 0.0, "eth"))
        return t


_RECEIVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); got = 0; t0 = None
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    t0 = t0 or time.perf_counter(); got += len(b)
print(got, time.perf_counter() - t0, flush=True)
"""
_SENDER = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); c.sendall(b"x" * int(sys.argv[3])); c.close()
"""


def check_testbed(tb, nbytes: int = 1 << 21, port: int = 17771, timeout_s: float = 60) -> list[dict]:
    """Send ``nbytes`` over TCP from every host to the next (one pair at a time) and return
    the one-way rate each pair reached, so a shaped link can be seen to run at its rate.

    The time runs from the first byte to the last at the receiver, so connection set-up and
    the tbf bucket's initial burst count for little at 2 MiB.
    """
    import sys

    rows = []
    n = len(tb.hosts)
    for i in range(n):
        j = (i + 1) % n
        recv = subprocess.Popen(["ip", "netns", "exec", tb.hosts[j], sys.executable, "-c", _RECEIVER, str(port)],
                                stdout=subprocess.PIPE, text=True)
        try:
            if recv.stdout.readline().strip() != "ready":
                raise ConfigError(f"testbed: receiver in {tb.hosts[j]} did not start")
            _run("ip", "netns", "exec", tb.hosts[i], sys.executable, "-c", _SENDER, tb.addresses[j], str(port),
                 str(nbytes))
            out, _ = recv.communicate(timeout=timeout_s)
        finally:
            if recv.poll() is None:
                recv.kill()
        got, secs = out.split()
        rows.append({"src": tb.hosts[i], "dst": tb.hosts[j], "bytes": int(got),
                     "Mbit_s": int(got) * 8 / float(secs) / 1e6})
    return rows
