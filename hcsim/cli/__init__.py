"""Command line: ``hcsim run``, ``sweep``, ``select``, ``hccl-test``, ``measure``, ``validate``, ``calibrate``,
``testbed check|show|cleanup``, ``topo show|list``, ``algos``.

Bad input prints one line, ``hcsim: error: ...``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from ..errors import ConfigError, HcsimError
from ..limits import MAX_CALIBRATION_WORK, MAX_DES_TRANSFERS, MAX_FLOW_UPDATES, MAX_WORK

SUBCOMMAND_MODULES = ("whatif", "plan")
"""Modules of ``hcsim.cli`` that each add one subcommand: ``register(subparsers)`` adds its parser
and sets ``handler`` (a function of the parsed arguments returning the exit status)."""


def _ranks(text):
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise HcsimError(f"--ranks = {text!r}: a count of NPUs, or comma-separated NPU names/indices")
    if len(items) == 1 and _digits(items[0]):
        return int(items[0])
    return [int(t) if _digits(t) else t for t in items]


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 18


PLOT_FORMATS = (".png", ".pdf", ".svg")
"""What --plot and --draw write (by the file's suffix)."""


def _writable(path, flag: str) -> None:
    """Fail before a long run, not after it, when an output file cannot be written."""
    import os
    from pathlib import Path

    if path is None:
        return
    if "\x00" in str(path):  # no file system takes a NUL in a name (os calls raise ValueError)
        raise HcsimError(f"{flag} = {str(path)!r}: a file path without a NUL character")
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not str(path).strip() or target.is_dir():
        raise HcsimError(f"{flag} = {str(path)!r}: a file path to write (not a folder)")
    if not folder.is_dir():  # checked before the run, not after it; nothing is made on the user's disk
        raise HcsimError(f"{flag} = {str(path)!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise HcsimError(f"{flag} = {str(path)!r}: not writable")
    if flag in ("--plot", "--draw") and target.suffix.lower() not in PLOT_FORMATS:
        raise HcsimError(f"{flag} = {str(path)!r}: a picture file ending " + ", ".join(PLOT_FORMATS))


def _write_csv(df, path) -> None:
    """Write ``df`` (no index) to ``path`` when one was given (already checked by :func:`_writable`)."""
    if path:
        try:
            df.to_csv(path, index=False)
        except OSError as exc:  # a full disk or a device that takes no data: name the flag and the file
            raise ConfigError(f"--csv = {str(path)!r}: cannot be written ({exc.strerror or exc})") from None
        print(f"# rows written to {path}")


class _Parser(argparse.ArgumentParser):
    """argparse with hcsim's one-line errors (``hcsim: error: ...``, exit status 2)."""

    def error(self, message):
        text = " ".join(f"{self.prog.removeprefix('hcsim ')}: {message}".split())
        self.exit(2, f"hcsim: error: {text}\n")

    def _get_values(self, action, arg_strings):
        # argparse drops a value of '--' (its end-of-options marker) and hands the option an empty
        # list, unconverted: `--ranks=--` reached the command as [] (an internal error later)
        if action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings) or action.dest}: expected a value, not '--'")
        return super()._get_values(action, arg_strings)


def _work_bound(text: str) -> int | None:
    """``--max-work``'s value: a whole number of engine work units (ASCII digits); 0 for no bound."""
    digits = text.strip().replace("_", "")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of engine work units (e.g. 20000000), "
                                         "or 0 for no bound")
    return int(digits) or None


def _add_work_flag(parser) -> None:
    parser.add_argument("--max-work", type=_work_bound, default=MAX_WORK, metavar="UNITS",
                        help=f"work bound of the whole command's event-driven runs, in engine units (about 1 us "
                             f"each; default {MAX_WORK:,}); 0: no bound")


