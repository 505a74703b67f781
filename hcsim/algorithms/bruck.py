"""Bruck AlltoAll (Bruck et al., "Efficient algorithms for all-to-all communications in
multiport message-passing systems", IEEE TPDS 1997), the algorithm Open MPI's coll_tuned fixed
decision runs for an alltoall of less than 200 bytes a peer on more than 12 ranks
(``ompi_coll_base_alltoall_intra_bruck``, coll_base_alltoall.c; the rule in
coll_tuned_decision_fixed.c, :func:`hcsim.corpus.open_mpi_fixed_rule`).

Rank r first rotates its send buffer so that slot i holds its block for rank r+i. Then for
each bit d = 1, 2, 4, ... < p it sends, in one message, every slot i (1 <= i < p) whose bit d
is set to rank r+d, and receives the same slots from r-d. After the step for bit d, slot i of
rank r holds the block that rank r - (i & (2d-1)) has for rank r - (i & (2d-1)) + i; after the
last bit, the block rank r-i has for r. A final local rotation puts the blocks in rank order.

ceil(log2 p) steps, each moving the blocks whose slot has that bit set (about half of them):
sum over bits d of (a + c_d (n/p) b), c_d = #{1 <= i < p : i & d}. Fewer steps than the
linear or pairwise exchange for more bytes: a small-message algorithm. The schedule prices the
communication only; the libraries' local work on the blocks (the rotations, and in every step
an indexed datatype of the c_d blocks packed and unpacked) is counted by
:func:`local_block_operations` and priced where the library is known
(:func:`hcsim.corpus.library_local_seconds`).
"""

from __future__ import annotations

import numpy as np

from ..errors import is_int
from .cost import AlphaBetaGamma
from .registry import AlgorithmSpec, register
from .schedule import ChunkSpace, CollectiveArgs, Schedule, block_bytes, make_step, merge_messages

SOURCE = ("Bruck et al. IEEE TPDS 8(11) 1997; Open MPI ompi/mca/coll/base/coll_base_alltoall.c "
          "(ompi_coll_base_alltoall_intra_bruck)")


def _slots(p: int, d: int) -> np.ndarray:
    i = np.arange(1, p, dtype=np.int64)
    return i[(i & d) != 0]


def _bruck(args: CollectiveArgs) -> Schedule:
    p = args.p
    space = ChunkSpace(block_bytes(args))  # block s*p + t: from rank s to rank t
    r = np.arange(p, dtype=np.int64)
    steps = []
    d = 1
    while d < p:
        slots = _slots(p, d)
        rr, ii = np.repeat(r, len(slots)), np.tile(slots, p)
        source = (rr - (ii & (d - 1))) % p  # whose block slot i of rank r holds before this step
        block = source * p + (source + ii) % p
        step = make_step(rr, (rr + d) % p, space.range_bytes(block, block + 1), False, block, block + 1)
        steps.append(merge_messages(step, p))
        d <<= 1
    return Schedule(args, p * p, steps, space.chunk_bytes, "bruck")


def cost_alltoall(args: CollectiveArgs, m: AlphaBetaGamma) -> float:
    p, b = args.p, args.nbytes / args.p
    total, d = 0.0, 1
    while d < p:
        total += m.alpha_s + len(_slots(p, d)) * b * m.beta_s_per_B
        d <<= 1
    return total


BLOCK_PASSES = {"openmpi": 3, "mpich": 2}
"""How many times a library's Bruck alltoall handles each block of a step one block at a time,
through the indexed datatype it builds for that step:

* Open MPI (``ompi_coll_base_alltoall_intra_bruck``, ompi/mca/coll/base/coll_base_alltoall.c, the
  int-count version of the 3.x and 4.0 series that coll_tuned runs below 200 bytes a peer): the
  ``sendrecv`` packs the step's blocks out of ``tmpbuf`` and unpacks them into ``rbuf`` with the
  step's ``new_ddt``, then ``ompi_datatype_copy_content_same_ddt(new_ddt, ...)`` copies them back
  into ``tmpbuf``: 3;
* MPICH (``MPIR_Alltoall_intra_brucks``, src/mpi/coll/alltoall/alltoall_intra_brucks.c):
  ``MPIR_Pack_impl`` with the step's indexed-block type, then the ``MPIC_Sendrecv`` receives into
  ``recvbuf`` with that type: 2.

Both finish with one copy per block (the inverse rotation, ``for (i = 0; i < size; i++)``); their
first rotation is two contiguous copies."""


def local_block_operations(p: int, library: str = "openmpi") -> int:
    """Block-at-a-time local operations one rank of a Bruck alltoall on ``p`` ranks does in
    ``library`` (:data:`BLOCK_PASSES`): ``passes x sum over bits d of c_d`` for the datatype
    passes of the steps, plus ``p`` for the final rotation.

    Examples
    --------
    >>> local_block_operations(64), local_block_operations(64, "mpich")
    (640, 448)
    >>> local_block_operations(8)  # bits 1, 2, 4: 4 blocks each
    44
    """
    from ..errors import bad_value

    if library not in BLOCK_PASSES:
        raise bad_value("library", library, "one of " + ", ".join(sorted(BLOCK_PASSES)))
    if not is_int(p) or p < 2:
        raise bad_value("p", p, "a whole number of ranks, at least 2")
    total, d = 0, 1
    while d < p:
        total += len(_slots(int(p), d))
        d <<= 1
    return BLOCK_PASSES[library] * total + int(p)


register(AlgorithmSpec("bruck", "alltoall", _bruck, cost_alltoall,
                       "Bruck: ceil(log2 p) steps, the blocks whose slot has bit d set to rank + d (Open MPI's "
                       "small-message alltoall)", SOURCE))
