"""hcsim against SimGrid SMPI: one AllReduce, the same star platform, the same max-min flow model.

Run: ``make bench-smpi`` (= ``.venv/bin/python benchmarks/bench_vs_smpi.py [--quick] [--repeats N]``).

Cases (issue 15): ring AllReduce of 1 MiB on a star of 512 and of 1024 hosts, and Rabenseifner
AllReduce of 1 MiB on 1024 hosts. Every host has one full-duplex link to one central switch,
25 GB/s and 1 us per link, so a host-to-host path crosses two links and pays 2 us.

* SMPI side: a platform XML (a ``routing="Cluster"`` zone, i.e. SimGrid's star zone: p hosts,
  p ``SPLITDUPLEX`` links, p ``host_link``) and a hostfile are written to a temporary
  directory; ``benchmarks/smpi/allreduce.c`` is compiled with ``smpicc`` and run under
  ``smpirun`` with ``--cfg=smpi/allreduce:lr`` (Patarasuk-Yuan logical ring: ring
  reduce-scatter then ring allgather, p - 1 steps each, one 1/p block per step) or
  ``rab_rdb`` (Rabenseifner: reduce-scatter by recursive halving, then allgather by recursive
  doubling, neighbours first, as hcsim's ``rabenseifner``). The prediction is the latest
  rank's ``MPI_Wtime`` after the call minus the earliest before it.
* hcsim side: ``single_switch(p, 25e9, 1e-6)`` (latency per hop, two hops per path, as
  SimGrid sums its links' latencies), ``step_overhead_s=0``, ``launch_overhead_s=0``,
  ``record=False`` (SMPI runs without tracing too), in a ``python -c`` child process.

``SMPI_CONFIG`` lists the options that make SMPI a pure max-min flow model; each is explained
there. With them the two predictions differ by exactly SMPI's 16-byte MPI envelope, which
SimGrid adds to every message's payload (``size + 16`` in ``smpi_request.cpp``) and hcsim does
not model: one envelope per step, 0.64 ns per step at 25 GB/s, about 0.03% of these runs. The
table shows the raw difference, the envelope's share and what is left (0 up to rounding).

Both are timed as whole processes (``smpirun`` or ``python -c``), case by case, the two of a
pair one right after the other, the order alternating between repeats; the medians are
reported with their ratio. hcsim's time inside ``simulate`` (and its import time: Python plus
numpy/pandas/networkx start-up, a floor under every whole-process time) and SMPI's own
"simulation took" time (``smpi/display-timing``: after parsing and platform setup) are shown
too. A relative difference of the predictions above 1% fails the run (exit 1).

Without ``smpirun``/``smpicc`` on PATH the benchmark says it skips and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
C_SOURCE = HERE / "smpi" / "allreduce.c"

SIZE_BYTES = 1 << 20  # per-rank AllReduce buffer
BANDWIDTH_BPS = 25e9  # per link, each direction
LATENCY_S = 1e-6  # per link (hcsim: per hop)
HOST_SPEED = "1Pf"  # flop/s; nothing is computed (smpi/simulate-computation:no), so only for form
ENVELOPE_BYTES = 16  # SMPI adds this to every message's payload (smpi_request.cpp, "MPI envelope")
FAIL_REL = 0.01  # predictions further apart than this fail the run
RESIDUAL_WARN_REL = 1e-6  # what is left once the envelope is counted should be rounding only
DEFAULT_TIMEOUT_S = 3600.0

# SMPI options (SimGrid 3.32), chosen so that SMPI's model is hcsim's: a fluid max-min flow
# model where a transfer pays its path latency, then drains at its max-min fair share.
SMPI_CONFIG = (
    # CM02 is SimGrid's plain max-min model (latency factor 1, bandwidth factor 1, weight-S 0:
    # every flow has the same weight). smpirun's default, the SMPI model, applies piecewise
    # latency and bandwidth factors by message size (smpi/lat-factor, smpi/bw-factor).
    "--cfg=network/model:CM02",
    # No reverse (ACK) traffic: by default a flow also loads its reverse route by 5%.
    "--cfg=network/crosstraffic:0",
    # No TCP window bound. CM02 bounds a flow at min(route bandwidth, gamma / (2 latency));
    # with gamma 0 the bound is 0, which SimGrid's solver reads as unbounded, so a flow is
    # limited by its links' constraints alone, as in hcsim. (The default 4 MiB bound would be
    # 1 TB/s here, never binding either.)
    "--cfg=network/TCP-gamma:0",
    # Written out although they are CM02's defaults: factors 1 and no RTT weighting.
    "--cfg=network/latency-factor:1",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/weight-S:0",
    # Only read by the SMPI network model, which CM02 replaces; set to 1 for every size anyway.
    "--cfg=smpi/bw-factor:0:1",
    "--cfg=smpi/lat-factor:0:1",
    # No time for the application's own code (the reduction arithmetic included) and no
    # benchmarking of it; hosts are very fast anyway.
    "--cfg=smpi/simulate-computation:no",
    f"--cfg=smpi/host-speed:{HOST_SPEED}",
    # Reading MPI_Wtime costs no simulated time (the default injects 10 ns per call).
    "--cfg=smpi/wtime:0",
    # No eager sends: a message starts when both sender and receiver have posted it, hcsim's
    # rule (a transfer starts when both ranks have entered its step). Sends below
    # send-is-detached-thresh (64 KiB, the default) return early, which changes nothing here:
    # every message of lr and rab_rdb is an MPI_Sendrecv. smpi/os, smpi/ois and smpi/or
    # (per-message CPU overheads) keep their default 0.
    "--cfg=smpi/async-small-thresh:0",
    "--cfg=smpi/send-is-detached-thresh:65536",
    # SMPI's own wall time after parsing and platform setup (printed by smpi_utils at INFO).
    "--cfg=smpi/display-timing:yes",
    "--log=root.thres:warning",
    "--log=smpi_utils.thres:info",
)


@dataclass(frozen=True)
class Case:
    name: str
    p: int
    hcsim_algorithm: str
    smpi_algorithm: str

    @property
    def label(self) -> str:
        return f"{self.name} AllReduce 1 MiB, p={self.p}"

    def steps(self) -> int:
        """Steps of the schedule: each rank sends one message per step, all ranks in lockstep."""
        if self.hcsim_algorithm == "ring":
            return 2 * (self.p - 1)
        if self.hcsim_algorithm == "rabenseifner":
            pp = 1 << (self.p.bit_length() - 1)
            return 2 * int(math.log2(pp)) + (2 if pp != self.p else 0)
        raise ValueError(f"algorithm = {self.hcsim_algorithm!r}: no step count known")

    def envelope_s(self) -> float:
        """What SMPI's 16-byte envelope adds: 16 B at full link rate once per step."""
        return self.steps() * ENVELOPE_BYTES / BANDWIDTH_BPS