def _add_parallel_flags(parser, what: str) -> None:
    """--workers, --scheduler and --progress of the sweeping subcommands (hcsim.parallel, hcsim.progress)."""
    parser.add_argument("--workers", type=int, default=None,
                        help=f"run the {what} on a local Dask cluster of N worker processes (hcsim[dask])")
    parser.add_argument("--scheduler", default=None,
                        help=f"run the {what} on a running Dask scheduler, tcp://HOST:PORT (hcsim[dask])")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="a progress bar on stderr (default: when stderr is a terminal and HCSIM_PROGRESS "
                             "is not 0)")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="hcsim", description="Simulate HCCL collectives on Ascend clusters.")
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
    sw.add_argument("--hccl-algo", default=None, help="an HCCL_ALGO string; implies --algo auto")
    sw.add_argument("--servers", type=int, default=None, help="servers (nodes) in the topology (builder topologies)")
    sw.add_argument("--max-transfers", type=int, default=MAX_DES_TRANSFERS,
                    help="refuse a call whose schedule holds more transfers than this (work bound)")
    sw.add_argument("--max-flow-updates", type=int, default=MAX_FLOW_UPDATES,
                    help="stop an event-driven run after this many flow-rate updates (work bound)")
    _add_work_flag(sw)
    sw.add_argument("--csv", help="also write the rows to this CSV file")
    sw.add_argument("--plot", help="write a bandwidth-vs-size plot (PNG) here")
    sw.add_argument("--metric", default="busbw_GBps", help="what --plot draws: busbw_GBps, algbw_GBps, time_us")
    _add_parallel_flags(sw, "points")

    se = sub.add_parser("select", help="HCCL's algorithm choice versus the fastest, size by size")
    se.add_argument("--topology", "-t", default="atlas900-a2-pod", help="built-in name or YAML file")
    se.add_argument("--servers", type=int, default=None, help="servers (nodes) in the topology (builder topologies)")
    se.add_argument("--op", required=True, help="collective")
    se.add_argument("-b", "--minbytes", default="8K")
    se.add_argument("-e", "--maxbytes", default="4G")
    se.add_argument("-f", "--stepfactor", type=int, default=2)
    se.add_argument("--mode", default="des", help="des or analytical")
    se.add_argument("--hccl-algo", default=None, help="an HCCL_ALGO string constraining HCCL's choice")
    se.add_argument("--buffsize", default="200M", help="HCCL_BUFFSIZE (CCL buffer), e.g. 200M")
    se.add_argument("--max-transfers", type=int, default=MAX_DES_TRANSFERS,
                    help="refuse a call whose schedule holds more transfers than this (work bound)")
    se.add_argument("--max-flow-updates", type=int, default=MAX_FLOW_UPDATES,
                    help="stop an event-driven run after this many flow-rate updates (work bound)")
    _add_work_flag(se)
    se.add_argument("--csv", help="write the table to this CSV file")
    se.add_argument("--plot", help="write time vs size per candidate (PNG), fastest regions shaded")
    se.add_argument("--metric", default="time_us", help="what --plot draws: time_us or algbw_GBps")
    _add_parallel_flags(se, "sizes")

    ht = sub.add_parser("hccl-test", help="simulate an hccl_test binary, printing hccl_test's table")
    ht.add_argument("binary", help="all_reduce_test, all_gather_test, reduce_scatter_test, alltoall_test, "
                                   "alltoallv_test, broadcast_test, reduce_test, scatter_test")
    ht.add_argument("-p", "--npus", type=int, default=8, help="NPUs per server (hccl_test -p)")
    ht.add_argument("-n", "--servers", type=int, default=1,
                    help="servers (hcsim's meaning; in hccl_test -n is the iteration count)")
    ht.add_argument("-b", "--minbytes", default="8K")
    ht.add_argument("-e", "--maxbytes", default="64M")
    ht.add_argument("-f", "--stepfactor", type=int, default=2)
    ht.add_argument("-d", "--datatype", default="fp32",
                    help="int8, int16, int32, int64, uint8..uint64, fp16, bfp16, fp32, fp64 (hccl_test -d); "
                         "HCCL's unsupported pairs are refused, int64 / prod reduce on the vector core")
    ht.add_argument("-o", "--op", default="sum", help="sum, prod, max, min (hccl_test -o)")
    ht.add_argument("-r", "--root", type=int, default=0)
    ht.add_argument("--topology", "-t", default=None, help="default: atlas800t-a2 (1 server) or atlas900-a2-pod")
    ht.add_argument("--hccl-algo", default=None, help="HCCL_ALGO for the run")
    ht.add_argument("-w", "--warmup_iters", type=int, default=5, help="accepted as hccl_test does (no effect)")
    ht.add_argument("-c", "--check", type=int, default=1, help="accepted as hccl_test does (no effect)")
    ht.add_argument("-i", "--stepbytes", default=None, help="accepted as hccl_test does (no effect)")
    _add_work_flag(ht)

    va = sub.add_parser("validate", help="predicted versus measured for a stored real output")
    va.add_argument("--measured", default=None, help="hccl_test output, nccl-tests output or CSV")
    va.add_argument("--topology", "-t", default=None, help="what the measurement ran on")
    va.add_argument("--backend", default=None, help="mpi: measure on a namespace testbed (root); hccl, nccl: "
                    "measure on this machine's NPUs / GPUs and predict on --topology")
    va.add_argument("--testbed", default="8x100mbit", help="HOSTSxRATEmbit[/Lleaves[/UPLINKmbit]]")
    va.add_argument("--ops", default="allreduce,allgather,reducescatter,alltoall,broadcast")
    va.add_argument("--algos", default="all", help="comma-separated hcsim algorithms, or all")
    va.add_argument("--sizes", default="64K,256K,1M")
    va.add_argument("--iterations", type=int, default=5, help="timed runs per point and per probe size")
    va.add_argument("--rounds", type=int, default=3, help="with --backend mpi: times the probe set and then "
                    "every point run, interleaved (each keeps the median)")
    va.add_argument("--op", default=None, help="collective (when the file does not say)")
    va.add_argument("--ranks", type=int, default=None, help="rank count (when the file does not say)")
    va.add_argument("--columns", default=None, help="which CSV/table column holds what, units named: "
                    "size=bytes,time=latency:ms; busbw=COL:GBps; wide=algorithm,values=time:us (docs/validation.md)")
    va.add_argument("--algo", default="auto", help="algorithm to predict with (default: the one each row records, "
                    "else HCCL's choice)")
    va.add_argument("--transport", default=None, metavar="LIBRARY",
                    help="with --algo auto: rows that name no algorithm run what this library runs where its rule "
                    "is known (openmpi: Open MPI's fixed decision rules; intel-mpi: MPICH's defaults standing in; "
                    "rccl: its MSCCL programs and rings; nccl-nvlink: NCCL's ring, its NVLS allreduce where the switch "
                    "has it), as the public corpus predicts them; else HCCL's choice. nccl-tests rows on an NVLink "
                    "topology take nccl-nvlink or nccl-net without it; none: HCCL's choice for them too")
    va.add_argument("--nccl-ll-max-gbps", type=float, default=None, metavar="GBPS",
                    help="with an NCCL transport: NCCL's cap on LL's bus bandwidth (llMaxBws, Hopper one node: 141), "
                    "which sets where NCCL's tuner moves an allreduce from its ring to NVLS (as calibrate's)")
    va.add_argument("--min-size", default="1", help="leave smaller points out of the summary")
    va.add_argument("--csv", help="write the rows here")
    va.add_argument("--plot", help="write predicted versus measured (PNG) here")
    va.add_argument("--save-topology", help="--backend mpi: write the calibrated topology (with its probes) here")
    _add_work_flag(va)

    me = sub.add_parser("measure", help="run a real collective sweep on a backend (hccl, nccl, mpi)")
    me.add_argument("--backend", required=True, help="hccl (Ascend NPUs), nccl (NVIDIA GPUs), mpi (testbed, root)")
    me.add_argument("--op", required=True, help="collective")
    me.add_argument("-b", "--minbytes", default="64K")
    me.add_argument("-e", "--maxbytes", default="1M")
    me.add_argument("-f", "--stepfactor", type=int, default=2)
    me.add_argument("--algo", default="auto", help="auto, or what the backend can force (HCCL_ALGO, NCCL_ALGO, "
                    "an Open MPI coll_tuned algorithm)")
    me.add_argument("--ranks", type=int, default=None, help="ranks (default: every device, or every testbed host)")
    me.add_argument("--iterations", type=int, default=20)
    me.add_argument("--testbed", default="8x100mbit", help="mpi: HOSTSxRATEmbit[/Lleaves[/UPLINKmbit]]")
    me.add_argument("--csv", help="write the rows here")

    tb = sub.add_parser("testbed", help="the emulated cluster: namespaces, veth, tc (root)")
    tbsub = tb.add_subparsers(dest="testbed_command", required=True)
    tbc = tbsub.add_parser("check", help="bring a testbed up, measure one-way rate per host pair, tear it down")
    tbc.add_argument("--testbed", default="4x100mbit", help="HOSTSxRATEmbit[/Lleaves[/UPLINKmbit]]")
    tbs = tbsub.add_parser("show", help="print the hcsim topology a testbed description gives")
    tbs.add_argument("--testbed", default="8x100mbit")
    tbsub.add_parser("cleanup", help="remove what killed runs left behind (namespaces, links)")

    ca = sub.add_parser("calibrate", help="fit tier bandwidths and overheads to measured times")
    ca.add_argument("--measured", default=None, help="hccl_test output, nccl-tests output or CSV")
    ca.add_argument("--topology", "-t", default=None, help="the topology to fit")
    ca.add_argument("--backend", default=None, help="mpi: fit the testbed from point-to-point probes (root)")
    ca.add_argument("--testbed", default="8x100mbit", help="with --backend mpi")
    ca.add_argument("--iterations", type=int, default=5, help="with --backend mpi: runs per probe size")
    ca.add_argument("--rounds", type=int, default=3, help="with --backend mpi: times the probe set runs, "
                    "interleaved (each probe size keeps the median)")
    ca.add_argument("--op", default=None, help="collective (when the file does not say)")
    ca.add_argument("--ranks", type=int, default=None, help="rank count (when the file does not say)")
    ca.add_argument("--columns", default=None, help="which CSV/table column holds what, units named: "
                    "size=bytes,time=latency:ms; busbw=COL:GBps; wide=algorithm,values=time:us (docs/validation.md)")
    ca.add_argument("--algo", default="auto", help="what ran (default: the one each row records, else HCCL's choice)")
    ca.add_argument("--out", required=True, help="write the calibrated topology YAML here")
    ca.add_argument("--fit", default="tiers", choices=("tiers", "bottleneck", "curve"),
                    help="tiers: a bandwidth scale per tier the points cross, the step overhead and a launch "
                    "factor; bottleneck: two parameters (the step overhead and the rate of the one class of links "
                    "that limits the points), for a fit from two points of a sweep; curve: a whole sweep, the "
                    "bottleneck line on its smallest and largest points and a monotone efficiency curve by message "
                    "size on all of them (docs/validation.md)")
    ca.add_argument("--bands", type=int, default=None,
                    help="with --fit curve: bands of message size of the curve (default 4)")
    ca.add_argument("--direction", default=None, choices=("either", "rising", "falling"),
                    help="with --fit curve: which way the efficiency goes with the message size (default either: "
                    "both fitted, the better kept)")
    ca.add_argument("--leave-one-out", action="store_true",
                    help="also refit without each point in turn and predict it (one whole fit per point); print "
                    "every point's error and their median and largest")
    ca.add_argument("--transport", default=None, metavar="LIBRARY",
                    help="with --fit bottleneck: the library that ran, set up as the public corpus sets it up "
                    "(hcsim.corpus.transport_calibration): hccl, nccl-nvlink (one NVLink domain), nccl-net (ring steps "
                    "cross a network), rccl, openmpi, openmpi-tcp or intel-mpi: its protocols as message regimes, "
                    "its cited per-step cost where it has one (NCCL over NVLink: 0.6 us, the launch fitted instead), "
                    "the ranks' own links preferred for MPI's CPU ranks (docs/validation.md). With --fit bottleneck, "
                    "nccl-tests rows on an NVLink topology take nccl-nvlink or nccl-net without it; none: a plain fit, "
                    "HCCL's choice")
    ca.add_argument("--points", default="all", choices=("all", "ends"),
                    help="which measured points the fit uses: all (default), or ends: the public corpus's two-point "
                    "rule, the smallest and largest size of the first row's sweep (hcsim.corpus.calibration_points), "
                    "which on the corpus predicts the rest better than a least-squares fit through every point")
    ca.add_argument("--nccl-ll-max-gbps", type=float, default=None, metavar="GBPS",
                    help="with --transport nccl-*: NCCL's absolute cap on LL's bus bandwidth for the system "
                    "(llMaxBws in NCCL's tuning.cc: Hopper, one node: 141; Blackwell: 282), checked at the largest point")
    ca.add_argument("--prefer-rank-links", action="store_true",
                    help="with --fit bottleneck, for ranks that are CPU processes (MPI): fit the ranks' own links "
                    "where the points cannot tell them from a link deeper in the network (a node's NIC), which "
                    "then keeps its spec rate; not for accelerators (docs/validation.md, change 10)")
    ca.add_argument("--max-work", type=int, default=MAX_CALIBRATION_WORK,
                    help="work bound of the fit, summed over its simulations (the engine units of --max-work elsewhere, "
                         "route searches included; default 5M, a few seconds); with --fit curve it bounds the curve's "
                         "fit and each fit of its line apart")

    tp = sub.add_parser("topo", help="inspect topologies")
    tsub = tp.add_subparsers(dest="topo_command", required=True)
    show = tsub.add_parser("show", help="summarise a topology")
    show.add_argument("topology", help="built-in name or YAML file")
    show.add_argument("--draw", help="also draw it to this PNG file")
    show.add_argument("--servers", type=int, default=None, help="servers (nodes) in the topology (builder topologies)")
    tsub.add_parser("list", help="list built-in topologies")

    ru = sub.add_parser("run", help="run a scenario file (a job: topology, workload, options)")
    ru.add_argument("scenario", help="a scenario YAML file (scenarios/*.yaml, docs/scenarios.md)")
    ru.add_argument("--servers", type=int, default=None, help="servers (nodes) in the scenario's topology")
    ru.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="change one field of the file before it is checked, e.g. workload.params.batch=128 "
                    "(VALUE is YAML; repeatable)")
    ru.add_argument("--trace", help="write a Chrome trace (JSON, opens in ui.perfetto.dev) here")
    ru.add_argument("--trace-group", default="npu", help="npu (a process per NPU) or server (per server)")
    ru.add_argument("--plot", help="write the timeline (PNG, PDF or SVG) here")
    ru.add_argument("--csv", help="write the operation table (one row per operation and rank) here")
    ru.add_argument("--max-rows", type=int, default=40, help="operations printed (the CSV holds all)")
    ru.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                    help="a progress bar over the operations, on stderr (default: only on a terminal)")

    al = sub.add_parser("algos", help="list algorithms per collective")
    al.add_argument("--op", default=None, help="only this collective")
    for name in SUBCOMMAND_MODULES:  # one small module per newer subcommand: register(sub) sets its handler
        import_module(f"{__name__}.{name}").register(sub)
    return ap


