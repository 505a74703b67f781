"""The CCL buffer: HCCL moves data through a fixed-size buffer (HCCL_BUFFSIZE, default
200 MB), so a larger collective runs as several back-to-back collectives on pieces of at
most the buffer size (FACTS.md s2).

How HCCL runs the loops (hcomm ``coll_executor/*/coll_*_executor.cc``, ``RunLoop`` and
``RunLoopInner``; hccl ``src/ops/*/..._executor*.cc``, ``RunLoop`` / ``OrchestrateLoop``): a
plain loop over the pieces on each rank's own stream; each iteration copies the piece from
the user buffer into the CCL buffer, runs the whole algorithm template on it (``KernelRun``),
copies the result back and launches the tasks. Nothing is sliced or pipelined across loops:
a rank begins loop i+1 only after its own loop i, and the templates synchronise with their
peers by notify handshakes at every step and (ring, mesh, NHR, NB) by a closing
``ExecuteBarrier`` with them. hcsim models each loop as a complete collective followed by a
barrier of all ranks (:attr:`Schedule.barriers`): for the symmetric collectives, whose ranks
end a loop together, this is what the handshakes amount to; for rooted chain-like ones it
leaves out the little overlap HCCL's neighbour-only handshakes allow. Both modes then cost a
call at launch + the sum of its pieces, and splitting never makes a call faster. The local
copies and the handshakes' own notify latency are not modelled (neither are they for one
piece). How big a piece is depends on the executor: buffer / ranks a rank for most, the whole
buffer for the 910B's one-server mesh executors (:func:`loop_buffer_bytes`)."""

from __future__ import annotations

import numpy as np

from ..algorithms.registry import AlgorithmSpec, make_args, run_builder
from ..algorithms.schedule import (
    PER_RANK_BLOCKS,
    CollectiveArgs,
    Schedule,
    in_network_factors,
    make_message_step,
    make_step,
)
from ..errors import WorkLimitError, bad_value, is_int
from ..limits import MAX_LOOPED_STEPS
from ..verify import _owner

MESH_OPBASE_RESERVE_BYTES = 16384
"""What AllGather's one-server mesh op-base executor keeps free in the CCL buffer (hcomm
``coll_all_gather_mesh_opbase_executor.cc`` ``CalcLoopMaxCount``: the buffer less 16384 bytes,
rounded down to 128; alg_template_base_pub.h): its piece is staged at an offset of up to 16 KiB."""
MESH_OPBASE_ALIGN_BYTES = 128
"""The alignment of that executor's per-rank piece (the same source)."""
ALLTOALL_FULLMESH_SPLIT = 2
"""The one-server direct full-mesh AlltoAll's per-peer block is the CCL buffer / (ranks x 2) when any
peer's block exceeds :data:`ALLTOALL_FULLMESH_BIG_PEER_BYTES` (hcomm alltoallv_direct_fullmesh.cc)."""
ALLTOALL_FULLMESH_BIG_PEER_BYTES = 1 << 20
"""The per-peer size above which that split applies (the same source)."""


def one_server_mesh(product: str | None, algorithm: str, servers: tuple) -> bool:
    """Whether a call runs one of the 910B's one-server mesh executors (:func:`loop_buffer_bytes`):
    product 910B, algorithm mesh, its ranks on one server."""
    return product == "910B" and algorithm == "mesh" and len(servers) == 1


