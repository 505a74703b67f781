"""The CCL buffer: HCCL moves data through a fixed-size buffer (HCCL_BUFFSIZE, default
200 MB), so a larger collective runs as several back-to-back collectives on pieces of at
most the buffer size (FACTS.md s2)."""

from __future__ import annotations

import numpy as np

from ..algorithms.registry import AlgorithmSpec, make_args, run_builder
from ..algorithms.schedule import CollectiveArgs, Schedule, make_step
from ..verify import _owner


def loop_count(nbytes: int, buffer_bytes: int) -> int:
    """How many buffer-sized pieces a collective of ``nbytes`` runs in."""
    return max(1, -(-int(nbytes) // int(buffer_bytes)))


def piece_sizes(args: CollectiveArgs, buffer_bytes: int) -> list[int]:
    """Sizes (nccl-tests convention) of the back-to-back pieces: full buffers, then the rest."""
    if args.collective == "alltoallv":
        return [args.nbytes]  # HCCL moves alltoallv's matrix in one pass here (not modelled)
    full, rest = divmod(int(args.nbytes), int(buffer_bytes))
    return [int(buffer_bytes)] * full + ([rest] if rest else [])


def looped(spec: AlgorithmSpec, args: CollectiveArgs, buffer_bytes: int) -> Schedule:
    """``spec``'s schedule for ``args`` run piece by piece through a buffer of ``buffer_bytes``.

    Chunks are laid out piece-major; :attr:`Schedule.chunk_owner` tells the verifier which
    rank's (or which alltoall block's) data each chunk is.
    """
    sizes = piece_sizes(args, buffer_bytes)
    if len(sizes) == 1:
        return run_builder(spec, args)
    cache: dict[int, Schedule] = {}
    steps, chunk_bytes, owners = [], [], []
    offset = 0
    for size in sizes:
        sub = cache.get(size)
        if sub is None:
            sub = cache[size] = run_builder(spec, make_args(args.collective, args.p, size, args.root, args.servers,
                                                            args.pods))
        for st in sub.steps:
            steps.append(make_step(st.src, st.dst, st.nbytes, st.reduce, st.chunk_lo + offset, st.chunk_hi + offset))
        chunk_bytes.append(np.asarray(sub.chunk_bytes))
        owners.append(_owner(sub))
        offset += sub.num_chunks
    return Schedule(args, offset, steps, np.concatenate(chunk_bytes), spec.name,
                    {"buffer_loops": len(sizes)}, chunk_owner=np.concatenate(owners))