def _cmd_sweep(a) -> int:
    from ..algorithms.registry import algorithms_for, check_collective, get_algorithm
    from ..api import sweep
    from ..engine.des import shares_in_network_switch
    from ..hccl.selection import candidates
    from ..parallel import dask_client
    from ..report import format_sweep

    check_collective(a.op)
    _writable(a.csv, "--csv")
    _writable(a.plot, "--plot")
    if a.plot and a.metric not in ("busbw_GBps", "algbw_GBps", "time_us"):
        raise HcsimError(f"--metric = {a.metric!r}: one of busbw_GBps, algbw_GBps, time_us")
    topo = _topology(a)
    if a.hccl_algo is not None:
        algos = ["auto"]
    elif a.algo == "all":
        switch = shares_in_network_switch(topo, topo.npus)
        algos = ([x for x in algorithms_for(a.op) if x not in ("pipeline", "ahc")
                  and (switch or not get_algorithm(a.op, x).in_network)] if len(_servers(topo)) < 2
                 else ["auto"] + [x for x in candidates(a.op, _servers(topo), (), topo.product, switch)])
    else:
        algos = [x.strip() for x in a.algo.split(",") if x.strip()]
        if not algos:
            raise HcsimError(f"--algo = {a.algo!r}: comma-separated algorithm names (hcsim algos --op {a.op}), "
                             "or 'all'")
    ranks = _ranks(a.ranks)
    with dask_client(a.workers, a.scheduler, flags=True) as client:
        df = sweep(topo, a.op, sizes=(a.minbytes, a.maxbytes), algorithms=algos, factor=a.stepfactor,
                   ranks=ranks, root=a.root, mode=a.mode, routing=a.routing, hccl_algo=a.hccl_algo,
                   max_transfers=a.max_transfers, max_flow_updates=a.max_flow_updates, client=client,
                   progress=a.progress, max_work=a.max_work)
    print(format_sweep(df, topo.name), end="")
    _write_csv(df, a.csv)
    if a.plot:
        from ..plot import plot_sweep

        path = plot_sweep(df, a.plot, a.metric)
        print(f"# plot written to {path}")
    return 0


