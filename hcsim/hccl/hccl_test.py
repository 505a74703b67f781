"""Simulated hccl_test runs, printed in hccl_test's own format so a simulated table can sit
beside a real one line by line (FACTS.md s5; docs/data/published/hccl_test_sample.txt).

hccl_test's conventions, which hcsim's sizes already follow: data_size is the -b..-e value;
AllReduce, Broadcast, Reduce and AlltoAll use the per-NPU buffer, AllGather and
ReduceScatter count x rank size. alg_bandwidth is data_size / aveg_time in units of 2^30
bytes per second: every row of the official sample output (hicann/oam-tools docs, kept in
docs/data/published/hccl_test_sample.txt) is bytes / time / 2^30 to the printed digit, although
its docs say GB/s (FACTS.md s5 repeats the docs; the printed numbers decide). No bus
bandwidth is printed.

``-d`` and ``-o`` reach the simulation (:mod:`hcsim.dtypes`): a (collective, dtype, op) HCCL
does not run on the machine's product is refused in one line, as hccl_test's README says
HCCL refuses it, and a dtype / op the SDMA engine cannot reduce inline (int64, prod; on
910A anything but fp32 sum) is reduced on the vector core, which is slower.
"""

from __future__ import annotations

import re

from ..dtypes import DTYPES as _DTYPES
from ..dtypes import check_supported, parse_dtype
from ..errors import WorkLimitError, bad_value, is_int, unknown_name
from ..limits import MAX_WORK
from ..units import parse_size, size_range

BINARIES = {"all_reduce_test": "allreduce", "all_gather_test": "allgather", "reduce_scatter_test": "reducescatter",
            "alltoall_test": "alltoall", "alltoallv_test": "alltoallv", "broadcast_test": "broadcast",
            "reduce_test": "reduce", "scatter_test": "scatter"}
DTYPES = {d.hccl_test_name: d.size_bytes for d in _DTYPES.values()}
"""hccl_test's ``-d`` spellings and element sizes (hccl_test README; hcsim.dtypes)."""
OPS = ("sum", "prod", "max", "min")
NPUS_PER_910B_SERVER = 8
"""NPUs in an Atlas 800T A2 server, the default machine (npu-smi topo, FACTS.md s4)."""
HEADER = "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:"
_WIDTHS = (18, 15, 21)


def alg_bandwidth(nbytes: int, time_us: float) -> float:
    """hccl_test's alg_bandwidth column: bytes / time / 2^30 (see the module docs)."""
    return nbytes / (time_us * 1e-6) / 2**30


def format_row(nbytes: int, time_us: float, check: str) -> str:
    """One hccl_test row: cells padded to their header's width, then ``| ``."""
    cells = (str(int(nbytes)), f"{time_us:.2f}", f"{alg_bandwidth(nbytes, time_us):.5f}")
    return "| ".join(c.ljust(w) for c, w in zip(cells, _WIDTHS, strict=True)) + "| " + check


