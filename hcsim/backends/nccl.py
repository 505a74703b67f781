"""NCCL backend: nccl-tests' binaries (all_reduce_perf, ...) where NVIDIA GPUs are present.

Run as ``<dir>/<collective>_perf -b MIN -e MAX -f F -g GPUS -n ITERS`` with ``NCCL_ALGO``
set when an algorithm is forced (Ring, Tree, CollnetDirect, CollnetChain, NVLS, NVLSTree,
PAT), and read by :func:`hcsim.backends.parse_nccl_tests` (out-of-place times).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd

from ..errors import ConfigError
from .base import geometric, keep_sizes, run_tool, which
from .parsers import NCCL_TESTS, parse_nccl_tests

NCCL_ALGOS = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")
"""NCCL_ALGO values (NVIDIA NCCL environment-variable documentation)."""

HCSIM_EQUIVALENT = {"Ring": "ring", "Tree": "double_ring"}
"""The hcsim schedule closest to each NCCL algorithm, for validation (Tree is NCCL's double
binary tree; hcsim has none, so it is compared with the double ring and says so)."""


def count_gpus() -> int:
    """GPUs ``nvidia-smi -L`` lists (0 when it is absent or fails)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class NcclBackend:
    """Run nccl-tests on this machine's GPUs (one process, ``-g`` GPUs).

    Parameters
    ----------
    bin_dir : str, optional
        Where the ``*_perf`` binaries are (default: ``$NCCL_TESTS_HOME/build``, then PATH).
    gpus : int, optional
        GPUs present; default: ``nvidia-smi -L``.

    Examples
    --------
    >>> NcclBackend(bin_dir="/nonexistent", gpus=0).available()
    'no NVIDIA GPU found (nvidia-smi lists none)'
    """

    name = "nccl"

    def __init__(self, bin_dir=None, gpus: int | None = None, timeout_s: float = 3600):
        home = os.environ.get("NCCL_TESTS_HOME")
        self.bin_dir = Path(bin_dir) if bin_dir else (Path(home) / "build" if home else None)
        self.gpus = count_gpus() if gpus is None else gpus
        self.timeout_s = timeout_s

    def _binary(self, collective: str) -> str:
        name = {v: k for k, v in NCCL_TESTS.items()}.get(collective)
        if name is None:
            raise ConfigError(f"op = {collective!r}: nccl-tests has no binary for it; allowed: "
                              f"{', '.join(sorted(NCCL_TESTS.values()))}")
        found = which(name, [self.bin_dir] if self.bin_dir else [])
        if found is None:
            raise ConfigError(f"backend nccl: {name} not found (set NCCL_TESTS_HOME or put it on PATH)")
        return found

    def available(self) -> str | None:
        if self.gpus < 1:
            return "no NVIDIA GPU found (nvidia-smi lists none)"
        if which("all_reduce_perf", [self.bin_dir] if self.bin_dir else []) is None:
            return "nccl-tests not found (set NCCL_TESTS_HOME or put all_reduce_perf on PATH)"
        return None

    def algorithms(self, collective: str) -> list[str]:
        return ["auto", *NCCL_ALGOS]

    def command(self, collective: str, sizes, ranks: int, iterations: int) -> list[str]:
        lo, hi, f = geometric(sizes) or (min(sizes), max(sizes), 2)
        return [self._binary(collective), "-b", str(lo), "-e", str(hi), "-f", str(f), "-g", str(ranks),
                "-n", str(iterations)]

    def run(self, collective: str, sizes, algorithm: str | None = None, ranks: int | None = None,
            iterations: int = 20) -> pd.DataFrame:
        why = self.available()
        if why:
            raise ConfigError(f"backend nccl: {why}")
        env = dict(os.environ)
        if algorithm and algorithm != "auto":
            if algorithm not in NCCL_ALGOS:
                raise ConfigError(f"algorithm = {algorithm!r}: allowed for nccl: auto, {', '.join(NCCL_ALGOS)}")
            env["NCCL_ALGO"] = algorithm
        ranks = ranks or self.gpus
        out = run_tool(self.command(collective, sizes, ranks, iterations), env, self.timeout_s, "nccl")
        df = parse_nccl_tests(out, collective, ranks, algorithm or "auto")
        return keep_sizes(df, sizes)