def _topology(a):
    from ..topology.io import load_topology

    servers = getattr(a, "servers", None)
    return load_topology(a.topology) if servers is None else load_topology(a.topology, servers=servers)


def _servers(topo):
    from ..api import rank_layout

    return rank_layout(topo, topo.npus)[0]


def _cmd_select(a) -> int:
    from ..algorithms.registry import check_collective
    from ..hccl.selection import HcclConfig
    from ..parallel import dask_client
    from ..report import format_select
    from ..study import select
    from ..units import parse_size

    check_collective(a.op)
    _writable(a.csv, "--csv")
    _writable(a.plot, "--plot")
    if a.plot and a.metric not in ("time_us", "algbw_GBps"):
        raise HcsimError(f"--metric = {a.metric!r}: one of time_us, algbw_GBps")
    topo = _topology(a)
    cfg = HcclConfig(buffer_bytes=parse_size(a.buffsize, "--buffsize"))
    with dask_client(a.workers, a.scheduler, flags=True) as client:
        df = select(topo, a.op, sizes=(a.minbytes, a.maxbytes), factor=a.stepfactor, mode=a.mode,
                    hccl_algo=a.hccl_algo, hccl=cfg, max_transfers=a.max_transfers,
                    max_flow_updates=a.max_flow_updates, client=client, progress=a.progress, max_work=a.max_work)
    print(format_select(df), end="")
    _write_csv(df, a.csv)
    if a.plot:
        from ..plot import plot_select

        print(f"# plot written to {plot_select(df, a.plot, a.metric)}")
    return 0


def _cmd_hccl_test(a) -> int:
    from ..hccl.hccl_test import run_hccl_test

    print(run_hccl_test(a.binary, npus=a.npus, servers=a.servers, minbytes=a.minbytes, maxbytes=a.maxbytes,
                        factor=a.stepfactor, dtype=a.datatype, op=a.op, root=a.root, topology=a.topology,
                        hccl_algo=a.hccl_algo, warmup_iters=a.warmup_iters, max_work=a.max_work), end="")
    return 0


