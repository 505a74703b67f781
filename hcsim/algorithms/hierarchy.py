"""Hierarchical composition: HCCL's level0 (inside a server) x level1 (between servers)
[x level2 (between pods)] algorithms, named ``"<level0>/<level1>[/<level2>]"``.

Ranks form a grid: rank = local + L * (server + S * pod). A phase runs one flat algorithm in
every group of ranks that differ only along one dimension (level0: the L ranks of a server;
level1: same-index ranks of the servers (of a pod); level2: same (server, local) ranks of
the pods); the groups of a phase run in parallel and the phases one after another, with
per-rank synchronisation between them. HCCL's phase split per collective (FACTS.md s1,
hicann/hccl docs; checked against hcomm's mesh executors, e.g. coll_all_gather_mesh_executor.cc
runs the intra-server AllGather first and then the inter-server AllGather of the whole
server's data):

=============  ==========================  ===============================  =====================
collective     phase 1                     phase 2                          phase 3
=============  ==========================  ===============================  =====================
allreduce      RS along level 0..k-2       AR along the last level          AG back along 0..k-2
allgather      AG level 0                  AG level 1 (the server's data)   AG level 2
reducescatter  RS along the last level     ... down to RS level 0
broadcast      scatter in root's server    broadcast between servers        AG inside servers
reduce         RS inside servers           reduce between servers           gather to the root
scatter        scatter between servers     scatter inside servers
gather         gather inside servers       gather between servers
alltoall(v)    inside servers (staging)    between servers
=============  ==========================  ===============================  =====================

Level 2 is supported for allreduce, allgather and reducescatter (HCCL uses it for those on
A3). The closed form is the sum of the phases' closed forms, each with its own level's
alpha, beta and gamma; it is exact on a topology where every level's pairs have their own
links (e.g. :func:`hcsim.topology.builders.tiered_mesh`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..errors import ScheduleError, bad_value
from .registry import REGISTRY, RESOLVERS, AlgorithmSpec, make_args, run_builder
from .schedule import (
    ChunkSpace,
    CollectiveArgs,
    Schedule,
    Step,
    block_bytes,
    data_bytes,
    make_message_step,
    make_step,
    merge_messages,
    message_key,
    split_bytes,
    sum_by_message,
)

SOURCE = "hicann/hccl docs coll_algo_intro (levels); hcomm coll_*_mesh_executor.cc; FACTS.md s1"
THREE_LEVEL = ("allreduce", "allgather", "reducescatter")


def _flat(collective: str, name: str) -> AlgorithmSpec:
    """A level's algorithm for a sub-collective; level 0 "mesh" means Star for rooted ones."""
    known = REGISTRY[collective]
    if name not in known and name == "mesh" and collective in ("scatter", "gather", "broadcast", "reduce"):
        name = "star"
    if name not in known or known[name].levels != 1 or known[name].shape is not None:
        # pipeline and AHC are two-level already; a level is built once at one size, so an algorithm whose
        # structure follows the size (the pipelined chain: AlgorithmSpec.shape) cannot be one
        raise bad_value(f"algorithm for a {collective} level", name, "a one-level algorithm whose structure does "
                        "not depend on the size: " + _one_level(collective))
    return known[name]


def _one_level(collective: str) -> str:
    """The registered one-level algorithms for ``collective`` that can be a level, listed for an error message."""
    return ", ".join(sorted(n for n, spec in REGISTRY[collective].items() if spec.levels == 1 and spec.shape is None))


@lru_cache(maxsize=512)
def _sub(collective: str, name: str, n: int, root: int) -> Schedule:
    spec = _flat(collective, name)
    if n == 1:  # a level with one rank moves nothing
        return Schedule(CollectiveArgs(collective, 1, 1), 1, [], np.ones(1, dtype=np.int64), spec.name)
    # Structure does not depend on the size; bytes are recomputed from the global chunks.
    sub = run_builder(spec, make_args(collective, n, 1 << 20, root))
    if any(st.is_message for st in sub.steps) and not _uniform(sub.chunk_bytes):
        # a message's chunk count is its bytes over the (equal) chunk size: make them equal
        per_chunk = 64 * sub.num_chunks // (n if collective in ("alltoall", "alltoallv") else 1)
        sub = run_builder(spec, make_args(collective, n, per_chunk, root))
        if not _uniform(sub.chunk_bytes):  # pragma: no cover - construction invariant
            raise ScheduleError(f"{name} {collective} on {n} ranks: unequal chunks at {per_chunk} bytes")
    return sub


def _uniform(values) -> bool:
    values = np.asarray(values)
    return bool((values == values[0]).all())


