"""``hcsim whatif``: a job (a scenario file) or one collective, as it is and perturbed.

Parses, calls :func:`hcsim.whatif.whatif` / :func:`hcsim.whatif.whatif_collective`, prints the
table (baseline first, then each perturbation and its difference) and writes the CSV and the
bar chart when asked.
"""

from __future__ import annotations

import argparse
import math

from ..errors import HcsimError


def register(sub) -> None:
    """Add the ``whatif`` subcommand to ``sub`` (argparse subparsers)."""
    w = sub.add_parser("whatif", help="baseline vs perturbed: failed links/nodes, degraded links, stragglers, "
                       "other jobs' traffic, another ECMP seed")
    w.add_argument("scenario", nargs="?", default=None,
                   help="a scenario file (a job); or give --topology and --op for one collective")
    w.add_argument("-p", "--perturb", action="append", default=[], metavar="NAME=ARGS",
                   help="a perturbation, repeatable: fail-link=A,B  fail-node=N  fail-server=S  "
                   "degrade-link=A,B:FACTOR[:LATENCY]  degrade-tier=TIER:FACTOR[:LATENCY]  "
                   "straggler=RANK:FACTOR[:LATE]  background-load=A,B:RATE  "
                   "background-job=RANKS:COLLECTIVE:SIZE[:REPEAT]  ecmp-seed=N (default: the file's whatif: list)")
    w.add_argument("--combined", action="store_true", help="also run every perturbation together")
    w.add_argument("--servers", type=int, default=None, help="servers (nodes) in the topology")
    w.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="change one field of the scenario file before it is checked (VALUE is YAML)")
    w.add_argument("--topology", default=None, help="one collective: a built-in name or YAML file")
    w.add_argument("--op", default=None, help="one collective: its name (allreduce, alltoall, ...)")
    w.add_argument("-b", "--size", default=None, help="one collective: its size (nccl-tests convention)")
    w.add_argument("--algo", default="auto", help="one collective: the algorithm (default auto: HCCL's choice)")
    w.add_argument("--ranks", default=None, help="one collective: global rank numbers, such as 0,1,2,3 or 0-7")
    w.add_argument("--routing", default=None, help="one collective: ecmp (default) or spray")
    w.add_argument("--csv", help="write the table here")
    w.add_argument("--plot", help="write baseline-vs-perturbed bars here (PNG, PDF or SVG)")
    w.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a progress bar on stderr (default: only on a terminal)")
    w.set_defaults(handler=command)


def command(a) -> int:
    from . import _settings, _writable, _write_csv

    _writable(a.csv, "--csv")
    _writable(a.plot, "--plot")
    one = [f for f, v in (("--topology", a.topology), ("--op", a.op), ("-b", a.size)) if v is not None]
    if a.scenario is not None:
        if one or a.ranks is not None or a.routing is not None or a.algo != "auto":
            raise HcsimError(f"{(one or ['--algo/--ranks/--routing'])[0]}: only for one collective (without a "
                             "scenario file)")
        from ..whatif import whatif

        df = whatif(a.scenario, a.perturb, combined=a.combined, progress=a.progress, servers=a.servers,
                    overrides=_settings(a.set))
        title = a.scenario
    else:
        missing = [f for f in ("--topology", "--op", "-b") if f not in one]
        if missing:
            raise HcsimError(f"scenario: none given: a scenario file, or {', '.join(missing)} for one collective")
        if a.set:
            raise HcsimError("--set: only for a scenario file")
        if not a.perturb:
            raise HcsimError("-p: at least one perturbation for one collective (such as -p fail-link=leaf0,spine0)")
        from ..topology.io import load_topology
        from ..whatif import _ranks_from_text, whatif_collective

        topo = load_topology(a.topology) if a.servers is None else load_topology(a.topology, servers=a.servers)
        ranks = None if a.ranks is None else list(_ranks_from_text("--ranks", a.ranks))
        options = {} if a.routing is None else {"routing": a.routing}
        df = whatif_collective(topo, a.op, a.size, a.perturb, algorithm=a.algo, ranks=ranks, combined=a.combined,
                               progress=a.progress, **options)
        title = f"{a.op} {a.size} on {topo.name}"
    print(format_whatif(df, title), end="")
    _write_csv(df, a.csv)
    if a.plot:
        from ..plot_plan import plot_whatif

        print(f"# plot written to {plot_whatif(df, a.plot)}")
    return 0


def format_whatif(df, title: str) -> str:
    """The what-if table: one line per case, errors with their reason."""
    from . import _table

    rows = []
    for r in df.itertuples(index=False):
        if r.status != "ok":
            rows.append([r.case, "-", "-", "-", "-", f"{r.status}: {r.reason}"])
            continue
        rows.append([r.case, f"{r.time_us:.2f}", f"{r.delta_us:+.2f}",
                     "-" if math.isnan(r.delta_pct) else f"{r.delta_pct:+.2f}%",  # a baseline of 0 us
                     f"{r.busiest_link} {100 * r.busiest_utilization:.0f}%" if r.busiest_link else "-",
                     r.perturbation or "as given"])
    out = [f"# what-if: {title}"]
    out += _table(["case", "time_us", "delta_us", "delta", "busiest link", "change"], rows)
    return "\n".join(out) + "\n"