def _cmd_validate(a) -> int:
    from ..backends import load_measured
    from ..units import parse_size
    from ..validate import fastest_line, format_validation, validate_measured

    _writable(a.csv, "--csv")
    _writable(a.plot, "--plot")
    _writable(a.save_topology, "--save-topology")
    if a.backend is not None and (a.transport is not None or a.nccl_ll_max_gbps is not None):
        flag = "--transport" if a.transport is not None else "--nccl-ll-max-gbps"
        raise HcsimError(f"{flag}: only with --measured FILE (a backend's rows name the algorithm that ran)")
    if a.backend is not None:
        from ..validate import validate_mpi

        if a.backend in ("hccl", "nccl"):
            return _validate_on_hardware(a)
        if a.backend != "mpi":
            raise HcsimError(f"--backend = {a.backend!r}: allowed: hccl, mpi, nccl")
        sizes = [parse_size(x, "--sizes") for x in a.sizes.split(",")]
        ops = [x.strip() for x in a.ops.split(",") if x.strip()]
        algos = "all" if a.algos == "all" else [x.strip() for x in a.algos.split(",")]
        df = validate_mpi(a.testbed, ops, algos, sizes, a.iterations, parse_size(a.min_size, "--min-size"),
                          a.rounds)
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        at = df.attrs
        print(f"# {at['points']} points: median |error| {100 * at['median_abs_error']:.1f}%, 90th percentile "
              f"{100 * at['p90_abs_error']:.1f}%")
        print(fastest_line(at))
        print(f"# point-to-point fit: {_fit_summary(at['fit'])}")
        _warn_noisy(at["fit"])
        if a.save_topology:
            from ..topology.io import save_topology
            print(f"# calibrated topology written to {save_topology(at['calibrated'], a.save_topology)}")
        _validation_outputs(df, a)
        return 0
    if a.measured is None or a.topology is None:
        raise HcsimError("validate: --measured FILE and --topology T, or --backend mpi")
    measured = load_measured(a.measured, a.op, a.ranks, a.columns)
    if measured["collective"].isna().any():
        raise HcsimError("--op: the measured file does not name its collective; pass --op")
    inferred = _infer_transport(a, measured)
    if a.nccl_ll_max_gbps is not None and not (a.transport or "").startswith("nccl"):
        raise HcsimError(f"--nccl-ll-max-gbps = {a.nccl_ll_max_gbps}: only with --transport nccl-nvlink or nccl-net")
    if a.transport is not None:
        from ..corpus import library_algorithms

        _check_transport(a.transport)
        if a.algo != "auto":
            raise HcsimError(f"--transport = {a.transport!r}: only with --algo auto (it names the rows' algorithms)")
        cap = None
        if a.nccl_ll_max_gbps is not None:
            from ..calibrate import _positive

            cap = _positive("--nccl-ll-max-gbps", a.nccl_ll_max_gbps, 1e6) * 1e9
        measured = library_algorithms(measured, a.topology, a.transport, cap)
    df = validate_measured(measured, a.topology, a.algo, parse_size(a.min_size, "--min-size"), max_work=a.max_work)
    print(format_validation(df), end="")
    if inferred:
        print(inferred)
    if _nccl_rows_without_transport(a, measured):
        print("# these rows ran NCCL (nccl-tests) and were predicted with HCCL's choice of algorithm; "
              "--transport nccl-nvlink (one NVLink domain) or nccl-net predicts what NCCL runs")
    _validation_outputs(df, a)
    return 0


def _validate_on_hardware(a) -> int:
    """Measure on this machine's NPUs (hccl) or GPUs (nccl), then predict each point on
    ``--topology`` with the same algorithm."""
    import pandas as pd

    from ..backends import get_backend
    from ..backends.nccl import HCSIM_EQUIVALENT
    from ..units import parse_size
    from ..validate import error_summary, format_validation, validate_measured

    backend = get_backend(a.backend)
    why = backend.available()
    if why:
        print(f"backend {a.backend} skipped: {why}")
        return 0
    if a.topology is None:
        raise HcsimError(f"validate --backend {a.backend}: --topology T (what this machine is) is required")
    sizes = [parse_size(x, "--sizes") for x in a.sizes.split(",")]
    parts = []
    for op in [x.strip() for x in a.ops.split(",") if x.strip()]:
        for algo in (backend.algorithms(op) if a.algos == "all" else [x.strip() for x in a.algos.split(",")]):
            measured = backend.run(op, sizes, algo, a.ranks, a.iterations)
            same = HCSIM_EQUIVALENT.get(algo, "auto") if a.backend == "nccl" else algo
            parts.append(validate_measured(measured, a.topology, same, parse_size(a.min_size, "--min-size")))
    df = pd.concat(parts, ignore_index=True)
    df.attrs.update(parts[0].attrs, **error_summary(df, parse_size(a.min_size, "--min-size")))
    print(format_validation(df), end="")
    _validation_outputs(df, a)
    return 0


def _validation_outputs(df, a) -> None:
    _write_csv(df, a.csv)
    if a.plot:
        from ..plot import plot_validation

        print(f"# plot written to {plot_validation(df, a.plot)}")


def _cmd_measure(a) -> int:
    from ..algorithms.registry import check_collective
    from ..backends import get_backend
    from ..report import format_sweep
    from ..units import size_range

    _writable(a.csv, "--csv")
    check_collective(a.op)
    sizes = size_range(a.minbytes, a.maxbytes, a.stepfactor)
    if a.backend == "mpi":
        from ..backends.mpi import MpiBackend, available

        why = available()
        if why:
            print(f"backend mpi skipped: {why}")
            return 0
        from ..testbed import Testbed, parse_testbed

        spec = parse_testbed(a.testbed)
        backend = MpiBackend(None)
        backend.check(a.op, a.algo, a.ranks, a.iterations, spec.hosts)  # before the testbed is up
        with Testbed(spec) as tb:
            backend.testbed = tb
            df = backend.run(a.op, sizes, a.algo, a.ranks, a.iterations)
        where = f"testbed {a.testbed}"
    else:
        backend = get_backend(a.backend)
        why = backend.available()
        if why:
            print(f"backend {a.backend} skipped: {why}")
            return 0
        df = backend.run(a.op, sizes, a.algo, a.ranks, a.iterations)
        where = f"this machine ({a.backend})"
    print(format_sweep(df, where), end="")
    _write_csv(df, a.csv)
    return 0


def _cmd_testbed(a) -> int:
    from ..testbed import Testbed, cleanup_stale, parse_testbed

    if a.testbed_command == "cleanup":
        removed = cleanup_stale()
        print(f"removed {len(removed)} stale testbed objects" + (f": {', '.join(removed)}" if removed else ""))
        return 0
    spec = parse_testbed(a.testbed)
    if a.testbed_command == "show":
        from ..topology.summary import format_summary, summarize

        with_tb = Testbed(spec)
        print(format_summary(summarize(with_tb.topology())))
        return 0
    from ..testbed.netns import check_testbed

    with Testbed(spec) as tb:
        rows = check_testbed(tb)
    for r in rows:
        print(f"{r['src']} -> {r['dst']}: {r['Mbit_s']:.1f} Mbit/s one-way (shaped at {spec.rate_mbit:g})")
    print(f"# {len(rows)} pairs checked; testbed torn down")
    return 0