class _MessagePart:
    """One group's message step in a phase: the sub-schedule's step ``step`` mapped onto the
    group's ranks ``members``, its sub-chunk j covering global chunks
    ``[base + j * scale, base + (j + 1) * scale)``."""

    __slots__ = ("src", "dst", "reduce", "step", "members", "base", "scale", "sub_chunks", "unit")

    def __init__(self, members, step, sub, base, scale):
        self.src, self.dst, self.reduce = members[step.src], members[step.dst], step.reduce
        self.step, self.members, self.base, self.scale = step, members, int(base), int(scale)
        self.sub_chunks, self.unit = sub.num_chunks, int(sub.chunk_bytes[0])

    def nbytes(self, space: ChunkSpace) -> np.ndarray:
        """Each message's bytes in the global chunk space."""
        width = self.sub_chunks * self.scale
        per_sub = space.chunk_bytes[self.base:self.base + width].reshape(self.sub_chunks, self.scale).sum(axis=1)
        if _uniform(per_sub):  # chunks of equal size: count x size, no chunk-level work
            return self.step.nbytes // self.unit * int(per_sub[0])
        chunks = self.step.chunks()  # exact: every chunk's bytes, summed per message
        prefix = np.concatenate([[0], np.cumsum(per_sub)])
        q = len(self.members)
        keys, _, sums = sum_by_message(chunks, q, prefix[chunks.chunk_hi] - prefix[chunks.chunk_lo])
        return sums[np.searchsorted(keys, message_key(self.step, q))]

    def chunk_part(self) -> tuple:
        """The chunk-level part ``(src, dst, chunk_lo, chunk_hi, reduce)``."""
        c = self.step.chunks()
        m = self.members
        return (m[c.src], m[c.dst], self.base + c.chunk_lo * self.scale, self.base + c.chunk_hi * self.scale,
                c.reduce)


def group_part(members, step: Step, sub: Schedule, base: int, scale: int):
    """``step`` of ``sub`` run by the ranks ``members``, its chunks mapped to the global space:
    a chunk-level tuple ``(src, dst, chunk_lo, chunk_hi, reduce)``, or a message part."""
    if step.is_message:
        return _MessagePart(members, step, sub, base, scale)
    return (members[step.src], members[step.dst], base + step.chunk_lo * scale, base + step.chunk_hi * scale,
            step.reduce)


class _Grid:
    def __init__(self, args: CollectiveArgs, nlevels: int):
        sizes = args.server_sizes
        if len(set(sizes)) != 1:
            raise ScheduleError(f"servers = {sizes}: hierarchical algorithms need servers of equal size "
                                "(HCCL uses AHC for unequal ones)")
        local, servers = sizes[0], len(sizes)
        if nlevels == 3:
            pods = args.pods or (servers,)
            if len(set(pods)) != 1:
                raise ScheduleError(f"pods = {pods}: level 2 needs pods with equal server counts")
            self.dims = (local, pods[0], len(pods))
        else:
            self.dims = (local, servers)
        self.p = args.p
        self._idx = np.arange(self.p).reshape(self.dims[::-1])

    def groups(self, d: int) -> np.ndarray:
        """Rows of global ranks that differ only along dimension d, ordered along d."""
        axis = len(self.dims) - 1 - d
        return np.moveaxis(self._idx, axis, -1).reshape(-1, self.dims[d])

    def coords(self, rank: int) -> list[int]:
        out = []
        for size in self.dims:
            out.append(rank % size)
            rank //= size
        return out


def _linear_phase(collective, name, groups, span, base, roots=None, only=None):
    """Run ``name`` in every group; sub-chunk j of group g covers global chunks
    base[g] + j * span / c .. (span: global chunks one group's sub-collective covers)."""
    steps: list[list] = []
    for g, members in enumerate(groups):
        if only is not None and g not in only:
            continue
        sub = _sub(collective, name, len(members), 0 if roots is None else int(roots[g]))
        if span % sub.num_chunks:
            raise ScheduleError(f"{name} {collective}: {sub.num_chunks} chunks do not divide {span}")
        scale = span // sub.num_chunks
        for k, st in enumerate(sub.steps):
            if len(steps) <= k:
                steps.append([])
            steps[k].append(group_part(members, st, sub, base[g], scale))
    return steps


def _lcm(*xs):
    out = 1
    for x in xs:
        out = out * x // math.gcd(out, x)
    return out


def _per_rank(name, collective, n):
    return _sub(collective, name, n, 0).num_chunks // n


