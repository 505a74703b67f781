"""Command line: ``hcsim sweep``, ``hcsim topo show|list``, ``hcsim algos``.

Bad input prints one line, ``hcsim: error: ...``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from .errors import HcsimError


def _ranks(text):
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if len(items) == 1 and items[0].isdigit():
        return int(items[0])
    return [int(t) if t.isdigit() else t for t in items]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hcsim", description="Simulate HCCL collectives on Ascend clusters.")
    sub = ap.add_subparsers(dest="command", required=True)

    sw = sub.add_parser("sweep", help="sweep message sizes for one collective (hccl_test-style table)")
    sw.add_argument("--topology", "-t", default="atlas800t-a2", help="built-in name or YAML file")
    sw.add_argument("--op", required=True, help="allreduce, allgather, reducescatter, broadcast, reduce, "
                                                "alltoall, sendrecv")
    sw.add_argument("-b", "--minbytes", default="8", help="smallest size (K/M/G = 1024^n, kB/MB/GB = 1000^n)")
    sw.add_argument("-e", "--maxbytes", default="64M", help="largest size")
    sw.add_argument("-f", "--stepfactor", type=int, default=2, help="multiply the size by this each row")
    sw.add_argument("--algo", default="all", help="comma-separated algorithm names, or 'all'")
    sw.add_argument("--ranks", default=None, help="count of NPUs, or comma-separated NPU names/indices")
    sw.add_argument("--root", type=int, default=0, help="root rank (broadcast, reduce)")
    sw.add_argument("--mode", default="des", help="des (event-driven) or analytical")
    sw.add_argument("--routing", default="ecmp", help="ecmp or spray")
    sw.add_argument("--csv", help="also write the rows to this CSV file")
    sw.add_argument("--plot", help="write a bandwidth-vs-size plot (PNG) here")
    sw.add_argument("--metric", default="busbw_GBps", help="what --plot draws: busbw_GBps, algbw_GBps, time_us")

    tp = sub.add_parser("topo", help="inspect topologies")
    tsub = tp.add_subparsers(dest="topo_command", required=True)
    show = tsub.add_parser("show", help="summarise a topology")
    show.add_argument("topology", help="built-in name or YAML file")
    show.add_argument("--draw", help="also draw it to this PNG file")
    tsub.add_parser("list", help="list built-in topologies")

    al = sub.add_parser("algos", help="list algorithms per collective")
    al.add_argument("--op", default=None, help="only this collective")
    return ap


def _cmd_sweep(a) -> int:
    from .algorithms.registry import algorithms_for, check_collective
    from .api import sweep
    from .report import format_sweep
    from .topology.io import load_topology

    topo = load_topology(a.topology)
    check_collective(a.op)
    algos = algorithms_for(a.op) if a.algo == "all" else [x.strip() for x in a.algo.split(",") if x.strip()]
    df = sweep(topo, a.op, sizes=(a.minbytes, a.maxbytes), algorithms=algos, factor=a.stepfactor,
               ranks=_ranks(a.ranks), root=a.root, mode=a.mode, routing=a.routing)
    print(format_sweep(df, topo.name), end="")
    if a.csv:
        df.to_csv(a.csv, index=False)
        print(f"# rows written to {a.csv}")
    if a.plot:
        from .plot import plot_sweep

        if a.metric not in ("busbw_GBps", "algbw_GBps", "time_us"):
            raise HcsimError(f"--metric = {a.metric!r}: one of busbw_GBps, algbw_GBps, time_us")
        path = plot_sweep(df, a.plot, a.metric)
        print(f"# plot written to {path}")
    return 0


def _cmd_topo(a) -> int:
    from .topology.io import builtin_names, load_topology
    from .topology.summary import format_summary, summarize

    if a.topo_command == "list":
        for name in builtin_names():
            t = load_topology(name)
            print(f"{name:<24} {t.num_npus:>6} NPUs  {t.description}")
        return 0
    topo = load_topology(a.topology)
    print(format_summary(summarize(topo)))
    if a.draw:
        from .plot import draw_topology

        print(f"drawing written to {draw_topology(topo, a.draw)}")
    return 0


def _cmd_algos(a) -> int:
    from .algorithms.registry import REGISTRY, check_collective

    colls = [check_collective(a.op)] if a.op else list(REGISTRY)
    for coll in colls:
        print(coll)
        for name, spec in REGISTRY[coll].items():
            print(f"  {name:<10} {spec.summary}")
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        handler = {"sweep": _cmd_sweep, "topo": _cmd_topo, "algos": _cmd_algos}[args.command]
        return handler(args)
    except HcsimError as exc:
        print(f"hcsim: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"hcsim: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hcsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