def _fit_summary(fit: dict) -> str:
    """One line of what the point-to-point probes gave (:func:`hcsim.backends.mpi.fit_probes`)."""
    reg = fit["regimes"]
    line = (f"one-way {fit['rate_Bps'] / 1e6:.2f} MB/s, exchange {fit['exchange_Bps'] / 1e6:.2f} MB/s, "
            f"send+receive {fit['engine_Bps'] / 1e6:.2f} MB/s, fan-out {fit['fanout_Bps'] / 1e6:.2f} MB/s, "
            f"per step {fit['alpha_s'] * 1e6:.1f} us, "
            + "".join(f"from {b} B +{o * 1e6:.0f} us a message ({w}), "
                      for b, o, w in zip(reg["from_bytes"][1:], reg["overhead_s"][1:], reg["overhead_when"][1:],
                                         strict=True))
            + f"efficiency {'/'.join(f'{e:.3f}' for e in reg['efficiency'])}, "
            + "".join(f"{label} efficiency {'/'.join(f'{e:.3f}' for e in reg.get(key, [1.0] * len(reg['efficiency'])))}, "
                      for label, key in (("new-peer", "new_peer_efficiency"), ("many-peer", "many_peer_efficiency")))
            + "reduction "
            + (f"{fit['reduce_Bps'] / 1e9:.2f} GB/s" if "reduce_Bps" in fit else "not measured"))
    if "cross_Bps" in fit:
        line += (f", uplink {fit['cross_Bps'] / 1e6:.2f} MB/s "
                 + ("(the bottleneck: used)" if "uplink_Bps" in fit else "(at least: the hosts were the bottleneck)"))
    if "probe_spread" in fit:
        net = {k: v for k, v in fit["probe_spread"].items() if k.startswith("p2p_")}
        worst = max(net, key=net.get)
        line += (f"; median of {fit['probe_rounds']} probe rounds, widest spread {100 * fit['probe_spread'][worst]:.0f}%"
                 f" ({worst})")
    return line


def _warn_noisy(fit: dict) -> None:
    from ..backends.mpi import noisy_probes

    warning = noisy_probes(fit)
    if warning:
        print(f"# warning: {warning}")


def _infer_transport(a, measured) -> str | None:
    """Without ``--transport``, nccl-tests rows (algorithm "nccl") under ``--algo auto`` on a topology whose ranks
    are linked by NVLink run what NCCL runs: ``a.transport`` is set from the topology
    (:func:`hcsim.corpus.nccl_transport_for`) and the line saying so is returned; else None (and, where the
    topology cannot tell, :func:`_nccl_rows_without_transport` says that HCCL's choice stood in)."""
    if a.transport == "none":  # no library set up: HCCL's choice and a plain fit, as without the inference
        a.transport = None
        return None
    if not _nccl_rows_without_transport(a, measured) or (getattr(a, "fit", "bottleneck") != "bottleneck"):
        return None
    from ..corpus import nccl_transport_for
    from ..validate import measured_ranks

    ranks = max((measured_ranks(r) or 0 for _, r in measured.iterrows()), default=0)
    found = nccl_transport_for(a.topology, ranks)
    if found is None:
        return None
    a.transport = found
    return (f"# these rows ran NCCL (nccl-tests): taken as --transport {found} (the topology's ranks are linked by "
            f"NVLink{', across servers' if found == 'nccl-net' else ' in one domain'}); --transport none gives "
            "HCCL's choice")


def _nccl_rows_without_transport(a, measured) -> bool:
    """Whether nccl-tests rows (algorithm "nccl") were taken without ``--transport``, under ``--algo auto``: then
    HCCL's choice stood in for NCCL's algorithms, which the command says in one line."""
    return (a.transport is None and a.algo == "auto" and "algorithm" in measured
            and bool(measured["algorithm"].astype(str).str.lower().eq("nccl").any()))


def _check_transport(name: str) -> None:
    """``--transport``: one of the libraries the corpus sets up, exactly as named."""
    from ..corpus import TRANSPORTS

    if name not in TRANSPORTS:
        raise HcsimError(f"--transport = {name!r}: allowed: {', '.join(TRANSPORTS)}, none")