def run_hccl_test(binary: str, npus: int = 8, servers: int = 1, minbytes="8K", maxbytes="64M", factor: int = 2,
                  dtype: str = "fp32", op: str = "sum", root: int = 0, topology=None, hccl_algo=None,
                  iters: int = 20, warmup_iters: int = 5, max_work: int | None = MAX_WORK) -> str:
    """Simulate ``mpirun -n <servers x npus> ./bin/<binary> -b .. -e .. -f .. -p <npus>``.

    The algorithm is HCCL's own choice (``algorithm="auto"``, or HCCL_ALGO when given).
    ``check_result`` reads ``success`` when the simulated schedule passed the semantic
    verifier, ``NA`` when it was too large to verify. The whole run shares one work bound,
    ``max_work`` (as :func:`hcsim.simulate`'s; None: none): a run it stops prints the rows so far
    and a ``# stopped before ...`` line saying why (no row at all: the one-line error).

    Examples
    --------
    >>> print(run_hccl_test("all_gather_test", npus=8, minbytes="8K", maxbytes="16K").splitlines()[1])
    data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:
    """
    from ..api import WorkBudget, simulate
    from ..topology.io import load_topology

    if not isinstance(binary, str) or binary not in BINARIES:
        raise unknown_name("hccl_test binary", binary, BINARIES)
    if not isinstance(dtype, str):
        raise unknown_name("-d", dtype, DTYPES)
    if not isinstance(op, str):
        raise unknown_name("-o", op, OPS)
    if hccl_algo is not None and not isinstance(hccl_algo, str):
        raise bad_value("HCCL_ALGO", hccl_algo, "a str such as level0:NA;level1:ring, or None")
    for name, value in (("iters", iters), ("-w", warmup_iters)):
        if not is_int(value) or not 0 <= value <= 1_000_000:
            raise bad_value(name, value, "a whole number from 0 to 1,000,000")
    iters, warmup_iters = int(iters), int(warmup_iters)
    if dtype not in DTYPES and not (isinstance(dtype, str) and dtype.lower() in ("float16", "float32", "float64",
                                                                                 "bfloat16", "bf16")):
        raise unknown_name("-d", dtype, DTYPES)
    if op not in OPS:
        raise unknown_name("-o", op, OPS)
    unit = DTYPES[_DTYPES[parse_dtype(dtype, "-d")].hccl_test_name]
    for name, value in (("-p", npus), ("-n", servers)):
        if not is_int(value) or value < 1:
            raise bad_value(name, value, "an integer >= 1")
    npus, servers = int(npus), int(servers)
    collective = BINARIES[binary]
    if topology is None and npus > NPUS_PER_910B_SERVER:
        raise bad_value("-p", npus, f"1 to {NPUS_PER_910B_SERVER}: an Atlas 800T A2 server (and an Atlas 900 A2 PoD's) "
                        "holds 8 NPUs; name another machine with --topology")
    if topology is None:
        topo = (load_topology("atlas800t-a2", npus_per_server=npus) if servers == 1 else
                load_topology("atlas900-a2-pod", servers=servers, npus_per_server=npus))
    else:
        topo = load_topology(topology)
    # the first -p NPUs of each of the first -n servers, as mpirun with -p per node places them
    by_server: dict = {}
    for name in topo.npus:
        spec = topo.npu_spec(name)
        by_server.setdefault((spec.pod, spec.server), []).append(name)
    groups = list(by_server.values())[:servers]
    if len(groups) < servers or any(len(g) < npus for g in groups):
        raise bad_value("-n x -p", servers * npus, f"{servers} servers of {npus} NPUs; {topo.name} has "
                        f"{len(by_server)} servers of {min(len(g) for g in by_server.values())} or more")
    ranks = [name for g in groups for name in g[:npus]]
    per_rank = BINARIES[binary] in ("allgather", "reducescatter", "scatter")
    sizes = size_range(minbytes, maxbytes, factor)
    lo, hi = parse_size(minbytes), parse_size(maxbytes)
    lines = [f"the minbytes is {lo}, maxbytes is {hi}, iters is {iters}, warmup_iters is {warmup_iters}", HEADER]
    check_supported(BINARIES[binary], dtype, op, topo.product)
    budget = WorkBudget(max_work)  # one bound for the whole run, as for a sweep
    for nbytes in sizes:
        need = unit * (len(ranks) if per_rank else 1)
        if nbytes % need:
            raise bad_value("data size", nbytes, f"a multiple of {need} bytes ({dtype}"
                            + (f" x {len(ranks)} ranks)" if per_rank else ")"))
        try:
            r = simulate(topo, collective, nbytes, ranks=ranks, root=root, hccl_algo=hccl_algo,
                         algorithm=None if hccl_algo else "auto", dtype=dtype, reduce_op=op, max_work=budget.left())
        except WorkLimitError as exc:
            reason = budget.spend_error(exc)  # in terms of the whole run's bound
            # hccl_test has no analytical mode and runs HCCL's one choice: its own ways to do less
            reason = re.sub(r"use mode='analytical', [^;]*?, or raise max_work",
                            "use fewer servers or NPUs (-n, -p) or a smaller maxbytes (-e), or raise max_work",
                            reason)
            if len(lines) == 2:  # not one row: an error, not an empty table
                raise WorkLimitError(reason) from None
            lines.append(f"# stopped before {nbytes} B: {reason}")
            break
        budget.spend(r.config.get("work", 0))
        lines.append(format_row(nbytes, r.time_us, "success" if r.config.get("verified") else "NA"))
    return "\n".join(lines) + "\n"
