"""HCCL backend: hccl_test's binaries under mpirun on Ascend hardware, HCCL_ALGO per run.

hccl_test (hicann/oam-tools, FACTS.md s5) is run as
``mpirun -n N <bin>/<binary> -b MIN -e MAX -f F -p NPUS_PER_NODE -d fp32 -o sum -n ITERS``
with ``HCCL_ALGO`` set when an algorithm is forced (validated by hcsim's own parser first),
and its table is read by :func:`hcsim.backends.parse_hccl_test`.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pandas as pd

from ..errors import ConfigError
from ..hccl.algo_env import parse_hccl_algo
from ..hccl.hccl_test import BINARIES
from .base import geometric, keep_sizes, run_tool, which
from .parsers import parse_hccl_test

TOOLKIT_DIRS = ("/usr/local/Ascend/ascend-toolkit/latest/tools/hccl_test/bin",
                "/usr/local/Ascend/tools/hccl_test/bin")
"""Where CANN installs hccl_test's binaries (besides $HCCL_TEST_HOME and $ASCEND_HOME_PATH)."""


HCCL_ALGO_NAME = {"ring": "ring", "mesh": "fullmesh", "hd": "H-D_R", "nhr": "NHR", "nb": "NB", "pipeline": "pipeline",
                  "pairwise": "pairwise", "ahc": "AHC"}
"""The HCCL_ALGO name of each hcsim algorithm it can force (the inverse of
:data:`hcsim.hccl.algo_env.HCSIM_NAME`)."""


class HcclBackend:
    """Run hccl_test on this machine's Ascend NPUs.

    Parameters
    ----------
    bin_dir : str, optional
        hccl_test's ``bin`` directory (default: ``$HCCL_TEST_HOME/bin``,
        ``$ASCEND_HOME_PATH/tools/hccl_test/bin``, then :data:`TOOLKIT_DIRS`).
    npus_per_node : int
        hccl_test's ``-p``.
    devices : int, optional
        NPUs present; default: count ``/dev/davinci<N>``.
    mpirun : str
        The launcher.

    Examples
    --------
    >>> b = HcclBackend(bin_dir="/nonexistent", devices=0)
    >>> b.available()
    'no Ascend NPU found (/dev/davinci* absent)'
    """

    name = "hccl"

    def __init__(self, bin_dir=None, npus_per_node: int = 8, devices: int | None = None, mpirun: str = "mpirun",
                 timeout_s: float = 3600):
        home = os.environ.get("HCCL_TEST_HOME")
        ascend = os.environ.get("ASCEND_HOME_PATH")
        candidates = [bin_dir] if bin_dir else [home and f"{home}/bin", ascend and f"{ascend}/tools/hccl_test/bin",
                                                *TOOLKIT_DIRS]
        self.bin_dir = next((Path(c) for c in candidates if c and Path(c).is_dir()), None)
        self.devices = len(glob.glob("/dev/davinci[0-9]*")) if devices is None else devices
        self.npus_per_node = npus_per_node
        self.mpirun = mpirun
        self.timeout_s = timeout_s

    def available(self) -> str | None:
        if self.devices < 1:
            return "no Ascend NPU found (/dev/davinci* absent)"
        if self.bin_dir is None:
            return "hccl_test not found (set HCCL_TEST_HOME or ASCEND_HOME_PATH)"
        if which(self.mpirun) is None:
            return f"{self.mpirun} not found"
        return None

    def algorithms(self, collective: str) -> list[str]:
        """HCCL's own choice, then the hcsim algorithms for ``collective`` that HCCL_ALGO can force."""
        from ..algorithms.registry import algorithms_for

        have = set(algorithms_for(collective))
        return ["auto", *(a for a in HCCL_ALGO_NAME if a in have)]

    def command(self, collective: str, sizes, ranks: int, iterations: int) -> list[str]:
        binary = {v: k for k, v in BINARIES.items()}.get(collective)
        if binary is None:
            raise ConfigError(f"op = {collective!r}: hccl_test has no binary for it; allowed: "
                              f"{', '.join(sorted(BINARIES.values()))}")
        lo, hi, f = geometric(sizes) or (min(sizes), max(sizes), 2)
        return [self.mpirun, "-n", str(ranks), str(self.bin_dir / binary), "-b", str(lo), "-e", str(hi), "-f", str(f),
                "-p", str(min(self.npus_per_node, ranks)), "-d", "fp32", "-o", "sum", "-n", str(iterations)]

    def run(self, collective: str, sizes, algorithm: str | None = None, ranks: int | None = None,
            iterations: int = 20) -> pd.DataFrame:
        """Run hccl_test; ``algorithm`` is an HCCL_ALGO value (``"level0:NA;level1:ring"``) or
        one algorithm name applied to every level HCCL allows (``"ring"``); None or "auto"
        leaves HCCL's own selection."""
        why = self.available()
        if why:
            raise ConfigError(f"backend hccl: {why}")
        ranks = ranks or self.devices
        env = dict(os.environ)
        if algorithm and algorithm != "auto":
            value = algorithm if ":" in algorithm else f"level0:NA;level1:{HCCL_ALGO_NAME.get(algorithm, algorithm)}"
            parse_hccl_algo(value)  # a bad value fails here, in one line, not inside HCCL
            env["HCCL_ALGO"] = value
        out = run_tool(self.command(collective, sizes, ranks, iterations), env, self.timeout_s, "hccl")
        df = parse_hccl_test(out, collective, ranks, algorithm or "auto")
        return keep_sizes(df, sizes)