def _cmd_calibrate(a) -> int:
    from ..backends import load_measured
    from ..calibrate import calibrate
    from ..topology.io import save_topology

    _writable(a.out, "--out")
    if a.backend is not None:
        if a.prefer_rank_links:
            raise HcsimError("--prefer-rank-links: only with --measured FILE --fit bottleneck, not with --backend")
        for flag, given in (("--transport", a.transport is not None), ("--points", a.points != "all"),
                            ("--nccl-ll-max-gbps", a.nccl_ll_max_gbps is not None)):
            if given:
                raise HcsimError(f"{flag}: only with --measured FILE, not with --backend")
        if a.backend != "mpi":
            raise HcsimError(f"--backend = {a.backend!r}: allowed: mpi (point-to-point probes on a testbed)")
        from ..backends.mpi import (
            calibrated_topology,
            check_iterations,
            check_rounds,
            fit_point_to_point,
        )
        from ..testbed import Testbed, parse_testbed

        spec = parse_testbed(a.testbed)
        check_rounds(a.rounds)  # before the testbed is up
        check_iterations(a.iterations)
        with Testbed(spec) as tb:
            fit = fit_point_to_point(tb, iterations=a.iterations, rounds=a.rounds)
            topo = calibrated_topology(tb, fit)
        print(f"# point-to-point fit: {_fit_summary(fit)}")
        _warn_noisy(fit)
        print(f"# written to {save_topology(topo, a.out)}")
        return 0
    if a.measured is None or a.topology is None:
        raise HcsimError("calibrate: --measured FILE and --topology T, or --backend mpi --testbed SPEC")
    measured = load_measured(a.measured, a.op, a.ranks, a.columns)
    if a.points == "ends":
        from ..corpus import calibration_points

        if a.fit == "curve":
            raise HcsimError("--points ends: not with --fit curve (a curve is fitted on the whole sweep)")
        measured = measured.loc[calibration_points(measured)]
    if a.fit != "curve" and (a.bands is not None or a.direction is not None):
        raise HcsimError(f"--{'bands' if a.bands is not None else 'direction'}: only with --fit curve")
    topology, kw = a.topology, {"prefer_rank_links": a.prefer_rank_links} if a.prefer_rank_links else {}
    inferred = _infer_transport(a, measured)
    if a.nccl_ll_max_gbps is not None and not (a.transport or "").startswith("nccl"):
        raise HcsimError(f"--nccl-ll-max-gbps = {a.nccl_ll_max_gbps}: only with --transport nccl-nvlink or nccl-net")
    if a.transport is not None:
        from ..calibrate import _positive
        from ..corpus import library_algorithms, transport_calibration

        _check_transport(a.transport)
        if a.fit != "bottleneck":
            raise HcsimError(f"--transport = {a.transport!r}: only with --fit bottleneck (the two-point fit it sets up)")
        cap = None if a.nccl_ll_max_gbps is None else _positive("--nccl-ll-max-gbps", a.nccl_ll_max_gbps, 1e6)
        big = measured.loc[measured["size_bytes"].idxmax()]
        topology, defaults, forced = transport_calibration(a.transport, a.topology, ll_point=big, nccl_ll_max_GBps=cap)
        kw = {**defaults, **kw, **forced}
        if a.algo == "auto":  # the rows that name no algorithm ran what the library runs, as the corpus fits them
            measured = library_algorithms(measured, a.topology, a.transport, None if cap is None else cap * 1e9)
    if a.fit == "curve":
        return _calibrate_curve(a, measured)
    fitted, rep = calibrate(topology, measured, algorithm=a.algo, source=str(a.measured), max_work=a.max_work,
                            fit=a.fit, **kw)
    scales = ", ".join(f"{t} x{v:.4f}" for t, v in {**rep["tier_bandwidth_scale"],
                                                      **rep.get("link_scale", {})}.items()) or "no tier"
    unused = f" (no point crosses {', '.join(rep['tiers_unused'])}: left as built)" if rep["tiers_unused"] else ""
    preferred = " (the ranks' own links preferred)" if rep.get("prefer_rank_links") else ""
    said = f" for {a.transport}" if a.transport else ""
    if inferred:
        print(inferred)
    print(f"# fitted{said} on {rep['measured_points']} points: bandwidth {scales}{unused}{preferred}; step overhead "
          f"{rep['step_overhead_us']:.3f} us; launch {rep['launch_overhead_us']:.3f} us")
    print(f"# rms log error {rep['rms_log_error_before']:.4f} -> {rep['rms_log_error_after']:.4f} "
          f"({rep['evaluations']} evaluations; limit {rep['evaluation_limit']}, which a last simplex shrink may pass by "
          "the parameter count)")
    if rep["evaluations"] >= rep["evaluation_limit"] and rep["rms_log_error_after"] > 0.01:
        print(f"# the work bound stopped the fit before it settled (--max-work {a.max_work}: each evaluation simulates "
              f"every point; a larger bound lets it go on)")
    print(f"# written to {save_topology(fitted, a.out)}")
    if _nccl_rows_without_transport(a, measured):
        print("# these rows ran NCCL (nccl-tests) and were fitted with HCCL's choice of algorithm; --fit bottleneck "
              "--transport nccl-nvlink (one NVLink domain) or nccl-net fits them as NCCL runs")
    if a.leave_one_out:  # after the fit is saved: a refused leave-one-out loses nothing
        from ..calibrate_sweep import leave_one_out_errors

        _print_leave_one_out(leave_one_out_errors(topology, measured, fit=a.fit, algorithm=a.algo,
                                                  max_work=a.max_work, **kw))
    return 0


def _print_leave_one_out(loo) -> None:
    """Each point's leave-one-out error, then their median and largest."""
    print("# leave-one-out: each point predicted by a fit on the others")
    print(f"# {'collective':<14}{'size (B)':>14}{'measured us':>14}{'predicted us':>14}{'error':>9}")
    for r in loo.itertuples():
        print(f"  {r.collective:<14}{r.size_bytes:>14}{r.measured_us:>14.2f}{r.predicted_us:>14.2f}{100 * r.error:>+8.1f}%")
    err = loo["error"].abs()
    print(f"# leave-one-out |error|: median {100 * err.median():.1f}%, largest {100 * err.max():.1f}% "
          f"({len(loo)} points)")


def _calibrate_curve(a, measured) -> int:
    from ..calibrate_sweep import DEFAULT_BANDS, calibrate_sweep, leave_one_out_errors
    from ..topology.io import save_topology

    kw = {"bands": DEFAULT_BANDS if a.bands is None else a.bands, "direction": a.direction or "either",
          "algorithm": a.algo, "max_work": a.max_work,
          **({"prefer_rank_links": True} if a.prefer_rank_links else {})}
    fitted, rep = calibrate_sweep(a.topology, measured, source=str(a.measured), **kw)
    line = rep["line"]
    scales = ", ".join(f"{t} x{v:.4f}" for t, v in {**line["tier_bandwidth_scale"], **line["link_scale"]}.items())
    print(f"# line on {rep['line_points'][0]} B and {rep['line_points'][1]} B: bandwidth {scales}; step overhead "
          f"{line['step_overhead_us']:.3f} us; launch {line['launch_overhead_us']:.3f} us")
    curve = "; ".join(f"from {c['from_bytes']} B x{c['efficiency']:.3f} ({c['points']} points)"
                      for c in rep["efficiency_curve"])
    print(f"# efficiency by message size ({rep['direction']}): {curve}")
    print(f"# rms log error over {rep['measured_points']} points: line {rep['rms_log_error_line']:.4f} -> with the "
          f"curve {rep['rms_log_error_after']:.4f} ({rep['evaluations']} evaluations; limit "
          f"{rep['evaluation_limit']}, which a last simplex shrink may pass by the parameter count)")
    print(f"# written to {save_topology(fitted, a.out)}")
    if a.leave_one_out:  # after the fit is saved
        _print_leave_one_out(leave_one_out_errors(a.topology, measured, fit="curve", **kw))
    return 0


def _cmd_topo(a) -> int:
    from ..topology.io import builtin_names, load_topology
    from ..topology.summary import format_summary, summarize

    if a.topo_command == "list":
        for name in builtin_names():
            t = load_topology(name)
            print(f"{name:<24} {t.num_npus:>6} NPUs  {t.description}")
        return 0
    _writable(a.draw, "--draw")
    topo = _topology(a)
    print(format_summary(summarize(topo)))
    if a.draw:
        from ..plot import draw_topology

        print(f"drawing written to {draw_topology(topo, a.draw)}")
    return 0


