"""The one interface every execution backend offers, and the lookup by name.

A backend runs a real collective sweep and returns the rows :func:`hcsim.sweep` returns
(``mode="measured"``), so prediction and measurement join on (collective, algorithm,
size). Where the hardware or toolkit it needs is absent, :meth:`Backend.available` says
why in one line and callers skip rather than fail.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Protocol

import numpy as np
import pandas as pd

from ..errors import ConfigError, bad_value


class Backend(Protocol):
    """What ``hcsim measure`` and ``hcsim validate --backend`` need of a backend."""

    name: str

    def available(self) -> str | None:
        """None when it can run here, else one line saying what is missing."""

    def algorithms(self, collective: str) -> list[str]:
        """Algorithm names :meth:`run` accepts for ``collective`` (forced where it can)."""

    def run(self, collective: str, sizes, algorithm: str | None = None, ranks: int | None = None,
            iterations: int = 20) -> pd.DataFrame:
        """Measure ``collective`` at ``sizes`` bytes; rows shaped like :func:`hcsim.sweep`."""


def geometric(sizes) -> tuple[int, int, int] | None:
    """``(min, max, factor)`` when ``sizes`` is min, min*f, ..., max (so one benchmark
    invocation with -b/-e/-f covers it), else None.

    Examples
    --------
    >>> geometric([1024, 2048, 4096]), geometric([1024, 3000])
    ((1024, 4096, 2), None)
    """
    s = [int(x) for x in sizes]
    if len(s) == 1:
        return s[0], s[0], 2
    f = s[1] // s[0] if s[0] else 0
    if f >= 2 and all(b == a * f for a, b in zip(s, s[1:], strict=False)):
        return s[0], s[-1], f
    return None


def run_tool(cmd: list[str], env: dict, timeout_s: float, what: str) -> str:
    """Run a benchmark binary; its stdout, or a one-line :class:`ConfigError`."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    except FileNotFoundError:
        raise ConfigError(f"backend {what}: {cmd[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"backend {what}: {' '.join(cmd[:3])} ... did not finish in {timeout_s:g} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise ConfigError(f"backend {what}: {cmd[0]} exited {proc.returncode}: {last}")
    return proc.stdout


def keep_sizes(df: pd.DataFrame, sizes) -> pd.DataFrame:
    """The rows whose size was asked for (a -b/-e/-f run may print more)."""
    return df[np.isin(df["size_bytes"].astype("int64"), np.asarray(list(sizes), dtype="int64"))].reset_index(drop=True)


def which(name: str, extra_dirs=()) -> str | None:
    for d in extra_dirs:
        if d and shutil.which(name, path=str(d)):
            return shutil.which(name, path=str(d))
    return shutil.which(name)


def get_backend(name: str, **options) -> Backend:
    """A backend by name: ``mpi`` (needs a running testbed: ``testbed=``), ``hccl``, ``nccl``."""
    from .hccl import HcclBackend
    from .nccl import NcclBackend

    makers = {"hccl": HcclBackend, "nccl": NcclBackend}
    if not isinstance(name, str):
        raise bad_value("backend", name, "one of hccl, mpi, nccl")
    if name == "mpi":
        from .mpi import MpiBackend

        return MpiBackend(**options)
    if name not in makers:
        raise ConfigError(f"backend = {name!r}: allowed: hccl, mpi, nccl")
    return makers[name](**options)