CASES = (
    Case("ring", 512, "ring", "lr"),
    Case("ring", 1024, "ring", "lr"),
    Case("rabenseifner", 1024, "rabenseifner", "rab_rdb"),
)


# ---------------------------------------------------------------- the two descriptions

def _bw_attr(bandwidth_Bps: float) -> str:
    return f"{bandwidth_Bps:.17g}Bps"


def _lat_attr(latency_s: float) -> str:
    return f"{latency_s!r}s"


def platform_xml(p: int, bandwidth_Bps: float = BANDWIDTH_BPS, latency_s: float = LATENCY_S) -> str:
    """SimGrid platform: p hosts, each with its own full-duplex link to one star centre."""
    bw, lat = _bw_attr(bandwidth_Bps), _lat_attr(latency_s)
    lines = ['<?xml version="1.0"?>',
             '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
             '<platform version="4.1">',
             f'  <!-- {p} hosts on one switch, {bandwidth_Bps:g} B/s and {latency_s:g} s per link '
             '(benchmarks/bench_vs_smpi.py) -->',
             '  <zone id="star" routing="Cluster">']
    lines += [f'    <host id="{host_name(i)}" speed="{HOST_SPEED}"/>' for i in range(p)]
    lines += [f'    <link id="{link_name(i)}" bandwidth="{bw}" latency="{lat}" sharing_policy="SPLITDUPLEX"/>'
              for i in range(p)]
    lines += [f'    <host_link id="{host_name(i)}" up="{link_name(i)}_UP" down="{link_name(i)}_DOWN"/>'
              for i in range(p)]
    lines += ['  </zone>', '</platform>', '']
    return "\n".join(lines)