def _cmd_algos(a) -> int:
    from ..algorithms.registry import REGISTRY, check_collective

    colls = [check_collective(a.op)] if a.op else list(REGISTRY)
    for coll in colls:
        print(coll)
        for name, spec in REGISTRY[coll].items():
            print(f"  {name:<11} {spec.summary}")
    print("\nAlso, for every collective but sendrecv: 'auto' (HCCL's own choice), 'best' (fastest by\n"
          "simulation), and '<level0>/<level1>[/<level2>]' compositions such as mesh/nhr (see docs/algorithms.md).")
    return 0


def _cmd_run(a) -> int:
    from ..scenario import load_scenario, run_loaded
    from ..workload.trace import GROUPS

    _writable(a.trace, "--trace")
    _writable(a.plot, "--plot")
    _writable(a.csv, "--csv")
    if a.trace_group not in GROUPS:
        raise HcsimError(f"--trace-group = {a.trace_group!r}: one of {', '.join(GROUPS)}")
    if a.max_rows < 0:
        raise HcsimError(f"--max-rows = {a.max_rows}: a count >= 0")
    sc = load_scenario(a.scenario, servers=a.servers, overrides=_settings(a.set))
    result = run_loaded(sc, a.progress)
    print(_format_job(sc, result, a.max_rows), end="")
    _write_csv(result.ops, a.csv)
    if a.trace:
        from ..workload.trace import write_chrome_trace

        print(f"# trace written to {write_chrome_trace(result, a.trace, a.trace_group, sc.topology)}")
    if a.plot:
        from ..plot_timeline import plot_timeline

        print(f"# timeline written to {plot_timeline(result, a.plot, title=sc.name)}")
    return 0


def _yaml_value(text: str):
    """``(ok, value)``: a command-line value read as YAML; ``(False, None)`` when it is not YAML,
    nests past the parser's depth (a RecursionError) or holds a value Python will not build (an
    integer of more than 4,300 digits, a date 2001-02-30: ValueError, OverflowError)."""
    import yaml

    try:
        return True, yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError, TypeError):
        return False, None


def _settings(items) -> dict:
    """``--set FIELD=VALUE`` pairs as load_scenario's overrides (each VALUE read as YAML)."""
    out = {}
    for item in items:
        field, sep, text = item.partition("=")
        if not sep or not field.strip():
            raise HcsimError(f"--set = {item!r}: FIELD=VALUE, such as workload.params.batch=128")
        ok, value = _yaml_value(text) if len(text) <= 10_000 else (True, text)
        if not ok:
            raise HcsimError(f"--set = {item!r}: the value is not YAML")
        out[field.strip()] = value
    return out


def _table(head, rows) -> list[str]:
    """Left-aligned columns separated by `` | `` (the select table's layout)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    return [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *rows]]


def _format_job(sc, result, max_rows: int) -> str:
    """The step time, the profiler's summary (mean, min, max over ranks, per rank when few),
    the operations (first start, last end over their ranks) and the busiest links."""
    from ..workload.metrics import COLUMNS, totals

    ops = result.op_times()
    ranks = result.ops["rank"].nunique()
    out = [f"# {sc.name} on {sc.topology.name}: {ranks} ranks, {len(ops)} operations",
           f"step time: {result.step_time_s * 1e6:.2f} us"]
    names = ["stepTime", "computation", "communication", "commNotOverlapComp", "free"]
    if "summary" in sc.report:
        summary = result.ranks
        out.append("# cluster step summary (us), as msprof-analyze cluster reports it")
        tot = totals(summary).loc[["mean", "min", "max"]]
        rows = [[str(idx)] + [f"{row[c]:.2f}" for c in COLUMNS] for idx, row in tot.iterrows()]
        if len(summary) <= 16:
            rows += [[f"rank {idx}"] + [f"{row[c]:.2f}" for c in COLUMNS] for idx, row in summary.iterrows()]
        out += _table(["ranks"] + names, rows)
    if "ops" in sc.report:
        out.append("# operations (times in us: first start and last end over their ranks)")
        shown_ops = ops.sort_values("start_s", kind="stable").head(max_rows)
        rows = [[r.op, r.kind, r.collective or "-", r.algorithm or "-",
                 str(int(r.size_bytes)) if r.size_bytes else "-", str(int(r.ranks)), f"{r.start_s * 1e6:.2f}",
                 f"{r.end_s * 1e6:.2f}", f"{r.duration_s * 1e6:.2f}"] for r in shown_ops.itertuples(index=False)]
        out += _table(["op", "kind", "collective", "algorithm", "size(Bytes)", "ranks", "start_us", "end_us",
                       "time_us"], rows)
        if len(ops) > max_rows:
            out.append(f"# {len(ops) - max_rows} more operations (--max-rows, or --csv for every row)")
    if "links" in sc.report:
        links = result.links.sort_values("utilization", ascending=False, kind="stable").head(10)
        out.append("# busiest links (bytes over capacity x step time)")
        rows = [[str(r.src), str(r.dst), str(r.tier), f"{r.bandwidth_GBps:.2f}", str(int(r.bytes)),
                 f"{100 * r.utilization:.1f}%"] for r in links.itertuples(index=False)]
        out += _table(["src", "dst", "tier", "GB/s", "bytes", "utilization"], rows)
    return "\n".join(out) + "\n"


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"hcsim: warning: {' '.join(str(message).splitlines())}", file=sys.stderr)


def main(argv=None) -> int:
    import warnings

    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        return _main(argv)


def _main(argv) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed as one line
        return int(exc.code or 0)
    try:
        handler = getattr(args, "handler", None) or {
            "sweep": _cmd_sweep, "topo": _cmd_topo, "algos": _cmd_algos, "select": _cmd_select,
            "hccl-test": _cmd_hccl_test, "validate": _cmd_validate, "calibrate": _cmd_calibrate,
            "measure": _cmd_measure, "testbed": _cmd_testbed, "run": _cmd_run}[args.command]
        return handler(args)
    except HcsimError as exc:
        print(f"hcsim: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader (head, less) went away: nothing more to say
        sys.stdout = None
        return 0
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"hcsim: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hcsim: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("hcsim: error: out of memory; try a smaller case (fewer ranks or sizes) or mode analytical",
              file=sys.stderr)
        return 2
    except Exception as exc:  # a bug, not bad input: still one line, never a traceback
        text = " ".join(str(exc).splitlines())[:200]
        print(f"hcsim: internal error: {type(exc).__name__}: {text} (a bug in hcsim; please report the command)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