def loop_buffer_bytes(args: CollectiveArgs, buffer_bytes: int | None, product: str | None, algorithm: str,
                      inline_reduce: bool = True) -> int | None:
    """The buffer size that sizes ``args``'s CCL-buffer loops, in :func:`piece_bytes`' terms.

    Most of HCCL's executors loop over a per-rank count of buffer / ranks (:func:`piece_bytes`,
    ``buffer_bytes`` as given). The 910B's one-server executors do not (hcomm, legacy
    ascend910 algorithm code, read at a fork's 8958adbf; docs/facts.md s10): on one server whose
    NPUs are all HCCS-linked (``isSingleMeshAggregation_``), op by op, each sizes its loop
    from the whole buffer, which this returns scaled so that :func:`piece_bytes` gives that loop:

    * AllGather (``AllGatherMeshOpbaseExecutor``, chosen at any size): a rank's own piece of up
      to the buffer less 16 KiB, rounded down to 128 bytes; peers read it straight into their
      user buffers (DMA elimination), so no buffer space is kept per rank.
    * ReduceScatter (``ReduceScatterMeshDmaEliminationExecutor``, where the links reduce inline):
      a rank's output of up to the whole buffer.
    * AllReduce above the small-count executor's 256 KB (``AllReduceMeshOpbaseLoopExecutor``,
      where the links reduce inline): up to ranks x the buffer a loop, a slice of up to the
      buffer per rank (HCCL rounds slices up to 16 KiB; hcsim splits bytes evenly).
    * AlltoAll: no loop while every rank's total fits the buffer (``RunAlltoAllVStaged`` copies the
      whole send buffer in once); above it, the direct full mesh (``RunAlltoAllDirectFullmesh``)
      moves per-peer blocks of buffer / (ranks x 2) (buffer / ranks where no peer's block passes
      1 MiB) a step, each step a loop here.

    Anything else (another product or algorithm, several servers, no buffer), and an AllGather buffer so
    small that its reserve would leave a rank less than buffer / ranks, keeps ``buffer_bytes``.

    Examples
    --------
    >>> from hcsim.algorithms.registry import make_args
    >>> a = make_args("allgather", 8, 2 << 30, servers=(8,))
    >>> loop_buffer_bytes(a, 200 << 20, "910B", "mesh") // 8  # a rank's piece
    209698816
    >>> loop_buffer_bytes(a, 200 << 20, None, "mesh") == 200 << 20
    True
    """
    if buffer_bytes is None or not one_server_mesh(product, algorithm, args.servers):
        return buffer_bytes
    p, b = args.p, int(buffer_bytes)
    c = args.collective
    if c == "allgather":
        per_rank = (b - MESH_OPBASE_RESERVE_BYTES) // MESH_OPBASE_ALIGN_BYTES * MESH_OPBASE_ALIGN_BYTES
        # a buffer too small for the reserve: the executor's own rule has nothing to loop over, so the
        # buffer / ranks rule stands (it never gives a rank less than that)
        return p * per_rank if per_rank >= b // p else buffer_bytes
    if c in ("reducescatter", "allreduce") and inline_reduce:
        return p * b
    if c == "alltoall":
        if args.nbytes <= b:
            return -(-b // p) * p  # one pass: the buffer, rounded up to a multiple of p so piece_bytes keeps it whole
        per_peer = b // (p * ALLTOALL_FULLMESH_SPLIT) if args.nbytes / p > ALLTOALL_FULLMESH_BIG_PEER_BYTES else b // p
        return p * per_peer if per_peer > 0 else buffer_bytes
    return buffer_bytes


def piece_bytes(args: CollectiveArgs, buffer_bytes: int) -> int:
    """Size (nccl-tests convention) of one full CCL-buffer piece of ``args``'s collective.

    Collectives whose data is a block per rank (allgather, reducescatter, scatter, gather,
    sendrecv) and alltoall (a block per peer) loop over a per-rank count, as HCCL's
    ``maxCountPerLoop`` = buffer / ranks does: a full piece is the largest multiple of p that
    fits the buffer (p bytes, one per rank, if even that does not fit); the others fill it.
    """
    buffer_bytes = int(buffer_bytes)
    if args.collective in PER_RANK_BLOCKS or args.collective == "alltoall":
        return max(args.p, buffer_bytes - buffer_bytes % args.p)
    return buffer_bytes


def loop_pieces(args: CollectiveArgs, buffer_bytes) -> dict[int, int]:
    """``{piece size: loops}`` for a call run through a CCL buffer of ``buffer_bytes`` (None: no
    buffer): :func:`piece_sizes` counted without listing every loop."""
    if buffer_bytes is None or args.collective == "alltoallv":
        return {args.nbytes: 1}  # alltoallv's matrix moves in one pass (piece_sizes)
    piece = piece_bytes(args, buffer_bytes)
    full, rest = divmod(args.nbytes, piece)
    return {n: k for n, k in ((piece, full), (rest, 1)) if k and n}


def loop_count(nbytes: int, buffer_bytes: int, args: CollectiveArgs | None = None) -> int:
    """How many buffer-sized pieces a collective of ``nbytes`` runs in (``args``: the call, for
    collectives that loop over a per-rank count; see :func:`piece_bytes`)."""
    piece = piece_bytes(args, buffer_bytes) if args is not None else int(buffer_bytes)
    return max(1, -(-int(nbytes) // piece))


def piece_sizes(args: CollectiveArgs, buffer_bytes: int) -> list[int]:
    """Sizes (nccl-tests convention) of the back-to-back pieces: full pieces, then the rest."""
    if args.collective == "alltoallv":
        return [args.nbytes]  # HCCL moves alltoallv's matrix in one pass here (not modelled)
    piece = piece_bytes(args, buffer_bytes)
    full, rest = divmod(int(args.nbytes), piece)
    return [piece] * full + ([rest] if rest else [])


def _shifted(st, offset: int):
    """``st`` with its chunk indices moved up by ``offset`` (a message step stays one)."""
    if st.is_message:
        return make_message_step(st.src, st.dst, st.nbytes, st.reduce, lambda: _shifted(st.chunks(), offset))
    return make_step(st.src, st.dst, st.nbytes, st.reduce, st.chunk_lo + offset, st.chunk_hi + offset)


def looped(spec: AlgorithmSpec, args: CollectiveArgs, buffer_bytes: int,
           max_steps: int | None = MAX_LOOPED_STEPS) -> Schedule:
    """``spec``'s schedule for ``args`` run piece by piece through a buffer of ``buffer_bytes``.

    Chunks are laid out piece-major; :attr:`Schedule.chunk_owner` tells the verifier which
    rank's (or which alltoall block's) data each chunk is. Every piece after the first starts
    behind a barrier of all ranks (:attr:`Schedule.barriers`; see the module docs). Raises
    :class:`~hcsim.errors.WorkLimitError`, before copying any loop, when the loops would hold more
    than ``max_steps`` steps (None: no bound; a job's runner bounds them by its work bound).
    """
    if max_steps is not None and (not is_int(max_steps) or max_steps < 1):
        raise bad_value("max_steps", max_steps, "a positive number of steps, or None for no bound")
    loops = loop_pieces(args, buffer_bytes)
    if sum(loops.values()) <= 1:
        return run_builder(spec, args)
    cache: dict[int, Schedule] = {}
    if max_steps is not None:  # counted on one schedule of each piece size, before the list of loops
        for size in loops:
            cache[size] = run_builder(spec, make_args(args.collective, args.p, size, args.root, args.servers, args.pods))
        total = sum(k * len(cache[size].steps) for size, k in loops.items())
        if total > max_steps:
            raise WorkLimitError(f"buffer_bytes = {buffer_bytes}: {spec.name} {args.collective} of {args.nbytes} bytes "
                                 f"runs {sum(loops.values()):,} CCL-buffer loops of {total:,} steps in all, more than "
                                 f"max_steps = {max_steps:,} (hcsim.limits.MAX_LOOPED_STEPS); use a larger buffer "
                                 "or a smaller size, or simulate it (its loops are priced without building them)")
    sizes = piece_sizes(args, buffer_bytes)
    steps, chunk_bytes, owners, barriers, protocol = [], [], [], [], []
    offset, streamed, in_network, factors = 0, False, False, []
    for size in sizes:
        sub = cache.get(size)
        if sub is None:
            sub = cache[size] = run_builder(spec, make_args(args.collective, args.p, size, args.root, args.servers,
                                                            args.pods))
        if steps and sub.steps:
            barriers.append(len(steps))
        barriers.extend(len(steps) + k for k in sub.barriers)
        for st in sub.steps:
            steps.append(_shifted(st, offset))
        # a streamed piece (the pipelined chain) keeps streaming inside its loop, its protocol by its own size;
        # the barrier before every loop after the first ends the stream (the engine's Schedule.streamed)
        streamed = streamed or bool(getattr(sub, "streamed", False))
        in_network = in_network or bool(getattr(sub, "in_network", False))  # every loop runs through the switch
        if getattr(sub, "in_network", False):  # each piece's own chunking, one factor per step
            factors.extend(in_network_factors(sub))
        else:
            factors.extend([1.0] * len(sub.steps))
        protocol.extend([getattr(sub, "protocol_bytes", None)] * len(sub.steps))
        chunk_bytes.append(np.asarray(sub.chunk_bytes))
        owners.append(_owner(sub))
        offset += sub.num_chunks
    return Schedule(args, offset, steps, np.concatenate(chunk_bytes), spec.name,
                    {"buffer_loops": len(sizes)}, chunk_owner=np.concatenate(owners),
                    barriers=tuple(b for b in barriers if b < len(steps)), streamed=streamed,
                    protocol_bytes=None if all(x is None for x in protocol) else tuple(protocol), in_network=in_network,
                    in_network_factor=tuple(factors) if in_network else 1.0)