def host_name(i: int) -> str:
    return f"host{i}"


def link_name(i: int) -> str:
    return f"link{i}"


def hostfile_text(p: int) -> str:
    """One rank per host, rank i on host i."""
    return "".join(f"{host_name(i)}\n" for i in range(p))


def hcsim_topology(p: int, bandwidth_Bps: float = BANDWIDTH_BPS, latency_s: float = LATENCY_S):
    """hcsim's side of the same platform (what the child process builds)."""
    from hcsim.topology import single_switch
    return single_switch(p, bandwidth_Bps, latency_s)


def write_platform(workdir: Path, p: int) -> tuple[Path, Path]:
    d = workdir / f"p{p}"
    d.mkdir(parents=True, exist_ok=True)
    xml, hosts = d / "platform.xml", d / "hostfile"
    xml.write_text(platform_xml(p))
    hosts.write_text(hostfile_text(p))
    return xml, hosts


# ---------------------------------------------------------------- commands

HCSIM_CHILD = r"""
import sys, time
t0 = time.perf_counter()
import json
import hcsim
from hcsim.topology import single_switch
t1 = time.perf_counter()
p, algorithm, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
topo = single_switch(p, float(sys.argv[4]), float(sys.argv[5]))
t2 = time.perf_counter()
r = hcsim.simulate(topo, "allreduce", size, algorithm, step_overhead_s=0.0, launch_overhead_s=0.0,
                   record=False)
t3 = time.perf_counter()
print("hcsim-bench " + json.dumps({"time_s": r.time_s, "import_s": t1 - t0, "topology_s": t2 - t1,
                                   "simulate_s": t3 - t2, "hcsim": hcsim.__file__}))
"""


def hcsim_command(case: Case) -> list[str]:
    return [sys.executable, "-c", HCSIM_CHILD, str(case.p), case.hcsim_algorithm, str(SIZE_BYTES),
            repr(BANDWIDTH_BPS), repr(LATENCY_S)]


def smpi_command(case: Case, platform: Path, hostfile: Path, binary: Path) -> list[str]:
    # -no-privatize: the program has no global state; privatizing would copy the binary per rank.
    return ["smpirun", "-no-privatize", "-np", str(case.p), "-platform", str(platform),
            "-hostfile", str(hostfile), *SMPI_CONFIG, f"--cfg=smpi/allreduce:{case.smpi_algorithm}",
            str(binary), str(SIZE_BYTES)]


def compile_smpi(workdir: Path) -> Path:
    binary = workdir / "allreduce"
    subprocess.run(["smpicc", "-O2", "-o", str(binary), str(C_SOURCE)], check=True,
                   capture_output=True, text=True)
    return binary


_SMPI_RESULT = re.compile(r"hcsim-bench-smpi start_s=(\S+) end_s=(\S+)")
_SMPI_TOOK = re.compile(r"The simulation took (\S+) seconds")


def parse_smpi(out: str) -> dict:
    m = _SMPI_RESULT.search(out)
    if not m:
        raise RuntimeError(f"no result line in SMPI's output:\n{out[-2000:]}")
    took = _SMPI_TOOK.search(out)
    return {"time_s": float(m.group(2)) - float(m.group(1)),
            "simulate_s": float(took.group(1)) if took else float("nan")}


def parse_hcsim(out: str) -> dict:
    for line in out.splitlines():
        if line.startswith("hcsim-bench "):
            return json.loads(line[len("hcsim-bench "):])
    raise RuntimeError(f"no result line in hcsim's output:\n{out[-2000:]}")