def compose(args: CollectiveArgs, names: tuple) -> Schedule:
    """Build the hierarchical schedule of ``args`` with one flat algorithm name per level."""
    coll, k = args.collective, len(names)
    if k == 3 and coll not in THREE_LEVEL:
        raise ScheduleError(f"level2 = {names[2]!r}: hcsim composes three levels for "
                            f"{', '.join(THREE_LEVEL)} only")
    grid = _Grid(args, k)
    dims = grid.dims
    p = args.p
    phases = []
    if coll == "allreduce":
        m = _lcm(*(_lcm(_per_rank(names[d], "reducescatter", dims[d]), _per_rank(names[d], "allgather", dims[d]))
                   for d in range(k - 1)))
        last = _sub("allreduce", names[-1], dims[-1], 0).num_chunks
        spans = [last * m]
        for d in range(k - 2, -1, -1):
            spans.insert(0, spans[0] * dims[d])
        total = spans[0]
        for d in range(k - 1):  # reduce-scatter down the levels, each on its part
            rows = grid.groups(d)
            base = [_part_base(grid, row[0], d, spans) for row in rows]
            phases.append(_linear_phase("reducescatter", names[d], rows, spans[d], base))
        rows = grid.groups(k - 1)
        phases.append(_linear_phase("allreduce", names[-1], rows, spans[k - 1],
                                    [_part_base(grid, row[0], k - 1, spans) for row in rows]))
        for d in range(k - 2, -1, -1):
            rows = grid.groups(d)
            base = [_part_base(grid, row[0], d, spans) for row in rows]
            phases.append(_linear_phase("allgather", names[d], rows, spans[d], base))
        space = ChunkSpace(split_bytes(args.nbytes, total))
    elif coll in ("allgather", "reducescatter"):
        m = _lcm(*(_per_rank(names[d], coll, dims[d]) for d in range(k)))
        order = range(k) if coll == "allgather" else range(k - 1, -1, -1)
        for d in order:
            rows = grid.groups(d)
            inner = int(np.prod(dims[:d]))  # ranks in one member's sub-cube
            span = dims[d] * inner * m
            # the group's sub-cubes are consecutive: they start at its first rank's sub-cube
            base = [(row[0] // inner) * inner * m for row in rows]
            phases.append(_linear_phase(coll, names[d], rows, span, base))
        space = ChunkSpace(np.concatenate([split_bytes(b, m) for b in block_bytes(args)]))
    elif coll in ("broadcast", "reduce"):
        local, servers = dims
        root_l, root_s = grid.coords(args.root)
        first, inner_last = ("scatter", "allgather") if coll == "broadcast" else ("reducescatter", "gather")
        w = _lcm(_sub(coll, names[1], servers, 0).num_chunks, _per_rank(names[0], first, local),
                 _per_rank(names[0], inner_last, local))
        rows0, rows1 = grid.groups(0), grid.groups(1)
        if coll == "broadcast":
            phases.append(_linear_phase("scatter", names[0], rows0, local * w, [0] * len(rows0),
                                        roots=[root_l] * len(rows0), only={root_s}))
        else:
            phases.append(_linear_phase("reducescatter", names[0], rows0, local * w, [0] * len(rows0)))
        phases.append(_linear_phase(coll, names[1], rows1, w, [g * w for g in range(local)],
                                    roots=[root_s] * local))
        if coll == "broadcast":
            phases.append(_linear_phase("allgather", names[0], rows0, local * w, [0] * len(rows0)))
        else:
            phases.append(_linear_phase("gather", names[0], rows0, local * w, [0] * len(rows0),
                                        roots=[root_l] * len(rows0), only={root_s}))
        space = ChunkSpace(split_bytes(args.nbytes, local * w))
    elif coll in ("scatter", "gather"):
        local, servers = dims
        root_l, root_s = grid.coords(args.root)
        m = _lcm(_per_rank(names[0], coll, local), _per_rank(names[1], coll, servers))
        rows0, rows1 = grid.groups(0), grid.groups(1)
        outer = _linear_phase(coll, names[1], rows1, p * m, [0] * local, roots=[root_s] * local, only={root_l})
        inner = _linear_phase(coll, names[0], rows0, local * m, [g * local * m for g in range(servers)],
                              roots=[root_l] * servers)
        phases = [outer, inner] if coll == "scatter" else [inner, outer]
        space = ChunkSpace(np.concatenate([split_bytes(b, m) for b in block_bytes(args)]))
    elif coll in ("alltoall", "alltoallv"):
        phases = _alltoall_phases(grid, names)
        space = ChunkSpace(block_bytes(args))
    else:
        raise ScheduleError(f"collective = {coll!r}: no hierarchical composition (use a flat algorithm)")
    if int(space.chunk_bytes.sum()) != data_bytes(args):  # pragma: no cover - construction invariant
        raise ScheduleError("hierarchical chunk space does not cover the data")
    return Schedule(args, space.count, assemble(phases, space, p), space.chunk_bytes, "/".join(names))


def _chunk_step(parts, space: ChunkSpace) -> Step:
    parts = [x.chunk_part() if isinstance(x, _MessagePart) else x for x in parts]
    src, dst, lo, hi, red = (np.concatenate([part[i] for part in parts]) for i in range(5))
    return make_step(src, dst, space.range_bytes(lo, hi), red, lo, hi)


def assemble(phases, space: ChunkSpace, p: int) -> list:
    """Global steps from phases (lists of steps, each a list of per-group parts made by
    :func:`group_part`), bytes taken from the global chunk sizes. Each step holds one message
    per (src, dst, reduce) (:func:`~.schedule.merge_messages`); groups whose sub-algorithm
    emits messages are never expanded into chunks unless the verifier asks."""
    steps = []
    for phase in phases:
        for parts in phase:
            if not any(isinstance(x, _MessagePart) for x in parts):
                steps.append(merge_messages(_chunk_step(parts, space), p))
                continue
            src, dst, nbytes, red = [], [], [], []
            for x in parts:
                if isinstance(x, _MessagePart):
                    src.append(x.src), dst.append(x.dst), nbytes.append(x.nbytes(space)), red.append(x.reduce)
                else:
                    src.append(x[0]), dst.append(x[1]), nbytes.append(space.range_bytes(x[2], x[3]))
                    red.append(x[4])
            step = make_message_step(np.concatenate(src), np.concatenate(dst), np.concatenate(nbytes),
                                     np.concatenate(red), lambda parts=parts: _chunk_step(parts, space))
            if len(np.unique(message_key(step, p))) != len(step):  # parts that share a pair: merge them from the chunks
                step = merge_messages(step.chunks(), p)
            steps.append(step)
    return steps


def _part_base(grid, rank, d, spans):
    """First global chunk of the part a rank works on at level d of a hierarchical allreduce."""
    coords = grid.coords(int(rank))
    base = 0
    for e in range(d):
        base += coords[e] * spans[e + 1]
    return base


def _alltoall_phases(grid, names):
    """Staged AlltoAll: inside a server rank (s,l) hands local peer l' every block bound for
    the ranks (., l'); then same-index ranks exchange between servers."""
    local, servers = grid.dims
    p = grid.p
    phases = []
    for d, name in ((0, names[0]), (1, names[1])):
        rows = grid.groups(d)
        steps: list[list] = []
        sub = _sub("alltoall", _flat("alltoall", name).name, rows.shape[1], 0)
        m_sub = sub.num_chunks // (rows.shape[1] ** 2)
        for row in rows:
            s_fixed, l_fixed = grid.coords(int(row[0]))[1], grid.coords(int(row[0]))[0]
            for k, st in enumerate(sub.steps):
                if len(steps) <= k:
                    steps.append([])
                st = st.chunks()
                blk = st.chunk_lo // m_sub
                i, j = blk // rows.shape[1], blk % rows.shape[1]
                if d == 0:  # local i -> local j carries blocks (s,i) -> (s', j) for every server s'
                    other = np.arange(servers)
                    gsrc = (s_fixed * local + i)[:, None]
                    gdst = other[None, :] * local + j[:, None]
                else:  # server i -> server j (index l) carries blocks (i, l'') -> (j, l) for every l''
                    other = np.arange(local)
                    gsrc = i[:, None] * local + other[None, :]
                    gdst = (j * local + l_fixed)[:, None] + 0 * other[None, :]
                g_blk = (gsrc * p + gdst).ravel()
                count = g_blk.size // len(blk)
                steps[k].append((np.repeat(row[st.src], count), np.repeat(row[st.dst], count), g_blk, g_blk + 1,
                                 np.repeat(st.reduce, count)))
        phases.append(steps)
    return phases


def _levels_abg(abg, k):
    abgs = tuple(abg) if isinstance(abg, (tuple, list)) else (abg,) * k
    if len(abgs) < k:
        raise ScheduleError(f"cost: needs {k} levels of alpha/beta/gamma, got {len(abgs)}")
    return abgs


def _cost(collective, name, n, size, abg, root=0):
    spec = _flat(collective, name)
    if n == 1:
        return 0.0
    return spec.cost(CollectiveArgs(collective, n, size, root), abg)


def hierarchical_cost(args: CollectiveArgs, names: tuple, abg) -> float:
    """Sum of the phases' closed forms, each with its level's alpha/beta/gamma."""
    coll, k = args.collective, len(names)
    abgs = _levels_abg(abg, k)
    grid = _Grid(args, k)
    dims = grid.dims
    n, p = args.nbytes, args.p
    if coll == "allreduce":
        t, size = 0.0, float(n)
        for d in range(k - 1):
            t += _cost("reducescatter", names[d], dims[d], size, abgs[d])
            t += _cost("allgather", names[d], dims[d], size, abgs[d])
            size /= dims[d]
        return t + _cost("allreduce", names[-1], dims[-1], size, abgs[-1])
    if coll in ("allgather", "reducescatter"):
        return sum(_cost(coll, names[d], dims[d], n * float(np.prod(dims[:d + 1])) / p, abgs[d]) for d in range(k))
    local, servers = dims
    root_l, root_s = grid.coords(args.root) if coll in ("broadcast", "reduce", "scatter", "gather") else (0, 0)
    if coll == "broadcast":  # each level rooted where the schedule roots it (an uneven block's place)
        return (_cost("scatter", names[0], local, n, abgs[0], root_l)
                + _cost("broadcast", names[1], servers, n / local, abgs[1], root_s)
                + _cost("allgather", names[0], local, n, abgs[0]))
    if coll == "reduce":
        return (_cost("reducescatter", names[0], local, n, abgs[0])
                + _cost("reduce", names[1], servers, n / local, abgs[1], root_s)
                + _cost("gather", names[0], local, n, abgs[0], root_l))
    if coll in ("scatter", "gather"):
        # level 0 runs in every server at once; server 0's share is the largest (split_bytes gives
        # the first e ranks a byte more), so its level 0 is the slowest
        q, e = divmod(n, p)
        return (_cost(coll, names[1], servers, n, abgs[1], root_s)
                + _cost(coll, names[0], local, local * q + min(e, local), abgs[0], root_l))
    if coll == "alltoall":
        return _cost("alltoall", names[0], local, n, abgs[0]) + _cost("alltoall", names[1], servers, n, abgs[1])
    raise ScheduleError(f"{'/'.join(names)} {coll}: no closed form (use mode 'des')")


def resolve(collective: str, name: str) -> AlgorithmSpec:
    """Turn ``"mesh/ring"`` (or ``"mesh/nhr/ring"``) into an AlgorithmSpec."""
    names = tuple(x.strip() for x in name.split("/"))
    if not 2 <= len(names) <= 3 or not all(names):
        raise bad_value(f"algorithm for {collective}", name, "'<level0>/<level1>' or '<level0>/<level1>/<level2>'")
    return _resolve(collective, names)


@lru_cache(maxsize=256)
def _resolve(collective, names):
    if len(names) == 3 and collective not in THREE_LEVEL:
        raise bad_value(f"algorithm for {collective}", "/".join(names),
                        "two levels (level2 is composed for allreduce, allgather, reducescatter)")
    subs = {"allreduce": [("reducescatter", "allgather")] * (len(names) - 1) + [("allreduce",)],
            "allgather": [("allgather",)] * len(names), "reducescatter": [("reducescatter",)] * len(names),
            "broadcast": [("scatter", "allgather"), ("broadcast",)], "reduce": [("reducescatter", "gather"), ("reduce",)],
            "scatter": [("scatter",), ("scatter",)], "gather": [("gather",), ("gather",)],
            "alltoall": [("alltoall",), ("alltoall",)], "alltoallv": [("alltoall",), ("alltoall",)]}
    if collective not in subs:
        raise bad_value(f"algorithm for {collective}", "/".join(names), "a flat algorithm (no levels for it)")
    for level, (name, need) in enumerate(zip(names, subs[collective], strict=True)):
        for sub in need:
            try:
                _flat(sub, name)
            except Exception:
                raise bad_value(f"level{level} algorithm for {collective}", name,
                                f"a one-level algorithm with a {sub}: " + _one_level(sub)) from None
    cost = None if collective == "alltoallv" else (lambda a, abg: hierarchical_cost(a, names, abg))
    return AlgorithmSpec("/".join(names), collective, lambda a: compose(a, names), cost,
                         f"level0 {names[0]}, level1 {names[1]}" + (f", level2 {names[2]}" if len(names) == 3 else ""),
                         SOURCE, levels=len(names))


RESOLVERS.append(resolve)

__all__ = ["compose", "hierarchical_cost", "resolve"]