def run_timed(cmd: list[str], *, env=None, cwd=None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Run ``cmd`` as a whole process: wall time, peak RSS of its process tree, output."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True)
        timer = threading.Timer(timeout_s, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {proc.returncode} after {wall:.1f} s"
                           f"{' (timeout)' if wall >= timeout_s else ''}:\n{stderr[-3000:]}")
    return {"wall_s": wall, "peak_MB": usage.ru_maxrss / 1024, "stdout": stdout, "stderr": stderr}


# ---------------------------------------------------------------- provenance

def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def hcsim_provenance(rev: str | None) -> str:
    if rev:
        return f"commit {_git('rev-parse', '--short', rev) or rev} (exported with git archive)"
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--", "hcsim")
    return f"working tree at commit {head}" + (" with uncommitted changes under hcsim/" if dirty else "")


def export_rev(rev: str, workdir: Path) -> Path:
    """``git archive`` the hcsim package at ``rev`` into ``workdir``; returns the PYTHONPATH entry."""
    dest = workdir / "hcsim-src"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "hcsim"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def smpi_version() -> str:
    try:
        out = subprocess.run(["smpirun", "-version"], capture_output=True, text=True, timeout=30)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


# ---------------------------------------------------------------- the run

def _median(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def summarize(case: Case, hc: list[dict], sm: list[dict]) -> dict:
    hc_t = {r["time_s"] for r in hc}
    sm_t = {r["time_s"] for r in sm}
    h, s = hc[0]["time_s"], sm[0]["time_s"]
    env = case.envelope_s()
    return {
        "case": case.label, "p": case.p, "hcsim_algorithm": case.hcsim_algorithm,
        "smpi_algorithm": case.smpi_algorithm,
        "hcsim_us": h * 1e6, "smpi_us": s * 1e6, "rel_diff": (s - h) / h,
        "envelope_us": env * 1e6, "residual_rel": (s - h - env) / h,
        "deterministic": len(hc_t) == 1 and len(sm_t) == 1,
        "hcsim_wall_s": _median(r["wall_s"] for r in hc),
        "hcsim_simulate_s": _median(r["simulate_s"] for r in hc),
        "hcsim_import_s": _median(r["import_s"] for r in hc),
        "hcsim_peak_MB": _median(r["peak_MB"] for r in hc),
        "smpi_wall_s": _median(r["wall_s"] for r in sm),
        "smpi_simulate_s": _median(r["simulate_s"] for r in sm),
        "smpi_peak_MB": _median(r["peak_MB"] for r in sm),
        "runs": len(hc),
        "hcsim_walls": [r["wall_s"] for r in hc], "smpi_walls": [r["wall_s"] for r in sm],
    }


def print_table(rows: list[dict]) -> None:
    print("\nPredictions (us) and whole-process wall times (s), medians:\n")
    print("| case | hcsim / SMPI algorithm | hcsim us | SMPI us | SMPI - hcsim | of which envelope "
          "| hcsim wall s (simulate, import) | SMPI wall s (simulate) | SMPI/hcsim wall | peak MB hcsim / SMPI |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['hcsim_algorithm']} / {r['smpi_algorithm']} | {r['hcsim_us']:.4f} "
              f"| {r['smpi_us']:.4f} | {100 * r['rel_diff']:+.4f}% | {r['envelope_us']:.4f} us "
              f"(residual {100 * r['residual_rel']:+.1e}%) "
              f"| {r['hcsim_wall_s']:.2f} ({r['hcsim_simulate_s']:.2f}, {r['hcsim_import_s']:.2f}) "
              f"| {r['smpi_wall_s']:.2f} ({r['smpi_simulate_s']:.2f}) "
              f"| {r['smpi_wall_s'] / r['hcsim_wall_s']:.1f} "
              f"| {r['hcsim_peak_MB']:.0f} / {r['smpi_peak_MB']:.0f} |")


def select_cases(args) -> list[Case]:
    cases = list(CASES[:1] if args.quick else CASES)
    if args.hosts:
        seen, cases = set(), [Case(c.name, args.hosts, c.hcsim_algorithm, c.smpi_algorithm) for c in cases]
        cases = [c for c in cases if not (c in seen or seen.add(c))]
    return cases


def measure(cases, platforms, binary, workdir, env, repeats, timeout_s):
    """Pairs of whole-process runs, case by case, the order of a pair alternating by repeat."""
    hc: dict[Case, list] = {c: [] for c in cases}
    sm: dict[Case, list] = {c: [] for c in cases}
    for rep in range(repeats):
        for c in cases:
            xml, hosts = platforms[c.p]
            sides = [("SMPI", smpi_command(c, xml, hosts, binary), parse_smpi, sm[c], None),
                     ("hcsim", hcsim_command(c), parse_hcsim, hc[c], env)]
            for side, cmd, parse, into, side_env in (sides if rep % 2 == 0 else sides[::-1]):
                run = run_timed(cmd, env=side_env, cwd=workdir, timeout_s=timeout_s)
                into.append({**parse(run["stdout"] + run["stderr"]), "wall_s": run["wall_s"],
                             "peak_MB": run["peak_MB"]})
                print(f"  [{rep + 1}/{repeats}] {c.label:<36} {side:<5} wall {run['wall_s']:7.2f} s  "
                      f"predicted {into[-1]['time_s'] * 1e6:.4f} us", flush=True)
    return hc, sm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the 512-host ring, 2 repeats")
    ap.add_argument("--repeats", type=int, default=None, help="runs of each side per case (default 3, --quick 2)")
    ap.add_argument("--hosts", type=int, default=None,
                    help="run the cases at this many hosts instead (tests use 16)")
    ap.add_argument("--hcsim-rev", default=None,
                    help="measure hcsim as committed at this git revision (git archive of hcsim/), "
                         "not the importable working tree")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per process")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the platforms and binary here")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--dry-run", action="store_true",
                    help="write the platforms, print the commands, run nothing (no SimGrid needed)")
    args = ap.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (2 if args.quick else 3)
    if repeats < 1 or (args.hosts is not None and args.hosts < 2):
        ap.error("--repeats must be >= 1 and --hosts >= 2")
    cases = select_cases(args)

    missing = [t for t in ("smpirun", "smpicc") if shutil.which(t) is None]
    if missing and not args.dry_run:
        print(f"bench_vs_smpi: skipped: {' and '.join(missing)} not found on PATH "
              "(SimGrid SMPI, e.g. Debian's libsimgrid-dev)")
        return 0

    with tempfile.TemporaryDirectory(prefix="hcsim-vs-smpi-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        platforms = {c.p: write_platform(workdir, c.p) for c in cases}
        binary = workdir / "allreduce"
        env = dict(os.environ)
        if args.hcsim_rev:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(export_rev(args.hcsim_rev, workdir)), env.get("PYTHONPATH")]))

        print(f"hcsim {hcsim_provenance(args.hcsim_rev)}; {smpi_version() if not missing else 'no SimGrid'}; "
              f"python {sys.version.split()[0]}; {os.cpu_count()} cores; "
              f"load average {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}")
        print(f"star of p hosts, {BANDWIDTH_BPS / 1e9:g} GB/s and {LATENCY_S * 1e6:g} us per link; "
              f"AllReduce {SIZE_BYTES} B per rank; {repeats} pair(s) per case")
        if args.dry_run:
            for c in cases:
                xml, hosts = platforms[c.p]
                print(f"\n{c.label}\n  SMPI : {' '.join(smpi_command(c, xml, hosts, binary))}\n"
                      f"  hcsim: {sys.executable} -c <HCSIM_CHILD> {' '.join(hcsim_command(c)[3:])}")
            return 0

        try:
            hc, sm = measure(cases, platforms, compile_smpi(workdir), workdir, env, repeats, args.timeout)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            detail = e.stderr if isinstance(e, subprocess.CalledProcessError) else ""
            print(f"ERROR: {e}\n{detail or ''}".rstrip())
            return 2

    rows = [summarize(c, hc[c], sm[c]) for c in cases]
    print(f"\nhcsim imported from {hc[cases[0]][0]['hcsim']}")
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    failed = False
    for r in rows:
        if not r["deterministic"]:
            print(f"WARNING: {r['case']}: a side predicted different times across repeats")
        if abs(r["rel_diff"]) > FAIL_REL:
            failed = True
            print(f"FAIL: {r['case']}: SMPI {r['smpi_us']:.4f} us vs hcsim {r['hcsim_us']:.4f} us, "
                  f"{100 * r['rel_diff']:+.3f}% (limit {100 * FAIL_REL:g}%)")
        elif abs(r["residual_rel"]) > RESIDUAL_WARN_REL:
            print(f"WARNING: {r['case']}: {100 * r['residual_rel']:+.2e}% left once SMPI's 16-byte "
                  "envelopes are counted; the models should agree to rounding")
    if failed:
        print("FAIL: the two simulators disagree by more than 1%; see above")
        return 1
    print("OK: every case agrees within 1% (the difference is SMPI's 16-byte MPI envelope per message)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
